"""Step markers for lockstep, from Python. lockstep.step() ends the current step, so calling it as
each step begins makes trace step N the script's step N, with the set-up work in step 0.

mode "api":  calls lockstep.step() from the lockstep package, which `lockstep run` puts on the
             job's PYTHONPATH (build/python, or the installed package); it does nothing when the
             shim is not preloaded. A job started with LD_PRELOAD alone, without the package on
             its path, falls back to lockstep_step() found with ctypes in the global scope.
mode "nvtx": torch.cuda.nvtx.range_push("step") / range_pop() around each step.
mode "none": nothing (lockstep's default step detection applies).
"""

import ctypes


def _api_step():
    """(step function, its description): lockstep.step, else the shim's lockstep_step() through
    ctypes, else (None, why)."""
    try:
        import lockstep
        if lockstep.traced():
            return lockstep.step, "lockstep.step()"
        return None, "none (lockstep not preloaded)"
    except ImportError:
        pass
    try:
        fn = ctypes.CDLL(None).lockstep_step
    except (AttributeError, OSError):
        return None, "none (lockstep not preloaded)"
    fn.restype = None
    fn.argtypes = []
    return fn, "lockstep_step()"


class StepMarkers:
    def __init__(self, mode="api"):
        if mode not in ("api", "nvtx", "none"):
            raise ValueError(f"unknown marker mode {mode!r} (api, nvtx, none)")
        self.mode = mode
        self._step_fn, self._api = _api_step() if mode == "api" else (None, "")

    @property
    def description(self):
        return self._api if self.mode == "api" else self.mode

    def begin(self):
        if self._step_fn is not None:
            self._step_fn()
        elif self.mode == "nvtx":
            import torch
            torch.cuda.nvtx.range_push("step")

    def end(self):
        if self.mode == "nvtx":
            import torch
            torch.cuda.nvtx.range_pop()
