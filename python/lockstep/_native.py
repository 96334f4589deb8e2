"""lockstep._core, the C++ reader and diff, imported when first needed: `import lockstep` (for
step() and mark() inside a traced job) works in any python3, also one the extension was not
built for."""

_core = None


def core():
    global _core
    if _core is None:
        try:
            from lockstep import _core as module
        except ImportError as e:
            raise ImportError(
                "lockstep._core (the trace reader and diff) is not available for this Python "
                f"({e}); it is built for Debian's python3 by the lockstep_python target "
                "(apt install pybind11-dev python3-dev), or comes with the lockstep .deb") from e
        _core = module
    return _core
