"""The shim's C API from Python (collectors/lockstep.h): steps, marks and state fingerprints.

Every function does nothing when the job runs without lockstep: the shim, preloaded by
`lockstep run` (LD_PRELOAD), is found in the process's global symbol scope; nothing is loaded
otherwise.
"""

import ctypes
import functools

PARAMETER, GRADIENT, OPTIMIZER_STATE, OTHER = 0, 1, 2, 3  # State records' state_kind


def _function(name, argtypes):
    try:
        fn = getattr(ctypes.CDLL(None), name)
    except (AttributeError, OSError):
        return None
    fn.argtypes = argtypes
    fn.restype = None
    return fn


_step = _function("lockstep_step", [])
_step_number = _function("lockstep_step_number", [ctypes.c_ulonglong])
_mark = _function("lockstep_mark", [ctypes.c_char_p])
_marker = _function("lockstep_marker", [ctypes.c_char_p])
_step_order_streams = _function("lockstep_step_order_streams", [])
_fingerprint_many = _function(
    "lockstep_fingerprint_many",
    [ctypes.c_ulonglong, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_ulonglong),
     ctypes.POINTER(ctypes.c_char_p), ctypes.c_void_p, ctypes.c_int])


def traced():
    """True when the job runs under lockstep's shim."""
    return _step is not None


def step(n=None):
    """End the current step (the next one starts). `n`: the job's own number of the step that
    starts (its loop counter), recorded so that `lockstep diff` pairs the steps of two runs by
    it: a run resumed from a checkpoint at step n then compares with one that ran straight."""
    if n is not None and _step_number is not None:
        _step_number(int(n))
    elif _step is not None:
        _step()


def mark(name):
    """End the current step, naming the boundary."""
    if _mark is not None:
        _mark(str(name).encode())


def marker(text):
    """Send `text` as an NVTX marker would be: it ends the step only when it matches the step
    pattern (LOCKSTEP_STEP_ON; "step 12", "train_step"), and "step 12" / "step_num=12" numbers
    the step that starts."""
    if _marker is not None:
        _marker(str(text).encode())


def step_order_streams():
    """From now on a record's step follows the order of work on its own stream, not which
    host thread ran first (collectors/stream_steps.h): for jobs whose launches come from
    worker threads while another thread marks steps, as XLA's do."""
    if _step_order_streams is not None:
        _step_order_streams()


def _extent(tensor):
    """(device pointer, bytes) of what a tensor holds: its own elements when contiguous, else
    the whole storage under it (reading a view's elements would need a copy kernel, which the
    trace would then hold)."""
    if hasattr(tensor, "data_ptr") and hasattr(tensor, "untyped_storage"):  # torch.Tensor
        if tensor.is_contiguous():
            return tensor.data_ptr(), tensor.numel() * tensor.element_size()
        storage = tensor.untyped_storage()
        return storage.data_ptr(), storage.nbytes()
    if hasattr(tensor, "unsafe_buffer_pointer"):  # a jax.Array on one device
        return tensor.unsafe_buffer_pointer(), tensor.nbytes
    pointer, nbytes = tensor  # (pointer, bytes)
    return int(pointer), int(nbytes)


def _stream_of(tensor, stream):
    if stream is not None:
        return int(getattr(stream, "cuda_stream", stream))
    if hasattr(tensor, "is_cuda") and tensor.is_cuda:
        import torch
        return current_stream_function(torch, tensor.device)()
    return 0


def current_stream_function(torch, device):
    """A call without arguments that answers the handle of `device`'s current PyTorch stream, as
    torch.cuda.current_stream(device).cuda_stream does, for a call made every step: through
    torch._C._cuda_getCurrentRawStream where this torch has it, which makes no Stream object
    (the public call makes one, after a lazy-init check and a device lookup)."""
    raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
    index = getattr(device, "index", None)
    if raw is not None and isinstance(index, int):
        return functools.partial(raw, index)
    return lambda: torch.cuda.current_stream(device).cuda_stream


class Batch:
    """The arguments of one lockstep_fingerprint_many call, kept while the tensors stay where
    they are (a model's parameters are updated in place: the same pointers every step)."""

    def __init__(self, named, kind, stream=None):
        named = list(named)
        extents = [_extent(t) for _, t in named]
        self.key = tuple(extents)
        self.n = len(named)
        self.kind = kind
        self.device = getattr(named[0][1], "device", None) if named else None
        self.stream = _stream_of(named[0][1], stream) if named else 0
        self._names = [str(name).encode() for name, _ in named]  # kept alive for the call
        self.names = (ctypes.c_char_p * self.n)(*self._names)
        self.ptrs = (ctypes.c_void_p * self.n)(*[p for p, _ in extents])
        self.sizes = (ctypes.c_ulonglong * self.n)(*[b for _, b in extents])

    def prepared(self):
        """(n, ptrs, sizes, names, kind): the call's arguments, its arrays by address (they live
        as long as this Batch), for lockstep._state_hook to make the call itself."""
        return (self.n, ctypes.addressof(self.ptrs), ctypes.addressof(self.sizes),
                ctypes.addressof(self.names), self.kind)

    def matches(self, named):
        return tuple(_extent(t) for _, t in named) == self.key

    def send(self):
        if _fingerprint_many is not None and self.n:
            _fingerprint_many(self.n, self.ptrs, self.sizes, self.names, self.stream, self.kind)


def fingerprint_many(named, kind=OTHER, stream=None):
    """Fingerprint several tensors in one hash launch, as State records of the current step.
    `named`: (name, tensor) pairs; a tensor is a torch.Tensor on the GPU, a single-device
    jax.Array (call block_until_ready() first: JAX's streams are its own) or (pointer, bytes).
    The hash runs on `stream` (default: the tensor's current PyTorch stream, else the legacy
    default stream) after the work queued there; nothing waits for it."""
    if _fingerprint_many is not None:
        Batch(named, kind, stream).send()


def fingerprint(tensor, name, kind=OTHER, stream=None):
    """Fingerprint one tensor as the State record `name` of the current step."""
    fingerprint_many([(name, tensor)], kind, stream)


_scope_push = _function("lockstep_scope_push", [ctypes.c_char_p])
_scope_pop = _function("lockstep_scope_pop", [])


def scope_push(name):
    """Open the range `name` (str or bytes) on the calling thread: every record the thread makes
    until the matching scope_pop carries it, inside the ranges already open (collectors/lockstep.h,
    lockstep_scope_push)."""
    if _scope_push is not None:
        _scope_push(name if isinstance(name, bytes) else str(name).encode())


def scope_pop():
    """Close the innermost range scope_push opened on the calling thread."""
    if _scope_pop is not None:
        _scope_pop()
