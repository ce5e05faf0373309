"""Convolutions and pooling.

Map: window index helper · conv1d (NLC/NCL) · conv2d_nchw, conv2d_nhwc (groups) ·
depthwise_conv2d_nchw/nhwc (channel multiplier) · conv3d_ndhwc · max_pool2d, avg_pool2d.

Shapes follow TVM. ``kernel``/``stride``/``padding``/``dilation`` take an int or one int
per spatial dimension; padding is symmetric. Convolutions pad in a separate "pad" stage
(only when some padding is non-zero); pools guard their reads with if_then_else inside
the reduction instead, so no padded copy is made. Either way the out-of-range read sits
in the branch that if_then_else does not select.

The 2-D convolutions and the pools call a tensor-taking compute (``conv2d_nchw_compute``,
``conv2d_nhwc_compute``, the depthwise ones, ``max_pool2d_compute``,
``avg_pool2d_compute``) that ``tvmlite.topi`` and the graph level call on their own
tensors.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from tvmlite import te
from tvmlite.ir.dtypes import STORAGE_FLOATS, value_range
from tvmlite.ir.expr import Expr
from tvmlite.ops.common import (
    axis_names,
    divisible,
    dtype_arg,
    named,
    out_size,
    pad,
    positive,
    product,
    size_arg,
    tuple_arg,
)


def window(o: Any, stride: int, r: Any, dilation: int) -> Expr:
    """Input coordinate ``o*stride + r*dilation`` of output ``o`` and kernel offset ``r``,
    written without multiplications by 1 so the loop IR stays readable."""
    base = o * stride if stride != 1 else o
    return base + (r * dilation if dilation != 1 else r)


def _window_args(op: str, ndim: int, kernel: Any, stride: Any, padding: Any,
                 dilation: Any) -> tuple[tuple[int, ...], ...]:
    return (tuple_arg(op, "kernel", kernel, ndim), tuple_arg(op, "stride", stride, ndim),
            tuple_arg(op, "padding", padding, ndim, allow_zero=True),
            tuple_arg(op, "dilation", dilation, ndim))


def _sizes(op: str, **sizes: Any) -> list[int]:
    return [positive(op, name, v) for name, v in sizes.items()]


def conv1d(N: int, L: int, CI: int, CO: int, kernel: Any, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, layout: str = "NLC", dtype: str = "float32") -> list[te.Tensor]:
    """1-D convolution. NLC: data (N, L, CI), weight (kernel, CI, CO), out (N, OL, CO);
    NCL: data (N, CI, L), weight (CO, CI, kernel), out (N, CO, OL)."""
    op = "conv1d"
    N, L, CI, CO = _sizes(op, N=N, L=L, CI=CI, CO=CO)
    (k,), (s,), (p,), (d,) = _window_args(op, 1, kernel, stride, padding, dilation)
    dtype_arg(op, dtype)
    if layout not in ("NLC", "NCL"):
        raise ValueError(f"{op}: layout must be 'NLC' or 'NCL', got {layout!r}")
    OL = out_size(op, "L", L, k, s, p, d)
    rc = te.reduce_axis((0, CI), name="rc")
    rl = te.reduce_axis((0, k), name="rl")
    # The output position axis stays `l`: te names each axis after its parameter, and
    # records and the generated loops refer to it by that name.
    if layout == "NLC":
        data = te.placeholder((N, L, CI), dtype, name="data")
        weight = te.placeholder((k, CI, CO), dtype, name="weight")
        padded = pad(data, (0, p, 0), layout)
        out = te.compute((N, OL, CO), lambda n, l, f: te.sum(  # noqa: E741 (axis name)
            padded[n, window(l, s, rl, d), rc] * weight[rl, rc, f], axis=[rc, rl]), name=op)
    else:
        data = te.placeholder((N, CI, L), dtype, name="data")
        weight = te.placeholder((CO, CI, k), dtype, name="weight")
        padded = pad(data, (0, 0, p), layout)
        out = te.compute((N, CO, OL), lambda n, f, l: te.sum(  # noqa: E741 (axis name)
            padded[n, rc, window(l, s, rl, d)] * weight[f, rc, rl], axis=[rc, rl]), name=op)
    return [data, weight, out]


def _groups(op: str, CI: int, CO: int, groups: Any) -> tuple[int, int]:
    """Input and output channels per group."""
    groups = positive(op, "groups", groups)
    divisible(op, "CI", CI, "groups", groups)
    divisible(op, "CO", CO, "groups", groups)
    return CI // groups, CO // groups


def _in_channel(f: Any, rc: Any, ci_g: int, co_g: int, groups: int) -> Any:
    """Input channel read by output channel ``f`` at reduce offset ``rc`` (grouped conv)."""
    return rc if groups == 1 else f // co_g * ci_g + rc


def conv2d_nchw(N: int, CI: int, H: int, W: int, CO: int, kernel: Any, stride: Any = 1,
                padding: Any = 0, dilation: Any = 1, groups: int = 1,
                dtype: str = "float32") -> list[te.Tensor]:
    """2-D convolution: data (N, CI, H, W), weight (CO, CI//groups, KH, KW) -> (N, CO, OH, OW)."""
    op = "conv2d_nchw"
    N = size_arg(op, "N", N)
    CI, H, W, CO = _sizes(op, CI=CI, H=H, W=W, CO=CO)
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _window_args(op, 2, kernel, stride, padding, dilation)
    ci_g, co_g = _groups(op, CI, CO, groups)
    dtype_arg(op, dtype)
    OH, OW = out_size(op, "H", H, kh, sh, ph, dh), out_size(op, "W", W, kw, sw, pw, dw)
    data = te.placeholder((N, CI, H, W), dtype, name="data")
    weight = te.placeholder((CO, ci_g, kh, kw), dtype, name="weight")
    return [data, weight, conv2d_nchw_compute(data, weight, (sh, sw), (ph, pw), (dh, dw),
                                              groups, (OH, OW))]


def conv2d_nchw_compute(data: te.Tensor, weight: te.Tensor, stride: tuple, padding: tuple,
                        dilation: tuple, groups: int, out_hw: tuple,
                        acc: str | None = None) -> te.Tensor:
    """The conv2d_nchw stage (and its "pad" stage) over the tensors data (N, CI, H, W) and
    weight (CO, CI//groups, KH, KW); (stride, padding, dilation) per dimension and the
    output size ``out_hw`` as ``conv2d_nchw`` checked them. ``acc``: the dtype the
    products are summed in when it is not the tensors' (``common.product``)."""
    op = "conv2d_nchw"
    N, CI = data.shape[:2]
    CO, ci_g, kh, kw = weight.shape
    co_g = CO // groups
    (sh, sw), (ph, pw), (dh, dw), (OH, OW) = stride, padding, dilation, out_hw
    padded = pad(data, (0, 0, ph, pw), "NCHW")
    rc = te.reduce_axis((0, ci_g), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    return te.compute((N, CO, OH, OW), lambda n, f, h, w: te.sum(product(
        padded[n, _in_channel(f, rc, ci_g, co_g, groups), window(h, sh, ry, dh),
               window(w, sw, rx, dw)], weight[f, rc, ry, rx], acc), axis=[rc, ry, rx]),
        name=op)


def conv2d_nhwc(N: int, H: int, W: int, CI: int, CO: int, kernel: Any, stride: Any = 1,
                padding: Any = 0, dilation: Any = 1, groups: int = 1,
                dtype: str = "float32") -> list[te.Tensor]:
    """2-D convolution: data (N, H, W, CI), weight (KH, KW, CI//groups, CO) -> (N, OH, OW, CO)."""
    op = "conv2d_nhwc"
    N = size_arg(op, "N", N)
    H, W, CI, CO = _sizes(op, H=H, W=W, CI=CI, CO=CO)
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _window_args(op, 2, kernel, stride, padding, dilation)
    ci_g, co_g = _groups(op, CI, CO, groups)
    dtype_arg(op, dtype)
    OH, OW = out_size(op, "H", H, kh, sh, ph, dh), out_size(op, "W", W, kw, sw, pw, dw)
    data = te.placeholder((N, H, W, CI), dtype, name="data")
    weight = te.placeholder((kh, kw, ci_g, CO), dtype, name="weight")
    return [data, weight, conv2d_nhwc_compute(data, weight, (sh, sw), (ph, pw), (dh, dw),
                                              groups, (OH, OW))]


def conv2d_nhwc_compute(data: te.Tensor, weight: te.Tensor, stride: tuple, padding: tuple,
                        dilation: tuple, groups: int, out_hw: tuple,
                        acc: str | None = None) -> te.Tensor:
    """The conv2d_nhwc stage (and its "pad" stage) over data (N, H, W, CI) and weight
    (KH, KW, CI//groups, CO), arguments as ``conv2d_nhwc`` checked them; ``acc`` as
    ``conv2d_nchw_compute``'s."""
    op = "conv2d_nhwc"
    N = data.shape[0]
    kh, kw, ci_g, CO = weight.shape
    co_g = CO // groups
    (sh, sw), (ph, pw), (dh, dw), (OH, OW) = stride, padding, dilation, out_hw
    padded = pad(data, (0, ph, pw, 0), "NHWC")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rc = te.reduce_axis((0, ci_g), name="rc")
    return te.compute((N, OH, OW, CO), lambda n, h, w, f: te.sum(product(
        padded[n, window(h, sh, ry, dh), window(w, sw, rx, dw),
               _in_channel(f, rc, ci_g, co_g, groups)], weight[ry, rx, rc, f], acc),
        axis=[ry, rx, rc]), name=op)


def _depthwise_args(op: str, N: int, C: int, H: int, W: int, kernel: Any, stride: Any,
                    padding: Any, dilation: Any, multiplier: Any, dtype: str):
    N, C, H, W, multiplier = _sizes(op, N=N, C=C, H=H, W=W, multiplier=multiplier)
    win = _window_args(op, 2, kernel, stride, padding, dilation)
    dtype_arg(op, dtype)
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = win
    return win, (out_size(op, "H", H, kh, sh, ph, dh), out_size(op, "W", W, kw, sw, pw, dw))


def depthwise_conv2d_nchw(N: int, C: int, H: int, W: int, kernel: Any, stride: Any = 1,
                          padding: Any = 0, dilation: Any = 1, multiplier: int = 1,
                          dtype: str = "float32") -> list[te.Tensor]:
    """Depthwise convolution: data (N, C, H, W), weight (C, multiplier, KH, KW) ->
    (N, C*multiplier, OH, OW); output channel f reads input channel f // multiplier."""
    op = "depthwise_conv2d_nchw"
    win, (OH, OW) = _depthwise_args(op, N, C, H, W, kernel, stride, padding, dilation,
                                    multiplier, dtype)
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = win
    m = multiplier
    data = te.placeholder((N, C, H, W), dtype, name="data")
    weight = te.placeholder((C, m, kh, kw), dtype, name="weight")
    return [data, weight, depthwise_conv2d_nchw_compute(data, weight, (sh, sw), (ph, pw),
                                                        (dh, dw), (OH, OW))]


def depthwise_conv2d_nchw_compute(data: te.Tensor, weight: te.Tensor, stride: tuple,
                                  padding: tuple, dilation: tuple, out_hw: tuple) -> te.Tensor:
    """The depthwise_conv2d_nchw stage (and its "pad" stage) over data (N, C, H, W) and
    weight (C, multiplier, KH, KW), arguments as ``depthwise_conv2d_nchw`` checked them."""
    op = "depthwise_conv2d_nchw"
    N, C = data.shape[:2]
    _, m, kh, kw = weight.shape
    (sh, sw), (ph, pw), (dh, dw), (OH, OW) = stride, padding, dilation, out_hw
    padded = pad(data, (0, 0, ph, pw), "NCHW")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")

    def body(n: Any, f: Any, h: Any, w: Any) -> Expr:
        c, q = (f, 0) if m == 1 else (f // m, f % m)
        return te.sum(padded[n, c, window(h, sh, ry, dh), window(w, sw, rx, dw)]
                      * weight[c, q, ry, rx], axis=[ry, rx])
    return te.compute((N, C * m, OH, OW), body, name=op)


def depthwise_conv2d_nhwc(N: int, H: int, W: int, C: int, kernel: Any, stride: Any = 1,
                          padding: Any = 0, dilation: Any = 1, multiplier: int = 1,
                          dtype: str = "float32") -> list[te.Tensor]:
    """Depthwise convolution: data (N, H, W, C), weight (KH, KW, C, multiplier) ->
    (N, OH, OW, C*multiplier)."""
    op = "depthwise_conv2d_nhwc"
    win, (OH, OW) = _depthwise_args(op, N, C, H, W, kernel, stride, padding, dilation,
                                    multiplier, dtype)
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = win
    m = multiplier
    data = te.placeholder((N, H, W, C), dtype, name="data")
    weight = te.placeholder((kh, kw, C, m), dtype, name="weight")
    return [data, weight, depthwise_conv2d_nhwc_compute(data, weight, (sh, sw), (ph, pw),
                                                        (dh, dw), (OH, OW))]


def depthwise_conv2d_nhwc_compute(data: te.Tensor, weight: te.Tensor, stride: tuple,
                                  padding: tuple, dilation: tuple, out_hw: tuple,
                                  acc: str | None = None) -> te.Tensor:
    """The depthwise_conv2d_nhwc stage (and its "pad" stage) over data (N, H, W, C) and
    weight (KH, KW, C, multiplier), arguments as ``depthwise_conv2d_nhwc`` checked them;
    ``acc`` as ``conv2d_nchw_compute``'s."""
    op = "depthwise_conv2d_nhwc"
    N, C = data.shape[0], data.shape[3]
    kh, kw, _, m = weight.shape
    (sh, sw), (ph, pw), (dh, dw), (OH, OW) = stride, padding, dilation, out_hw
    padded = pad(data, (0, ph, pw, 0), "NHWC")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")

    def body(n: Any, h: Any, w: Any, f: Any) -> Expr:
        c, q = (f, 0) if m == 1 else (f // m, f % m)
        return te.sum(product(padded[n, window(h, sh, ry, dh), window(w, sw, rx, dw), c],
                              weight[ry, rx, c, q], acc), axis=[ry, rx])
    return te.compute((N, OH, OW, C * m), body, name=op)


def conv3d_ndhwc(N: int, D: int, H: int, W: int, CI: int, CO: int, kernel: Any,
                 stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                 dtype: str = "float32") -> list[te.Tensor]:
    """3-D convolution: data (N, D, H, W, CI), weight (KD, KH, KW, CI, CO) ->
    (N, OD, OH, OW, CO)."""
    op = "conv3d_ndhwc"
    N, D, H, W, CI, CO = _sizes(op, N=N, D=D, H=H, W=W, CI=CI, CO=CO)
    ks, ss, ps, ds = _window_args(op, 3, kernel, stride, padding, dilation)
    dtype_arg(op, dtype)
    OD, OH, OW = (out_size(op, dim, n, k, s, p, d)
                  for dim, n, k, s, p, d in zip("DHW", (D, H, W), ks, ss, ps, ds))
    data = te.placeholder((N, D, H, W, CI), dtype, name="data")
    weight = te.placeholder((*ks, CI, CO), dtype, name="weight")
    padded = pad(data, (0, *ps, 0), "NDHWC")
    rd, ry, rx = (te.reduce_axis((0, k), name=n) for n, k in zip(("rd", "ry", "rx"), ks))
    rc = te.reduce_axis((0, CI), name="rc")
    out = te.compute((N, OD, OH, OW, CO), lambda n, d, h, w, f: te.sum(
        padded[n, window(d, ss[0], rd, ds[0]), window(h, ss[1], ry, ds[1]),
               window(w, ss[2], rx, ds[2]), rc] * weight[rd, ry, rx, rc, f],
        axis=[rd, ry, rx, rc]), name=op)
    return [data, weight, out]


# -- pooling ---------------------------------------------------------------------------

class _Pool(NamedTuple):
    """Checked arguments of a 2-D pool, its input, and a window reader."""
    data: te.Tensor
    out_shape: tuple[int, ...]
    kernel: tuple[int, ...]    # (KH, KW)
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    in_hw: tuple[int, int]
    hw_pos: tuple[int, int]  # positions of H and W in the layout

    def read(self, idx: tuple, ry: Any, rx: Any, fill: Any) -> Expr:
        """The input element under kernel offset (ry, rx) of output coordinate ``idx``, or
        ``fill`` where that lies in the padding."""
        at, conds = list(idx), []
        for pos, s, p, r, n in zip(self.hw_pos, self.stride, self.padding, (ry, rx), self.in_hw):
            at[pos] = window(idx[pos], s, r, 1)
            if p:
                at[pos] = at[pos] - p
                conds += [at[pos] >= 0, at[pos] < n]
        src = self.data[tuple(at)]
        if not conds:
            return src
        return te.if_then_else(te.all(*conds), src, te.const(fill, self.data.dtype))


def _pool(op: str, N: Any, C: Any, H: Any, W: Any, kernel: Any, stride: Any, padding: Any,
          layout: str, dtype: str, floats_only: bool, data: te.Tensor | None = None) -> _Pool:
    N, C, H, W = _sizes(op, N=N, C=C, H=H, W=W)
    ks = tuple_arg(op, "kernel", kernel, 2)
    ss = tuple_arg(op, "stride", kernel if stride is None else stride, 2)
    ps = tuple_arg(op, "padding", padding, 2, allow_zero=True)
    dtype_arg(op, dtype, floats_only=floats_only)
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"{op}: layout must be 'NCHW' or 'NHWC', got {layout!r}")
    for dim, p, k in zip("HW", ps, ks):
        if p >= k:
            raise ValueError(f"{op}: padding along {dim} ({p}) must be smaller than the kernel "
                             f"({k}), or some windows would see only padding")
    OH, OW = (out_size(op, dim, n, k, s, p) for dim, n, k, s, p in zip("HW", (H, W), ks, ss, ps))
    sizes = {"N": N, "C": C, "H": H, "W": W}
    in_shape = tuple(sizes[ch] for ch in layout)
    out_shape = tuple({**sizes, "H": OH, "W": OW}[ch] for ch in layout)
    if data is None:
        data = te.placeholder(in_shape, dtype, name="data")
    return _Pool(data, out_shape, ks, ss, ps, (H, W), (layout.index("H"), layout.index("W")))


def max_pool2d(N: int, C: int, H: int, W: int, kernel: Any, stride: Any = None,
               padding: Any = 0, layout: str = "NCHW", dtype: str = "float32") -> list[te.Tensor]:
    """Max over each window; ``stride`` defaults to ``kernel``. Padding counts as the
    dtype's lowest value, so it never wins."""
    op = "max_pool2d"
    pool = _pool(op, N, C, H, W, kernel, stride, padding, layout, dtype, floats_only=False)
    return [pool.data, _max_pool(pool, layout)]


def _pool_of(op: str, data: te.Tensor, kernel: Any, stride: Any, padding: Any, layout: str,
             floats_only: bool) -> _Pool:
    """A pool's checked arguments over an existing tensor ``data`` (its sizes read from
    its shape in ``layout``)."""
    if layout not in ("NCHW", "NHWC") or len(data.shape) != 4:
        raise ValueError(f"{op}: data must be a 4-D tensor in layout 'NCHW' or 'NHWC', got "
                         f"shape {data.shape} and layout {layout!r}")
    sizes = dict(zip(layout, data.shape))
    return _pool(op, sizes["N"], sizes["C"], sizes["H"], sizes["W"], kernel, stride, padding,
                 layout, data.dtype, floats_only, data)


def max_pool2d_compute(data: te.Tensor, kernel: Any, stride: Any = None, padding: Any = 0,
                       layout: str = "NCHW") -> te.Tensor:
    """The max_pool2d stage over the tensor ``data`` (arguments as ``max_pool2d``'s)."""
    pool = _pool_of("max_pool2d", data, kernel, stride, padding, layout, floats_only=False)
    return _max_pool(pool, layout)


def _max_pool(pool: _Pool, layout: str) -> te.Tensor:
    """The max over each window. Of a storage float (bfloat16, float16) it is taken in
    float32 and cast once at the end, which is exact (a max is one of its inputs): a
    reduction stored in the storage type rounds its partial max at every tap (a bf16
    3x3 pool on Zen 4: 3.1 ms scalar, 0.39 ms in vectors, against float32's 0.10)."""
    op, dtype = "max_pool2d", pool.data.dtype
    lowest = value_range(dtype)[0]     # bfloat16's range too (numpy has no finfo of it)
    acc = "float32" if dtype in STORAGE_FLOATS else dtype
    ry, rx = (te.reduce_axis((0, k), name=n) for n, k in zip(("ry", "rx"), pool.kernel))

    def tap(idx: tuple) -> Expr:
        x = pool.read(idx, ry, rx, lowest)
        return x if acc == dtype else te.cast(x, acc)
    body = named(axis_names(layout), lambda *idx: te.max(tap(idx), axis=[ry, rx]))
    if acc == dtype:
        return te.compute(pool.out_shape, body, name=op)
    red = te.compute(pool.out_shape, body, name=f"{op}_{acc}")
    return te.compute(pool.out_shape, named(axis_names(layout),
                                            lambda *idx: te.cast(red[idx], dtype)), name=op)


def avg_pool2d(N: int, C: int, H: int, W: int, kernel: Any, stride: Any = None,
               padding: Any = 0, layout: str = "NCHW", count_include_pad: bool = True,
               dtype: str = "float32") -> list[te.Tensor]:
    """Mean over each window: a "pool_sum" stage, then division by the window size
    (``count_include_pad``) or by the number of non-padding elements in the window."""
    op = "avg_pool2d"
    if not isinstance(count_include_pad, bool):
        raise ValueError(f"{op}: count_include_pad must be True or False, "
                         f"got {count_include_pad!r}")
    pool = _pool(op, N, C, H, W, kernel, stride, padding, layout, dtype, floats_only=True)
    return [pool.data, _avg_pool(pool, layout, count_include_pad)]


def avg_pool2d_compute(data: te.Tensor, kernel: Any, stride: Any = None, padding: Any = 0,
                       layout: str = "NCHW", count_include_pad: bool = True) -> te.Tensor:
    """The avg_pool2d stages over the tensor ``data`` (arguments as ``avg_pool2d``'s)."""
    if not isinstance(count_include_pad, bool):
        raise ValueError(f"avg_pool2d: count_include_pad must be True or False, "
                         f"got {count_include_pad!r}")
    pool = _pool_of("avg_pool2d", data, kernel, stride, padding, layout, floats_only=True)
    return _avg_pool(pool, layout, count_include_pad)


def _avg_pool(pool: _Pool, layout: str, count_include_pad: bool) -> te.Tensor:
    op, dtype = "avg_pool2d", pool.data.dtype
    ry, rx = (te.reduce_axis((0, k), name=n) for n, k in zip(("ry", "rx"), pool.kernel))
    names = axis_names(layout)
    total = te.compute(pool.out_shape, named(names, lambda *idx: te.sum(
        pool.read(idx, ry, rx, 0.0), axis=[ry, rx])), name="pool_sum")
    kh, kw = pool.kernel

    def count(idx: tuple) -> Any:
        """Elements of the window that lie inside the input (padding excluded)."""
        per_dim = []
        for pos, s, p, k, n in zip(pool.hw_pos, pool.stride, pool.padding, pool.kernel,
                                   pool.in_hw):
            start = (idx[pos] * s if s != 1 else idx[pos]) - p
            per_dim.append(te.min(start + k, n) - te.max(start, 0) if p else k)
        return per_dim[0] * per_dim[1]

    def body(*idx: Any) -> Expr:
        if count_include_pad or not any(pool.padding):
            return total[idx] / te.const(kh * kw, dtype)
        return total[idx] / te.cast(count(idx), dtype)
    return te.compute(pool.out_shape, named(names, body), name=op)
