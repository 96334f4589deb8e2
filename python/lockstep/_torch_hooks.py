"""PyTorch hooks that `lockstep run` arms, with no change to the job, when the job imports torch
(lockstep/_boot/sitecustomize.py). After every optimizer step (torch.optim's global post-step
hook) the model's parameters, and as LOCKSTEP_STATE asks their gradients and the optimizer's
state tensors, are fingerprinted on the GPU as State records named by their path in the model
("blocks.1.mlp.up.weight", "...:grad", "...:exp_avg"). Broad then dates the earliest step whose
state differs, though no kernel is fingerprinted and the loss may differ only steps later.

Cost per step: one hash launch per device and kind (the hash reads the bytes at HBM speed,
about 1 ms per 4 GB) and the parameters' pointers read (torch's C data_ptr each, in a C-level
loop); the names are found once per optimizer (a walk of the live nn.Modules) and the call is
prepared again only when a pointer moved. Under LOCKSTEP_DEBUG the hook prints its own time.

The steady step (the same optimizer, parameters and pointers as last time, only the default
parameters asked for) runs in C where lockstep._state_hook is built (python/src/state_hook.cpp):
torch calls it directly, and it hands every other step to StateHook, which prepares the call
again and primes it. Without the extension StateHook runs every step.
"""

import atexit
import gc
import operator
import os
import sys
import time
import weakref
from itertools import chain

from lockstep import _shim

_data_ptr = operator.methodcaller("data_ptr")  # as t.data_ptr(), a subclass's own included
_params_of = operator.itemgetter("params")  # a param group's list, without a Python frame


def capturing_function(torch):
    """What tells the hook, every step, whether the current stream is capturing a CUDA graph:
    torch's C function itself where torch has it (torch.cuda.is_current_stream_capturing is a
    Python function that only calls it: a frame a step), else that function."""
    raw = getattr(getattr(torch, "_C", None), "_cuda_isCurrentStreamCapturing", None)
    return raw if callable(raw) else torch.cuda.is_current_stream_capturing


def pointer_function(torch, tensors):
    """What reads the tensors' pointers every step: their C method itself (torch._C.TensorBase's
    data_ptr, which answers a subclass's __torch_function__ as the bound call does) when no
    tensor's type has a data_ptr of its own, else t.data_ptr() each. The C method saves the bound
    method each call makes: on the H200's host 8.5 against 18.4 us for 77 parameters
    (bench/overhead/hook_parts.py)."""
    c = getattr(torch, "_C", None)
    base = getattr(c, "TensorBase", None) or getattr(c, "_TensorBase", None)
    method = getattr(base, "data_ptr", None)
    if method is not None and all(getattr(type(t), "data_ptr", None) is method for t in tensors):
        return method
    return _data_ptr


def _pointers(named):
    """The pointers of (name, tensor) pairs: a part's key."""
    return tuple(_data_ptr(t) for _, t in named)


_WRAPPER_PREFIXES = ("_orig_mod.", "module.", "_fsdp_wrapped_module.", "_checkpoint_wrapped_module.")


def wanted(value=None):
    """The parts of the state LOCKSTEP_STATE asks for (common/settings.def, State)."""
    value = (os.environ.get("LOCKSTEP_STATE", "params") if value is None else value)
    value = value.strip().lower()
    if value in ("", "0", "off", "false", "no"):
        return set()
    if value == "all":
        return {"params", "grads", "optimizer"}
    return {word for word in value.split(",") if word}


def _strip(name):
    changed = True
    while changed:
        changed = False
        for prefix in _WRAPPER_PREFIXES:
            if name.startswith(prefix):
                name, changed = name[len(prefix):], True
    return name.replace("._orig_mod.", ".").replace(".module.", ".")


def parameter_names(torch, params):
    """Each parameter's path in its model, by id: the longest name any live nn.Module gives it
    (the root module's), without wrapper prefixes (torch.compile's _orig_mod, DDP's module)."""
    wanted_ids = {id(p) for p in params}
    names = {}
    module_type = torch.nn.Module
    for obj in gc.get_objects():
        # type(), not isinstance(): isinstance reads obj.__class__, which a dead weak proxy
        # answers with ReferenceError and a deprecated module's proxy with a warning.
        if not issubclass(type(obj), module_type):
            continue
        try:
            named = obj.named_parameters(remove_duplicate=False)
            for name, p in named:
                if id(p) in wanted_ids:
                    name = _strip(name)
                    old = names.get(id(p))
                    if old is None or name.count(".") > old.count("."):
                        names[id(p)] = name
        except Exception:  # a module in the middle of construction
            continue
    return names


class _OptimizerState:
    """What one optimizer's hook keeps between steps: the parameters' names and the prepared
    calls, rebuilt only when a pointer changes."""

    def __init__(self):
        self.params = ()
        self.pointer = _data_ptr  # pointer_function of the parameters
        self.names = {}
        self.batches = {}  # part -> (pointer key, [(Batch, its current-stream call)])


