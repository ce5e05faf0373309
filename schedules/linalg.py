"""Templates for the matrix products: matmul, batch_matmul, dense (+bias, +relu fused).

The x86 recipe of BLAS kernels, with its sizes left as knobs:

* a register block of ``rows x cols`` outputs accumulates in a local cache
  (``cache_write`` + ``compute_at``) whose column loop is vectorized and whose row loop
  is unrolled, so every accumulator is a vector register;
* the reduction loop runs outside the block, split so its inner part can be unrolled;
* matmul's B is packed per column panel (``cache_read`` computed at the parallel loop):
  the block then streams one contiguous panel instead of rows N floats apart;
* the block loops are fused into one parallel loop (OpenMP).

dense reads both operands along k (weight is (M, K)), so it vectorizes k instead: k is
split, its inner part ``rfactor``-ed into a spatial axis, and a block of ``rows x cols``
outputs keeps one k-vector accumulator each; the lanes are summed once per output.

Each template builds its compute with ``tvmlite.ops`` unchanged, so its workload (the
key of its records) is the one the template-free search tunes too.

Block sizes come from the target the template is tuned for (``cfg.target``): a vector
is ``target.vector_lanes(dtype)`` elements, and the register block is sized so its
accumulators fit the target's vector registers (``max_rows``, ``max_cols``,
``dense_block``).

Map: sizes and vector splits (``lanes``, ``max_rows``, ``max_cols``, ``dense_block``,
``define_vector_split``) · shared block
helpers (``unroll_if``, ``define_gemm_knobs``, ``gemm_block``, ``pack_panel``) · matmul ·
batch_matmul · dense.
"""
from __future__ import annotations

import math
from typing import Any

from tvmlite import ops, te
from tvmlite.schedule.schedule import Schedule
from tvmlite.search.templated.task import template

# Unrolled reduction steps per block iteration. Not a register fact (each unrolled step
# reuses the same accumulators); it bounds the unrolled body's code size, as
# passes/unroll.py's MAX_COPIES bounds any unrolled loop.
MAX_K_INNER = 16


def lanes(cfg: Any, dtype: str) -> int:
    """Elements of ``dtype`` in one vector register of the template's target."""
    return cfg.target.vector_lanes(dtype)


def max_rows(cfg: Any) -> int:
    """Register-block rows: with one vector of columns, one accumulator per row in half
    the vector registers (16 of AVX-512's 32, 8 of AVX2's 16); the other half holds the
    column vectors loaded and the row values broadcast."""
    return cfg.target.vector_registers // 2


