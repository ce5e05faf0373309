"""Quantized operators: uint8/int8 matmul, dense and conv2d with int32 accumulation, zero
points, and the requantize epilogue that brings the int32 sum back to uint8/int8.

Map: value helpers (round_half_even, quantize_value, dequantize_value, requantize_value) ·
tensor computes (qmatmul_compute, qdense_compute, qconv2d_nchw_compute,
qconv2d_nhwc_compute, requantize_compute) · size-taking ops for the library (qmatmul,
qdense, qconv2d_nchw, qconv2d_nhwc; a depthwise conv is ``groups == CI``).

Arithmetic, as ONNX defines it and onnxruntime computes it, so the results are the same
integers: the product sums ``(int32(x) - x_zp) * (int32(w) - w_zp)`` in int32 (exact for
any size a model has: 255 * 128 * K stays below 2**31 up to K = 65000); the requantize
multiplies the int32 sum (plus the int32 bias) by the real scale in float32, clips it to
the output type's range minus the zero point, rounds half to even (QuantizeLinear's
rounding; onnxruntime's MLAS requantize is the same float32 multiply and rounding), adds
the zero point; ReLU is a clip at the zero point (the real value 0). A zero point is a
plain int (per tensor) or a (C,) int32 tensor (the weight's per output channel); a scale
a plain float or a (C,) float32 tensor along the output channels.

The reduction's innermost axis is the input channel (K for a matmul, CI/group for a
conv), read contiguously in the weight layouts (M, K), (KH, KW, CI, CO)'s CI rows and
(CO, CI, KH, KW): what a u8 x s8 -> s32 dot product of four neighbours (vpdpbusd, sdot)
consumes once a schedule splits it by 4.
"""
from __future__ import annotations

from typing import Any

from tvmlite import te
from tvmlite.checks import is_int, is_number
from tvmlite.ir.dtypes import value_range
from tvmlite.ir.expr import Expr
from tvmlite.ir.simplify import ROUNDING_MAGIC
from tvmlite.ops.common import divisible, named, out_size, pad, positive, size_arg, tuple_arg

__all__ = ["QUANT_DTYPES", "round_half_even", "quantize_value", "dequantize_value",
           "requantize_value", "qmatmul_compute", "qdense_compute", "qconv2d_nchw_compute",
           "qconv2d_nhwc_compute", "requantize_compute", "qmatmul", "qdense", "qconv2d_nchw",
           "qconv2d_nhwc"]

QUANT_DTYPES = ("uint8", "int8")
ZeroPoint = Any   # an int, or a te.Tensor (C,) of int32 read at the output channel
Scale = Any       # a float, or a te.Tensor (C,) of float32 read at the output channel


# -- values ----------------------------------------------------------------------------

def round_half_even(f: Any) -> Expr:
    """The float32 ``f`` rounded to the nearest int32, ties to even (numpy's ``rint``):
    ``(f + 1.5 * 2**23) - 1.5 * 2**23`` in float32. For ``|f| < 2**22`` the sum lands
    where float32's spacing is 1, so IEEE's default rounding (to nearest, ties to even)
    rounds it there, and the difference is exact. ``f`` must lie in that range: the
    callers clip it to a quantized type's range first (which also keeps a multiply out
    of the sum, so no fused multiply-add changes its rounding). ``f`` is read once: the
    comparison form used before read it 13 times, and a fused requantize -> batch norm ->
    quantize epilogue chains three roundings (13**3 = 2197 copies: 18 MB of C in
    ResNet-50's residual kernels, which gcc did not compile in 60 s)."""
    magic = te.const(ROUNDING_MAGIC, "float32")    # 1.5 * 2**23 (ir.simplify knows it)
    return te.cast((f + magic) - magic, "int32")


def _int32(v: Any) -> Expr:
    return te.const(v, "int32") if is_int(v) else te.cast(v, "int32")


def _to_quant(f: Any, zero_point: Any, dtype: str, relu: bool) -> Expr:
    """``f`` (float32, in units of the output scale) as ``dtype``: clipped to the range
    minus the zero point, rounded half to even, the zero point added (MLAS's order: the
    bounds are integers, so clipping first gives what clipping the rounded value would)."""
    lo, hi = value_range(dtype)
    zp = _int32(zero_point)
    f = te.min(te.max(f, te.cast(te.const(lo, "int32") - zp, "float32")),
               te.cast(te.const(hi, "int32") - zp, "float32"))
    q = round_half_even(f) + zp
    if relu:
        q = te.max(q, zp)
    return te.cast(q, dtype)


