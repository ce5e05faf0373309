"""The default schedule of a kernel whose anchor is a low-precision dot product: an integer
conv or matmul (u8/s8 x s8 -> s32) or a bf16 one (bf16 x bf16 -> f32), blocked around the
best dot-product instruction the target has.

Why its own schedule: the float kernels' blocking (``blocking.blocked_decisions``) tiles
in vectors of the accumulator's dtype and multiplies element by element, which for bytes
widened to int32 is a quarter of what ``vpdpbusd`` or ``sdot`` does per instruction, and
the template-free "tensorize-dot" block (``tvmlite.schedule.dot_block``) takes only a 2-D
matmul of two inputs, not a conv nor a fused epilogue. This is the same register block,
for any anchor ``D[..., r, f] = sum_{..., k} acc(A[..., k]) * acc(B[..., k, .., f])`` with
a constant B (after ``fold_zero_points`` every integer conv and matmul with symmetric
weights is one):

- the intrinsic is ``best_intrinsic`` for the anchor's dtypes (the dispatch: VNNI where
  the target has it, the exact AVX2 or NEON fallback, ``vdpbf16ps`` for bf16); it needs
  the innermost reduce axis (input channels) read contiguously by A and divisible by its
  group, and the output channels divisible by its lanes;
- B is pre-packed once at load time in the intrinsic's layout (output channels in panels
  of its lanes, the reduce axis in groups last: ``prepack(.., group=...)``);
- ``rows x vectors`` output pixels by vectors of lanes (``dot_block.block_sizes``)
  accumulate in a local block computed at the output's tile; the epilogue (the zero
  point constant, bias, requantize, ReLU, a dequantize) runs on that tile in vectors;
- the output-channel panels outermost, then the output's other axes, fused into one
  parallel loop (each task walks one panel of B over its pixels);
- a stage A reads (a padding, a layout transpose) is computed once at the root, in
  parallel and in vectors, so the block reads plain bytes; for an intrinsic with
  ``a_storage`` (AVX2's ``vpmaddwd``) that copy is A widened to int16, the padding
  inlined in it.

Where no intrinsic applies (3 input channels, a depthwise conv whose A index is not the
reduce axis, a target without one) the same block is plain vectors of the accumulator;
where the lanes do not divide the output channels either, ``dot_schedule`` returns None
and the kernel gets the generic default. A plain float block (bf16 storage without
``vdpbf16ps``: 1000 output channels, say) with fewer accumulators than the FMA floor
(``priors.fma_block_floor``: its rows and vectors must divide the output's, so 13 x 1000
has one) is declined too: the float kernels' blocking, whose rows may leave a remainder,
blocks it. Where the CPU has ``vdpbf16ps`` on ymm (AVX512-VL), its 8 lanes divide 1000
and a block of 13 rows takes that instead (SqueezeNet's classifier conv in bf16; the
figures are in docs/benchmarks.md).
"""
from __future__ import annotations

from typing import Any

from tvmlite import te
from tvmlite.ir.expr import BinOp, Cast, Reduce, TensorRead, Var
from tvmlite.passes.pipeline import lower
from tvmlite.schedule.dot_block import block_sizes, output_block, tile_block, widen_in_parallel
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError
from tvmlite.search.template_free.priors import fma_block_floor
from tvmlite.target.intrinsics import INTRINSICS, Intrinsic, best_intrinsic
from tvmlite.target.target import Target

__all__ = ["DotAnchor", "dot_anchor", "dot_intrinsic", "dot_schedule"]


class DotAnchor:
    """The anchor stage of a dot kernel and how its two operands are indexed: ``a`` and
    ``b`` the tensors read (``b`` a constant input), ``b_lanes_dim`` / ``b_group_dim``
    the dimensions of ``b`` indexed by the output channel and the innermost reduce
    axis, ``a_contiguous``: A's last index is that reduce axis (its groups contiguous)."""

    def __init__(self, op: Any, a: TensorRead, b: TensorRead, b_lanes_dim: int,
                 b_group_dim: int, a_contiguous: bool):
        self.op, self.a, self.b = op, a, b
        self.b_lanes_dim, self.b_group_dim = b_lanes_dim, b_group_dim
        self.a_contiguous = a_contiguous


def _factor(e: Any, dtype: str) -> TensorRead | None:
    inner = e.value if isinstance(e, Cast) and e.dtype == dtype else e
    return inner if isinstance(inner, TensorRead) else None