def _by_device(named):
    groups = {}
    for name, tensor in named:
        groups.setdefault(tensor.device, []).append((name, tensor))
    return list(groups.values())


class HookTime:
    """The hook's own time, under LOCKSTEP_DEBUG: Python the job runs for lockstep each optimizer
    step, which the shim's self time (common/self_time.h) does not see. Printed at exit in the
    shim's phase format, for bench/overhead/overhead.py to add to it. A call that found the
    parameters or their pointers changed (names walked, calls prepared) is counted apart, as the
    shim counts its slow first calls."""

    def __init__(self):
        self.calls = self.ns = self.slow_calls = self.slow_ns = 0
        self.steady = None  # the C steady step, which counts its own calls
        atexit.register(self.report)

    def add(self, ns, slow):
        if slow:
            self.slow_calls += 1
            self.slow_ns += ns
        else:
            self.calls += 1
            self.ns += ns

    def report(self):
        calls, ns = self.calls, self.ns
        steady_parts = None
        if self.steady is not None:
            steady_calls, steady_ns, parts = self.steady.times()
            calls, ns = calls + steady_calls, ns + steady_ns
            if steady_calls:
                steady_parts = ", ".join(
                    f"{name} {part // steady_calls} ns"
                    for name, part in zip(("capture check", "parameters", "pointers",
                                           "stream and state call"), parts))
        if calls or self.slow_calls:
            print(f"lockstep[{os.getpid()}]: python state hook self time: {calls} x "
                  f"{ns // max(1, calls)} ns (+{self.slow_calls} slow, "
                  f"{self.slow_ns / 1e6:.1f} ms)", file=sys.stderr)
        if steady_parts:
            # Where the C steady step's time goes (the last part holds the shim's "state").
            print(f"lockstep[{os.getpid()}]: state hook steady step in C by part: "
                  f"{steady_parts}", file=sys.stderr)


class StateHook:
    def __init__(self, torch, parts):
        self.torch = torch
        self.parts = parts
        self.states = weakref.WeakKeyDictionary()
        # The optimizer of the last step and its state (a weak reference: the hook keeps no
        # optimizer alive): the next step's is that one almost always, found without the
        # WeakKeyDictionary's Python-level get.
        self.last = None
        self.capturing = capturing_function(torch)
        self.failed = False
        debug = os.environ.get("LOCKSTEP_DEBUG", "0").strip()
        self.time = HookTime() if debug not in ("", "0") else None
        self.steady = steady_step(self, parts, self.time is not None)
        if self.time is not None:
            self.time.steady = self.steady

    def registered(self):
        """What torch calls after each optimizer step: the C steady step, which calls this hook
        for every other step, or this hook."""
        return self.steady if self.steady is not None else self

    def __call__(self, optimizer, args, kwargs):
        if self.failed:
            return
        try:
            start = time.perf_counter_ns() if self.time is not None else 0
            rebuilt = self.record(optimizer)
            if self.steady is not None:
                self.prime(optimizer)
            if self.time is not None:
                self.time.add(time.perf_counter_ns() - start, rebuilt)
        except Exception as error:  # never the job's problem: say so once and stop
            self.failed = True
            if self.steady is not None:
                self.steady.unprime()
            print(f"lockstep: state records stopped: {type(error).__name__}: {error}",
                  file=sys.stderr)

    def prime(self, optimizer):
        """Hands the C steady step the call just sent for `optimizer`'s parameters, to repeat
        while the optimizer, its parameters and their pointers stay the same."""
        last = self.last
        cached = None
        if last is not None and last[0]() is optimizer:
            cached = last[1].batches.get("params")
        if cached is None:  # a capture before any step: nothing prepared yet
            self.steady.unprime()
            return
        calls = [batch.prepared() + (current_stream,) for batch, current_stream in cached[1]
                 if batch.n]
        self.steady.prime(last[0], last[1].params, cached[0], last[1].pointer, calls, cached)

    def record(self, optimizer):
        """Sends this step's state calls; True when it had to walk names or prepare calls."""
        torch = self.torch
        if self.capturing():
            return False  # a CUDA graph capture: nothing runs now, and replays run no hook
        last = self.last
        if last is not None and last[0]() is optimizer:
            state, rebuilt = last[1], False
        else:
            state = self.states.get(optimizer)
            rebuilt = state is None
            if state is None:
                state = self.states[optimizer] = _OptimizerState()
            self.last = (weakref.ref(optimizer), state)
        # Loops in C (chain, map) where they run every step, and no Python function but the
        # hook's own three (__call__, record, send; tests/cpu/python_hooks counts them): the
        # hook's Python cost the job ~200 us a step on the H200's host for the launch-bound GPT
        # job's 77 parameters at cc59dc0, 60-80 us at be1f190 (LOCKSTEP_DEBUG's "python state
        # hook", issue #34; its parts: bench/overhead/hook_parts.py), run cold after the job's
        # own work: a frame saved counts more there than in a warm loop.
        params = tuple(chain.from_iterable(map(_params_of, optimizer.param_groups)))
        if len(params) != len(state.params) or not all(map(operator.is_, params, state.params)):
            state.params = params
            state.pointer = pointer_function(torch, params)
            found = parameter_names(torch, params)
            state.names = {id(p): found.get(id(p), f"param{i}") for i, p in enumerate(params)}
            state.batches = {}
            rebuilt = True
        if "params" in self.parts:
            # Keyed by every parameter's pointer, a CPU one's too: one that moved (p.data = ...,
            # .to(), a sharded parameter gathered elsewhere) or went to the GPU makes the call anew.
            # The names and CUDA parameters are only looked at then.
            rebuilt |= self.send(state, "params", tuple(map(state.pointer, params)),
                                 lambda: [(state.names[id(p)], p) for p in params if p.is_cuda],
                                 _shim.PARAMETER)
        if "grads" in self.parts:
            grads = [(state.names[id(p)] + ":grad", p.grad) for p in params
                     if p.grad is not None and p.grad.is_cuda]
            rebuilt |= self.send(state, "grads", _pointers(grads), lambda: grads, _shim.GRADIENT)
        if "optimizer" in self.parts:
            named = []
            for p in params:
                for key, value in sorted(optimizer.state.get(p, {}).items(), key=lambda kv: str(kv[0])):
                    if torch.is_tensor(value) and value.is_cuda and value.numel() > 0:
                        named.append((f"{state.names[id(p)]}:{key}", value))
            rebuilt |= self.send(state, "optimizer", _pointers(named), lambda: named,
                                 _shim.OPTIMIZER_STATE)
        return rebuilt

    def send(self, state, part, key, named, kind):
        """One state call per device, on its current stream (the job may have changed it); the
        calls are prepared anew from named(), the (name, tensor) pairs, only when `key` (the
        tensors' pointers) changed: True then."""
        cached = state.batches.get(part)
        rebuilt = cached is None or cached[0] != key
        if rebuilt:
            # stream=0: each call reads its stream just before it is sent.
            batches = [_shim.Batch(group, kind, stream=0) for group in _by_device(named())]
            cached = (key, [(batch, _shim.current_stream_function(self.torch, batch.device))
                            for batch in batches])
            state.batches[part] = cached
        for batch, current_stream in cached[1]:
            batch.stream = current_stream()
            batch.send()
        return rebuilt


