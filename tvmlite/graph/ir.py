"""The graph IR: frozen nodes over named values, constants as numpy arrays.

A ``Node`` is one operator application in tvmlite's own vocabulary (the frontend has
already turned each ONNX op, as its opset defines it, into these; ``ops.py`` lists them):
its inputs and outputs are value names, its attributes a sorted tuple of (key, value)
pairs with hashable values, so two nodes that compute the same thing compare equal.
A ``Graph`` holds the nodes in topological order, the type (shape, dtype) of every
value, the constants and, once the fusion pass ran, the fused ``Kernel``s: one kernel is
one compiled function, and ``print(graph)`` shows one line per kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import numpy as np

from tvmlite.errors import TvmliteError

__all__ = ["GraphError", "TensorType", "Node", "Kernel", "Graph", "attrs_of"]


class GraphError(TvmliteError, ValueError):
    """A graph that cannot be compiled: a cycle, no outputs, an unknown value, a shape
    that does not fit its operator. The message names the node and the value."""


@dataclass(frozen=True, slots=True)
class TensorType:
    """The shape and numpy dtype name of a value. In a graph with a symbolic dimension
    (``Graph.sizes``) a dimension may be a size expression over it (``L``, ``L * 12``,
    ``tvmlite.ir.symbolic``); everywhere else it is an int."""
    shape: tuple[Any, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.dtype}{list(self.shape)}"


def attrs_of(d: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A node's attribute tuple from a dict: sorted by key, lists made tuples."""
    def frozen(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return tuple(frozen(x) for x in v)
        if isinstance(v, np.generic):
            return v.item()
        return v
    return tuple(sorted((k, frozen(v)) for k, v in d.items()))


@dataclass(frozen=True, slots=True)
class Node:
    """``outputs = op(inputs; attrs)``; ``name`` is the model's node name (for errors)."""
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: tuple[tuple[str, Any], ...] = ()
    name: str = ""

    def attr(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    @property
    def output(self) -> str:
        return self.outputs[0]


@dataclass(frozen=True, slots=True)
class Kernel:
    """A fused kernel: ``nodes`` (topological) computed by one function from ``inputs``
    (graph inputs, constants or other kernels' outputs) into ``output``. ``anchor`` is
    the op of its one conv/matmul/pool/reduction node, or None for an injective chain;
    ``flops`` those of one run of all its nodes (counted by the fusion pass, which knows
    the ops)."""
    name: str
    nodes: tuple[Node, ...]
    inputs: tuple[str, ...]
    output: str
    anchor: str | None
    flops: int = 0


@dataclass(frozen=True, eq=False)
class Graph:
    """A model: nodes in topological order over named values.

    ``inputs`` are the values fed at run time, ``outputs`` the values returned (model
    order), ``types`` the type of every value, ``constants`` the weights. ``kernels`` is
    set by the fusion pass; ``layout`` names the data layout the graph computes in.
    ``sizes`` holds ``(name, lo, hi)`` of each symbolic dimension (``graph/symbolic.py``):
    the range of sizes the graph runs at, read at run time from the inputs' shapes.
    ``precision`` ("fp32" or "bf16") is what its convs and matmuls store their weights
    and activations in (``passes/precision.py``: the pipeline rewrites a "bf16" graph)."""
    nodes: tuple[Node, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    types: Mapping[str, TensorType]
    constants: Mapping[str, np.ndarray] = field(default_factory=dict)
    kernels: tuple[Kernel, ...] | None = None
    layout: str = "NCHW"
    name: str = "model"
    sizes: tuple[tuple[str, int, int], ...] = ()
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if not self.outputs:
            raise GraphError(f"graph {self.name!r} has no outputs: nothing to compute")
        check_order(self)

    def replace(self, **changes: Any) -> "Graph":
        """A copy with some fields changed (graphs are frozen)."""
        return replace(self, **changes)

    def producers(self) -> dict[str, Node]:
        return {o: n for n in self.nodes for o in n.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    out.setdefault(i, []).append(n)
        return out

    def __str__(self) -> str:
        ranges = "".join(f", {n} in [{lo}, {hi}]" for n, lo, hi in self.sizes)
        prec = "" if self.precision == "fp32" else f", {self.precision}"
        lines = [f"graph {self.name} ({self.layout}{ranges}{prec}): inputs "
                 + ", ".join(f"{i}: {self.types[i]}" for i in self.inputs)]
        if self.kernels is None:
            for n in self.nodes:
                lines.append(f"  {n.op}({', '.join(n.inputs)}) -> {n.output}: "
                             f"{self.types[n.output]}")
        else:
            for k in self.kernels:
                ops = "+".join(n.op for n in k.nodes)
                lines.append(f"  {k.name}: {ops} -> {k.output}: {self.types[k.output]}, "
                             f"{k.flops} flops")
        lines.append("  outputs " + ", ".join(self.outputs))
        return "\n".join(lines)


def check_order(g: Graph) -> None:
    """Every node reads only values defined before it (inputs, constants, earlier
    outputs): a cycle or a dangling name is a GraphError naming the node."""
    defined = set(g.inputs) | set(g.constants)
    by_output = {o: n for n in g.nodes for o in n.outputs}
    for n in g.nodes:
        for i in n.inputs:
            if i and i not in defined:
                if i in by_output:
                    raise GraphError(f"graph {g.name!r}: node {n.name or n.op!r} reads {i!r}, "
                                     f"which is computed after it (the graph has a cycle)")
                raise GraphError(f"graph {g.name!r}: node {n.name or n.op!r} reads {i!r}, "
                                 f"which no node, input or constant defines")
        defined.update(n.outputs)
    for o in g.outputs:
        if o not in defined:
            raise GraphError(f"graph {g.name!r}: output {o!r} is not computed")
