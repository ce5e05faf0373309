"""A symbolic dimension for a whole graph, found by importing the model at a few sizes.

A model's shape arithmetic (Shape -> Gather -> Concat -> Reshape, Slice ends, Expand
shapes) is constant folding on concrete sizes, and the passes (fusion, layout) decide on
concrete types. Rather than give every converter and pass a second, symbolic life, the
frontend imports and optimizes the model at a few sizes of the symbolic dimension
(``probe_sizes``) and ``generalize`` merges the fused graphs into one: the graphs must
agree node for node and kernel for kernel; an integer that differs between them (a
dimension, a reshape's target, a slice's length) must be affine in the size, ``a*L + b``
with integers ``a >= 1`` and ``b``, fitted on the first two sizes and checked on the
others, and becomes that expression over the ``SizeVar``; anything else that differs (a
constant whose values depend on the size, an op whose output shape depends on data, a
dimension like ``L // 2``) is a ``GraphError`` naming the node or value. Constants must
not depend on the size. The flops of a kernel are those at the largest size.

``shape_at(shape, sizes)`` is a concrete shape of a merged type at run time.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np

from tvmlite.graph.ir import Graph, GraphError, Kernel, Node, TensorType
from tvmlite.ir.expr import BinOp, Const
from tvmlite.ir.symbolic import SizeVar, bind_extent, fold, is_static

__all__ = ["probe_sizes", "generalize", "shape_at", "affine_of", "is_symbolic"]


def probe_sizes(name: str, lo: int, hi: int) -> tuple[int, ...]:
    """The sizes a graph over ``name`` in ``[lo, hi]`` is imported at: the two smallest
    sizes from 2 up (at 1 a broadcast may change the graph's structure) and the largest,
    which checks the affine fit and gives the flops."""
    first = max(lo, 2)
    if hi < first + 1:
        raise GraphError(f"symbolic size {name} in [{lo}, {hi}]: a range needs at least "
                         f"two sizes from 2 up; give a fixed size instead")
    return tuple(sorted({first, first + 1, hi}))


def is_symbolic(x: Any) -> bool:
    """Whether a dimension is a size expression (not an int)."""
    return not is_static(x)


def affine_of(dim: Any, name: str) -> tuple[int, int]:
    """``(a, b)`` with ``dim == a * name + b`` (a dimension of a merged graph)."""
    if is_static(dim):
        return 0, int(dim)
    f1, f2 = bind_extent(dim, {name: 1}), bind_extent(dim, {name: 2})
    return f2 - f1, 2 * f1 - f2


def shape_at(shape: Sequence[Any], sizes: Mapping[str, int]) -> tuple[int, ...]:
    """A merged shape with its symbolic dimensions bound (``{"L": 37}``)."""
    return tuple(bind_extent(d, dict(sizes)) for d in shape)


class _Merger:
    def __init__(self, var: SizeVar, probes: Sequence[int]):
        self.var, self.probes = var, tuple(probes)

    def value(self, vals: Sequence[Any], where: str) -> Any:
        first = vals[0]
        if all(_same(v, first) for v in vals[1:]):
            return first
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in vals):
            return self.affine([int(v) for v in vals], where)
        if all(isinstance(v, tuple) and len(v) == len(first) for v in vals):
            return tuple(self.value([v[i] for v in vals], where) for i in range(len(first)))
        raise GraphError(f"{where} changes with the symbolic size {self.var.name} "
                         f"({self._at(vals)}) in a way a symbolic dimension cannot "
                         f"carry (its structure, not a size, depends on it)")

    def affine(self, vals: list[int], where: str) -> Any:
        (p0, p1), (v0, v1) = self.probes[:2], vals[:2]
        a, rem = divmod(v1 - v0, p1 - p0)
        b = v0 - a * p0
        if rem or a < 1 or any(v != a * p + b for p, v in zip(self.probes, vals)):
            raise GraphError(f"{where}: a size that is not a*{self.var.name} + b with an "
                             f"integer a >= 1 ({self._at(vals)}): the graph cannot carry it "
                             f"as a symbolic dimension")
        e: Any = self.var if a == 1 else BinOp("*", self.var, Const(a))
        return fold(BinOp("+", e, Const(b))) if b else fold(e)

    def _at(self, vals: Sequence[Any]) -> str:
        return ", ".join(f"{v} at {self.var.name}={p}" for p, v in zip(self.probes, vals))

    def node(self, ns: Sequence[Node]) -> Node:
        n = ns[0]
        where = f"node {n.name or n.op!r} ({n.op})"
        if any((m.op, m.inputs, m.outputs, [k for k, _ in m.attrs]) !=
               (n.op, n.inputs, n.outputs, [k for k, _ in n.attrs]) for m in ns[1:]):
            raise GraphError(f"{where}: the graph differs between sizes of "
                             f"{self.var.name}; its structure depends on the size")
        attrs = tuple((k, self.value([dict(m.attrs)[k] for m in ns], f"{where}, attribute "
                                     f"{k!r}")) for k, _ in n.attrs)
        return replace(n, attrs=attrs)


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b) and not (isinstance(a, (int, np.integer)) and
                                       isinstance(b, (int, np.integer))):
        return False
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def generalize(graphs: Sequence[Graph], var: SizeVar, probes: Sequence[int],
               lo: int, hi: int) -> Graph:
    """One graph over ``var`` in ``[lo, hi]`` from ``graphs``, the same model fused at
    each of ``probes`` (the largest last; see the module docstring)."""
    g0, m = graphs[0], _Merger(var, probes)
    for g in graphs[1:]:
        if (g.inputs, g.outputs, g.layout) != (g0.inputs, g0.outputs, g0.layout):
            raise GraphError(f"graph {g0.name!r}: its inputs, outputs or layout differ "
                             f"between sizes of {var.name}")
        if len(g.nodes) != len(g0.nodes) or (g.kernels is None) != (g0.kernels is None) or \
                len(g.kernels or ()) != len(g0.kernels or ()):
            raise GraphError(f"graph {g0.name!r}: its nodes differ between sizes of "
                             f"{var.name} (an op whose output depends on the size or on "
                             f"data: its structure cannot be made symbolic)")
    nodes = tuple(m.node([g.nodes[i] for g in graphs]) for i in range(len(g0.nodes)))
    kernels = None
    if g0.kernels is not None:
        kernels = tuple(_kernel(m, [g.kernels[i] for g in graphs if g.kernels])
                        for i in range(len(g0.kernels)))
    used = {i for n in nodes for i in n.inputs} | {i for k in kernels or () for i in k.inputs}
    used |= set(g0.outputs)
    constants = {}
    for name, c in g0.constants.items():
        if name not in used:
            continue
        if any(name not in g.constants or not _same(g.constants[name], c) for g in graphs):
            raise GraphError(f"constant {name!r} of graph {g0.name!r} depends on the symbolic "
                             f"size {var.name} (shape {c.shape} at {var.name}={probes[0]}): "
                             f"values computed from the size (a position table sliced to "
                             f"it) cannot be symbolic")
        constants[name] = c
    types = {}
    for v, t in g0.types.items():
        if any(v not in g.types for g in graphs):
            raise GraphError(f"value {v!r} exists at some sizes of {var.name} only")
        ts = [g.types[v] for g in graphs]
        if any(len(x.shape) != len(t.shape) or x.dtype != t.dtype for x in ts):
            raise GraphError(f"value {v!r}: its rank or dtype changes with {var.name}")
        types[v] = TensorType(m.value([x.shape for x in ts], f"value {v!r}"), t.dtype)
    return g0.replace(nodes=nodes, kernels=kernels, types=types, constants=constants,
                      sizes=((var.name, lo, hi),))


def _kernel(m: _Merger, ks: Sequence[Kernel]) -> Kernel:
    k = ks[0]
    if any((x.name, x.inputs, x.output, x.anchor, len(x.nodes)) !=
           (k.name, k.inputs, k.output, k.anchor, len(k.nodes)) for x in ks[1:]):
        raise GraphError(f"kernel {k.name}: the fusion differs between sizes of "
                         f"{m.var.name}")
    nodes = tuple(m.node([x.nodes[i] for x in ks]) for i in range(len(k.nodes)))
    return replace(k, nodes=nodes, flops=ks[-1].flops)
