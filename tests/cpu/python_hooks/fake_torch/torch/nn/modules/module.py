_forward_pre_hooks = []
_forward_hooks = []


def register_module_forward_pre_hook(hook):
    _forward_pre_hooks.append(hook)


def register_module_forward_hook(hook, *, always_call=False):
    _forward_hooks.append(hook)