def dot_anchor(op: Any, constants: tuple[str, ...]) -> DotAnchor | None:
    """``op`` as a ``DotAnchor`` (module doc) when it is a plain sum of products of two
    tensors of dtypes some intrinsic takes, the second a constant input; else None."""
    body = op.body
    if not (isinstance(body, Reduce) and body.combiner == "sum" and body.where is None
            and len(op.axis) >= 2 and op.reduce_axis):
        return None
    src = body.source
    if not (isinstance(src, BinOp) and src.op == "*"):
        return None
    reads = [_factor(src.a, op.dtype), _factor(src.b, op.dtype)]
    if reads[0] is None or reads[1] is None:
        return None
    f, k = op.axis[-1].var, op.reduce_axis[-1].var
    for a, b in ((reads[0], reads[1]), (reads[1], reads[0])):
        if b.tensor.name not in constants:
            continue
        lanes = [d for d, x in enumerate(b.indices) if isinstance(x, Var) and x.name == f.name]
        group = [d for d, x in enumerate(b.indices) if isinstance(x, Var) and x.name == k.name]
        if len(lanes) != 1 or len(group) != 1:
            continue
        if not any(i.takes(a.dtype, b.dtype, op.dtype) for i in INTRINSICS.values()):
            return None
        last = a.indices[-1]
        contiguous = isinstance(last, Var) and last.name == k.name
        return DotAnchor(op, a, b, lanes[0], group[0], contiguous)
    return None


def dot_intrinsic(anchor: DotAnchor, target: Target, tiles: bool = True) -> Intrinsic | None:
    """The target's best intrinsic for the anchor, when its shape lets it apply: a tile
    intrinsic (AMX) where ``tiles`` and the rows (the output's next-to-last axis: output
    pixels along a row for a conv), the output channels and the innermost reduce axis
    are whole tiles, else a vector one."""
    rows, co, k = anchor.op.shape[-2], anchor.op.axis[-1].extent, \
        anchor.op.reduce_axis[-1].extent
    shape = (rows, co, k) if tiles and all(isinstance(x, int) for x in (rows, co, k)) \
        else None
    if not isinstance(co, int) or not isinstance(k, int) or not anchor.a_contiguous:
        return None
    return best_intrinsic(target.arch, target.features, anchor.a.dtype, anchor.b.dtype,
                          anchor.op.dtype, shape, divides=(co, k))


def _plain_lanes(target: Target, dtype: str, channels: Any) -> int | None:
    lanes = target.vector_lanes(dtype)
    while lanes >= 4:
        if isinstance(channels, int) and channels % lanes == 0:
            return lanes
        lanes //= 2
    return None


def dot_schedule(kc: Any, target: Target) -> Schedule | None:
    """The blocked schedule of the module doc for kernel ``kc`` (a ``KernelCompute``), or
    None when its anchor is no ``DotAnchor``, its epilogue changes the shape, or the
    block cannot be built."""
    out = kc.output
    if any(not isinstance(d, int) for d in out.shape):
        return None
    s = te.create_schedule(out.op)
    reductions = [st for st in s.stages if st.op.reduce_axis]
    if len(reductions) != 1 or not kc.elementwise_epilogue:
        return None
    anchor = dot_anchor(reductions[0].op, tuple(kc.constants))
    if anchor is None or tuple(anchor.op.shape) != tuple(out.shape):
        return None
    intr = dot_intrinsic(anchor, target)
    if intr is not None and intr.is_tile:
        try:
            tiled = _block(te.create_schedule(out.op), kc, anchor, target, intr)
            if tiled is not None:
                lower(tiled, list(kc.tensors))   # the tile's strides are checked there
            return tiled
        except ScheduleError:       # A's rows not at a constant stride, say: vectors
            intr = dot_intrinsic(anchor, target, tiles=False)
    try:
        return _block(s, kc, anchor, target, intr)
    except ScheduleError:
        return None


