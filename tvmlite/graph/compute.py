"""Each graph node as a ``te`` compute stage over the tensors of its inputs.

Anchors call the operator library's tensor-taking computes (``conv2d_nchw_compute``,
``conv2d_nhwc_compute``, ``broadcast_matmul_compute``, ``max_pool2d_compute``,
``softmax_compute``...), so the graph adds no second definition of an op; the
elementwise and injective nodes are one ``te.compute`` each, written here by
broadcasting or re-indexing their inputs. A constant of one element is read as a
literal (``graph.scalar.Scalar``), not as a buffer, so ``x * 0.5`` needs no argument and ``x ** 2``
becomes ``x * x``.

Map: unary/binary elementwise · node_compute (dispatch) · anchors (conv, matmul, pools,
reductions, softmax, layer norm, LRN). The injective nodes' computes (reshape,
transpose, concat, slice, gather, expand, pad) are ``graph.injective_compute``, the
quantized nodes' ``graph.quantized_compute``, and the indexing both share (``read``:
broadcasting, ``pointwise``, ``flatten``) ``graph.indexing``.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from tvmlite import te
from tvmlite.graph.indexing import axis_names, flatten, pointwise, read, unflatten
from tvmlite.graph.injective_compute import INJECTIVE_COMPUTE
from tvmlite.graph.ir import GraphError, Node
from tvmlite.graph.quantized_compute import (
    QUANT_VALUE,
    conv_integer_compute,
    matmul_integer_compute,
)
from tvmlite.graph.scalar import Operand, Scalar
from tvmlite.ir.dtypes import STORAGE_FLOATS
from tvmlite.ir.symbolic import is_static
from tvmlite.ops.common import named
from tvmlite.ops.elementwise import softmax_compute
from tvmlite.ops.linalg import broadcast_matmul_compute
from tvmlite.ops.nn import (
    avg_pool2d_compute,
    conv2d_nchw_compute,
    conv2d_nhwc_compute,
    depthwise_conv2d_nhwc_compute,
    max_pool2d_compute,
)

__all__ = ["Scalar", "node_compute"]


def _cst(v: float, dtype: str) -> Any:
    return te.const(v, dtype)


def _unary(op: str, node: Node, x: Any, dtype: str) -> Any:
    c = lambda v: _cst(v, dtype)   # noqa: E731 - a literal of the node's dtype
    if op == "relu":
        return te.max(x, c(0.0))
    if op == "sigmoid":
        return c(1.0) / (c(1.0) + te.exp(c(0.0) - x))
    if op in ("tanh", "exp", "log", "sqrt", "erf", "abs"):
        return getattr(te, op)(x)
    if op == "identity":
        return x
    if op == "neg":
        return c(0.0) - x
    if op == "leaky_relu":
        return te.if_then_else(x > c(0.0), x, x * c(node.attr("alpha")))
    if op == "clip":
        return te.min(te.max(x, c(node.attr("min"))), c(node.attr("max")))
    if op == "hard_sigmoid":
        return te.min(te.max(x * c(node.attr("alpha")) + c(node.attr("beta")), c(0.0)), c(1.0))
    if op == "hard_swish":
        return x * te.min(te.max(x * c(1 / 6) + c(0.5), c(0.0)), c(1.0))
    if op == "gelu":
        return c(0.5) * x * (c(1.0) + te.erf(x * c(1 / math.sqrt(2))))
    if op == "cast":
        return te.cast(x, node.attr("to"))
    raise GraphError(f"node {node.name or op!r}: no compute for op {op!r}")


def _binary(op: str, a: Any, b: Any, b_value: float | None, dtype: str) -> Any:
    if op == "div" and dtype.startswith("int"):   # ONNX truncates: C's '/', not '//'
        q, r, zero = te.floordiv(a, b), te.floormod(a, b), _cst(0, dtype)
        off = te.all(r != zero, te.any(te.all(a < zero, b > zero), te.all(a > zero, b < zero)))
        return q + te.if_then_else(off, _cst(1, dtype), zero)
    if op == "pow" and dtype.startswith("int"):
        # by squaring over the exponent's bits 0..5 (2**63 already overflows int64);
        # a negative exponent counts as 0
        e, out, sq = te.max(b, _cst(0, dtype)), _cst(1, dtype), a
        for k in range(6):
            if b_value is None:
                out = te.if_then_else((e // (1 << k)) % 2 == _cst(1, dtype), out * sq, out)
            elif int(b_value) >> k & 1:
                out = out * sq
            sq = sq * sq
        return out
    if op == "pow":
        if b_value == 2.0:
            return a * a
        if b_value == 3.0:
            return a * a * a
        if b_value == 0.5:
            return te.sqrt(a)
        if b_value == 0.75:     # LRN's beta (AlexNet, GoogLeNet): vector square roots,
            r = te.sqrt(a)      # where exp(log) is a scalar logf per lane
            return r * te.sqrt(r)
        if b_value == 1.0:
            return a
        return te.exp(b * te.log(a))
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "div": lambda: a / b, "max": lambda: te.max(a, b), "min": lambda: te.min(a, b),
            "equal": lambda: te.if_then_else(a == b, _cst(1, "bool"), _cst(0, "bool"))}[op]()


def node_compute(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...],
                 out_dtype: str, name: str) -> te.Tensor:
    """The stage computing ``node`` from ``args`` (tensors, or Scalars for one-element
    constants), named ``name``; ``out_shape``/``out_dtype`` are its inferred type."""
    op = node.op
    if op in ("add", "sub", "mul", "div", "pow", "max", "min", "equal"):
        a, b = args
        bv = b.value if isinstance(b, Scalar) else None
        return pointwise(out_shape, name, lambda i: _binary(
            op, read(a, i, out_shape), read(b, i, out_shape), bv, out_dtype))
    if op == "where":
        return pointwise(out_shape, name, lambda i: te.if_then_else(
            read(args[0], i, out_shape) != _cst(0, "bool"), read(args[1], i, out_shape),
            read(args[2], i, out_shape)))
    if op in QUANT_VALUE:
        return pointwise(out_shape, name, lambda i: QUANT_VALUE[op](
            node, *(read(a, i, out_shape) for a in args)))
    if op == "batch_norm":
        raise GraphError(f"node {node.name!r}: batch_norm is folded before compute")
    if len(args) == 1 and op not in _ANCHOR_COMPUTE and op not in INJECTIVE_COMPUTE:
        (x,) = args
        return pointwise(out_shape, name, lambda i: _unary(op, node, read(x, i, out_shape),
                                                           out_dtype))
    if op in _ANCHOR_COMPUTE:
        return _ANCHOR_COMPUTE[op](node, args, out_shape, name)
    if op in INJECTIVE_COMPUTE:
        return INJECTIVE_COMPUTE[op](node, args, out_shape, name)
    raise GraphError(f"node {node.name or op!r}: no compute for op {op!r}")


# -- anchors ---------------------------------------------------------------------------

def _layout(node: Node) -> str:
    return node.attr("layout", "NCHW")


def _hw(shape: Sequence[Any], layout: str) -> tuple[Any, Any]:
    return (shape[1], shape[2]) if layout == "NHWC" else (shape[2], shape[3])


def _pad4(x: te.Tensor, pads: tuple[int, ...], fill: float, name: str,
          layout: str = "NCHW") -> te.Tensor:
    """x (N, C, H, W) -- or (N, H, W, C) -- padded by (top, left, bottom, right)."""
    pt, pl, pb, pr = pads
    h, w = _hw(x.shape, layout)
    hd, wd = (1, 2) if layout == "NHWC" else (2, 3)
    shape = list(x.shape)
    shape[hd], shape[wd] = h + pt + pb, w + pl + pr

    def body(*i: Any) -> Any:
        y, z = i[hd], i[wd]
        conds = []
        if pt or pb:
            conds += [y >= pt, y < h + pt]
        if pl or pr:
            conds += [z >= pl, z < w + pl]
        idx = list(i)
        idx[hd], idx[wd] = y - pt, z - pl
        return te.if_then_else(te.all(*conds), x[tuple(idx)], _cst(fill, x.dtype))
    return te.compute(tuple(shape), named(axis_names(4), body), name=name)


def _conv(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...], name: str) -> te.Tensor:
    x, w = args[0], args[1]
    layout = _layout(node)
    pt, pl, pb, pr = node.attr("pads")
    pad = (pt, pl)
    if (pt, pl) != (pb, pr):
        x = _pad4(x, node.attr("pads"), 0.0, f"{name}_pad", layout)
        pad = (0, 0)
    win = (node.attr("strides"), pad, node.attr("dilations"))
    acc = _accumulator(x)
    if layout == "NCHW":
        return conv2d_nchw_compute(x, w, *win, node.attr("group"), out_shape[2:], acc)
    if node.attr("depthwise"):
        return depthwise_conv2d_nhwc_compute(x, w, *win, out_shape[1:3], acc)
    return conv2d_nhwc_compute(x, w, *win, node.attr("group"), out_shape[1:3], acc)


def _accumulator(x: te.Tensor) -> str | None:
    """float32 for a conv or matmul over a storage float (the bf16 precision pass's
    anchors, ``passes/precision.py``), else None: the tensors' own dtype."""
    return "float32" if x.dtype in STORAGE_FLOATS else None