def quantize_value(x: Any, scale: Any, zero_point: Any, dtype: str) -> Expr:
    """ONNX QuantizeLinear of a float32 value: ``saturate(round(x / scale) + zero_point)``,
    rounding half to even."""
    return _to_quant(x / scale, zero_point, dtype, relu=False)


def dequantize_value(q: Any, scale: Any, zero_point: Any) -> Expr:
    """ONNX DequantizeLinear: ``float32(int32(q) - zero_point) * scale``."""
    d = te.cast(q, "int32")
    if not (is_int(zero_point) and zero_point == 0):
        d = d - _int32(zero_point)
    return te.cast(d, "float32") * scale


def requantize_value(acc: Any, multiplier: Any, zero_point: Any, dtype: str,
                     relu: bool = False) -> Expr:
    """An int32 sum back to ``dtype``: ``float32(acc) * multiplier`` (the real scale
    ``x_scale * w_scale / y_scale``) quantized with ``zero_point``; ``relu`` clips at the
    zero point."""
    return _to_quant(te.cast(acc, "float32") * multiplier, zero_point, dtype, relu)


# -- computes --------------------------------------------------------------------------

def _centered(x: Any, zero_point: ZeroPoint, channel: Any = None) -> Expr:
    """``int32(x) - zero_point`` (the zero point read at ``channel`` when a tensor)."""
    v = te.cast(x, "int32")
    if isinstance(zero_point, te.Tensor):
        return v - te.cast(zero_point[channel], "int32")
    return v if zero_point == 0 else v - te.const(zero_point, "int32")


def _check_zp(op: str, name: str, zp: Any, dtype: str) -> None:
    if isinstance(zp, te.Tensor):
        return
    lo, hi = value_range(dtype)
    if not is_int(zp, lo, hi):
        raise ValueError(f"{op}: {name} must be an int in [{lo}, {hi}] (the range of "
                         f"{dtype}) or a tensor, got {zp!r}")


def _check_quant(op: str, t: te.Tensor, name: str) -> None:
    if t.dtype not in QUANT_DTYPES:
        raise ValueError(f"{op}: {name} must be uint8 or int8, got {t.dtype}")


def qmatmul_compute(a: te.Tensor, b: te.Tensor, a_zp: ZeroPoint = 0, b_zp: ZeroPoint = 0,
                    name: str = "qmatmul") -> te.Tensor:
    """ONNX MatMulInteger: ``C[..., i, j] = sum_k (a[..., i, k] - a_zp) * (b[..., k, j] -
    b_zp[j])`` in int32 of a (..., M, K) and b (..., K, N), the batch dimensions
    broadcast as numpy's ``@`` (a dimension of 1 read at index 0); ``b_zp`` per column
    or per tensor."""
    for t, n in ((a, "a"), (b, "b")):
        _check_quant("qmatmul", t, n)
    sa, sb = tuple(a.shape), tuple(b.shape)
    if len(sa) < 2 or len(sb) < 2 or sa[-1] != sb[-2]:
        raise ValueError(f"qmatmul: takes a (..., M, K) and b (..., K, N), got {sa} and {sb}")
    rank = max(len(sa), len(sb))
    pa, pb = (1,) * (rank - len(sa)) + sa[:-2], (1,) * (rank - len(sb)) + sb[:-2]
    if any(x != y and 1 not in (x, y) for x, y in zip(pa, pb)):
        raise ValueError(f"qmatmul: batch dimensions {sa[:-2]} and {sb[:-2]} do not broadcast")
    batch = tuple(max(x, y) for x, y in zip(pa, pb))
    k = te.reduce_axis((0, sa[-1]), name="k")

    def lead(shape: tuple, bi: tuple) -> tuple:
        own = bi[len(bi) - (len(shape) - 2):] if len(shape) > 2 else ()
        return tuple(0 if d == 1 else i for d, i in zip(shape[:-2], own))

    def body(*idx: Any) -> Any:
        *bi, i, j = idx
        return te.sum(_centered(a[lead(sa, tuple(bi)) + (i, k)], a_zp)
                      * _centered(b[lead(sb, tuple(bi)) + (k, j)], b_zp, j), axis=k)
    names = [f"b{d}" for d in range(len(batch))] + ["i", "j"]
    return te.compute(batch + (sa[-2], sb[-1]), named(names, body), name=name)