def max_cols(cfg: Any, dtype: str) -> int:
    """Register-block columns: an eighth of the vector registers as vectors of ``dtype``
    (4 x 16 float32 with AVX-512, 2 x 8 with AVX2), so a block of a few rows by this many
    columns still fits the register file."""
    return max(1, cfg.target.vector_registers // 8) * lanes(cfg, dtype)


def dense_block(cfg: Any) -> int:
    """dense: outputs per block side, each with its own k-vector accumulator; the
    ``side x side`` accumulators take at most half the vector registers (4 x 4 of 32)."""
    return max(1, math.isqrt(cfg.target.vector_registers // 2))


def _factorizations(n: int, parts: int) -> list[tuple]:
    """Every ordered ``parts``-tuple of positive ints whose product is ``n``."""
    if parts == 1:
        return [(n,)]
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    return [(d,) + rest for d in divisors for rest in _factorizations(n // d, parts - 1)]


def _tail_free(f: int, n_lanes: int) -> bool:
    """Does a vectorized loop of ``f`` iterations run without a scalar tail? Codegen cuts
    it into chunks of the native width, or of the largest power of two up to ``f``
    when shorter. A tail is slow twice over: its iterations are scalar, and its runtime
    index keeps a register block's accumulators in memory."""
    return f % n_lanes == 0 if f >= n_lanes else f & (f - 1) == 0


def define_vector_split(cfg: Any, name: str, extent: int, parts: int, dtype: str,
                        max_factor: int) -> None:
    """A split whose innermost loop is vectorized. Its choices are the exact
    factorizations whose innermost factor is a whole number of vectors
    (``lanes(cfg, dtype)``); when the extent has none (56 = 7 * 8), those whose innermost
    factor is a shorter power of two >= 2 (a narrower vector, no tail); when it has
    none of those either (an odd extent), every exact factorization."""
    sizes = [z for z in _factorizations(extent, parts) if z[-1] <= max_factor]
    n = lanes(cfg, dtype)
    vec = [z for z in sizes if z[-1] % n == 0] or \
        [z for z in sizes if z[-1] >= 2 and _tail_free(z[-1], n)]
    if vec:
        cfg.define_split(name, extent, parts, policy="candidates",
                         candidates=[list(z) for z in vec])
    else:
        cfg.define_split(name, extent, parts, max_factor=max_factor)


def unroll_if(s: Schedule, stage: Any, axis: Any, flag: bool) -> None:
    """Unroll ``axis`` when the knob says so (a no-op otherwise)."""
    if flag:
        s[stage].unroll(axis)


def define_gemm_knobs(cfg: Any, rows: int, cols: int, red: int, dtype: str) -> None:
    """The knobs of a GEMM-like block: rows and columns split in three (outer, cache
    block, register block), the reduction in two (outer, unrolled inner), and whether to
    unroll that inner part. Defined on extents only, so no knob depends on another."""
    cfg.define_split("tile_y", rows, num_outputs=3, max_factor=max_rows(cfg))
    define_vector_split(cfg, "tile_x", cols, 3, dtype, max_cols(cfg, dtype))
    cfg.define_split("tile_k", red, num_outputs=2, max_factor=MAX_K_INNER)
    cfg.define_knob("unroll_k", [True, False])


def gemm_block(s: Schedule, cfg: Any, out: te.Tensor, batch: list) -> tuple[Any, te.Tensor]:
    """Register-block the GEMM-like output ``out`` (its last two axes rows, columns;
    ``batch`` = the axes before them) with the knobs of ``define_gemm_knobs``.

    Loop order: batch, rows.outer, cols.outer (fused, parallel), rows.block,
    cols.block, then the register block, where the local accumulator stage is computed:
    reduce.outer, reduce.inner (unroll knob), rows (unrolled), cols (vectorized).
    Returns (the fused parallel loop, the local stage) for callers that place more
    stages there (a packed panel)."""
    local = s.cache_write(out, "local")
    y, x = s[out].op.axis[-2:]
    yo, ym, yi = cfg["tile_y"].apply(s, out, y)
    xo, xm, xi = cfg["tile_x"].apply(s, out, x)
    s[out].reorder(*batch, yo, xo, ym, xm, yi, xi)
    par = s[out].fuse(*batch, yo, xo)
    s[out].parallel(par)
    s[out].vectorize(xi)
    s[local].compute_at(s[out], xm)
    ci, cj = s[local].op.axis[-2:]
    (k,) = s[local].op.reduce_axis
    ko, ki = cfg["tile_k"].apply(s, local, k)
    s[local].reorder(ko, ki, ci, cj)
    unroll_if(s, local, ki, cfg["unroll_k"].val)
    s[local].unroll(ci)
    s[local].vectorize(cj)
    return par, local


def pack_panel(s: Schedule, src: te.Tensor, reader: te.Tensor, out: te.Tensor,
               at: Any, prepack: int = 0) -> None:
    """Copy the part of ``src`` that ``reader`` uses inside loop ``at`` of ``out`` into a
    contiguous local buffer (a packed panel), its last axis vectorized. ``prepack`` > 0
    (``src`` constant): make all the panels, ``prepack`` columns wide, once outside the
    kernel instead (``s.prepack``), its panel loop parallel."""
    packed = s.cache_read(src, "local", [reader])
    if prepack:
        packed = s.prepack(packed, dim=len(src.shape) - 1, factor=prepack)
        s[packed].parallel(s[packed].op.axis[0])
    else:
        s[packed].compute_at(s[out], at)
    s[packed].vectorize(s[packed].op.axis[-1])


@template("matmul")
def matmul(cfg: Any, M: int, N: int, K: int, dtype: str = "float32") -> tuple[Schedule, list]:
    """``C = A @ B``: register-blocked, B packed per column panel (knob ``pack_b``)."""
    A, B, C = ops.matmul(M, N, K, dtype)
    define_gemm_knobs(cfg, M, N, K, dtype)
    # B constant (templated.create(..., constants=["B"])): its panels may be made once,
    # outside the kernel, as wide as the parallel loop's column block
    cfg.define_knob("pack_b", ["prepack", True, False] if "B" in cfg.constants
                    else [True, False])
    s = te.create_schedule(C.op)
    par, local = gemm_block(s, cfg, C, [])
    if cfg["pack_b"].val:
        width = math.prod(cfg["tile_x"].size[1:])   # columns of one parallel block
        if cfg["pack_b"].val != "prepack" or N % width:
            width = 0                                  # (a ragged last panel: in-kernel)
        pack_panel(s, B, local, C, par, width)
    return s, [A, B, C]


@template("batch_matmul")
def batch_matmul(cfg: Any, B: int, M: int, N: int, K: int,
                 dtype: str = "float32") -> tuple[Schedule, list]:
    """``C[b] = A[b] @ B[b]``: matmul's template with the batch fused into the parallel
    loop (each parallel iteration packs its own panel of B[b])."""
    lhs, rhs, out = ops.batch_matmul(B, M, N, K, dtype)
    define_gemm_knobs(cfg, M, N, K, dtype)
    cfg.define_knob("pack_b", [True, False])
    s = te.create_schedule(out.op)
    par, local = gemm_block(s, cfg, out, [s[out].op.axis[0]])
    if cfg["pack_b"].val:
        pack_panel(s, rhs, local, out, par)
    return s, [lhs, rhs, out]


@template("dense")
def dense(cfg: Any, N: int, K: int, M: int, dtype: str = "float32", bias: bool = False,
          relu: bool = False) -> tuple[Schedule, list]:
    """``out = data @ weight.T`` (+bias, +relu fused into the same loop nest).

    Both operands are contiguous along k, so k is vectorized: ``tile_k``'s inner part
    becomes the spatial axis of ``dense_rf`` (rfactor), a ``tile_y x tile_x`` block of
    outputs keeps one k-vector each (k.outer outside the unrolled block), and
    ``dense`` sums each vector's lanes. With ``weight_outer`` the weight block is the
    outer loop, so its rows stay in L1 while every data block passes (the weight is
    usually the bigger operand). bias_add is inlined; the last stage owns the parallel
    loop and the block loops.
    """
    tensors = ops.dense(N, K, M, dtype, bias, relu)
    out = tensors[-1]
    cfg.define_split("tile_y", N, num_outputs=2, max_factor=dense_block(cfg))
    cfg.define_split("tile_x", M, num_outputs=2, max_factor=dense_block(cfg))
    define_vector_split(cfg, "tile_k", K, 2, dtype, 2 * lanes(cfg, dtype))
    cfg.define_knob("unroll_block", [True, False])
    cfg.define_knob("weight_outer", [True, False])
    s = te.create_schedule(out.op)
    red = s["dense"]
    (k,) = red.op.reduce_axis
    _, kv = cfg["tile_k"].apply(s, "dense", k)
    rf = s.rfactor("dense", kv, factor_axis=2)        # dense_rf[i, j, kv]
    if s.state.has_stage("bias_add") and out.op.name != "bias_add":
        s["bias_add"].compute_inline()
    y, x = s[out].op.axis
    yo, yi = cfg["tile_y"].apply(s, out, y)
    xo, xi = cfg["tile_x"].apply(s, out, x)
    outer = [xo, yo] if cfg["weight_outer"].val else [yo, xo]
    s[out].reorder(*outer, yi, xi)
    par = s[out].fuse(*outer)
    s[out].parallel(par)
    if out.op.name != "dense":
        s["dense"].compute_at(s[out], par)
        s[out].vectorize(xi)
    s[rf].compute_at(s[out], par)
    ri, rj, rv = s[rf].op.axis
    (rko,) = s[rf].op.reduce_axis
    s[rf].reorder(rko, ri, rj, rv)
    unroll_if(s, rf, ri, cfg["unroll_block"].val)
    unroll_if(s, rf, rj, cfg["unroll_block"].val)
    s[rf].vectorize(rv)
    return s, list(tensors)
