"""Explicit lockstep steps from Python: `from lockstep_markers import step, mark`.
Does nothing when the job does not run under lockstep (the shim is not loaded)."""
import ctypes

_shim = ctypes.CDLL(None)  # the preloaded shim is in the global scope
_step = getattr(_shim, "lockstep_step", None)
_mark = getattr(_shim, "lockstep_mark", None)

def step():
    """End the current step."""
    if _step: _step()

def mark(name: str):
    """End the current step, naming the boundary."""
    if _mark: _mark(name.encode())
