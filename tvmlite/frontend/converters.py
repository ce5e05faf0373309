"""ONNX operators as graph nodes, each converted as its opset defines it.

``CONVERTERS[op_type](node, ctx)`` returns the graph nodes computing the ONNX node.
Where an op's meaning moved across opsets (9 to 21) the converter reads ``ctx.opset``:
Clip's min/max are attributes before opset 11 and inputs after; Squeeze, Unsqueeze and
ReduceSum take axes as an input from 13, ReduceMean from 18; Softmax means "flatten
from axis" before 13 and "along axis" after; Slice's ranges are attributes before 10;
BatchNormalization's ``spatial`` is gone at 9; Dropout's ratio became an input at 12
(ignored: inference). Values a converter needs to know (a Reshape's shape, a Slice's
starts) must be constants by then; the importer folds shape arithmetic as it goes.

Map: 1-D windows as 2-D · one function per op · CONVERTERS (op type -> converter) ·
CONSTANT_INPUTS (the inputs a converter needs as constants). The context and helpers
(windows: pads, auto_pad) are in ``common.py``; the quantized ops (QuantizeLinear,
DequantizeLinear, QLinearConv/MatMul, ConvInteger, MatMulInteger) in
``quantized_converters.py``; ops converted as several nodes (batch and layer norm,
Softmax off the last axis, Clip with run-time bounds, Gelu tanh, mixed-dtype Pow) in
``decompositions.py``.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tvmlite.frontend.common import Context, ConversionError, node, window
from tvmlite.frontend.common import attr as _a
from tvmlite.frontend.common import need_const as _need
from tvmlite.frontend.common import opt_const as _opt
from tvmlite.frontend.common import scalar as _scalar
from tvmlite.frontend.common import simple as _simple
from tvmlite.frontend.decompositions import batch_norm, clip, gelu, layer_norm, pow_, softmax
from tvmlite.frontend.quantized_converters import (
    conv_integer,
    dequantize_linear,
    matmul_integer,
    qlinear_conv,
    qlinear_matmul,
    quantize_linear,
)
from tvmlite.graph.ir import Node

__all__ = ["CONVERTERS", "CONSTANT_INPUTS", "Context", "ConversionError"]


def _via_2d(n: Any, ctx: Context, convert: Callable[[Any, Context], list[Node]]) -> list[Node]:
    """A 1-D Conv or pool as the 2-D one over (N, C, 1, L): inputs reshaped, window
    attributes given a leading 1 (pads a leading 0), the output reshaped back."""
    import onnx.helper as oh
    x = ctx.type(n.input[0])
    x4 = ctx.fresh(n.input[0] + "_2d")
    ctx.add(node("reshape", n, [n.input[0]], [x4], shape=x.shape[:2] + (1,) + x.shape[2:]))
    inputs = [x4] + list(n.input[1:])
    if n.op_type == "Conv":
        w = ctx.type(n.input[1])
        inputs[1] = ctx.fresh(n.input[1] + "_2d")
        ctx.add(node("reshape", n, [n.input[1]], [inputs[1]],
                     shape=w.shape[:2] + (1,) + w.shape[2:]))
    attrs = {}
    for at in n.attribute:
        v = oh.get_attribute_value(at)
        if at.name in ("kernel_shape", "strides", "dilations"):
            v = [1] + list(v)
        elif at.name == "pads":
            v = [0, v[0], 0, v[1]]
        attrs[at.name] = v.decode() if isinstance(v, bytes) else v
    y4 = ctx.fresh(n.output[0] + "_2d")
    for out in convert(oh.make_node(n.op_type, inputs, [y4], name=n.name, **attrs), ctx):
        ctx.add(out)
    y = ctx.type(y4)
    return [node("reshape", n, [y4], [n.output[0]], shape=y.shape[:2] + y.shape[3:])]


def conv(n: Any, ctx: Context) -> list[Node]:
    if len(ctx.type(n.input[0]).shape) == 3:
        return _via_2d(n, ctx, conv)
    w = ctx.type(n.input[1])
    win = window(n, ctx, tuple(w.shape[2:]))
    has_bias = len(n.input) > 2 and n.input[2]
    out = ctx.fresh(n.output[0] + "_conv") if has_bias else n.output[0]
    nodes = [node("conv", n, [n.input[0], n.input[1]], [out], group=_a(n, "group", 1), **win)]
    if has_bias:
        shape = ctx.fresh(n.input[2] + "_c")
        nodes.append(node("reshape", n, [n.input[2]], [shape], shape=(w.shape[0], 1, 1)))
        nodes.append(node("add", n, [out, shape]))
    return nodes


def pool(op: str) -> Callable[[Any, Context], list[Node]]:
    def convert(n: Any, ctx: Context) -> list[Node]:
        if len(ctx.type(n.input[0]).shape) == 3:
            return _via_2d(n, ctx, convert)
        kernel = tuple(_a(n, "kernel_shape"))
        win = window(n, ctx, kernel)
        if win.pop("dilations") != (1, 1):
            raise ConversionError(f"node {n.name!r} ({n.op_type}): dilated pools are not "
                                  f"supported")
        extra = {"count_include_pad": _a(n, "count_include_pad", 0)} if op == "avg_pool" else {}
        if len(n.output) > 1 and n.output[1]:
            raise ConversionError(f"node {n.name!r}: MaxPool's Indices output is not supported")
        return [node(op, n, [n.input[0]], kernel=kernel, ceil_mode=_a(n, "ceil_mode", 0),
                     **win, **extra)]
    return convert


def global_avg_pool(n: Any, ctx: Context) -> list[Node]:
    rank = len(ctx.type(n.input[0]).shape)
    return [node("reduce_mean", n, [n.input[0]], axes=tuple(range(2, rank)), keepdims=1)]




def gemm(n: Any, ctx: Context) -> list[Node]:
    a, b = n.input[0], n.input[1]
    nodes = []
    for flag, name in (("transA", "a"), ("transB", "b")):
        if _a(n, flag, 0):
            src = a if name == "a" else b
            t = ctx.fresh(f"{src}_T")
            nodes.append(node("transpose", n, [src], [t], perm=(1, 0)))
            a, b = (t, b) if name == "a" else (a, t)
    alpha, beta = float(_a(n, "alpha", 1.0)), float(_a(n, "beta", 1.0))
    has_c = len(n.input) > 2 and n.input[2] and beta != 0
    out = ctx.fresh(n.output[0] + "_mm") if (has_c or alpha != 1.0) else n.output[0]
    nodes.append(node("matmul", n, [a, b], [out]))
    if alpha != 1.0:
        scaled = ctx.fresh(n.output[0] + "_alpha") if has_c else n.output[0]
        nodes.append(node("mul", n, [out, _scalar(ctx, alpha)], [scaled]))
        out = scaled
    if has_c:
        c = n.input[2]
        if beta != 1.0:
            cb = ctx.fresh(c + "_beta")
            nodes.append(node("mul", n, [c, _scalar(ctx, beta)], [cb]))
            c = cb
        nodes.append(node("add", n, [out, c]))
    return nodes


def matmul(n: Any, ctx: Context) -> list[Node]:
    a, b = ctx.type(n.input[0]), ctx.type(n.input[1])
    if len(a.shape) >= 2 and len(b.shape) >= 2:
        return [node("matmul", n, list(n.input))]
    ia, ib, nodes = n.input[0], n.input[1], []
    if len(a.shape) == 1:
        ia = ctx.fresh(ia + "_2d")
        nodes.append(node("reshape", n, [n.input[0]], [ia], shape=(1,) + a.shape))
    if len(b.shape) == 1:
        ib = ctx.fresh(ib + "_2d")
        nodes.append(node("reshape", n, [n.input[1]], [ib], shape=b.shape + (1,)))
    mm = ctx.fresh(n.output[0] + "_mm")
    nodes.append(node("matmul", n, [ia, ib], [mm]))
    return nodes + [node("reshape", n, [mm], shape=_matmul_shape(a.shape, b.shape))]


def _matmul_shape(sa: tuple, sb: tuple) -> tuple:
    return tuple(np.matmul(np.zeros(sa, np.float32), np.zeros(sb, np.float32)).shape)




def reshape(n: Any, ctx: Context) -> list[Node]:
    x = ctx.type(n.input[0])
    shape = [int(d) for d in _need(ctx, n, 1, "shape")]
    allow_zero = _a(n, "allowzero", 0)
    shape = [x.shape[i] if d == 0 and not allow_zero else d for i, d in enumerate(shape)]
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1]))
        shape[shape.index(-1)] = int(np.prod(x.shape)) // max(known, 1)
    return [node("reshape", n, [n.input[0]], shape=tuple(shape))]


def flatten(n: Any, ctx: Context) -> list[Node]:
    x = ctx.type(n.input[0])
    ax = _a(n, "axis", 1)
    ax = ax if ax == len(x.shape) else ax % len(x.shape)
    return [node("reshape", n, [n.input[0]], shape=(int(np.prod(x.shape[:ax])),
                                                    int(np.prod(x.shape[ax:]))))]


def _axes(n: Any, ctx: Context, from_opset: int, rank: int) -> list[int] | None:
    if ctx.opset >= from_opset:
        v = _opt(ctx, n, 1)
        if len(n.input) > 1 and n.input[1] and v is None:
            raise ConversionError(f"node {n.name!r} ({n.op_type}): axes must be a constant")
        axes = None if v is None else [int(a) for a in v]
    else:
        axes = _a(n, "axes")
    return None if axes is None else sorted(a % rank for a in axes)


def squeeze(n: Any, ctx: Context) -> list[Node]:
    x = ctx.type(n.input[0])
    axes = _axes(n, ctx, 13, len(x.shape))
    shape = tuple(s for d, s in enumerate(x.shape) if not (s == 1 and (axes is None or d in axes)))
    return [node("reshape", n, [n.input[0]], shape=shape)]


def unsqueeze(n: Any, ctx: Context) -> list[Node]:
    x = ctx.type(n.input[0])
    given = _opt(ctx, n, 1) if ctx.opset >= 13 else _a(n, "axes", [])
    axes = _axes(n, ctx, 13, len(x.shape) + (0 if given is None else len(given)))
    shape = list(x.shape)
    for a in axes or []:
        shape.insert(a, 1)
    return [node("reshape", n, [n.input[0]], shape=tuple(shape))]


def transpose(n: Any, ctx: Context) -> list[Node]:
    rank = len(ctx.type(n.input[0]).shape)
    perm = _a(n, "perm") or list(reversed(range(rank)))
    return [node("transpose", n, [n.input[0]], perm=tuple(perm))]


def concat(n: Any, ctx: Context) -> list[Node]:
    rank = len(ctx.type(n.input[0]).shape)
    return [node("concat", n, list(n.input), axis=_a(n, "axis") % rank)]




def reduce(op: str, axes_input_from: int) -> Callable[[Any, Context], list[Node]]:
    def convert(n: Any, ctx: Context) -> list[Node]:
        rank = len(ctx.type(n.input[0]).shape)
        axes = _axes(n, ctx, axes_input_from, rank)
        if axes is None or not axes:
            if axes == [] and _a(n, "noop_with_empty_axes", 0):
                return [node("reshape", n, [n.input[0]], shape=ctx.type(n.input[0]).shape)]
            axes = list(range(rank))
        return [node(op, n, [n.input[0]], axes=tuple(axes), keepdims=_a(n, "keepdims", 1))]
    return convert




def lrn(n: Any, ctx: Context) -> list[Node]:
    return [node("lrn", n, [n.input[0]], size=_a(n, "size"), alpha=_a(n, "alpha", 1e-4),
                 beta=_a(n, "beta", 0.75), bias=_a(n, "bias", 1.0))]


def slice_(n: Any, ctx: Context) -> list[Node]:
    x = ctx.type(n.input[0])
    if ctx.opset < 10:
        starts, ends = _a(n, "starts"), _a(n, "ends")
        axes, steps = _a(n, "axes"), None
    else:
        starts, ends = _need(ctx, n, 1, "starts"), _need(ctx, n, 2, "ends")
        axes, steps = _opt(ctx, n, 3), _opt(ctx, n, 4)
    axis_list = list(range(len(starts))) if axes is None else [int(a) for a in axes]
    step_list = [1] * len(starts) if steps is None else [int(s) for s in steps]
    ranges = []
    for ax, b, e, s in zip(axis_list, starts, ends, step_list):
        ax %= len(x.shape)
        r = range(x.shape[ax])[slice(int(b), int(e), s)]
        ranges.append((ax, r.start, s, len(r)))
    return [node("slice", n, [n.input[0]], ranges=tuple(ranges))]


def gather(n: Any, ctx: Context) -> list[Node]:
    rank = len(ctx.type(n.input[0]).shape)
    idx = ctx.const(n.input[1])
    if idx is None or ctx.const(n.input[0]) is not None:
        return [node("gather", n, [n.input[0], n.input[1]], axis=_a(n, "axis", 0) % rank)]
    return [node("gather", n, [n.input[0]], axis=_a(n, "axis", 0) % rank,
                 indices=tuple(int(v) for v in idx.reshape(-1)),
                 indices_shape=tuple(int(d) for d in idx.shape))]


def expand(n: Any, ctx: Context) -> list[Node]:
    shape = tuple(int(d) for d in _need(ctx, n, 1, "shape"))
    return [node("expand", n, [n.input[0]], shape=shape)]


def cast(n: Any, ctx: Context) -> list[Node]:
    import onnx.helper as oh
    to = np.dtype(oh.tensor_dtype_to_np_dtype(_a(n, "to"))).name
    return [node("cast", n, [n.input[0]], to=to)]


def constant_of_shape(n: Any, ctx: Context) -> list[Node]:
    import onnx.numpy_helper as nh
    v = _a(n, "value")
    value = nh.to_array(v).reshape(-1)[0] if v is not None else np.float32(0)
    return [node("constant_of_shape", n, [n.input[0]], value=value.item(),
                 dtype=np.dtype(value.dtype).name)]


def shape(n: Any, ctx: Context) -> list[Node]:
    s = np.array(ctx.type(n.input[0]).shape, np.int64)
    start, end = _a(n, "start", 0), _a(n, "end", None)
    return [node("shape_value", n, [], value=tuple(int(d) for d in s[start:end]))]


def dropout(n: Any, ctx: Context) -> list[Node]:
    if len(n.output) > 1 and n.output[1]:   # at inference the mask keeps everything
        ctx.set_constant(n.output[1], np.ones(ctx.type(n.input[0]).shape, bool))
    return [node("identity", n, [n.input[0]], [n.output[0]])]


def _sum(n: Any, ctx: Context) -> list[Node]:
    if len(n.input) == 1:
        return [node("identity", n, [n.input[0]])]
    nodes, acc = [], n.input[0]
    for i, name in enumerate(n.input[1:]):
        out = n.output[0] if i == len(n.input) - 2 else ctx.fresh(n.output[0] + "_sum")
        nodes.append(node("add", n, [acc, name], [out]))
        acc = out
    return nodes


def leaky_relu(n: Any, ctx: Context) -> list[Node]:
    return [node("leaky_relu", n, [n.input[0]], alpha=float(_a(n, "alpha", 0.01)))]


def hard_sigmoid(n: Any, ctx: Context) -> list[Node]:
    return [node("hard_sigmoid", n, [n.input[0]], alpha=float(_a(n, "alpha", 0.2)),
                 beta=float(_a(n, "beta", 0.5)))]


CONVERTERS: dict[str, Callable[[Any, Context], list[Node]]] = {
    "Conv": conv, "BatchNormalization": batch_norm, "Relu": _simple("relu"),
    "LeakyRelu": leaky_relu, "Sigmoid": _simple("sigmoid"), "MaxPool": pool("max_pool"),
    "AveragePool": pool("avg_pool"), "GlobalAveragePool": global_avg_pool, "LRN": lrn,
    "Concat": concat, "Sum": _sum, "Add": _simple("add"), "Sub": _simple("sub"),
    "Mul": _simple("mul"), "Div": _simple("div"), "Reshape": reshape, "Flatten": flatten,
    "Transpose": transpose, "Gemm": gemm, "MatMul": matmul, "Dropout": dropout,
    "Identity": _simple("identity"), "Softmax": softmax,
    "ConstantOfShape": constant_of_shape, "Unsqueeze": unsqueeze, "Squeeze": squeeze,
    "Clip": clip, "HardSigmoid": hard_sigmoid, "HardSwish": _simple("hard_swish"),
    "Pow": pow_, "Sqrt": _simple("sqrt"), "Erf": _simple("erf"),
    "Tanh": _simple("tanh"), "Gelu": gelu, "LayerNormalization": layer_norm,
    "ReduceMean": reduce("reduce_mean", 18), "ReduceSum": reduce("reduce_sum", 13),
    "Gather": gather, "Cast": cast, "Where": _simple("where"), "Equal": _simple("equal"),
    "Shape": shape, "Slice": slice_, "Expand": expand, "Range": _simple("range"),
    "Exp": _simple("exp"), "Neg": _simple("neg"), "Max": _simple("max"),
    "Min": _simple("min"), "Abs": _simple("abs"),
    "QuantizeLinear": quantize_linear, "DequantizeLinear": dequantize_linear,
    "QLinearConv": qlinear_conv, "QLinearMatMul": qlinear_matmul,
    "ConvInteger": conv_integer, "MatMulInteger": matmul_integer,
}

# The inputs (by position) whose values a converter needs when it converts: shapes,
# axes, slice ranges; a model that gives them at run time can only be compiled once
# they are known (``onnx_backend`` binds them from the first run's feeds).
CONSTANT_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Slice": (1, 2, 3, 4), "Squeeze": (1,),
    "Unsqueeze": (1,), "ReduceSum": (1,), "ReduceMean": (1,), "ConstantOfShape": (0,),
    "Range": (0, 1, 2), "Dropout": (1, 2),
    "QuantizeLinear": (1, 2), "DequantizeLinear": (1, 2),
    "QLinearConv": (1, 2, 4, 5, 6, 7, 8), "QLinearMatMul": (1, 2, 4, 5, 6, 7),
    "ConvInteger": (2, 3), "MatMulInteger": (2, 3),
}
