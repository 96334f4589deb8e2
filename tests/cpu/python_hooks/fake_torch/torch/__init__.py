"""A stand-in for the few parts of PyTorch that lockstep's Python hooks touch (modules,
parameters, the optimizer's global post-step hook, the current CUDA stream), for CPU tests of
the hooks' mechanics only: arming on import, names, what is sent to the shim. Real PyTorch is
exercised by the GPU suite (tests/gpu)."""

class Tensor:
    def __init__(self, ptr, nbytes, device="cuda:0", grad_fn=None):
        self._ptr, self._nbytes, self.device = ptr, nbytes, device
        self.is_cuda = device.startswith("cuda")
        self.grad_fn = grad_fn

    def data_ptr(self):
        return self._ptr

    def numel(self):
        return self._nbytes

    def element_size(self):
        return 1

    def is_contiguous(self):
        return True

    def untyped_storage(self):
        raise AssertionError("contiguous tensors are read as themselves")


def is_tensor(value):
    return isinstance(value, Tensor)


class _C:
    """torch._C's functions the hooks may call, as C functions (builtins: no Python frame)."""
    # Not capturing: each call takes one False off the list (a builtin), so a test counts the
    # calls by what is left.
    _capture_answers = [False] * 1000
    _cuda_isCurrentStreamCapturing = _capture_answers.pop


from torch import autograd, compiler, cuda, nn, optim  # noqa: E402,F401  (after Tensor)
