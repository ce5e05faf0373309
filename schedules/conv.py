"""Templates for the convolutions: conv2d_nhwc, conv2d_nchw, depthwise_conv2d_nhwc,
depthwise_conv2d_nchw, conv1d (NLC and NCL).

A convolution is a GEMM whose reduction runs over (channels, kernel window), so each
template is the GEMM register block of ``linalg.py`` laid over the layout:

* the vectorized axis is the one contiguous in the output *and* in one operand: the
  output channels in NHWC / NLC (the weight row is contiguous too), the output width
  in NCHW / NCL / depthwise NCHW (the input row is contiguous), the channels in
  depthwise NHWC;
* the register rows are the axis whose operand is a broadcast scalar: output width in
  NHWC (input pixels), output channels in NCHW (weights), output rows in depthwise;
* the accumulators live in a local cache (``cache_write`` + ``compute_at`` at the
  block), the reduction loops outside the unrolled rows and the vectorized columns, in
  the order of the ``reduce_order`` knob, input channels split for an unrolled inner part;
* padding, when there is any, is a knob: ``"outer"`` builds the padded input rows a
  parallel iteration reads (``compute_at`` the parallel loop: a small packed copy, and
  a branch-free inner loop), ``"inline"`` reads the input through the bounds check
  (offered only where that check is a scalar, i.e. the vectorized axis is not padded).

Map: shared helpers (``define_pad``, ``place_pad``, ``define_channel_knobs``,
``channel_reduce``, ``accumulate``) · conv2d_nhwc · conv2d_nchw · depthwise_conv2d_nhwc ·
depthwise_conv2d_nchw · conv1d.
"""
from __future__ import annotations

from typing import Any, Sequence

from tvmlite import ops, te
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedules.linalg import MAX_K_INNER, define_vector_split, max_cols, max_rows, unroll_if
from tvmlite.search.templated.task import template

PAD_CHOICES = ["outer", "inline"]
# Reduction loop orders: input-channel blocks outermost (the weight block stays hot)
# or the kernel window outermost (the input window stays hot).
REDUCE_ORDERS = ["channels_outer", "window_outer"]


def define_pad(cfg: Any, s: Schedule, data: te.Tensor, vector_dim: int,
               choices: Sequence[str] = PAD_CHOICES) -> bool:
    """Define the ``pad`` knob (its first choice is the fallback) when the compute has a
    pad stage; True if it has one. When the vectorized dimension ``vector_dim`` of the
    input is padded, inlining would put a per-lane bounds check on vector loads, which
    keeps the whole block scalar: only ``"outer"`` is offered then."""
    if not s.state.has_stage("pad"):
        return False
    if s["pad"].op.shape[vector_dim] != data.shape[vector_dim]:
        choices = ["outer"]
    cfg.define_knob("pad", list(choices))
    return True


def place_pad(s: Schedule, cfg: Any, has_pad: bool, out: te.Tensor, at: Any) -> None:
    """Inline the pad stage, or compute the padded rows at loop ``at`` of ``out`` with its
    innermost axis vectorized (the bounds check does not depend on it in the layouts
    where the innermost axis is not padded; where it is, the copy stays scalar)."""
    if not has_pad:
        return
    if cfg["pad"].val == "inline":
        s["pad"].compute_inline()
        return
    s["pad"].compute_at(s[out], at)
    s["pad"].vectorize(s["pad"].op.axis[-1])


def accumulate(s: Schedule, cfg: Any, local: te.Tensor, spatial_first: Sequence[Any],
               reduce_loops: Sequence[Any], rows: Sequence[Any], col: Any) -> None:
    """Order the local accumulator stage as ``spatial_first`` (extent-1 loops at the
    block), the reduction loops, the register rows (unrolled) and the vectorized
    column; its last reduction loop is unrolled when the ``unroll_inner`` knob says so."""
    s[local].reorder(*spatial_first, *reduce_loops, *rows, col)
    unroll_if(s, local, reduce_loops[-1], cfg["unroll_inner"].val)
    for r in rows:
        s[local].unroll(r)
    s[local].vectorize(col)


def channel_reduce(s: Schedule, cfg: Any, local: te.Tensor, rc: Any,
                   window: Sequence[Any]) -> list:
    """The reduction loops of a dense convolution in the ``reduce_order`` knob's order:
    input channels split by ``tile_rc`` (inner part last, to unroll), window loops
    outside or inside the channel blocks."""
    rco, rci = cfg["tile_rc"].apply(s, local, rc)
    if cfg["reduce_order"].val == "channels_outer":
        return [rco, *window, rci]
    return [*window, rco, rci]


def define_channel_knobs(cfg: Any, channels: int) -> None:
    """The reduction knobs of a dense convolution: the input-channel split (its inner
    part is the innermost reduction loop, so it bounds the unrolled body), the loop
    order, and whether to unroll."""
    cfg.define_split("tile_rc", channels, num_outputs=2, max_factor=MAX_K_INNER)
    cfg.define_knob("reduce_order", REDUCE_ORDERS)
    cfg.define_knob("unroll_inner", [True, False])


