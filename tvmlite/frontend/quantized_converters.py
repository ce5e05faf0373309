"""ONNX's quantized operators as graph nodes: QuantizeLinear, DequantizeLinear,
QLinearConv, QLinearMatMul, ConvInteger and MatMulInteger.

Scales and zero points must be constants (a model quantized with per-tensor or
per-channel parameters has them as initializers); zero points are kept as int32 values,
the arithmetic is ``tvmlite.ops.quantized``'s, and ``graph.passes.quantize`` folds the QDQ
form of the same computations into these integer kernels.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tvmlite.frontend.common import Context, ConversionError, node, window
from tvmlite.frontend.common import attr as _a
from tvmlite.frontend.common import need_const as _need
from tvmlite.graph.ir import Node

__all__ = ["quantize_linear", "dequantize_linear", "qlinear_conv", "qlinear_matmul",
           "conv_integer", "matmul_integer"]


# -- quantized ops: scales and zero points must be constants; zero points are kept as int32
# (the output dtype is the ``to`` attribute), a per-axis one reshaped to broadcast ---------

def _qparam(ctx: Context, n: Any, i: int, what: str, rank: int, axis: int,
            dtype: str, default: Any = None) -> np.ndarray:
    """Constant input ``i`` (a scale or zero point) as ``dtype``, shaped to broadcast
    against a rank-``rank`` value along ``axis`` when it has one value per channel."""
    if default is not None and (len(n.input) <= i or not n.input[i]):
        return np.asarray(default, dtype)
    v = np.asarray(_need(ctx, n, i, what))
    if v.size > 1:
        if v.ndim != 1:
            raise ConversionError(f"node {n.name!r} ({n.op_type}): {what} must be one value "
                                  f"or one per channel (1-D); blocked quantization is not "
                                  f"supported, got shape {v.shape}")
        shape = [1] * rank
        shape[axis % rank] = v.size
        v = v.reshape(shape)
    return v.astype(dtype)


def _zp_dtype(ctx: Context, n: Any, i: int, default: str = "uint8") -> str:
    if len(n.input) > i and n.input[i]:
        dt = ctx.type(n.input[i]).dtype
        if dt not in ("uint8", "int8"):
            raise ConversionError(f"node {n.name!r} ({n.op_type}): zero point type {dt} is "
                                  f"not supported (uint8 and int8 are)")
        return dt
    return default


def _check_float_input(ctx: Context, n: Any) -> None:
    dt = ctx.type(n.input[0]).dtype
    if dt != "float32":
        raise ConversionError(f"node {n.name!r} ({n.op_type}): input {n.input[0]!r} is "
                              f"{dt}; only float32 is supported")


def quantize_linear(n: Any, ctx: Context) -> list[Node]:
    _check_float_input(ctx, n)
    rank, axis = len(ctx.type(n.input[0]).shape), _a(n, "axis", 1)
    to = _zp_dtype(ctx, n, 2)
    if _a(n, "output_dtype", 0) not in (0, 2, 3):   # 2: uint8, 3: int8
        raise ConversionError(f"node {n.name!r} (QuantizeLinear): output_dtype "
                              f"{_a(n, 'output_dtype')} is not supported (uint8, int8 are)")
    to = {2: "uint8", 3: "int8"}.get(_a(n, "output_dtype", 0), to)
    scale = _qparam(ctx, n, 1, "y_scale", rank, axis, "float32")
    zp = _qparam(ctx, n, 2, "y_zero_point", rank, axis, "int32", 0)
    return [node("quantize", n, [n.input[0], ctx.constant(scale, "y_scale"),
                                 ctx.constant(zp, "y_zp")], to=to)]


def dequantize_linear(n: Any, ctx: Context) -> list[Node]:
    x = ctx.type(n.input[0])
    if x.dtype not in ("uint8", "int8", "int32"):
        raise ConversionError(f"node {n.name!r} (DequantizeLinear): input type {x.dtype} is "
                              f"not supported (uint8, int8, int32 are)")
    rank, axis = len(x.shape), _a(n, "axis", 1)
    scale = _qparam(ctx, n, 1, "x_scale", rank, axis, "float32")
    zp = _qparam(ctx, n, 2, "x_zero_point", rank, axis, "int32", 0)
    return [node("dequantize", n, [n.input[0], ctx.constant(scale, "x_scale"),
                                   ctx.constant(zp, "x_zp")])]


def _integer_conv(n: Any, ctx: Context, x: str, w: str, x_zp: np.ndarray, w_zp: np.ndarray,
                  out: str) -> Node:
    wt = ctx.type(w)
    if len(ctx.type(x).shape) != 4 or len(wt.shape) != 4:
        raise ConversionError(f"node {n.name!r} ({n.op_type}): only 2-D convolutions are "
                              f"supported")
    if x_zp.size != 1:
        raise ConversionError(f"node {n.name!r} ({n.op_type}): the input zero point must be "
                              f"one value")
    win = window(n, ctx, tuple(wt.shape[2:]))
    return node("conv_integer", n, [x, w, ctx.constant(x_zp.reshape(()), "x_zp"),
                                    ctx.constant(w_zp.reshape(-1), "w_zp")], [out],
                group=_a(n, "group", 1), **win)


def _integer_matmul(n: Any, ctx: Context, a: str, b: str, a_zp: np.ndarray,
                    b_zp: np.ndarray, out: str) -> Node:
    sa, sb = ctx.type(a).shape, ctx.type(b).shape
    if len(sa) < 2 or len(sb) < 2 or a_zp.size != 1:
        raise ConversionError(f"node {n.name!r} ({n.op_type}): A must be (..., M, K) with one "
                              f"zero point (not one per row) and B (..., K, N), got {sa} "
                              f"and {sb}")
    return node("matmul_integer", n, [a, b, ctx.constant(a_zp.reshape(()), "a_zp"),
                                      ctx.constant(b_zp.reshape(-1), "b_zp")], [out])


def _zp(ctx: Context, n: Any, i: int) -> np.ndarray:
    """An optional zero point input as an int32 array (0 when absent)."""
    if len(n.input) > i and n.input[i]:
        _zp_dtype(ctx, n, i)
        return np.asarray(_need(ctx, n, i, "zero point")).astype(np.int32)
    return np.zeros((), np.int32)


def conv_integer(n: Any, ctx: Context) -> list[Node]:
    return [_integer_conv(n, ctx, n.input[0], n.input[1], _zp(ctx, n, 2), _zp(ctx, n, 3),
                          n.output[0])]


def matmul_integer(n: Any, ctx: Context) -> list[Node]:
    return [_integer_matmul(n, ctx, n.input[0], n.input[1], _zp(ctx, n, 2), _zp(ctx, n, 3),
                            n.output[0])]


def _requantize(n: Any, ctx: Context, acc: str, scales: tuple[int, int, int], zp_at: int,
                rank: int, axis: int) -> Node:
    """``acc`` back to the zero point's type by ``x_scale * w_scale / y_scale``, in float32
    and in that order, as onnxruntime computes the multiplier."""
    xs, ws, ys = (np.asarray(_need(ctx, n, i, "scale"), np.float32).reshape(-1)
                  for i in scales)
    mult = (xs * ws / ys).astype(np.float32)
    if mult.size > 1:
        shape = [1] * rank
        shape[axis] = mult.size
        mult = mult.reshape(shape)
    zp = _zp(ctx, n, zp_at)
    return node("requantize", n, [acc, ctx.constant(mult.reshape(mult.shape if mult.size > 1
                                                                 else ()), "multiplier"),
                                  ctx.constant(zp.reshape(()), "y_zp")],
                to=_zp_dtype(ctx, n, zp_at))


def qlinear_conv(n: Any, ctx: Context) -> list[Node]:
    acc = ctx.fresh(n.output[0] + "_acc")
    nodes = [_integer_conv(n, ctx, n.input[0], n.input[3], _zp(ctx, n, 2), _zp(ctx, n, 5),
                           acc)]
    if len(n.input) > 8 and n.input[8]:
        co = ctx.type(n.input[3]).shape[0]
        bias = np.asarray(_need(ctx, n, 8, "B")).astype(np.int32).reshape(co, 1, 1)
        biased = ctx.fresh(n.output[0] + "_bias")
        nodes.append(node("add", n, [acc, ctx.constant(bias, "bias")], [biased]))
        acc = biased
    return nodes + [_requantize(n, ctx, acc, (1, 4, 6), 7, 4, 1)]


def qlinear_matmul(n: Any, ctx: Context) -> list[Node]:
    acc = ctx.fresh(n.output[0] + "_acc")
    mm = _integer_matmul(n, ctx, n.input[0], n.input[3], _zp(ctx, n, 2), _zp(ctx, n, 5), acc)
    rank = len(ctx.type(n.input[0]).shape)
    return [mm, _requantize(n, ctx, acc, (1, 4, 6), 7, rank, rank - 1)]
