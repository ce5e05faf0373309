"""The injective graph nodes as ``te`` computes: each output element is one input element
re-indexed (reshape, transpose, slice, expand, pad), chosen by a select on the output
coordinate (concat, a gather of constant indices) or at an index read at run time (an
embedding lookup). No arithmetic on values: fusion joins them before an anchor, which
reads through them (``passes/fusion.py``). ``compute.node_compute`` dispatches here
through ``INJECTIVE_COMPUTE``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from tvmlite import te
from tvmlite.graph.indexing import flatten, pointwise, read, unflatten
from tvmlite.graph.ir import Node
from tvmlite.graph.scalar import Operand
from tvmlite.ir.symbolic import is_static, same_extent

__all__ = ["INJECTIVE_COMPUTE"]


def reshape_compute(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...],
                    name: str) -> te.Tensor:
    (x,) = args
    src = tuple(x.shape)
    if all(is_static(d) for d in src + tuple(out_shape)):
        return pointwise(out_shape, name, lambda i: x[unflatten(flatten(i, out_shape), src)]
                         if src else x[()])
    # over a symbolic size: the leading and trailing dimensions both shapes share are
    # indexed straight through, so (1, L, 768) -> (1, L, 12, 64) divides by 12 * 64 and
    # not by L at every element (which the simplifier cannot fold without L's value)
    n = min(len(src), len(out_shape))
    p = next((d for d in range(n) if not same_extent(src[d], out_shape[d])), n)
    q = next((d for d in range(n - p) if not same_extent(src[-1 - d], out_shape[-1 - d])),
             n - p)
    mid_src, mid_out = src[p:len(src) - q], tuple(out_shape[p:len(out_shape) - q])

    def body(i: tuple) -> Any:
        mid = i[p:len(i) - q]
        inner = unflatten(flatten(mid, mid_out), mid_src) if mid_src else ()
        return x[tuple(i[:p]) + inner + tuple(i[len(i) - q:])]
    return pointwise(out_shape, name, body)


def transpose_compute(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...],
                      name: str) -> te.Tensor:
    (x,) = args
    perm = node.attr("perm")

    def body(i: tuple) -> Any:
        idx = [None] * len(perm)
        for d, p in enumerate(perm):
            idx[p] = i[d]
        return x[tuple(idx)]
    return pointwise(out_shape, name, body)


def concat_compute(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...],
                   name: str) -> te.Tensor:
    ax = node.attr("axis")

    def body(i: tuple) -> Any:
        starts, at = [], 0
        for t in args:
            starts.append(at)
            at += t.shape[ax]
        expr = None
        for t, s in reversed(list(zip(args, starts))):
            idx = list(i)
            idx[ax] = te.max(te.min(i[ax] - s, t.shape[ax] - 1), 0) if len(args) > 1 else i[ax]
            v = read(t, idx, out_shape[:ax] + (t.shape[ax],) + out_shape[ax + 1:])
            end = s + t.shape[ax]
            expr = v if expr is None else te.if_then_else(i[ax] < end, v, expr)
        return expr
    return pointwise(out_shape, name, body)


def slice_compute(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...],
                  name: str) -> te.Tensor:
    (x,) = args
    ranges = {ax: (b, s) for ax, b, s, _ in node.attr("ranges")}

    def body(i: tuple) -> Any:
        return x[tuple(ranges[d][0] + i[d] * ranges[d][1] if d in ranges else i[d]
                       for d in range(len(i)))]
    return pointwise(out_shape, name, body)


def gather_compute(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...],
                   name: str) -> te.Tensor:
    """Gather. Constant indices (the frontend passes them as the ``indices`` attribute)
    are literals, chosen by a select on the output coordinate, so no index buffer is
    read; indices given at run time (an embedding lookup's token ids) are read, wrapped
    when negative and clamped into the axis, so a bad id never reads out of bounds."""
    data = args[0]
    values = node.attr("indices")
    ax, n = node.attr("axis"), data.shape[node.attr("axis")]
    if values is None:   # indices read at run time (an embedding lookup)
        idx = args[1]
        ri = len(idx.shape)

        def dynamic(i: tuple) -> Any:
            j = te.cast(idx[tuple(i[ax:ax + ri])] if ri else idx[()], "int64")
            j = te.max(te.min(te.if_then_else(j < 0, j + n, j), n - 1), 0)
            return data[tuple(i[:ax]) + (j,) + tuple(i[ax + ri:])]
        return pointwise(out_shape, name, dynamic)
    shape_i = node.attr("indices_shape")
    flat = [int(v) + n if int(v) < 0 else int(v) for v in values]
    ri = len(shape_i)

    def body(i: tuple) -> Any:
        pos = flatten(i[ax:ax + ri], shape_i) if ri else 0
        rest = tuple(i[:ax]), tuple(i[ax + ri:])
        expr = data[rest[0] + (flat[-1],) + rest[1]]
        for p in reversed(range(len(flat) - 1)):
            expr = te.if_then_else(pos == p, data[rest[0] + (flat[p],) + rest[1]], expr)
        return expr
    return pointwise(out_shape, name, body)


def expand_compute(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...],
                   name: str) -> te.Tensor:
    (x,) = args
    return pointwise(out_shape, name, lambda i: read(x, i, out_shape))


def pad_compute(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...],
                name: str) -> te.Tensor:
    (x,) = args
    pads, r = node.attr("pads"), len(out_shape)

    def body(i: tuple) -> Any:
        conds = [c for d in range(r) if pads[d] or pads[d + r]
                 for c in (i[d] >= pads[d], i[d] < pads[d] + x.shape[d])]
        v = x[tuple(i[d] - pads[d] if pads[d] else i[d] for d in range(r))]
        fill = te.const(node.attr("value", 0.0), x.dtype)   # a zero point: the fold_zero_points pad
        return te.if_then_else(te.all(*conds), v, fill) if conds else v
    return pointwise(out_shape, name, body)


INJECTIVE_COMPUTE: dict[str, Callable[..., te.Tensor]] = {
    "reshape": reshape_compute, "transpose": transpose_compute, "concat": concat_compute,
    "slice": slice_compute, "gather": gather_compute, "expand": expand_compute,
    "pad": pad_compute,
}