@template("conv2d_nhwc")
def conv2d_nhwc(cfg: Any, N: int, H: int, W: int, CI: int, CO: int, kernel: Any,
                stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
                dtype: str = "float32") -> tuple[Schedule, list]:
    """Block = ``tile_w`` output pixels (rows, unrolled) x ``tile_f`` output channels
    (vectorized); the parallel loop is batch x output rows."""
    data, weight, out = ops.conv2d_nhwc(N, H, W, CI, CO, kernel, stride, padding, dilation,
                                        groups, dtype)
    s = te.create_schedule(out.op)
    OW = out.shape[2]
    define_vector_split(cfg, "tile_f", CO, 2, dtype, max_cols(cfg, dtype))
    cfg.define_split("tile_w", OW, num_outputs=2, max_factor=max_rows(cfg))
    define_channel_knobs(cfg, CI // groups)
    has_pad = define_pad(cfg, s, data, 3)
    local = s.cache_write(out, "local")
    n, h, w, f = s[out].op.axis
    wo, wi = cfg["tile_w"].apply(s, out, w)
    fo, fi = cfg["tile_f"].apply(s, out, f)
    s[out].reorder(n, h, wo, fo, wi, fi)
    par = s[out].fuse(n, h)
    s[out].parallel(par)
    s[out].vectorize(fi)
    s[local].compute_at(s[out], fo)
    ln, lh, lw, lf = s[local].op.axis
    ry, rx, rc = s[local].op.reduce_axis
    accumulate(s, cfg, local, [ln, lh], channel_reduce(s, cfg, local, rc, [ry, rx]),
               [lw], lf)
    place_pad(s, cfg, has_pad, out, par)
    return s, [data, weight, out]


@template("conv2d_nchw")
def conv2d_nchw(cfg: Any, N: int, CI: int, H: int, W: int, CO: int, kernel: Any,
                stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
                dtype: str = "float32") -> tuple[Schedule, list]:
    """Block = ``tile_f`` output channels x ``tile_h`` output rows (both unrolled: one
    broadcast weight per channel) x ``tile_w`` output columns (vectorized); the
    parallel loop is batch x channel blocks x row blocks."""
    data, weight, out = ops.conv2d_nchw(N, CI, H, W, CO, kernel, stride, padding, dilation,
                                        groups, dtype)
    s = te.create_schedule(out.op)
    _, _, OH, OW = out.shape
    cfg.define_split("tile_f", CO, num_outputs=2, max_factor=max_rows(cfg))
    cfg.define_split("tile_h", OH, num_outputs=2, max_factor=4)
    define_vector_split(cfg, "tile_w", OW, 2, dtype, max_cols(cfg, dtype))
    define_channel_knobs(cfg, CI // groups)
    has_pad = define_pad(cfg, s, data, 3)
    local = s.cache_write(out, "local")
    n, f, h, w = s[out].op.axis
    fo, fi = cfg["tile_f"].apply(s, out, f)
    ho, hi = cfg["tile_h"].apply(s, out, h)
    wo, wi = cfg["tile_w"].apply(s, out, w)
    s[out].reorder(n, fo, ho, wo, fi, hi, wi)
    par = s[out].fuse(n, fo, ho)
    s[out].parallel(par)
    s[out].vectorize(wi)
    s[local].compute_at(s[out], wo)
    ln, lf, lh, lw = s[local].op.axis
    rc, ry, rx = s[local].op.reduce_axis
    accumulate(s, cfg, local, [ln], channel_reduce(s, cfg, local, rc, [ry, rx]),
               [lf, lh], lw)
    place_pad(s, cfg, has_pad, out, par)
    return s, [data, weight, out]


@template("depthwise_conv2d_nhwc")
def depthwise_conv2d_nhwc(cfg: Any, N: int, H: int, W: int, C: int, kernel: Any,
                          stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                          multiplier: int = 1, dtype: str = "float32") -> tuple[Schedule, list]:
    """Block = ``tile_w`` output pixels (unrolled: the weight vector is reused across
    them) x ``tile_c`` channels (vectorized); the whole window is the reduction, unrolled
    when ``unroll_inner`` says so. Padding is inlined by default: with 2 * KH * KW flops
    per input element, copying the padded rows costs more than the bounds checks (whose
    condition is a scalar here: the channel axis is not padded)."""
    data, weight, out = ops.depthwise_conv2d_nhwc(N, H, W, C, kernel, stride, padding,
                                                  dilation, multiplier, dtype)
    s = te.create_schedule(out.op)
    _, _, OW, CM = out.shape
    define_vector_split(cfg, "tile_c", CM, 2, dtype, max_cols(cfg, dtype))
    cfg.define_split("tile_w", OW, num_outputs=2, max_factor=8)
    cfg.define_knob("unroll_inner", [True, False])
    has_pad = define_pad(cfg, s, data, 3, PAD_CHOICES[::-1])
    local = s.cache_write(out, "local")
    n, h, w, c = s[out].op.axis
    wo, wi = cfg["tile_w"].apply(s, out, w)
    co, ci = cfg["tile_c"].apply(s, out, c)
    s[out].reorder(n, h, wo, co, wi, ci)
    par = s[out].fuse(n, h)
    s[out].parallel(par)
    s[out].vectorize(ci)
    s[local].compute_at(s[out], co)
    ln, lh, lw, lc = s[local].op.axis
    ry, rx = s[local].op.reduce_axis
    unroll_if(s, local, ry, cfg["unroll_inner"].val)
    accumulate(s, cfg, local, [ln, lh], [ry, rx], [lw], lc)
    place_pad(s, cfg, has_pad, out, par)
    return s, [data, weight, out]


@template("depthwise_conv2d_nchw")
def depthwise_conv2d_nchw(cfg: Any, N: int, C: int, H: int, W: int, kernel: Any,
                          stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                          multiplier: int = 1, dtype: str = "float32") -> tuple[Schedule, list]:
    """Block = ``tile_h`` output rows (unrolled) x ``tile_w`` output columns
    (vectorized) of one channel plane; the parallel loop is batch x channels, and the
    padded plane is built once per channel."""
    data, weight, out = ops.depthwise_conv2d_nchw(N, C, H, W, kernel, stride, padding,
                                                  dilation, multiplier, dtype)
    s = te.create_schedule(out.op)
    _, _, OH, OW = out.shape
    cfg.define_split("tile_h", OH, num_outputs=2, max_factor=8)
    define_vector_split(cfg, "tile_w", OW, 2, dtype, max_cols(cfg, dtype))
    cfg.define_knob("unroll_inner", [True, False])
    has_pad = define_pad(cfg, s, data, 3)
    local = s.cache_write(out, "local")
    n, f, h, w = s[out].op.axis
    ho, hi = cfg["tile_h"].apply(s, out, h)
    wo, wi = cfg["tile_w"].apply(s, out, w)
    s[out].reorder(n, f, ho, wo, hi, wi)
    par = s[out].fuse(n, f)
    s[out].parallel(par)
    s[out].vectorize(wi)
    s[local].compute_at(s[out], wo)
    ln, lf, lh, lw = s[local].op.axis
    ry, rx = s[local].op.reduce_axis
    unroll_if(s, local, ry, cfg["unroll_inner"].val)
    accumulate(s, cfg, local, [ln, lf], [ry, rx], [lh], lw)
    place_pad(s, cfg, has_pad, out, par)
    return s, [data, weight, out]


@template("conv1d")
def conv1d(cfg: Any, N: int, L: int, CI: int, CO: int, kernel: Any, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, layout: str = "NLC",
           dtype: str = "float32") -> tuple[Schedule, list]:
    """NLC: block = ``tile_l`` positions (unrolled) x ``tile_f`` channels (vectorized);
    NCL: block = ``tile_f`` channels (unrolled) x ``tile_l`` positions (vectorized).
    The parallel loop is batch x the outer part of the unrolled axis."""
    data, weight, out = ops.conv1d(N, L, CI, CO, kernel, stride, padding, dilation, layout,
                                   dtype)
    s = te.create_schedule(out.op)
    OL = out.shape[1] if layout == "NLC" else out.shape[2]
    if layout == "NLC":
        define_vector_split(cfg, "tile_f", CO, 2, dtype, max_cols(cfg, dtype))
        cfg.define_split("tile_l", OL, num_outputs=2, max_factor=max_rows(cfg))
    else:
        cfg.define_split("tile_f", CO, num_outputs=2, max_factor=max_rows(cfg))
        define_vector_split(cfg, "tile_l", OL, 2, dtype, max_cols(cfg, dtype))
    define_channel_knobs(cfg, CI)
    has_pad = define_pad(cfg, s, data, 2)
    local = s.cache_write(out, "local")
    if layout == "NLC":
        n, ax_l, f = s[out].op.axis
    else:
        n, f, ax_l = s[out].op.axis
    lo, li = cfg["tile_l"].apply(s, out, ax_l)
    fo, fi = cfg["tile_f"].apply(s, out, f)
    rows, cols = ((lo, li), (fo, fi)) if layout == "NLC" else ((fo, fi), (lo, li))
    s[out].reorder(n, rows[0], cols[0], rows[1], cols[1])
    par = s[out].fuse(n, rows[0])
    s[out].parallel(par)
    s[out].vectorize(cols[1])
    s[local].compute_at(s[out], cols[0])
    ln, l_row, l_col = s[local].op.axis      # (n, l, f) in NLC, (n, f, l) in NCL
    rc, rl = s[local].op.reduce_axis
    accumulate(s, cfg, local, [ln], channel_reduce(s, cfg, local, rc, [rl]), [l_row], l_col)
    place_pad(s, cfg, has_pad, out, par)
    return s, [data, weight, out]