def _matmul(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...],
            name: str) -> te.Tensor:
    a, b = args
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise GraphError(f"node {node.name!r}: MatMul of a vector is reshaped by the frontend")
    out = broadcast_matmul_compute(a, b, name=name, acc=_accumulator(a))
    if tuple(out.shape) != tuple(out_shape):    # a batch of 1 the model's output drops
        raise GraphError(f"node {node.name!r}: MatMul gives {tuple(out.shape)}, the graph "
                         f"expects {out_shape}")
    return out


def _pool(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...], name: str) -> te.Tensor:
    x = args[0]
    layout = _layout(node)
    pt, pl, pb, pr = node.attr("pads")
    kernel, strides = node.attr("kernel"), node.attr("strides")
    h, w = _hw(x.shape, layout)
    oh, ow = _hw(out_shape, layout)
    # the padding the output size needs below/right (ceil_mode), beyond the given pads
    extra_b = max(0, (oh - 1) * strides[0] + kernel[0] - h - pt)
    extra_r = max(0, (ow - 1) * strides[1] + kernel[1] - w - pl)
    sym = (pt, pl) == (pb, pr) and pt < kernel[0] and pl < kernel[1] and all(
        (n + 2 * p - k) // st + 1 == o for n, p, k, st, o in
        zip((h, w), (pt, pl), kernel, strides, (oh, ow)))
    if node.op == "max_pool":
        if sym:
            return max_pool2d_compute(x, kernel, strides, (pt, pl), layout)
        xp = _pad4(x, (pt, pl, extra_b, extra_r), -3.4028234663852886e38, f"{name}_pad",
                   layout)
        return max_pool2d_compute(xp, kernel, strides, 0, layout)
    include = bool(node.attr("count_include_pad", 0))
    if sym:
        return avg_pool2d_compute(x, kernel, strides, (pt, pl), layout,
                                  count_include_pad=include)
    if not any((pt, pl, extra_b, extra_r)):
        return avg_pool2d_compute(x, kernel, strides, 0, layout)
    # asymmetric pads or ceil_mode: sum over an explicitly padded input, divided by the
    # window's cells inside the input (or inside input + pads with count_include_pad;
    # the ceil-mode overhang never counts)
    xp = _pad4(x, (pt, pl, extra_b, extra_r), 0.0, f"{name}_pad", layout)
    mean = avg_pool2d_compute(xp, kernel, strides, 0, layout)
    (kh, kw), (sh, sw) = kernel, strides
    lo = (-pt, -pl) if include else (0, 0)
    hi = (h + pb, w + pr) if include else (h, w)

    def cells(o: Any, d: int) -> Any:
        start = o * (sh, sw)[d] - (pt, pl)[d]
        return te.min(start + (kh, kw)[d], hi[d]) - te.max(start, lo[d])

    hd, wd = (1, 2) if layout == "NHWC" else (2, 3)
    return te.compute(out_shape, named(axis_names(4), lambda *i: mean[i] * _cst(
        float(kh * kw), x.dtype) / te.cast(cells(i[hd], 0) * cells(i[wd], 1), x.dtype)),
        name=name)


