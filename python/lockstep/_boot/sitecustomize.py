"""Run by Python at start-up in a job that `lockstep run` launched: lockstep puts this directory
first on PYTHONPATH (tools/python_env.h). It arms lockstep's PyTorch hooks
(lockstep/_torch_hooks.py) when, and only when, the job imports torch, and its JAX hooks
(lockstep/_jax_hooks.py) when it imports jax, and then runs the
sitecustomize it shadows (a distribution's or a virtual environment's), so that nothing else
changes. It never fails the job: a problem is one line on stderr.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _debug(message):
    if os.environ.get("LOCKSTEP_DEBUG", "0") not in ("", "0"):
        print(f"lockstep: {message}", file=sys.stderr)


def _armed(module):
    framework = "PyTorch" if module.__name__ == "torch" else "JAX"
    try:
        if module.__name__ == "torch":
            from lockstep import _torch_hooks as hooks
        else:
            from lockstep import _jax_hooks as hooks
        _debug(f"{framework} hooks: {hooks.arm(module)}")
    except Exception as error:
        print(f"lockstep: {framework} hooks not armed: {type(error).__name__}: {error}",
              file=sys.stderr)


class _Watcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when `name` (torch, jax) is first imported, it lets the other
    finders find it and wraps the loader so that the hooks are armed right after it loaded."""

    def __init__(self, name):
        self.name = name

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # once
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            _armed(module)

        spec.loader.exec_module = exec_module
        return spec


def _run_shadowed():
    """The sitecustomize that this one hides, if any, run as it would have been."""
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        print(f"lockstep: {spec.origin}: {type(error).__name__}: {error}", file=sys.stderr)


for _name in ("torch", "jax"):
    if _name in sys.modules:
        _armed(sys.modules[_name])
    else:
        sys.meta_path.insert(0, _Watcher(_name))
_run_shadowed()
