from jax._src.profiler import StepTraceAnnotation, TraceAnnotation  # noqa: F401
