"""Autograd's graph as the module scopes see it: nodes (grad_fn) with metadata and pre-hooks, and
a backward that runs every node's pre-hooks, last made first, on a thread of its own (as
autograd's device threads do)."""
import threading

_nodes = []  # every node made, in forward order


class _Handle:
    def __init__(self, hooks, hook):
        self._hooks, self._hook = hooks, hook

    def remove(self):
        self._hooks.remove(self._hook)


class Node:
    def __init__(self, name):
        self.name = name
        self.metadata = {}
        self._prehooks = []
        _nodes.append(self)

    def register_prehook(self, hook):
        self._prehooks.append(hook)
        return _Handle(self._prehooks, hook)


def backward(on_node=None):
    """Runs the pre-hooks of every node made since the last backward, last made first, then
    on_node(node) for each (what the node's own kernels would do), on another thread."""
    nodes = list(reversed(_nodes))
    _nodes.clear()

    def run():
        for node in nodes:
            for hook in list(node._prehooks):
                hook(None)
            if on_node:
                on_node(node)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
