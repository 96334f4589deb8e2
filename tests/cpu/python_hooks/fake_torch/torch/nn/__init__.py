import torch
from torch.nn import modules  # noqa: F401


class Parameter(torch.Tensor):
    grad = None


class Module:
    """A module whose forward calls its children in order, each on the previous one's output, and
    returns a tensor made by a node of its own (as the module's last op would)."""

    def __init__(self, **children):
        self._children = {}
        self._params = {}
        for name, value in children.items():
            (self._params if isinstance(value, Parameter) else self._children)[name] = value

    def named_parameters(self, prefix="", remove_duplicate=True):
        for name, p in self._params.items():
            yield prefix + name, p
        for name, child in self._children.items():
            yield from child.named_parameters(prefix + name + ".", remove_duplicate)

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        yield prefix, self
        for name, child in self._children.items():
            yield from child.named_modules(None, prefix + ("." if prefix else "") + name,
                                           remove_duplicate)

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def forward(self, x):
        for child in self._children.values():
            x = child(x)
        return torch.Tensor(0, 4, grad_fn=torch.autograd.Node(type(self).__name__))

    def __call__(self, *args):
        for hook in modules.module._forward_pre_hooks:
            hook(self, args)
        output = self.forward(*args)
        for hook in modules.module._forward_hooks:
            hook(self, args, output)
        return output