def _reduce(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...],
            name: str) -> te.Tensor:
    (x,) = args
    axes, keep = node.attr("axes"), node.attr("keepdims")
    shape = tuple(x.shape)
    rs = [te.reduce_axis((0, shape[d]), name=f"r{d}") for d in axes]
    count = math.prod(shape[d] for d in axes)
    if node.op == "reduce_mean" and not is_static(count):
        raise GraphError(f"node {node.name!r}: a mean over the symbolic size {count} is "
                         f"not supported (the divisor must be a number)")

    def body(*i: Any) -> Any:
        it, idx, r = iter(i), [], iter(rs)
        for d in range(len(shape)):
            if d in axes:
                idx.append(next(r))
                if keep:
                    next(it)
            else:
                idx.append(next(it))
        return te.sum(x[tuple(idx)], axis=rs)
    total = te.compute(out_shape, named(axis_names(len(out_shape)), body),
                       name=name if node.op == "reduce_sum" else f"{name}_sum")
    if node.op == "reduce_sum":
        return total
    return pointwise(out_shape, name, lambda i: total[i] * _cst(1 / count, x.dtype))


def _last_axis(x: te.Tensor, axis: int, node: Node) -> tuple[int, int]:
    shape = tuple(x.shape)
    if axis % len(shape) != len(shape) - 1:
        raise GraphError(f"node {node.name!r}: {node.op} over axis {axis} of {shape}: only "
                         f"the last axis is supported")
    return math.prod(shape[:-1]), shape[-1]


