"""Step markers for lockstep, from Python. lockstep.step() ends the current step, so calling it as
each step begins makes trace step N the script's step N, with the set-up work in step 0.
begin(n) also gives the step the script's own number n, which `lockstep diff` pairs two runs'
steps by: a run resumed from a checkpoint at step n compares with one that ran straight.

mode "api":  calls lockstep.step(n) from the lockstep package, which `lockstep run` puts on the
             job's PYTHONPATH (build/python, or the installed package); it does nothing when the
             shim is not preloaded. A job started with LD_PRELOAD alone, without the package on
             its path, falls back to lockstep_step_number(n) / lockstep_step() found with ctypes
             in the global scope.
mode "nvtx": torch.cuda.nvtx.range_push("step n") / range_pop() around each step.
mode "none": nothing (lockstep's default step detection applies).
"""

import ctypes


def _shim_function(name, argtypes):
    try:
        fn = getattr(ctypes.CDLL(None), name)
    except (AttributeError, OSError):
        return None
    fn.restype = None
    fn.argtypes = argtypes
    return fn


def _api_step():
    """(step function taking the step's number or None, its description): lockstep.step, else
    the shim's C API through ctypes, else (None, why)."""
    try:
        import lockstep
        if lockstep.traced():
            return lockstep.step, "lockstep.step(n)"
        return None, "none (lockstep not preloaded)"
    except ImportError:
        pass
    step = _shim_function("lockstep_step", [])
    if step is None:
        return None, "none (lockstep not preloaded)"
    number = _shim_function("lockstep_step_number", [ctypes.c_ulonglong])

    def ctypes_step(n=None):
        if n is not None and number is not None:
            number(n)
        else:
            step()
    return ctypes_step, "lockstep_step_number(n)" if number else "lockstep_step()"


class StepMarkers:
    def __init__(self, mode="api"):
        if mode not in ("api", "nvtx", "none"):
            raise ValueError(f"unknown marker mode {mode!r} (api, nvtx, none)")
        self.mode = mode
        self._step_fn, self._api = _api_step() if mode == "api" else (None, "")

    @property
    def description(self):
        return self._api if self.mode == "api" else self.mode

    def begin(self, number=None):
        if self._step_fn is not None:
            self._step_fn(number)
        elif self.mode == "nvtx":
            import torch
            torch.cuda.nvtx.range_push("step" if number is None else f"step {number}")

    def end(self):
        if self.mode == "nvtx":
            import torch
            torch.cuda.nvtx.range_pop()
