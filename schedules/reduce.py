"""Templates for the reductions: softmax (row-wise) and norm2 (whole tensor).

A reduce axis cannot be vectorized or parallelized directly (its iterations update one
element), so both templates ``rfactor`` it: the inner part of a split becomes a spatial
axis of partial results, one per vector lane (and, for norm2, one per parallel row
block), and a small final stage combines the partials.

* softmax: every stage of a row is computed at the output's row loop, which is
  parallel, so a row stays in L1 between its passes; the row max and the row sum
  accumulate ``tile_k`` lanes at a time; ``exp`` is stored once per row (``expv =
  "at_row"``) or recomputed in both of its readers (``"inline"``); ``auto_unroll``
  unrolls the row's short loops.
* norm2: ``tile_rows`` blocks of rows are summed in parallel, each block's columns
  ``tile_cols`` lanes at a time in a thread-local accumulator.

Map: softmax · norm2.
"""
from __future__ import annotations

from typing import Any

from tvmlite import ops, te
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedules.linalg import define_vector_split, max_cols, unroll_if
from tvmlite.search.templated.task import template

# auto_unroll_max_step of the row loop: unroll every loop nest of at most this many
# steps inside it (16: the lane-combining loops; 64: short rows entirely; 0: nothing).
AUTO_UNROLL = [16, 0, 64]


def _lane_reduce(s: Schedule, cfg: Any, stage: str, out: te.Tensor, row: Any) -> None:
    """Rfactor ``stage``'s reduction into ``tile_k`` vector lanes, both parts computed at
    ``out``'s loop ``row``: ``<stage>_rf[i, lane]`` (vectorized lanes inside the reduce
    loop), then ``stage`` combines the lanes."""
    (k,) = s[stage].op.reduce_axis
    _, kv = cfg["tile_k"].apply(s, stage, k)
    rf = s.rfactor(stage, kv, factor_axis=1)
    i, lane = s[rf].op.axis
    (ko,) = s[rf].op.reduce_axis
    s[rf].reorder(i, ko, lane)
    s[rf].vectorize(lane)
    s[rf].compute_at(s[out], row)
    s[stage].compute_at(s[out], row)


@template("softmax")
def softmax(cfg: Any, N: int, M: int, dtype: str = "float32") -> tuple[Schedule, list]:
    """Row max, exp, row sum and division, each row in one parallel iteration."""
    data, out = ops.softmax(N, M, dtype)
    define_vector_split(cfg, "tile_k", M, 2, dtype, max_cols(cfg, dtype))
    define_vector_split(cfg, "tile_j", M, 2, dtype, max_cols(cfg, dtype))
    cfg.define_knob("expv", ["at_row", "inline"])
    cfg.define_knob("auto_unroll", AUTO_UNROLL)
    s = te.create_schedule(out.op)
    i, j = s[out].op.axis
    _, ji = cfg["tile_j"].apply(s, out, j)
    s[out].parallel(i)
    s[out].vectorize(ji)
    if cfg["auto_unroll"].val:
        s[out].pragma(i, "auto_unroll_max_step", cfg["auto_unroll"].val)
    _lane_reduce(s, cfg, "maxelem", out, i)
    _lane_reduce(s, cfg, "expsum", out, i)
    if cfg["expv"].val == "inline":
        s["expv"].compute_inline()
    else:
        s["expv"].compute_at(s[out], i)
        _, ej = s["expv"].op.axis
        _, eji = cfg["tile_j"].apply(s, "expv", ej)
        s["expv"].vectorize(eji)
    return s, [data, out]


@template("norm2")
def norm2(cfg: Any, N: int, M: int, dtype: str = "float32") -> tuple[Schedule, list]:
    """Rows in ``tile_rows`` blocks (the outer part parallel, via rfactor), columns in
    vector lanes (a second rfactor, computed per block in a thread-local buffer); the
    partial sums are added, then the square root taken."""
    (A, out) = ops.norm2(N, M, dtype)
    cfg.define_split("tile_rows", N, num_outputs=2)
    define_vector_split(cfg, "tile_cols", M, 2, dtype, max_cols(cfg, dtype))
    cfg.define_knob("unroll_cols", [True, False])
    s = te.create_schedule(out.op)
    ri, _ = s["sumsq"].op.reduce_axis
    rio, _ = cfg["tile_rows"].apply(s, "sumsq", ri)
    blocks = s.rfactor("sumsq", rio, factor_axis=0)          # sumsq_rf[block, 0]
    _, rj = s[blocks].op.reduce_axis
    _, rjv = cfg["tile_cols"].apply(s, blocks, rj)
    lane_sums = s.rfactor(blocks, rjv, factor_axis=2)       # sumsq_rf_rf[block, 0, lane]
    lb, li, lv = s[lane_sums].op.axis
    ljo, lii = s[lane_sums].op.reduce_axis
    s[lane_sums].reorder(lb, li, lii, ljo, lv)
    unroll_if(s, lane_sums, ljo, cfg["unroll_cols"].val)
    s[lane_sums].vectorize(lv)
    s[blocks].parallel(s[blocks].op.axis[0])
    s[lane_sums].compute_at(s[blocks], s[blocks].op.axis[0])
    return s, [A, out]