def _softmax(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...],
             name: str) -> te.Tensor:
    (x,) = args
    rows, cols = _last_axis(x, node.attr("axis"), node)
    x2 = te.compute((rows, cols), lambda i, j: x[unflatten(i, out_shape[:-1]) + (j,)],
                    name=f"{name}_in")
    sm = softmax_compute(x2, name=f"{name}_2d")
    return pointwise(out_shape, name, lambda i: sm[flatten(i[:-1], out_shape[:-1]), i[-1]])


def _layer_norm(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...],
                name: str) -> te.Tensor:
    x, scale = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    rows, cols = _last_axis(x, node.attr("axis"), node)
    if not is_static(cols):
        raise GraphError(f"node {node.name!r}: a layer norm over the symbolic size {cols} "
                         f"is not supported (the divisor must be a number)")
    lead = out_shape[:-1]
    k = te.reduce_axis((0, cols), name="k")
    mean = te.compute((rows,), lambda i: te.sum(x[unflatten(i, lead) + (k,)], axis=k),
                      name=f"{name}_mean")
    k2 = te.reduce_axis((0, cols), name="k")
    inv = _cst(1 / cols, x.dtype)
    sq = te.compute((rows,), lambda i: te.sum(
        (x[unflatten(i, lead) + (k2,)] - mean[i] * inv)
        * (x[unflatten(i, lead) + (k2,)] - mean[i] * inv), axis=k2), name=f"{name}_var")
    eps = _cst(node.attr("epsilon"), x.dtype)

    def body(i: tuple) -> Any:
        r = flatten(i[:-1], lead)
        y = (x[i] - mean[r] * inv) / te.sqrt(sq[r] * inv + eps) * read(scale, i, out_shape)
        return y + read(bias, i, out_shape) if bias is not None else y
    return pointwise(out_shape, name, body)


def _lrn(node: Node, args: Sequence[Operand], out_shape: tuple[int, ...], name: str) -> te.Tensor:
    (x,) = args
    cd = 3 if _layout(node) == "NHWC" else 1     # the channel axis
    size, c = node.attr("size"), out_shape[cd]
    lo = (size - 1) // 2
    r = te.reduce_axis((0, size), name="r")

    def sq(*i: Any) -> Any:
        cc = i[cd] + r - lo
        idx = list(i)
        idx[cd] = te.max(te.min(cc, c - 1), 0)
        v = x[tuple(idx)]
        return te.sum(te.if_then_else(te.all(cc >= 0, cc < c), v * v, _cst(0.0, x.dtype)),
                      axis=r)
    acc = te.compute(out_shape, named(axis_names(4), sq), name=f"{name}_sq")
    a = _cst(node.attr("alpha") / size, x.dtype)
    b, beta = _cst(node.attr("bias"), x.dtype), float(node.attr("beta"))
    return pointwise(out_shape, name, lambda i: x[i] / _binary(
        "pow", b + a * acc[i], _cst(beta, x.dtype), beta, x.dtype))


_ANCHOR_COMPUTE: dict[str, Callable[..., te.Tensor]] = {
    "conv": _conv, "matmul": _matmul, "max_pool": _pool, "avg_pool": _pool,
    "reduce_mean": _reduce, "reduce_sum": _reduce, "softmax": _softmax,
    "layer_norm": _layer_norm, "lrn": _lrn,
    "conv_integer": conv_integer_compute, "matmul_integer": matmul_integer_compute,
}
