class _Stream:
    cuda_stream = 0x51


def is_current_stream_capturing():
    return False


def current_stream(device=None):
    return _Stream()