def qdense_compute(data: te.Tensor, weight: te.Tensor, data_zp: ZeroPoint = 0,
                   weight_zp: ZeroPoint = 0, name: str = "qdense") -> te.Tensor:
    """``out[i, j] = sum_k (data[i, k] - data_zp) * (weight[j, k] - weight_zp[j])`` in
    int32 of data (N, K) and weight (M, K), TVM's dense layout (K contiguous in both)."""
    K = data.shape[1]
    k = te.reduce_axis((0, K), name="k")
    return te.compute((data.shape[0], weight.shape[0]), lambda i, j: te.sum(
        _centered(data[i, k], data_zp) * _centered(weight[j, k], weight_zp, j), axis=k),
        name=name)


def qconv2d_nchw_compute(data: te.Tensor, weight: te.Tensor, data_zp: ZeroPoint,
                         weight_zp: ZeroPoint, stride: tuple, padding: tuple, dilation: tuple,
                         groups: int, out_hw: tuple, name: str = "qconv2d_nchw") -> te.Tensor:
    """ONNX ConvInteger in int32 of data (N, CI, H, W) and weight (CO, CI/groups, KH, KW):
    the padding holds ``data_zp`` (a real 0), ``weight_zp`` per tensor or per output
    channel. ``padding`` is (top, left, bottom, right) or symmetric (pad_h, pad_w)."""
    N = data.shape[0]
    CO, ci_g, kh, kw = weight.shape
    co_g = CO // groups
    (sh, sw), (dh, dw), (OH, OW) = stride, dilation, out_hw
    padded = _pad_zp(data, padding, "NCHW", data_zp)
    rc = te.reduce_axis((0, ci_g), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")

    def body(n: Any, f: Any, h: Any, w: Any) -> Any:
        c = rc if groups == 1 else f // co_g * ci_g + rc
        x = padded[n, c, _win(h, sh, ry, dh), _win(w, sw, rx, dw)]
        return te.sum(_centered(x, data_zp) * _centered(weight[f, rc, ry, rx], weight_zp, f),
                      axis=[ry, rx, rc])
    return te.compute((N, CO, OH, OW), body, name=name)


def qconv2d_nhwc_compute(data: te.Tensor, weight: te.Tensor, data_zp: ZeroPoint,
                         weight_zp: ZeroPoint, stride: tuple, padding: tuple, dilation: tuple,
                         groups: int, out_hw: tuple, name: str = "qconv2d_nhwc") -> te.Tensor:
    """ConvInteger in int32 of data (N, H, W, CI) and weight (KH, KW, CI/groups, CO);
    otherwise as ``qconv2d_nchw_compute``."""
    N = data.shape[0]
    kh, kw, ci_g, CO = weight.shape
    co_g = CO // groups
    (sh, sw), (dh, dw), (OH, OW) = stride, dilation, out_hw
    padded = _pad_zp(data, padding, "NHWC", data_zp)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rc = te.reduce_axis((0, ci_g), name="rc")

    def body(n: Any, h: Any, w: Any, f: Any) -> Any:
        c = rc if groups == 1 else f // co_g * ci_g + rc
        x = padded[n, _win(h, sh, ry, dh), _win(w, sw, rx, dw), c]
        return te.sum(_centered(x, data_zp) * _centered(weight[ry, rx, rc, f], weight_zp, f),
                      axis=[ry, rx, rc])
    return te.compute((N, OH, OW, CO), body, name=name)


def _win(o: Any, stride: int, r: Any, dilation: int) -> Any:
    base = o * stride if stride != 1 else o
    return base + (r * dilation if dilation != 1 else r)


def _pad_zp(data: te.Tensor, padding: tuple, layout: str, data_zp: ZeroPoint) -> te.Tensor:
    """``data`` padded by (top, left[, bottom, right]) with its zero point."""
    if isinstance(data_zp, te.Tensor):
        raise ValueError("qconv2d: the data zero point is per tensor (an int)")
    pt, pl, pb, pr = padding if len(padding) == 4 else (*padding, *padding)
    hd, wd = (1, 2) if layout == "NHWC" else (2, 3)
    if (pt, pl) == (pb, pr):
        pads = [0, 0, 0, 0]
        pads[hd], pads[wd] = pt, pl
        return pad(data, pads, layout, value=data_zp)
    shape = list(data.shape)
    h, w = shape[hd], shape[wd]
    shape[hd], shape[wd] = h + pt + pb, w + pl + pr

    def body(*i: Any) -> Any:
        y, z = i[hd], i[wd]
        idx = list(i)
        idx[hd], idx[wd] = y - pt, z - pl
        inside = te.all(y >= pt, y < h + pt, z >= pl, z < w + pl)
        return te.if_then_else(inside, data[tuple(idx)], te.const(data_zp, data.dtype))
    return te.compute(tuple(shape), named([c.lower() for c in layout], body), name="pad")


def requantize_compute(acc: te.Tensor, multiplier: Scale, zero_point: int, dtype: str,
                       relu: bool = False, bias: te.Tensor | None = None, axis: int = -1,
                       name: str = "requantize") -> te.Tensor:
    """``acc`` (int32) plus ``bias[c]`` (int32, optional) requantized to ``dtype``
    (``requantize_value``); a tensor ``multiplier`` or ``bias`` is read at the index of
    ``axis`` (the output channels: 1 in NCHW, -1 in NHWC and for a matmul)."""
    rank = len(acc.shape)
    ax = axis % rank

    def body(*i: Any) -> Any:
        v = acc[i]
        if bias is not None:
            v = v + bias[i[ax]]
        m = multiplier[i[ax]] if isinstance(multiplier, te.Tensor) else te.const(
            float(multiplier), "float32")
        return requantize_value(v, m, zero_point, dtype, relu)
    return te.compute(tuple(acc.shape), named([f"i{d}" for d in range(rank)], body),
                      name=name)


# -- the library's size-taking ops -----------------------------------------------------

def _dtypes(op: str, **dts: Any) -> None:
    for name, v in dts.items():
        if v not in QUANT_DTYPES:
            raise ValueError(f"{op}: {name} must be 'uint8' or 'int8', got {v!r}")


def _epilogue(op: str, acc: te.Tensor, channels: int, axis: int, scale: Any, out_zp: Any,
              out_dtype: str, bias: bool, relu: bool, per_channel: bool
              ) -> list[te.Tensor]:
    """The requantize inputs (bias (C,) int32, scale (C,) float32 when per channel) and
    the output, for a size-taking op."""
    _dtypes(op, out_dtype=out_dtype)
    _check_zp(op, "out_zp", out_zp, out_dtype)
    for name, flag in (("bias", bias), ("relu", relu), ("per_channel", per_channel)):
        if not isinstance(flag, bool):
            raise ValueError(f"{op}: {name} must be True or False, got {flag!r}")
    if not per_channel and not is_number(scale, 0.0, lo_open=True):
        raise ValueError(f"{op}: scale must be a positive float (x_scale * w_scale / "
                         f"y_scale), got {scale!r}")
    extra = []
    b = None
    if bias:
        b = te.placeholder((channels,), "int32", name="bias")
        extra.append(b)
    mult: Any = scale
    if per_channel:
        mult = te.placeholder((channels,), "float32", name="scale")
        extra.append(mult)
    return extra + [requantize_compute(acc, mult, out_zp, out_dtype, relu, b, axis)]


def qmatmul(M: int, N: int, K: int, dtype: str = "uint8", weight_dtype: str = "int8",
            data_zp: int = 0, weight_zp: int = 0) -> list[te.Tensor]:
    """MatMulInteger: A (M, K) ``dtype``, B (K, N) ``weight_dtype`` -> int32 (M, N);
    returns [A, B, C]."""
    op = "qmatmul"
    M, N, K = (size_arg(op, n, v) for n, v in (("M", M), ("N", N), ("K", K)))
    _dtypes(op, dtype=dtype, weight_dtype=weight_dtype)
    _check_zp(op, "data_zp", data_zp, dtype)
    _check_zp(op, "weight_zp", weight_zp, weight_dtype)
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), weight_dtype, name="B")
    return [A, B, qmatmul_compute(A, B, data_zp, weight_zp, name="C")]


