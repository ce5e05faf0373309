"""ONNX ops whose general forms are converted as several graph nodes.

Where an op has one graph op for its common form (a batch norm at inference,
a layer norm over the last axis, Clip with constant bounds, exact Gelu, Softmax over
the last axis), that form keeps it, so fusion and batch-norm folding see it. The other
forms are decomposed here into nodes the graph already has, which keeps the graph's
op set small:

- BatchNormalization in training mode (opset 14+, ``training_mode=1``) as its
  elementwise formula with the batch's mean and variance
  (``reduce_mean`` nodes) and the running statistics as its extra outputs;
- LayerNormalization over any axis (the input as a 2-D (rows, cols) matrix around the
  last-axis op) and its optional Mean and InvStdDev outputs as reductions;
- Softmax over a non-last axis (opset 13+) between two transposes;
- Clip with run-time min/max as ``max``/``min`` nodes;
- Gelu(approximate="tanh") as its formula,
  ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``;
- Pow with an exponent of another dtype than its base: the exponent cast to the base's
  dtype (ONNX's result has the base's dtype; an integer base takes an integer-valued
  exponent, a fractional one is truncated).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tvmlite.frontend.common import Context, ConversionError, attr, node, opt_const, scalar
from tvmlite.graph.ir import Node

__all__ = ["batch_norm", "layer_norm", "softmax", "clip", "gelu", "pow_"]


class _Nodes:
    """The graph nodes of one ONNX node, in order: ``op(...)`` appends a node whose
    output is ``out`` (one of the ONNX node's outputs) or a fresh name, and returns it."""

    def __init__(self, n: Any, ctx: Context):
        self.n, self.ctx = n, ctx
        self.nodes: list[Node] = []

    def op(self, op: str, inputs: list[str], out: str | None = None, **attrs: Any) -> str:
        name = out or self.ctx.fresh(f"{self.n.output[0]}_{op}")
        self.nodes.append(node(op, self.n, inputs, [name], **attrs))
        return name


def batch_norm(n: Any, ctx: Context) -> list[Node]:
    eps = float(attr(n, "epsilon", 1e-5))
    training = ctx.opset >= 14 and attr(n, "training_mode", 0)
    if not training:   # run-time weights too: fold_batch_norm says why
        return [node("batch_norm", n, list(n.input[:5]), epsilon=eps)]
    x = ctx.type(n.input[0])
    rank = len(x.shape)
    dtype = x.dtype
    b = _Nodes(n, ctx)
    per_channel = (x.shape[1],) + (1,) * (rank - 2)
    scale, bias = (b.op("reshape", [i], shape=per_channel) for i in n.input[1:3])
    axes = (0,) + tuple(range(2, rank))
    mean = b.op("reduce_mean", [n.input[0]], axes=axes, keepdims=1)
    d = b.op("sub", [n.input[0], mean])
    var = b.op("reduce_mean", [b.op("mul", [d, d])], axes=axes, keepdims=1)
    std = b.op("sqrt", [b.op("add", [var, scalar(ctx, eps, dtype)])])
    b.op("add", [b.op("mul", [b.op("div", [d, std]), scale]), bias], out=n.output[0])
    momentum = float(attr(n, "momentum", 0.9))
    for k, (running, batch) in enumerate(((n.input[3], mean), (n.input[4], var))):
        if len(n.output) > k + 1 and n.output[k + 1]:
            flat = b.op("reshape", [batch], shape=(x.shape[1],))
            b.op("add", [b.op("mul", [running, scalar(ctx, momentum, dtype)]),
                         b.op("mul", [flat, scalar(ctx, 1 - momentum, dtype)])],
                 out=n.output[k + 1])
    return b.nodes


def layer_norm(n: Any, ctx: Context) -> list[Node]:
    x = ctx.type(n.input[0])
    rank = len(x.shape)
    axis = attr(n, "axis", -1) % rank
    eps = float(attr(n, "epsilon", 1e-5))
    extra = [n.output[k] if len(n.output) > k else "" for k in (1, 2)]   # Mean, InvStdDev
    if axis == rank - 1 and not any(extra):
        return [node("layer_norm", n, list(n.input), axis=axis, epsilon=eps)]
    b = _Nodes(n, ctx)
    rows, cols = math.prod(x.shape[:axis]), math.prod(x.shape[axis:])
    x2 = b.op("reshape", [n.input[0]], shape=(rows, cols))
    params = []
    for i in n.input[1:3]:
        if not i:
            continue
        full = i if ctx.type(i).shape == x.shape[axis:] else b.op(
            "expand", [i], shape=x.shape[axis:])
        params.append(b.op("reshape", [full], shape=(cols,)))
    y2 = b.op("layer_norm", [x2, *params], axis=1, epsilon=eps)
    b.op("reshape", [y2], out=n.output[0], shape=x.shape)
    stat_shape = x.shape[:axis] + (1,) * (rank - axis)
    if any(extra):
        mean = b.op("reduce_mean", [x2], axes=(1,), keepdims=1)
        if extra[0]:
            b.op("reshape", [mean], out=extra[0], shape=stat_shape)
        if extra[1]:
            d = b.op("sub", [x2, mean])
            var = b.op("reduce_mean", [b.op("mul", [d, d])], axes=(1,), keepdims=1)
            std = b.op("sqrt", [b.op("add", [var, scalar(ctx, eps, x.dtype)])])
            inv = b.op("div", [scalar(ctx, 1.0, x.dtype), std])
            b.op("reshape", [inv], out=extra[1], shape=stat_shape)
    return b.nodes


def softmax(n: Any, ctx: Context) -> list[Node]:
    x = ctx.type(n.input[0])
    rank = len(x.shape)
    ax = attr(n, "axis", -1 if ctx.opset >= 13 else 1) % rank
    if ax == rank - 1:
        return [node("softmax", n, [n.input[0]], axis=ax)]
    b = _Nodes(n, ctx)
    if ctx.opset >= 13:   # along the axis: move it last and back
        perm = list(range(rank))
        perm[ax], perm[-1] = perm[-1], perm[ax]
        t = b.op("transpose", [n.input[0]], perm=tuple(perm))
        sm = b.op("softmax", [t], axis=rank - 1)
        b.op("transpose", [sm], out=n.output[0], perm=tuple(perm))
        return b.nodes
    # before 13: the input flattened to 2-D from the axis
    two = (math.prod(x.shape[:ax]), math.prod(x.shape[ax:]))
    sm = b.op("softmax", [b.op("reshape", [n.input[0]], shape=two)], axis=1)
    b.op("reshape", [sm], out=n.output[0], shape=x.shape)
    return b.nodes


_FLT_MAX = 3.4028234663852886e38


def clip(n: Any, ctx: Context) -> list[Node]:
    x = ctx.type(n.input[0])
    if ctx.opset < 11:
        return [node("clip", n, [n.input[0]], min=float(attr(n, "min", -_FLT_MAX)),
                     max=float(attr(n, "max", _FLT_MAX)))]
    bounds = []
    for i in (1, 2):
        given = len(n.input) > i and bool(n.input[i])
        bounds.append((given, opt_const(ctx, n, i)))
    if all(v is not None or not given for given, v in bounds):
        lo, hi = (float(v) if v is not None else d
                  for (_, v), d in zip(bounds, (-_FLT_MAX, _FLT_MAX)))
        if x.dtype.startswith("int"):
            info = np.iinfo(x.dtype)
            lo, hi = max(lo, info.min), min(hi, info.max)
        return [node("clip", n, [n.input[0]], min=lo, max=hi)]
    # a bound given at run time: max(x, min) then min(., max), as ONNX defines Clip
    b = _Nodes(n, ctx)
    cur = n.input[0]
    for (given, _), i, op in zip(bounds, (1, 2), ("max", "min")):
        if given:
            last = op == "min" or not bounds[1][0]
            cur = b.op(op, [cur, n.input[i]], out=n.output[0] if last else None)
    return b.nodes


def gelu(n: Any, ctx: Context) -> list[Node]:
    how = attr(n, "approximate", "none")
    if how == "none":
        return [node("gelu", n, [n.input[0]])]
    if how != "tanh":
        raise ConversionError(f"node {n.name!r} (Gelu): approximate={how!r} is not one of "
                              f"'none', 'tanh'")
    x, dtype = n.input[0], ctx.type(n.input[0]).dtype
    b = _Nodes(n, ctx)
    cube = b.op("mul", [b.op("mul", [x, x]), x])
    inner = b.op("add", [x, b.op("mul", [cube, scalar(ctx, 0.044715, dtype)])])
    t = b.op("tanh", [b.op("mul", [inner, scalar(ctx, math.sqrt(2 / math.pi), dtype)])])
    half_x = b.op("mul", [x, scalar(ctx, 0.5, dtype)])
    b.op("mul", [half_x, b.op("add", [t, scalar(ctx, 1.0, dtype)])], out=n.output[0])
    return b.nodes


def pow_(n: Any, ctx: Context) -> list[Node]:
    base, exponent = ctx.type(n.input[0]), ctx.type(n.input[1])
    if base.dtype == exponent.dtype:
        return [node("pow", n, list(n.input[:2]))]
    b = _Nodes(n, ctx)
    e = b.op("cast", [n.input[1]], to=base.dtype)
    b.op("pow", [n.input[0], e], out=n.output[0])
    return b.nodes
