"""JAX hooks that `lockstep run` arms, with no change to the job, when the job imports jax
(lockstep/_boot/sitecustomize.py).

- Steps: XLA launches from its own threads while the Python thread marks steps and reads the
  loss back, so the shim is switched to stream-ordered steps (collectors/stream_steps.h): a
  record belongs to the step of the work before it on its own stream, whichever thread ran
  first.
- Step names: JAX emits no NVTX marker of its own. `jax.profiler.StepTraceAnnotation(name,
  step_num=n)` ends the step and starts the job's step n (lockstep_step_number), and a
  `jax.profiler.TraceAnnotation` is sent to the shim as an NVTX marker would be (its name, and
  its step_num when given): one named like a step ("train_step", "step 3", LOCKSTEP_STEP_ON)
  ends the step, any other does nothing. The annotations keep doing what they did.
"""

from lockstep import _shim


def _text(name, kwargs):
    """The annotation as a marker's text: "train step_num=3" carries the job's number."""
    step_num = kwargs.get("step_num")
    return f"{name} step_num={step_num}" if step_num is not None else str(name)


def _step_begins(name, kwargs):
    step_num = kwargs.get("step_num")
    try:
        number = int(step_num) if step_num is not None else None
    except (TypeError, ValueError):
        number = None
    if number is not None and number >= 0:
        _shim.step(number)
    else:
        _shim.mark(str(name))


def _wrap_step_annotation(cls):
    """StepTraceAnnotation is JAX's own Python subclass of the C++ TraceMe: its methods can be
    replaced in place, so that every reference to the class (imported before or after) sees
    them. The step begins when the annotation is entered."""
    if getattr(cls, "_lockstep_wrapped", False):
        return False
    init, enter = cls.__init__, cls.__enter__

    def __init__(self, name, *args, **kwargs):
        init(self, name, *args, **kwargs)
        try:
            self._lockstep_step = (name, kwargs)
        except AttributeError:  # no instance dictionary: the step begins now
            _step_begins(name, kwargs)

    def __enter__(self):
        pending = getattr(self, "_lockstep_step", None)
        if pending is not None:
            _step_begins(*pending)
        return enter(self)

    cls.__init__, cls.__enter__ = __init__, __enter__
    cls._lockstep_wrapped = True
    return True


def _marking_annotation(base):
    """TraceAnnotation is the C++ TraceMe itself, whose type cannot be changed: a subclass that
    sends its name to the shim as a marker when entered takes its place in jax.profiler."""

    class TraceAnnotation(base):
        __doc__ = base.__doc__
        _lockstep_wrapped = True

        def __init__(self, name, *args, **kwargs):
            super().__init__(name, *args, **kwargs)
            self._lockstep_text = _text(name, kwargs)

        def __enter__(self):
            _shim.marker(self._lockstep_text)
            return super().__enter__()

    TraceAnnotation.__module__ = base.__module__
    return TraceAnnotation


def arm(jax):
    """Installs the hooks; returns what was done, for LOCKSTEP_DEBUG."""
    import jax.profiler  # noqa: F401 (`import jax` may not load it)
    profiler = jax.profiler
    done = []
    _shim.step_order_streams()
    done.append("stream-ordered steps")
    step_cls = getattr(profiler, "StepTraceAnnotation", None)
    if step_cls is not None and _wrap_step_annotation(step_cls):
        done.append("StepTraceAnnotation")
    base = getattr(profiler, "TraceAnnotation", None)
    if base is not None and not getattr(base, "_lockstep_wrapped", False):
        try:
            replacement = _marking_annotation(base)
        except TypeError:  # a type that cannot be subclassed: left alone
            replacement = None
        if replacement is not None:
            profiler.TraceAnnotation = replacement
            private = getattr(getattr(jax, "_src", None), "profiler", None)
            if private is not None and getattr(private, "TraceAnnotation", None) is base:
                private.TraceAnnotation = replacement
            done.append("TraceAnnotation")
    return ", ".join(done)