def qdense(N: int, K: int, M: int, dtype: str = "uint8", weight_dtype: str = "int8",
           data_zp: int = 0, weight_zp: int = 0, scale: float = 1.0, out_zp: int = 0,
           out_dtype: str = "uint8", bias: bool = False, relu: bool = False,
           per_channel: bool = False) -> list[te.Tensor]:
    """A quantized fully connected layer: data (N, K), weight (M, K), int32 sums
    requantized by ``scale`` (or a (M,) float32 "scale" input with ``per_channel``) to
    ``out_dtype`` around ``out_zp``; ``bias`` adds a (M,) int32 input first, ``relu``
    clips at ``out_zp``. Returns [data, weight, (bias), (scale), out]."""
    op = "qdense"
    N = size_arg(op, "N", N)
    K, M = positive(op, "K", K), positive(op, "M", M)
    _dtypes(op, dtype=dtype, weight_dtype=weight_dtype)
    _check_zp(op, "data_zp", data_zp, dtype)
    _check_zp(op, "weight_zp", weight_zp, weight_dtype)
    data = te.placeholder((N, K), dtype, name="data")
    weight = te.placeholder((M, K), weight_dtype, name="weight")
    acc = qdense_compute(data, weight, data_zp, weight_zp)
    return [data, weight] + _epilogue(op, acc, M, -1, scale, out_zp, out_dtype, bias, relu,
                                      per_channel)


