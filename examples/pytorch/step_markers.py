"""Step markers for lockstep, from Python (the examples' variant of
examples/python/lockstep_markers.py). lockstep_step() ends the current step, so calling it as
each step begins makes trace step N the script's step N, with the set-up work in step 0.

mode "api":  calls lockstep_step() from the preloaded shim (found with ctypes in the process's
             global scope); does nothing when the job runs without lockstep.
mode "nvtx": torch.cuda.nvtx.range_push("step") / range_pop() around each step.
mode "none": nothing (lockstep's default step detection applies).
"""

import ctypes


class StepMarkers:
    def __init__(self, mode="api"):
        if mode not in ("api", "nvtx", "none"):
            raise ValueError(f"unknown marker mode {mode!r} (api, nvtx, none)")
        self.mode = mode
        self._step_fn = None
        if mode == "api":
            try:
                fn = ctypes.CDLL(None).lockstep_step
            except (AttributeError, OSError):
                fn = None
            if fn is not None:
                fn.restype = None
                fn.argtypes = []
                self._step_fn = fn

    @property
    def description(self):
        if self.mode == "api":
            return "lockstep_step()" if self._step_fn else "none (lockstep not preloaded)"
        return self.mode

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
