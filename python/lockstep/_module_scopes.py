"""Module scopes, armed by `lockstep run` in a PyTorch job (_torch_hooks.arm) when LOCKSTEP_SCOPES
asks (auto: at level full, and in `lockstep hunt`). Every nn.Module's forward and backward and the
optimizer's step open a scope through the shim's C API (lockstep_scope_push/pop,
collectors/scopes.h), which every record made inside carries, so that `lockstep show`, `diff`,
`hunt` and `export` name the module and the phase of an op: "blocks.1.mlp (forward)".

Forward: the global forward pre- and post-hooks (torch.nn.modules.module), run on the thread that
calls the module, push and pop "<path> (forward)", the module's path in its model (named_modules()
of the outermost module called, wrapper prefixes such as DDP's "module." and torch.compile's
"_orig_mod." stripped); the outermost module is named by its class: "GPT (forward)". A module
that has its parent's name (DDP's wrapped model) adds no level.

Backward: not through module backward hooks. Full backward hooks (register_full_backward_hook)
pass a module's inputs and outputs through an identity autograd Function (BackwardHookFunction):
an in-place op on them then fails ("... is a view and is being modified inplace") and the graph
gains nodes. Instead, hooks on the graph's own nodes, registered when the forward runs: the
module's output's grad_fn gets a pre-hook that sets the backward scope of autograd's thread to
"<path> (backward)" (autograd reaches that node first: the module's backward starts there), and
each input's grad_fn one that sets it back to the enclosing module's (autograd reaches what made
the module's inputs once the module's backward is done). A node keeps only the innermost
module's hook. Nothing is added to the graph and no tensor is wrapped: the job computes exactly
what it computes without lockstep. The backward scope is one level, set rather than nested, and
stays until the next node hook on that thread: the loss's backward (outside every module) carries
the last backward scope of the thread, none in the first step.

torch.compile: inside a region dynamo compiles (torch.compiler.is_compiling()) the hooks do
nothing, so that dynamo never meets a ctypes call (a graph break would change the compiled
kernels): a compiled model's ops carry the scope of the module whose call entered it.

Optimizer: the global optimizer step pre- and post-hooks push and pop "optimizer.step".

Cost: torch's hooked call path for every module call (a few us), the hooks' work,
and a node hook per module output (and per module input no module made) in the backward. Where
lockstep._scope_hooks is built (python/src/scope_hooks.cpp) the hooks' work runs in C after a
thin Python check for dynamo (hooks() below), and a node's hook is a C callable: ModuleScopes'
rules, without its Python frames (in Python the scopes cost the unseen job 5.8 ms a step at full;
a module's two forward hooks take 8.2 us in Python and 4.1 in C, bench/overhead/scope_parts.py).
Without it ModuleScopes does it.
"""

import os
import sys
import threading

from lockstep import _shim

_KEY = "_lockstep_scope"  # a module's name in its model, kept in its __dict__ (bytes)
_WRAPPERS = ("DistributedDataParallel", "DataParallel", "OptimizedModule",
             "FullyShardedDataParallel")
_WRAPPER_PATHS = ("module", "_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module")
_OPTIMIZER_STEP = b"optimizer.step"


def _names(name):
    """A module's names as the scopes send them: (name, forward scope, backward scope), bytes."""
    return name, name + b" (forward)", name + b" (backward)"


def wanted(level, value=None):
    """Whether LOCKSTEP_SCOPES (common/settings.def, Scopes) turns the scopes on at `level`."""
    value = os.environ.get("LOCKSTEP_SCOPES", "auto") if value is None else value
    value = value.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    return level == "full"  # auto


def _strip(path):
    from lockstep._torch_hooks import _strip as strip_prefixes
    parts = [part for part in path.split(".") if part not in _WRAPPER_PATHS]
    return strip_prefixes(".".join(parts))


def _tensors(value):
    """The tensors a module takes or returns: itself, or the items of a tuple, list or dict."""
    if isinstance(value, (tuple, list)):
        return [v for v in value if hasattr(v, "grad_fn")]
    if isinstance(value, dict):
        return [v for v in value.values() if hasattr(v, "grad_fn")]
    return [value] if hasattr(value, "grad_fn") else []