def _conv_args(op: str, CI: int, CO: int, kernel: Any, stride: Any, padding: Any,
               dilation: Any, groups: Any, hw: tuple[int, int]) -> tuple:
    win = (tuple_arg(op, "kernel", kernel, 2), tuple_arg(op, "stride", stride, 2),
           tuple_arg(op, "padding", padding, 2, allow_zero=True),
           tuple_arg(op, "dilation", dilation, 2))
    groups = positive(op, "groups", groups)
    divisible(op, "CI", CI, "groups", groups)
    divisible(op, "CO", CO, "groups", groups)
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = win
    out_hw = (out_size(op, "H", hw[0], kh, sh, ph, dh), out_size(op, "W", hw[1], kw, sw, pw, dw))
    return win, groups, out_hw


def qconv2d_nchw(N: int, CI: int, H: int, W: int, CO: int, kernel: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, dtype: str = "uint8",
                 weight_dtype: str = "int8", data_zp: int = 0, weight_zp: int = 0,
                 scale: float = 1.0, out_zp: int = 0, out_dtype: str = "uint8",
                 bias: bool = False, relu: bool = False,
                 per_channel: bool = False) -> list[te.Tensor]:
    """QLinearConv in NCHW: data (N, CI, H, W), weight (CO, CI/groups, KH, KW) -> (N, CO,
    OH, OW) ``out_dtype``; requantize arguments as ``qdense``; depthwise is groups == CI."""
    op = "qconv2d_nchw"
    N = size_arg(op, "N", N)
    CI, H, W, CO = (positive(op, n, v) for n, v in (("CI", CI), ("H", H), ("W", W), ("CO", CO)))
    ((kh, kw), st, pd, dl), groups, out_hw = _conv_args(op, CI, CO, kernel, stride, padding,
                                                        dilation, groups, (H, W))
    _dtypes(op, dtype=dtype, weight_dtype=weight_dtype)
    _check_zp(op, "data_zp", data_zp, dtype)
    _check_zp(op, "weight_zp", weight_zp, weight_dtype)
    data = te.placeholder((N, CI, H, W), dtype, name="data")
    weight = te.placeholder((CO, CI // groups, kh, kw), weight_dtype, name="weight")
    acc = qconv2d_nchw_compute(data, weight, data_zp, weight_zp, st, pd, dl, groups, out_hw)
    return [data, weight] + _epilogue(op, acc, CO, 1, scale, out_zp, out_dtype, bias, relu,
                                      per_channel)


def qconv2d_nhwc(N: int, H: int, W: int, CI: int, CO: int, kernel: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, dtype: str = "uint8",
                 weight_dtype: str = "int8", data_zp: int = 0, weight_zp: int = 0,
                 scale: float = 1.0, out_zp: int = 0, out_dtype: str = "uint8",
                 bias: bool = False, relu: bool = False,
                 per_channel: bool = False) -> list[te.Tensor]:
    """QLinearConv in NHWC: data (N, H, W, CI), weight (KH, KW, CI/groups, CO) -> (N, OH,
    OW, CO) ``out_dtype``; requantize arguments as ``qdense``; depthwise is groups == CI."""
    op = "qconv2d_nhwc"
    N = size_arg(op, "N", N)
    H, W, CI, CO = (positive(op, n, v) for n, v in (("H", H), ("W", W), ("CI", CI), ("CO", CO)))
    ((kh, kw), st, pd, dl), groups, out_hw = _conv_args(op, CI, CO, kernel, stride, padding,
                                                        dilation, groups, (H, W))
    _dtypes(op, dtype=dtype, weight_dtype=weight_dtype)
    _check_zp(op, "data_zp", data_zp, dtype)
    _check_zp(op, "weight_zp", weight_zp, weight_dtype)
    data = te.placeholder((N, H, W, CI), dtype, name="data")
    weight = te.placeholder((kh, kw, CI // groups, CO), weight_dtype, name="weight")
    acc = qconv2d_nhwc_compute(data, weight, data_zp, weight_zp, st, pd, dl, groups, out_hw)
    return [data, weight] + _epilogue(op, acc, CO, -1, scale, out_zp, out_dtype, bias, relu,
                                      per_channel)
