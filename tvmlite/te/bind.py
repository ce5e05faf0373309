"""Bind symbolic sizes: the same compute DAG with ``te.var`` sizes replaced by numbers.

A kernel over ``M`` is deployed symbolic, but a cost model's features, a numpy reference
or a per-size comparison want the concrete program at one size: ``bind_sizes(tensors,
{"M": 256})`` rebuilds every op with its shapes, reduction extents and index expressions
evaluated at those sizes. Op and axis names are kept, so a schedule's Steps (which name
stages and loops) replay on the bound DAG unchanged.
"""
from __future__ import annotations

from typing import Sequence

from tvmlite.ir.expr import Const, Expr, Reduce, TensorRead, rebuild
from tvmlite.ir.symbolic import SizeVar, bind_extent, size_vars
from tvmlite.te.tensor import ComputeOp, IterVar, PlaceholderOp, Tensor, collect_ops

__all__ = ["bind_sizes", "free_sizes"]


def free_sizes(tensors: Sequence[Tensor]) -> list:
    """Names of the symbolic sizes a DAG uses, in first-seen order (shapes, extents, bodies)."""
    out: list = []
    outputs = [t for t in tensors if isinstance(t.op, ComputeOp)]
    for op in collect_ops(outputs):
        dims = list(op.shape) + [iv.extent for iv in op.reduce_axis]
        exprs = dims + ([op.body] if isinstance(op, ComputeOp) else [])
        for e in exprs:
            out.extend(v.name for v in size_vars(e) if v.name not in out)
    return out


def bind_sizes(tensors: Sequence[Tensor], sizes: dict) -> list:
    """``tensors`` (a kernel's argument list) rebuilt with every size of ``sizes`` bound."""
    for k, v in sizes.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"bind_sizes: size {k} must be an int >= 1, got {v!r}")
    missing = [n for n in free_sizes(tensors) if n not in sizes]
    if missing:
        raise ValueError(f"bind_sizes: no value for the size(s) {', '.join(missing)}")
    memo: dict = {}
    outputs = [t for t in tensors if isinstance(t.op, ComputeOp)]
    for op in collect_ops(outputs):
        memo[id(op)] = _bind_op(op, sizes, memo)
    for t in tensors:  # a placeholder no output reads is still an argument
        if id(t.op) not in memo:
            memo[id(t.op)] = _bind_op(t.op, sizes, memo)
    return [memo[id(t.op)] for t in tensors]


def _bind_op(op, sizes: dict, memo: dict) -> Tensor:
    if isinstance(op, PlaceholderOp):
        return PlaceholderOp(op.name, tuple(bind_extent(d, sizes) for d in op.shape),
                             op.dtype).output(0)

    def go(e: Expr) -> Expr:
        if isinstance(e, SizeVar):
            return Const(sizes[e.name], e.dtype) if e.name in sizes else e
        if isinstance(e, TensorRead):
            return TensorRead(memo[id(e.tensor.op)], tuple(go(i) for i in e.indices))
        if isinstance(e, Reduce):
            axes = tuple(IterVar(iv.var, bind_extent(iv.extent, sizes), "reduce", iv.min)
                         for iv in e.axes)
            where = None if e.where is None else go(e.where)
            return Reduce(e.combiner, go(e.source), axes, where)
        return rebuild(e, go)
    axis = tuple(IterVar(iv.var, bind_extent(iv.extent, sizes), "spatial") for iv in op.axis)
    return ComputeOp(op.name, axis, go(op.body), op.tag, op.attrs).output(0)
