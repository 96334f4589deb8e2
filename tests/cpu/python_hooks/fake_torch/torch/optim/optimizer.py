_post_hooks = []


def register_optimizer_step_post_hook(hook):
    _post_hooks.append(hook)


class Optimizer:
    def __init__(self, params):
        self.param_groups = [{"params": list(params)}]
        self.state = {}

    def step(self):
        for hook in _post_hooks:
            hook(self, (), {})
