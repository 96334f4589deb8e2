"""jax._src.profiler's annotations as JAX 0.11 defines them: TraceAnnotation is the C++ TraceMe
(here a class whose enter and exit are written to `entered`, so a test sees that the hooks
keep them), StepTraceAnnotation JAX's Python subclass of it."""

entered = []


class TraceAnnotation:
    __slots__ = ("name", "kwargs")  # like the C++ type: no instance dictionary

    def __init__(self, name, **kwargs):
        self.name = name
        self.kwargs = kwargs

    def __enter__(self):
        entered.append(f"enter {self.name}")
        return self

    def __exit__(self, *exc):
        entered.append(f"exit {self.name}")
        return False


class StepTraceAnnotation(TraceAnnotation):
    def __init__(self, name, **kwargs):
        super().__init__(name, _r=1, **kwargs)