def _block(s: Schedule, kc: Any, anchor: DotAnchor, target: Target,
           intr: Intrinsic | None) -> Schedule | None:
    op = anchor.op
    if intr is not None and intr.is_tile:
        return _tile_block(s, kc, anchor, intr, target)
    lanes = intr.lanes if intr is not None else _plain_lanes(target, op.dtype, op.shape[-1])
    if lanes is None:
        return None
    group = intr.group if intr is not None else 1
    registers, floor = target.vector_registers, fma_block_floor(target, target.vector_registers)
    rows_first = not (intr is not None and intr.broadcast_in_registers)
    rows, vectors = block_sizes(op.shape[-2], op.shape[-1], lanes, registers, rows_first)
    if rows * vectors < floor:      # 13 rows x 125 vectors: more rows, as registers allow
        rows, vectors = block_sizes(op.shape[-2], op.shape[-1], lanes, registers, rows_first,
                                    max_rows=registers // 2)
    if intr is None and op.dtype.startswith("float") and rows * vectors < floor:
        return None     # too few accumulators: the float blocking does better (module doc)
    out = kc.output
    local, _ = _operands(s, kc, anchor, lanes, group, intr, target)
    output_block(s, out, local, rows, vectors * lanes, lanes)
    cl = s[local]
    sp, red = list(cl.op.axis), list(cl.op.reduce_axis)
    cfo, cfi = cl.split(sp[-1], factor=lanes)
    if intr is not None:
        rko, rki = cl.split(red[-1], factor=group)
        cl.reorder(*red[:-1], rko, *sp[:-1], cfo, cfi, rki)
    else:
        cl.reorder(*red, *sp[:-1], cfo, cfi)
    cl.unroll(sp[-2])
    cl.unroll(cfo)
    if intr is not None:
        cl.tensorize(cfi, intr.name)
    else:
        cl.vectorize(cfi)
    return s


def _copy_lanes(op: Any, target: Target) -> int:
    """The vector of A's copy: a whole register of what its dtype computes in, or a half or
    a quarter one where that divides its last axis (a depthwise conv's 144 channels: 16
    bytes). A scalar padding copy was a quarter of a quantized depthwise conv's time on a
    Zen 3; a bf16 one in 32 float32 lanes 0.6 of a depthwise conv's 0.9 ms on Zen 4."""
    full = target.compute_lanes(op.dtype)
    extent = op.axis[-1].extent if op.axis else 1
    return next((v for v in (full, full // 2, full // 4) if v > 1 and extent % v == 0), full)


def _operands(s: Schedule, kc: Any, anchor: DotAnchor, factor: int, group: int,
              intr: Intrinsic | None, target: Target) -> tuple[Any, Any]:
    """A's producers once at the root (in parallel), everything else inlined, the
    anchor's local block, and B pre-packed in panels of ``factor`` output channels with
    the reduce axis in groups: (the local block, the packed B or None)."""
    out, op = kc.output, anchor.op
    a_name = anchor.a.tensor.name
    placeholders = {t.name for t in kc.tensors[:-1]}
    widen_a = intr.a_storage if intr is not None else ""
    for st in s.stages:
        if st.name in (out.op.name, op.name):
            continue
        if st.name == a_name and not widen_a:   # padded / transposed activations: once
            widen_in_parallel(s, st.name, _copy_lanes(st.op, target))
        elif st.name != a_name:
            st.compute_inline()
    anchor_t = s.tensor(op.name)
    local = s.cache_write(anchor_t, "local")
    if op.name != out.op.name:
        s[anchor_t].compute_inline()
    if intr is not None and widen_a:   # A widened (its padding, transpose inlined): once
        wide = s.cache_read(s.tensor(a_name), "global", [local], dtype=widen_a)
        if a_name not in placeholders:
            s[a_name].compute_inline()
        widen_in_parallel(s, wide, 2 * intr.lanes)
    packed = None
    if anchor.b.tensor.name in placeholders:
        copy = s.cache_read(s.tensor(anchor.b.tensor.name), "global", [local])
        packed = s.prepack(copy, dim=anchor.b_lanes_dim, factor=factor,
                           group_dim=anchor.b_group_dim, group=group,
                           dtype=intr.b_storage if intr is not None else "")
        s[packed].parallel(s[packed].op.axis[0])
    return local, packed


def _tile_block(s: Schedule, kc: Any, anchor: DotAnchor, intr: Intrinsic,
                target: Target) -> Schedule:
    """The AMX block (``dot_block.tile_block``): ``rows x cols`` tiles of output pixels
    by output channels, B packed in panels as wide as the block, the local block's rows,
    channels and innermost reduce axis (in groups) the tile nest, the other reduce axes
    (a conv's window) around it."""
    op, out = anchor.op, kc.output
    rt, ct = tile_block(op.shape[-2], op.shape[-1], intr)
    R, W = rt * intr.tile_rows, ct * intr.lanes
    local, _ = _operands(s, kc, anchor, W, intr.group, intr, target)
    output_block(s, out, local, R, W, intr.lanes, unroll_rows=False)
    cl = s[local]
    sp, red = list(cl.op.axis), list(cl.op.reduce_axis)
    ko, kin = cl.split(red[-1], factor=op.reduce_axis[-1].extent)   # the zeroing before it
    kg, ki = cl.split(kin, factor=intr.group)
    cl.reorder(*red[:-1], ko, *sp, kg, ki)
    cl.tensorize(sp[-2], intr.name)
    return s
