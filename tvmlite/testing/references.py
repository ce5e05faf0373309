"""Independent numpy implementations of the operator library (``tvmlite.ops``).

Written without looking at the te definitions: layout transposes into one generic
channels-first convolution and pooling, evaluated as one einsum (or strided slice) per
kernel position, so they are fast enough for real layer shapes. Accumulation is float64
(int64 for integers); the caller casts back. Each function takes the input arrays and
the op's bound arguments (sizes, stride, padding, ... as given to the op function).

Map: generic conv / pool (channels-first) · per-op references · quantized references
(``requantize``: ONNX's rounding and saturation) · REFERENCES table.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np


def _acc(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64 if x.dtype.kind == "f" else np.int64)


def _tuple(v: Any, n: int) -> tuple[int, ...]:
    return (v,) * n if isinstance(v, int) else tuple(v)


def conv_nc(x: np.ndarray, w: np.ndarray, stride: Any, padding: Any, dilation: Any,
            groups: int = 1) -> np.ndarray:
    """Grouped N-d convolution: x (N, CI, *S), w (CO, CI/groups, *K) -> (N, CO, *OS)."""
    nd = x.ndim - 2
    s, p, d = _tuple(stride, nd), _tuple(padding, nd), _tuple(dilation, nd)
    x = np.pad(_acc(x), [(0, 0), (0, 0)] + [(q, q) for q in p])
    N, CI, sp = x.shape[0], x.shape[1], x.shape[2:]
    CO, ks = w.shape[0], w.shape[2:]
    osz = [(sp[i] - d[i] * (ks[i] - 1) - 1) // s[i] + 1 for i in range(nd)]
    xg = x.reshape(N, groups, CI // groups, *sp)
    wg = _acc(w).reshape(groups, CO // groups, CI // groups, *ks)
    out = np.zeros((N, groups, CO // groups, *osz), dtype=xg.dtype)
    for kpos in np.ndindex(*ks):
        win = tuple(slice(k * d[i], k * d[i] + (osz[i] - 1) * s[i] + 1, s[i])
                    for i, k in enumerate(kpos))
        at: tuple[Any, ...] = (Ellipsis, *win)
        tap: tuple[Any, ...] = (Ellipsis, *kpos)
        out += np.einsum("ngc...,goc->ngo...", xg[at], wg[tap], optimize=True)
    return out.reshape(N, CO, *osz)


def pool_nc(x: np.ndarray, kernel: Any, stride: Any, padding: Any, kind: str,
            count_include_pad: bool = True) -> np.ndarray:
    """2-D max or average pool of x (N, C, H, W)."""
    k = _tuple(kernel, 2)
    s, p = _tuple(k if stride is None else stride, 2), _tuple(padding, 2)
    pads = [(0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])]
    if kind == "max":
        low = np.finfo(x.dtype).min if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        xp = np.pad(x, pads, constant_values=low)
    else:
        xp = np.pad(_acc(x), pads)
        valid = np.pad(np.ones(x.shape[2:]), pads[2:])
    osz = [(xp.shape[2 + i] - k[i]) // s[i] + 1 for i in range(2)]
    out: np.ndarray | None = None
    count: Any = 0   # the number of real (not padded) inputs each window saw
    for ky, kx in np.ndindex(*k):
        win = (slice(ky, ky + (osz[0] - 1) * s[0] + 1, s[0]),
               slice(kx, kx + (osz[1] - 1) * s[1] + 1, s[1]))
        window: tuple[Any, ...] = (Ellipsis, *win)
        part = xp[window]
        if out is None:
            out = part.copy()
        elif kind == "max":
            np.maximum(out, part, out=out)
        else:
            out += part
        if kind == "avg" and not count_include_pad:
            count = count + valid[win]
    assert out is not None   # a kernel has at least one tap
    if kind == "max":
        return out
    return np.asarray(out / (k[0] * k[1] if count_include_pad else count))


def _to_nc(x: np.ndarray) -> np.ndarray:
    """Channels-last (N, *S, C) -> channels-first (N, C, *S)."""
    return np.moveaxis(x, -1, 1)


def _from_nc(x: np.ndarray) -> np.ndarray:
    return np.moveaxis(x, 1, -1)


# -- per-op references: fn(inputs, args) -> array -------------------------------------------

def _dense(xs: list, a: dict) -> np.ndarray:
    out = _acc(xs[0]) @ _acc(xs[1]).T
    if a["bias"]:
        out = out + xs[2]
    return np.maximum(out, 0) if a["relu"] else out


def _conv1d(xs: list, a: dict) -> np.ndarray:
    x, w = xs
    if a["layout"] == "NCL":
        return conv_nc(x, w, a["stride"], a["padding"], a["dilation"])
    return _from_nc(conv_nc(_to_nc(x), w.transpose(2, 1, 0), a["stride"], a["padding"],
                            a["dilation"]))


def _conv2d_nchw(xs: list, a: dict) -> np.ndarray:
    return conv_nc(xs[0], xs[1], a["stride"], a["padding"], a["dilation"], a["groups"])


def _conv2d_nhwc(xs: list, a: dict) -> np.ndarray:
    x, w = xs
    return _from_nc(conv_nc(_to_nc(x), w.transpose(3, 2, 0, 1), a["stride"], a["padding"],
                            a["dilation"], a["groups"]))


def _depthwise_nchw(xs: list, a: dict) -> np.ndarray:
    x, w = xs  # w (C, m, KH, KW): output channel c*m + q is grouped conv with groups=C
    C, m = w.shape[:2]
    return conv_nc(x, w.reshape(C * m, 1, *w.shape[2:]), a["stride"], a["padding"],
                   a["dilation"], C)


def _depthwise_nhwc(xs: list, a: dict) -> np.ndarray:
    x, w = xs  # w (KH, KW, C, m)
    return _from_nc(_depthwise_nchw([_to_nc(x), w.transpose(2, 3, 0, 1)], a))


def _conv3d_ndhwc(xs: list, a: dict) -> np.ndarray:
    x, w = xs  # w (KD, KH, KW, CI, CO)
    return _from_nc(conv_nc(_to_nc(x), w.transpose(4, 3, 0, 1, 2), a["stride"], a["padding"],
                            a["dilation"]))


def _pool(kind: str) -> Callable[[list, dict], np.ndarray]:
    def ref(xs: list, a: dict) -> np.ndarray:
        x = xs[0] if a["layout"] == "NCHW" else _to_nc(xs[0])
        out = pool_nc(x, a["kernel"], a["stride"], a["padding"], kind,
                      a.get("count_include_pad", True))
        return out if a["layout"] == "NCHW" else _from_nc(out)
    return ref


def _softmax(xs: list, a: dict) -> np.ndarray:
    x = _acc(xs[0])
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _bias_add(xs: list, a: dict) -> np.ndarray:
    data, bias = xs
    shape = [1] * data.ndim
    shape[a["axis"]] = -1
    return _acc(data) + bias.reshape(shape)


# -- quantized: int64 sums of zero-point-centered values, requantized in float32 ----------

def requantize(acc: np.ndarray, scale: Any, zero_point: int, dtype: str,
               relu: bool = False) -> np.ndarray:
    """An integer sum as ``dtype`` the way ONNX's QLinear ops define it: times the real
    scale in float32, rounded half to even (``np.rint``), plus the zero point, saturated;
    ``relu`` clips at the zero point."""
    f = acc.astype(np.float32) * np.asarray(scale, np.float32)
    q = np.rint(f).astype(np.int64) + zero_point
    info = np.iinfo(dtype)
    q = np.clip(q, max(info.min, zero_point) if relu else info.min, info.max)
    return q.astype(dtype)


def _centered(x: np.ndarray, zp: Any) -> np.ndarray:
    return x.astype(np.int64) - np.asarray(zp, np.int64)


def _q_epilogue(acc: np.ndarray, xs: list, a: dict, axis: int) -> np.ndarray:
    rest = list(xs[2:])
    shape = [1] * acc.ndim
    shape[axis] = -1
    if a["bias"]:
        acc = acc + rest.pop(0).astype(np.int64).reshape(shape)
    scale = rest.pop(0).reshape(shape) if a["per_channel"] else a["scale"]
    return requantize(acc, scale, a["out_zp"], a["out_dtype"], a["relu"])


def _qconv2d(layout: str) -> Callable[[list, dict], np.ndarray]:
    def ref(xs: list, a: dict) -> np.ndarray:
        x, w = _centered(xs[0], a["data_zp"]), xs[1]
        if layout == "NHWC":
            x, w = _to_nc(x), w.transpose(3, 2, 0, 1)
        w = _centered(w, np.reshape(a["weight_zp"], (-1, 1, 1, 1)))
        acc = conv_nc(x, w, a["stride"], a["padding"], a["dilation"], a["groups"])
        if layout == "NHWC":
            acc = _from_nc(acc)
        return _q_epilogue(acc, xs, a, 1 if layout == "NCHW" else -1)
    return ref


REFERENCES: dict[str, Callable[[list, dict], np.ndarray]] = {
    "matmul": lambda xs, a: _acc(xs[0]) @ _acc(xs[1]),
    "batch_matmul": lambda xs, a: np.matmul(_acc(xs[0]), _acc(xs[1])),
    "dense": _dense,
    "conv1d": _conv1d,
    "conv2d_nchw": _conv2d_nchw,
    "conv2d_nhwc": _conv2d_nhwc,
    "depthwise_conv2d_nchw": _depthwise_nchw,
    "depthwise_conv2d_nhwc": _depthwise_nhwc,
    "conv3d_ndhwc": _conv3d_ndhwc,
    "max_pool2d": _pool("max"),
    "avg_pool2d": _pool("avg"),
    "softmax": _softmax,
    "norm2": lambda xs, a: np.sqrt(np.sum(_acc(xs[0]) ** 2)).reshape(1),
    "add": lambda xs, a: _acc(xs[0]) + xs[1],
    "relu": lambda xs, a: np.maximum(xs[0], 0),
    "bias_add": _bias_add,
    "qmatmul": lambda xs, a: _centered(xs[0], a["data_zp"]) @ _centered(xs[1], a["weight_zp"]),
    "qdense": lambda xs, a: _q_epilogue(_centered(xs[0], a["data_zp"])
                                        @ _centered(xs[1], a["weight_zp"]).T, xs, a, -1),
    "qconv2d_nchw": _qconv2d("NCHW"),
    "qconv2d_nhwc": _qconv2d("NHWC"),
}
