"""A blocked starting point for the packed tiling of a reduction, read off the target.

A BLAS does not search for its blocking: it derives it from the register file and the
caches (Low et al., "Analytical modeling is enough for high-performance BLIS", 2016).
``blocked_decisions`` does that for the sketches with a BLAS's structure -- SSRSRS tiles
fused into the output (``multi-level-tiling-with-fusion``: into a local accumulator
block, ``add-cache-write``, or into the elementwise epilogue that follows), with or
without a packed copy of the operand read along the vectorized axis
(``add-cache-read``; a depthwise conv has none to pack):

- register block: ``nr`` = two vectors (whole vectors where the axis allows; up to
  ``max_innermost`` when too few rows divide the row axis) of the vectorized (last
  spatial) axis by ``mr``
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
- the loops outside the blocks have at least ``PARALLEL_SHARE`` iterations per core
  (``share_cores``: blocks shrink, the outer rows first, when the whole output fits);
- the copy is made at the panel's loop (the outermost one of the vectorized axis), every
  loop above it is parallel (each task packs its own panel); with every panel packed
  at load time instead, the panel loop is the outermost where the operand read along
  the vector outweighs the rows (``panels_outweigh_rows``: a deep layer's weights, 2.4
  MB for ResNet-50's 14 x 14 x 256 3x3 against a 0.2 MB input, swept whole per row
  tile when the rows were outside; on Zen 3 its 31 such kernels ran 5-7% faster in the
  run relative to the others), and the auto-unroll steps
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
from tvmlite.ir.expr import TensorRead, free_vars, walk
from tvmlite.schedule.state import ScheduleError
from tvmlite.search.records.workload import Workload
from tvmlite.search.template_free import dag
from tvmlite.search.template_free.annotate import location_candidates
from tvmlite.search.template_free.loose import loose_choices
from tvmlite.search.template_free.priors import (
    divisors,
    fma_block_floor,
    max_innermost,
    register_block_rows,
    unroll_steps,
)
from tvmlite.search.template_free.realize import dot_decisions, realize
from tvmlite.search.template_free.sketch import (
    CacheRead,
    DotBlock,
    FuseInto,
    Sketch,
    row_operand,
    structure,
)
from tvmlite.target.target import Target

__all__ = ["blocked_decisions", "block_rows_axis", "panels_outweigh_rows", "share_cores",
           "PANEL_SHARE", "ROWS_SHARE", "PARALLEL_SHARE"]

PARALLEL_SHARE = 2      # at least 2 blocks per core in the parallel loop
PANEL_SHARE = 4         # the packed panel fills at most 1/4 of L2 ...
ROWS_SHARE = 2          # ... and the rows of the other operand it meets 1/2
DEFAULT_L2 = 256 << 10  # bytes, when the target does not know its L2


def blocked_decisions(workload: Workload, sketch: Sketch, target: Target,
                      constants: Sequence[str] = (), loose: frozenset = frozenset(),
                      prepack: bool = False) -> dict | None:
    """The complete decisions of ``sketch`` blocked as above (with ``prepack``, a constant
    operand's panels are made once at load time, ``nr`` wide, instead of per call), or
    None if the sketch does not have a BLAS's structure, its rows cannot give the block
    ``fma_block_floor`` accumulators but one (a GEMV: one row), or the blocking is not a
    legal schedule of it. Where few rows divide the row axis, rows of one vector may give
    the most accumulators: a conv's w = 7 or 14 on AVX2 takes 7 rows of 1 vector (2 rows
    of 2 were refused, and the generic schedule, one accumulator per output vector, ran
    ResNet-50's res5 3x3 conv in 11.5 ms on Zen 3; blocked, 2.1)."""
    dot = next((a for a in sketch.actions if isinstance(a, DotBlock)), None)
    if dot is not None:      # the register block around a dot-product intrinsic
        return dot_decisions(workload, dot.stage, target, constants)
    reads = [a for a in sketch.actions if isinstance(a, CacheRead)]
    fuse = next((a for a in sketch.actions if isinstance(a, FuseInto)), None)
    if fuse is None:         # no register block fused into an output's tiles
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

    def largest(it: Any, others: int, at_most: int, innermost: bool,
                whole: bool = False) -> int:
        """The largest legal factor of one level of ``it``'s tile, at most ``at_most``
        (with ``whole``, in whole vectors when some such factor exists)."""
        fit = (loose_choices(it.extent, others, innermost, registers, limit)
               if it.name in symbolic else divisors(it.extent // others))
        fit = [d for d in fit if d <= at_most]
        vector = lanes
        while whole and vector >= 4:     # whole vectors, else whole shorter ones (24: 8s)
            if any(d % vector == 0 for d in fit):
                fit = [d for d in fit if d % vector == 0]
                break
            vector //= 2
        return max(fit, default=1)

    vec, rows = spatial[-1], spatial[-2::-1]          # rows: innermost first
    floor = fma_block_floor(target, registers)

    def block(at_most: int) -> tuple[int, int, int]:
        """(nr, vectors per row, mr) of the register block with nr <= at_most."""
        nr = largest(vec, 1, at_most, True, whole=True)
        if nr % lanes:      # the vector loop is split in whole shorter vectors: one per row
            nr = max(d for d in (lanes // 2, lanes // 4, 4, 1) if nr % d == 0 or d == 1)
        width = -(-nr // lanes)
        # rows of one vector: two registers kept free, as 14 of AVX2's 16 spilled
        # (ResNet-50's 28x28x512 -> 14x14x1024 1x1 conv on Zen 3: 5.4 ms; 7 rows 1.6-2.5)
        most = register_block_rows(registers, width) - (2 if width == 1 else 0)
        mr = largest(rows[0], 1, most, True) if rows else 1
        return nr, width, mr
    nr, width, mr = block(2 * lanes)
    if mr * width < floor and rows:      # few rows divide: wider rows (w = 111: 3 rows),
        # or rows of one vector (w = 7 or 14 on AVX2: 7 rows), the most accumulators
        nr, width, mr = max((nr, width, mr), block(limit), block(lanes),
                            key=lambda b: b[1] * b[2])
    tiles = {it.name: [1, 1, 1] for it in spatial}
    tiles.update({it.name: [1] for it in reduce})
    tiles[reduce[-1].name] = [largest(reduce[-1], 1, limit, True)]
    depth = math.prod(it.extent for it in reduce)      # the panel spans the whole reduction
    l2 = target.cache_bytes("L2") or DEFAULT_L2
    row_bytes = depth * ITEMSIZE[st.op.dtype]
    tiles[vec.name] = [largest(vec, nr, max(1, l2 // PANEL_SHARE // (row_bytes * nr)), False),
                       1, nr]
    if mr * width < floor - 1:      # one chain short leaves one FMA slot in ``floor`` idle
        return None                 # too few rows for a micro-kernel (or a GEMV: no rows)
    left = max(1, l2 // ROWS_SHARE // row_bytes)       # rows of the other operand
    for n, it in enumerate(rows):
        inner = mr if n == 0 else 1
        count = largest(it, inner, max(1, left // inner), False)
        tiles[it.name] = [count, 1, inner]
        left //= inner * count
        if inner * count != it.extent:
            break                                      # the next axis out is not reached
    share_cores(tiles, spatial, [*rows[:0:-1], vec, *rows[:1]], target.cores * PARALLEL_SHARE)
    steps = unroll_steps(registers)
    decisions: dict[str, Any] = {f"tile:{fuse.stage}.{name}": f for name, f in tiles.items()}
    decisions.update({f"fuse:{fuse.stage}": 2, f"unroll:{fuse.stage}": steps[1],
                      f"unroll:{fuse.consumer}": steps[2], f"parallel:{fuse.consumer}": 0})
    copies = []          # the packed panel of the operand read along the vector (B), and
    for read in reads:   # the rows of A the panel meets (``pack-a-panels``), at one loop
        copy = next(c.name for c in s.state.stages if c.scope == "local"
                    and [t.name for t in c.op.input_tensors] == [read.tensor]
                    and fuse.stage in s.state.consumers(c.name))
        decisions.update({f"unroll:{copy}": steps[1], f"at:{copy}": 0})
        if read.tensor in constants:    # B packed inside, per panel; or once, at load time
            once = prepack and read.tensor != row_operand(workload.schedule().state, read.stage)
            decisions[f"prepack:{read.tensor}"] = nr if once else 0
        if not decisions.get(f"prepack:{read.tensor}"):  # else a stage of its own, not placed
            copies.append(copy)
    # every panel packed once at load time: the panel loop goes outside the rows when the
    # operand read along the vector is the larger one (a deep layer's weights), so a
    # task reuses its panel from L2 over every row instead of streaming all the panels
    # again for each row tile; a copy made in the kernel stays at its panel's loop
    decisions[f"panels:{fuse.stage}"] = int(not copies and panels_outweigh_rows(st, vec.name))
    try:
        placed, drawn = realize(workload, sketch, decisions, random.Random(0), target,
                                constants, loose)
        # the consumer's outermost loops are one per spatial axis (``_apply_fuse``)
        panel = [it for it in st.roots if it.kind == "spatial"].index(vec)
        loop = placed.state.stage(fuse.consumer).leaves[panel].name
        for copy in copies:
            decisions[f"at:{copy}"] = location_candidates(placed.state, copy).index(
                (fuse.consumer, loop))
        decisions[f"parallel:{fuse.consumer}"] = panel + 1
        base = workload.schedule().state   # where annotate draws from: 1 is "inline"
        for k in drawn:   # the rest at the root, a padding few multiply-adds read inlined
            if k.startswith("at:") and k not in decisions:
                name = k[len("at:"):]
                decisions[k] = int(dag.inlinable(base, name) and not dag.copy_pays(base, name))
        _, used = realize(workload, sketch, decisions, random.Random(0), target, constants,
                          loose)
    except (ScheduleError, ValueError):
        return None
    return used


def panels_outweigh_rows(stage: Any, vector_axis: str) -> bool:
    """Whether the inputs ``stage`` reads along ``vector_axis`` (B, a conv's weights)
    hold more elements than those it broadcasts across it (A, the rows); False where a
    shape is symbolic."""
    sizes: dict[bool, dict[str, int]] = {True: {}, False: {}}
    for read in (n for n in walk(stage.op.body) if isinstance(n, TensorRead)):
        if not all(isinstance(d, int) for d in read.tensor.shape):
            return False
        along = vector_axis in set().union(*(free_vars(i) for i in read.indices))
        sizes[along][read.tensor.name] = math.prod(read.tensor.shape)
    return sum(sizes[True].values()) > sum(sizes[False].values())


def block_rows_axis(workload: Workload, sketch: Sketch) -> tuple[str, str] | None:
    """(stage, axis) of the rows of ``sketch``'s register block (the spatial axis next to
    the vectorized one of the stage fused into its output), or None without one.

    A static axis's tiles divide it, so the rows the registers hold may not be a choice:
    1024 rows take 4 on AVX2, where 6 fit (6 x 16 ran 127 GFLOP/s on Zen 3, 4 x 16 90).
    Made loose like a symbolic axis's, the rows end in a remainder block; the first round
    measures the blocking both ways (``policy.blocked_candidates``)."""
    if any(isinstance(a, DotBlock) for a in sketch.actions):
        return None
    fuse = next((a for a in sketch.actions if isinstance(a, FuseInto)), None)
    if fuse is None:
        return None
    st = structure(workload, sketch).state.stage(fuse.stage)
    spatial = [it for it in st.roots if it.kind == "spatial" and it.extent > 1]
    return (fuse.stage, spatial[-2].name) if len(spatial) >= 2 else None


def register_block(workload: Workload, sketch: Sketch, decisions: dict,
                   lanes: int) -> tuple[int, int, int]:
    """(rows, vectors per row, extent of the rows axis) of the register block
    ``decisions`` give ``sketch`` (``block_rows_axis``); (0, 0, 0) without one."""
    found = block_rows_axis(workload, sketch)
    if found is None:
        return 0, 0, 0
    stage, rows = found
    st = structure(workload, sketch).state.stage(stage)
    spatial = [it for it in st.roots if it.kind == "spatial" and it.extent > 1]
    extent = next(it.extent for it in spatial if it.name == rows)
    mr = decisions.get(f"tile:{stage}.{rows}", [1])[-1]
    nr = decisions.get(f"tile:{stage}.{spatial[-1].name}", [1])[-1]
    return mr, -(-nr // lanes), extent


def share_cores(tiles: dict, spatial: Sequence[Any], order: Sequence[Any], need: int) -> None:
    """Shrink the cache blocks (``tiles[axis][0]``, in ``order``) until the loops outside
    them -- the parallel loop -- have at least ``need`` iterations: a small conv's whole
    output fits the L2 blocks, which would leave one block, on one core."""
    def outer(it: Any) -> int:
        return -(-it.extent // math.prod(tiles[it.name]))
    for it in order:
        total = math.prod(outer(a) for a in spatial)
        if total >= need:
            return
        f = tiles[it.name]
        others = total // outer(it)
        fits = [c for c in divisors(f[0]) if others * -(-it.extent // (c * f[1] * f[2])) >= need]
        f[0] = max(fits) if fits else 1
