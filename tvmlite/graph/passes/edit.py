"""The working copy a rewriting pass edits: the graph's types and constants, with fresh
names for the values and constants it adds.

Passes are pure over the frozen ``Graph``; a pass that inserts values (the layout pass's
conversions and transposed weights, the QDQ fold's integer weights and scales) needs
mutable dictionaries while it walks the nodes and a name no other value has, and builds a
new ``Graph`` from them at the end.
"""
from __future__ import annotations

import numpy as np

from tvmlite.graph.ir import Graph, TensorType

__all__ = ["GraphEdit"]


class GraphEdit:
    def __init__(self, g: Graph):
        self.g = g
        self.types: dict[str, TensorType] = dict(g.types)
        self.consts: dict[str, np.ndarray] = dict(g.constants)

    def fresh(self, base: str) -> str:
        """``base``, or ``base_<k>`` with the first k no value of the graph is named."""
        name, k = base, 0
        while name in self.types:
            k += 1
            name = f"{base}_{k}"
        return name

    def constant(self, base: str, value: np.ndarray) -> str:
        """A new constant holding ``value`` (contiguous), under a fresh name."""
        name = self.fresh(base)
        self.consts[name] = np.ascontiguousarray(value)
        self.types[name] = TensorType(tuple(value.shape), value.dtype.name)
        return name
