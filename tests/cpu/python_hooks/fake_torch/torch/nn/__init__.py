import torch


class Parameter(torch.Tensor):
    grad = None


class Module:
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

    def parameters(self):
        return [p for _, p in self.named_parameters()]
