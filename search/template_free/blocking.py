"""A blocked starting point for the packed tiling of a reduction, read off the target.

A BLAS does not search for its blocking: it derives it from the register file and the
caches (Low et al., "Analytical modeling is enough for high-performance BLIS", 2016).
``blocked_decisions`` does that for the one sketch with a BLAS's structure -- a packed
copy of the operand read along the vectorized axis (``add-cache-read``), accumulators in
a local block (``add-cache-write``), SSRSRS tiles fused into the output
(``multi-level-tiling-with-fusion``):

- register block: ``nr`` = two vectors of the vectorized (last spatial) axis by ``mr``
  rows of the axis inside it, as many as the registers hold beside one row of the packed
  operand and one broadcast, ``mr * nr/lanes + nr/lanes + 1 <= registers`` (14 x 32 on
  AVX-512's 32 registers, 6 x 16 on AVX2's 16, 14 x 8 on NEON's 32);
- reduction: the innermost reduce axis's tile is the longest ``max_innermost`` allows
  (a micro-kernel's unrolled k loop), the other reduce axes stay whole;
- the packed panel, the whole reduction by ``nc`` columns, fills at most a quarter of L2
  (``PANEL_SHARE``), the ``mc`` rows of the other operand it meets at most half
  (``ROWS_SHARE``: both stay in L2 while the task walks its register blocks), in whole
  register blocks, continuing into the next axis out when the row axis is covered (a
  conv's rows run over w, then h). Rows in a quarter of L2 instead ran both the GMM
  kernel over symbolic M and a conv2d over N slower at every size measured (see
  docs/benchmarks.md);
- the copy is made at the panel's loop (the outermost one of the vectorized axis), every
  loop above it is parallel (each task packs its own panel), and the auto-unroll steps
  are the middle ones of ``unroll_steps``; any other stage (a padding) is computed at
  the root, and the decisions left are drawn by a fixed seed, so the candidate is the
  same every time.

Tiles of a symbolic axis come from ``loose.loose_choices``. Why the search needs this:
a dynamic tuning splits one search's population over its sizes, so each size evolves a
tenth of a static tuning's population. GMM tunings at M = 117 alone (24 measurements)
found the packed 9 x 13 by 4 x 32 kernel in each of nine runs (this blocking at 117, or
one mutation from it); the dynamic tunings over M = 1..1024 never measured a good packed
kernel at M >= 103 (their packed candidates came from the small sizes' policies and ran
slowly there, and the shared model learnt that packing is slow), so the large sizes were
served by unpacked kernels. Measured first at the largest size (``dynamic.py``), this
candidate raised them (``bench/results/dynamic-sapphire-rapids.md``, round 7). A static
tuning does not get it: it finds such kernels itself.
"""
from __future__ import annotations

import math
import random
from typing import Any, Sequence

from tvmlite.ir.dtypes import ITEMSIZE
from tvmlite.schedule.state import ScheduleError
from tvmlite.search.records.workload import Workload
from tvmlite.search.template_free.annotate import location_candidates
from tvmlite.search.template_free.loose import loose_choices
from tvmlite.search.template_free.priors import (
    divisors,
    fma_block_floor,
    max_innermost,
    unroll_steps,
)
from tvmlite.search.template_free.sketch import (
    CacheRead,
    CacheWrite,
    FuseInto,
    Sketch,
    realize,
    structure,
)
from tvmlite.target.target import Target

__all__ = ["blocked_decisions", "PANEL_SHARE", "ROWS_SHARE"]

PANEL_SHARE = 4         # the packed panel fills at most 1/4 of L2 ...
ROWS_SHARE = 2          # ... and the rows of the other operand it meets 1/2
DEFAULT_L2 = 256 << 10  # bytes, when the target does not know its L2