class ModuleScopes:
    def __init__(self, torch):
        self.torch = torch
        self.local = threading.local()
        self.failed = False
        compiler = getattr(torch, "compiler", None)
        self.compiling = getattr(compiler, "is_compiling", None) or (lambda: False)

    # ---- names ---------------------------------------------------------------------------------
    def name_of(self, module):
        """The module's names (_names), its whole tree named on first sight."""
        names = module.__dict__.get(_KEY)
        if names is None:
            self.name_tree(module)
            names = module.__dict__[_KEY]
        return names

    def name_tree(self, root):
        inner = root
        while type(inner).__name__ in _WRAPPERS:
            inner = getattr(inner, "module", None) or getattr(inner, "_orig_mod", None) or root
            if inner is root:
                break
        root_name = type(inner).__name__
        for path, module in root.named_modules(remove_duplicate=False):
            module.__dict__[_KEY] = _names((_strip(path) or root_name).encode())

    # ---- forward -------------------------------------------------------------------------------
    def stack(self):
        stack = getattr(self.local, "stack", None)
        if stack is None:
            stack = self.local.stack = []
        return stack

    def forward_pre(self, module, args):
        if self.failed or self.compiling():
            return None
        try:
            stack = self.stack()
            if not stack:
                self.set_backward(None)  # a backward scope left on this thread (a CPU backward)
            names = self.name_of(module)
            pushed = not stack or stack[-1][0][0] != names[0]
            if pushed:
                _shim.scope_push(names[1])
            parent = stack[-1][0][2] if stack else None
            stack.append((names, pushed))
            for tensor in _tensors(args):
                self.on_node(tensor.grad_fn, parent, output=False)
        except Exception as error:
            self.fail(error)
        return None

    def forward_post(self, module, args, output):
        if self.failed or self.compiling():
            return None
        try:
            stack = self.stack()
            if not stack:
                return None
            names, pushed = stack.pop()
            if pushed:
                _shim.scope_pop()
            for tensor in _tensors(output):
                self.on_node(tensor.grad_fn, names[2], output=True)
        except Exception as error:
            self.fail(error)
        return None

    # ---- backward ------------------------------------------------------------------------------
    def on_node(self, node, scope, output):
        """Gives autograd's node `node` a pre-hook that sets the backward scope to `scope`: for
        a module's output (output=True) unless an inner module's output hook is there already,
        replacing an input hook; for a module's input only on a node with no hook yet."""
        if node is None:
            return
        metadata = node.metadata
        held = metadata.get(_KEY)
        if held is not None:
            if not output or held[0]:
                return
            held[1].remove()
        handle = node.register_prehook(lambda grads, scope=scope: self.set_backward(scope))
        metadata[_KEY] = (output, handle)

    def set_backward(self, scope):
        current = getattr(self.local, "backward", None)
        if current == scope:
            return None
        try:
            if current is not None:
                _shim.scope_pop()
            if scope is not None:
                _shim.scope_push(scope)
            self.local.backward = scope
        except Exception as error:
            self.fail(error)
        return None

    # ---- optimizer -----------------------------------------------------------------------------
    def optimizer_pre(self, optimizer, args, kwargs):
        if self.failed:
            return None
        self.set_backward(None)
        _shim.scope_push(_OPTIMIZER_STEP)
        return None

    def optimizer_post(self, optimizer, args, kwargs):
        if not self.failed:
            _shim.scope_pop()

    def fail(self, error):
        if self.failed:
            return
        self.failed = True  # never the job's problem: say so once and stop
        if self.fast is not None:
            self.fast.stop()
        print(f"lockstep: module scopes stopped: {type(error).__name__}: {error}", file=sys.stderr)

    fast = None  # lockstep._scope_hooks, when hooks() chose it


def _in_c(scopes):
    """lockstep._scope_hooks set up for `scopes`, or None: not built, not importable, or no shim
    in the process."""
    try:
        from lockstep import _scope_hooks
    except ImportError:
        return None
    if not _scope_hooks.available():
        return None
    _scope_hooks.init(scopes.name_of, scopes.fail)
    return _scope_hooks


def hooks(torch, in_c=True):
    """(scopes, forward pre-hook, forward hook): what arm() registers. In C where it can be (the
    thin Python frames check dynamo only: inside a region it compiles, nothing), else
    ModuleScopes' own methods."""
    scopes = ModuleScopes(torch)
    fast = _in_c(scopes) if in_c else None
    if fast is None:
        return scopes, scopes.forward_pre, scopes.forward_post
    scopes.fast = fast
    scopes.set_backward = fast.set_backward  # the optimizer's hook and the node hooks share it
    compiling, pre, post = scopes.compiling, fast.forward_pre, fast.forward_post

    def forward_pre(module, args):
        if not compiling():
            pre(module, args)

    def forward_post(module, args, output):
        if not compiling():
            post(module, args, output)
    return scopes, forward_pre, forward_post


def arm(torch):
    """Registers the global hooks (once)."""
    scopes, forward_pre, forward_post = hooks(torch)
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim_module
    nn_module.register_module_forward_pre_hook(forward_pre)
    try:
        nn_module.register_module_forward_hook(forward_post, always_call=True)
    except TypeError:  # before always_call: a forward that raises leaves its scope open
        nn_module.register_module_forward_hook(forward_post)
    optim_module.register_optimizer_step_pre_hook(scopes.optimizer_pre)
    optim_module.register_optimizer_step_post_hook(scopes.optimizer_post)
    return scopes