def steady_step(hook, parts, timed):
    """The C steady step for `hook` (lockstep._state_hook.SteadyStep), or None: where the
    extension is not built or not importable, no shim is in the process, or more than the
    parameters are asked for (their gradients and the optimizer's state change every step)."""
    if parts != {"params"}:
        return None
    try:
        from lockstep import _state_hook
    except ImportError:
        return None
    if not _state_hook.available():
        return None
    return _state_hook.SteadyStep(hook, hook.capturing, timed)


def steps_at_optimizer_steps():
    """Whether LOCKSTEP_STEP_ON=optimizer (common/settings.def, StepOn) asks the hooks to end a
    step after each optimizer step."""
    return os.environ.get("LOCKSTEP_STEP_ON", "").strip() == "optimizer"


def _end_step(optimizer, args, kwargs):
    """torch.optim's global post-step hook under LOCKSTEP_STEP_ON=optimizer: the step ends here,
    registered after the state hook, so that the step's State records are the step's."""
    _shim.step()


def arm(torch):
    """Registers the module scopes' hooks (_module_scopes.py, as LOCKSTEP_SCOPES asks), the
    optimizer's state hook and, under LOCKSTEP_STEP_ON=optimizer, the step's end (once).
    Returns what it armed, for LOCKSTEP_DEBUG."""
    if not _shim.traced():
        return "nothing"
    level = os.environ.get("LOCKSTEP_LEVEL", "broad").strip().lower()

    def after_optimizer_steps(hook):  # torch's global post-step hooks, called in turn
        from torch.optim.optimizer import register_optimizer_step_post_hook
        register_optimizer_step_post_hook(hook)

    armed = []
    if level in ("broad", "full"):
        from lockstep import _module_scopes
        if _module_scopes.wanted(level):
            scopes = _module_scopes.arm(torch)
            armed.append("module scopes" + (" (in C)" if scopes.fast is not None else ""))
        parts = wanted()
        if parts:
            hook = StateHook(torch, parts)
            after_optimizer_steps(hook.registered())
            armed.append("state records of " + ",".join(sorted(parts)) +
                         (" (steady step in C)" if hook.steady is not None else ""))
    # After the state hook, so that the step's State records are the step's; at metrics too.
    if steps_at_optimizer_steps() and level != "off":
        after_optimizer_steps(_end_step)
        armed.append("steps at optimizer steps")
    if not armed and level not in ("broad", "full"):
        return "nothing (level %s)" % level
    return "; ".join(armed) or "nothing"