def blocked_decisions(workload: Workload, sketch: Sketch, target: Target,
                      constants: Sequence[str] = (), loose: frozenset = frozenset()) -> dict | None:
    """The complete decisions of ``sketch`` blocked as above, or None if the sketch does
    not have a BLAS's structure, its rows cannot give the block ``fma_block_floor``
    accumulators (a conv's w = 14 on AVX2: 2 rows of 2 vectors; a GEMV: one row), or the
    blocking is not a legal schedule of it."""
    read = next((a for a in sketch.actions if isinstance(a, CacheRead)), None)
    fuse = next((a for a in sketch.actions if isinstance(a, FuseInto)), None)
    if read is None or fuse is None or not any(isinstance(a, CacheWrite) for a in sketch.actions):
        return None
    s = structure(workload, sketch)
    st = s.state.stage(fuse.stage)
    reduce = [it for it in st.roots if it.kind == "reduce" and it.extent > 1]
    spatial = [it for it in st.roots if it.kind == "spatial" and it.extent > 1]
    lanes, registers = target.vector_lanes(st.op.dtype), target.vector_registers
    symbolic = {axis for stage, axis in loose if stage == fuse.stage}
    if not reduce or not spatial:
        return None
    limit = max_innermost(lanes, registers)

    def largest(it: Any, others: int, at_most: int, innermost: bool) -> int:
        """The largest legal factor of one level of ``it``'s tile, at most ``at_most``."""
        fit = (loose_choices(it.extent, others, innermost, registers, limit)
               if it.name in symbolic else divisors(it.extent // others))
        return max([d for d in fit if d <= at_most], default=1)

    vec, rows = spatial[-1], spatial[-2::-1]          # rows: innermost first
    nr = largest(vec, 1, 2 * lanes, True)
    width = -(-nr // lanes)                            # vectors per row of the block
    tiles = {it.name: [1, 1, 1] for it in spatial}
    tiles.update({it.name: [1] for it in reduce})
    tiles[reduce[-1].name] = [largest(reduce[-1], 1, limit, True)]
    depth = math.prod(it.extent for it in reduce)      # the panel spans the whole reduction
    l2 = target.cache_bytes("L2") or DEFAULT_L2
    row_bytes = depth * ITEMSIZE[st.op.dtype]
    tiles[vec.name] = [largest(vec, nr, max(1, l2 // PANEL_SHARE // (row_bytes * nr)), False),
                       1, nr]
    mr = largest(rows[0], 1, max(1, (registers - 1 - width) // width), True) if rows else 1
    if mr * width < fma_block_floor(target, registers):
        return None                 # too few rows for a micro-kernel (or a GEMV: no rows)
    left = max(1, l2 // ROWS_SHARE // row_bytes)       # rows of the other operand
    for n, it in enumerate(rows):
        inner = mr if n == 0 else 1
        count = largest(it, inner, max(1, left // inner), False)
        tiles[it.name] = [count, 1, inner]
        left //= inner * count
        if inner * count != it.extent:
            break                                      # the next axis out is not reached
    steps = unroll_steps(registers)
    copy = next(c.name for c in s.state.stages if c.scope == "local"
                and [t.name for t in c.op.input_tensors] == [read.tensor]
                and fuse.stage in s.state.consumers(c.name))
    decisions: dict[str, Any] = {f"tile:{fuse.stage}.{name}": f for name, f in tiles.items()}
    decisions.update({f"fuse:{fuse.stage}": 2, f"unroll:{fuse.stage}": steps[1],
                      f"unroll:{copy}": steps[1], f"unroll:{fuse.consumer}": steps[2],
                      f"at:{copy}": 0, f"parallel:{fuse.consumer}": 0})
    if read.tensor in constants:
        decisions[f"prepack:{read.tensor}"] = 0        # packed inside, per panel
    try:
        placed, drawn = realize(workload, sketch, decisions, random.Random(0), target,
                                constants, loose)
        # the consumer's outermost loops are one per spatial axis (``_apply_fuse``)
        panel = [it for it in st.roots if it.kind == "spatial"].index(vec)
        loop = placed.state.stage(fuse.consumer).leaves[panel].name
        decisions[f"at:{copy}"] = location_candidates(placed.state, copy).index(
            (fuse.consumer, loop))
        decisions[f"parallel:{fuse.consumer}"] = panel + 1
        decisions.update({k: 0 for k in drawn if k.startswith("at:") and k not in decisions})
        _, used = realize(workload, sketch, decisions, random.Random(0), target, constants,
                          loose)
    except (ScheduleError, ValueError):
        return None
    return used
