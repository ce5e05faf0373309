"""Realizing a sketch: from its actions and a dict of decisions to a concrete Schedule.

``realize(sketch, decisions, rng)`` turns a sketch (``sketch.py``) into a real Schedule.
Every open number -- tile sizes, where a stage is computed, how many outer loops run in
parallel, the auto-unroll step, whether a constant input's packed copy is made once outside
the kernel -- is read from ``decisions`` (a plain dict, stored in tuning records);
a missing or no-longer-valid decision is sampled with ``rng`` and written back. So random
sampling is ``realize(sketch, {}, rng)`` and a mutation is "change one decision, realize
again": the search never edits Steps directly, and every candidate it builds is a Step
list that the core checked.

Decision keys: ``tile:<stage>.<axis>`` (inner factors, outermost first),
``fuse:<stage>`` (tile level 1 or 2 where it joins its consumer), ``panels:<stage>`` (1:
the consumer's outermost loop is the vectorized axis's, so a task keeps one panel of the
operand read along the vector in cache while it walks the rows; 0: the axes' own order),
``rfactor:<stage>``, ``rfvec:<stage>`` and ``rfser:<stage>`` (factor, vector split and
vector chunks per thread inside the reduction of an rfactor), ``at:<stage>`` (index into
the stage's candidate compute locations; 0 = root, then inline where allowed),
``parallel:<stage>`` (outer loops fused into the parallel loop), ``unroll:<stage>``
(auto_unroll_max_step), ``prepack:<input>`` (for an input the task declares constant: 0
= pack inside the kernel, as cache_read does, else the panel width of the layout it is
pre-packed in, ``tvmlite.schedule.prepack``), ``tensorize:<stage>`` (1: the dot block
uses the target's intrinsic) and ``dot:<stage>`` (its [rows, vectors]).
"""
from __future__ import annotations

import math
import random
from typing import Any, Sequence

from tvmlite.checks import is_int  # decisions come from logs a user may edit
from tvmlite.schedule.dot_block import block_sizes, dot_operands, schedule_dot
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError
from tvmlite.search.records.workload import Workload
from tvmlite.search.template_free.annotate import annotate
from tvmlite.search.template_free.loose import LOOSE_COVER, sample_loose_factors
from tvmlite.search.template_free.priors import (
    MAX_INNERMOST,
    apply_prepack,
    decide,
    divisors,
    fma_block_floor,
    max_innermost,
)
from tvmlite.search.template_free.sketch import (
    CacheRead,
    DotBlock,
    FuseInto,
    Rfactor,
    Sketch,
    Tile,
    apply_rfactor,
    apply_structural,
)
from tvmlite.target.intrinsics import best_intrinsic
from tvmlite.target.target import Target

UNROLL_STEPS = (0, 16, 64, 512)   # unroll_steps() of a 32-register target
WHOLE_VECTOR_PROB = 0.8    # share of sampled vectorized tiles that are whole vectors
BLOCK_TRIES = 16           # redraws of fresh tiles whose register block overflows
SPATIAL_LEVELS = 4         # "SSRSRS": four spatial levels ...
REDUCE_LEVELS = 2          # ... and two reduce levels


def sample_factors(extent: int, parts: int, rng: random.Random,
                   max_innermost: int = MAX_INNERMOST, multiple_of: int = 1) -> list[int]:
    """A random factorization ``extent = outer * f1 * ... * f_{parts-1}``; returns the
    inner factors (outermost first), the innermost at most ``max_innermost`` and, when
    the extent allows it, a multiple of ``multiple_of``."""
    rest, inner = extent, []
    for level in range(parts - 1):
        options = divisors(rest)
        if level == 0:
            options = [d for d in options if d <= max_innermost] or [1]
            options = [d for d in options if d % multiple_of == 0] or options
        f = rng.choice(options)
        inner.append(f)
        rest //= f
    return inner[::-1]


def _valid_factors(value: Any, extent: int, parts: int, limit: int = MAX_INNERMOST,
                   loose: bool = False) -> bool:
    if not (isinstance(value, list) and len(value) == parts - 1
            and all(is_int(f, 1) for f in value) and value[-1] <= limit):
        return False
    if loose:
        return math.prod(value) < LOOSE_COVER * extent
    return extent % math.prod(value) == 0


def _split_levels(s: Schedule, stage: str, axis: str, factors: list[int]) -> list[str]:
    """Split ``axis`` into len(factors)+1 loops with the given inner factors."""
    loops, rest = [], axis
    for i in range(len(factors)):
        outer, inner = s[stage].split(rest, factor=math.prod(factors[i:]))
        loops.append(outer.name)
        rest = inner.name
    return loops + [rest]


def register_block(st: Any, decisions: dict, lanes: int) -> int:
    """Vector registers the innermost spatial tiles of a tiled stage keep live: the product
    of the innermost tile of every spatial axis, the vectorized (last) one counted in
    vectors of ``lanes``."""
    spatial = [it for it in st.roots if it.kind == "spatial" and it.extent > 1]
    block = 1
    for i, it in enumerate(spatial):
        f = decisions.get(f"tile:{st.name}.{it.name}")
        inner = f[-1] if f else 1
        block *= -(-inner // lanes) if i == len(spatial) - 1 else inner
    return block


def _apply_tile(s: Schedule, stage: str, decisions: dict, rng: random.Random,
                lanes: int, registers: int, floor: int = 1, loose: frozenset = frozenset()) -> dict:
    """SSRSRS tiling; returns {axis: [loop names per level]} for a fused consumer.

    Two priors shape the tiles sampled fresh (mutations still reach any size):
    - The innermost tile of the last spatial axis becomes the vectorized loop. Sampled
      uniformly, its size is mostly not a multiple of the vector width (or 1: no vector
      at all); in the random rounds of the suite's cases such programs ran far below
      whole-vector tiles at the median, and whole-vector tiles held the best program in
      most cases. So it is whole vectors ``WHOLE_VECTOR_PROB`` of the time
      (as a BLAS picks its micro-kernel width).
    - The innermost tiles of all spatial axes are the register block. In the 200-trial
      logs of the suite's cases, no program whose block exceeds the register file came
      near its case's best, and such programs took a sizeable share of the trials. So
      the tiles are redrawn (up to ``BLOCK_TRIES`` times) until the block
      fits in ``registers`` vectors and, for a reduction, holds at least ``floor``
      accumulators (``fma_block_floor``: enough FMA chains to hide the latency); a draw
      that only fits is kept when none does both.
    - The innermost tiles are at most ``max_innermost(lanes, registers)``.
    Axes named in ``loose`` (symbolic in the deployed kernel) draw shape-independent
    tiles (``sample_loose_factors``)."""
    st = s.state.stage(stage)
    vector_axis = next((it.name for it in reversed(st.roots)
                        if it.kind == "spatial" and it.extent > 1), None)
    parts = {it.name: SPATIAL_LEVELS if it.kind == "spatial" else REDUCE_LEVELS
             for it in st.roots}
    limit = max_innermost(lanes, registers)
    fresh = [it for it in st.roots if it.extent > 1 and not _valid_factors(
        decisions.get(f"tile:{stage}.{it.name}"), it.extent, parts[it.name], limit,
        it.name in loose)]

    def draw(axes: list) -> None:
        for it in axes:
            whole = it.name == vector_axis and rng.random() < WHOLE_VECTOR_PROB
            multiple = lanes if whole else 1
            decisions[f"tile:{stage}.{it.name}"] = (
                sample_loose_factors(it.extent, parts[it.name], rng, registers, limit, multiple)
                if it.name in loose else
                sample_factors(it.extent, parts[it.name], rng, limit, multiple_of=multiple))

    draw([it for it in fresh if it.kind != "spatial"])
    low = floor if any(it.kind == "reduce" for it in st.roots) else 1
    fits = None
    spatial_fresh = [it for it in fresh if it.kind == "spatial"]
    for _ in range(BLOCK_TRIES):
        draw(spatial_fresh)
        block = register_block(st, decisions, lanes)
        if block <= registers:
            if block >= low:
                break
            fits = fits or {k: decisions[k] for k in
                            (f"tile:{stage}.{it.name}" for it in spatial_fresh)}
    else:
        if fits:
            decisions.update(fits)
    levels: list[list[str]] = [[] for _ in range(SPATIAL_LEVELS + REDUCE_LEVELS)]
    spatial_slots, reduce_slots = (0, 1, 3, 5), (2, 4)
    per_axis = {}
    for it in st.roots:
        slots = spatial_slots if it.kind == "spatial" else reduce_slots
        if it.extent == 1:
            levels[slots[0]].append(it.name)
            continue
        names = _split_levels(s, stage, it.name, decisions[f"tile:{stage}.{it.name}"])
        per_axis[it.name] = names
        for slot, n in zip(slots, names):
            levels[slot].append(n)
    s[stage].reorder(*[n for level in levels for n in level])
    return per_axis


def _apply_fuse(s: Schedule, stage: str, consumer: str, decisions: dict,
                rng: random.Random) -> None:
    producer = s.state.stage(stage)
    cons = s.state.stage(consumer)
    level = decide(decisions, f"fuse:{stage}", lambda v: v in (1, 2), lambda: rng.choice((1, 2)))
    outer: list[list[str]] = [[] for _ in range(level)]
    inner: list[str] = []
    spatial = [it for it in producer.roots if it.kind == "spatial"]
    panel = None                           # the outermost loop of the vectorized axis
    for p_it, c_it in zip(spatial, cons.roots):
        f = decisions.get(f"tile:{stage}.{p_it.name}")
        if f is None:                      # extent 1: nothing to tile
            outer[0].append(c_it.name)
            continue
        names = _split_levels(s, consumer, c_it.name, _consumer_factors(f, level))
        for lv in range(level):
            outer[lv].append(names[lv])
        inner.append(names[level])
        panel = names[0]
    if panel is not None and len(outer[0]) > 1 and decide(
            decisions, f"panels:{stage}", lambda v: v in (0, 1), lambda: rng.choice((0, 1))):
        outer[0].remove(panel)             # the panel loop outside the rows
        outer[0].insert(0, panel)
    order = [n for lv in outer for n in lv] + inner
    s[consumer].reorder(*order)
    s[stage].compute_at(s[consumer], outer[-1][-1])


def _consumer_factors(f: list[int], level: int) -> list[int]:
    """Inner factors that cut a consumer axis like the producer's first ``level`` levels:
    [S1, S2*S3] for level 2, [S1*S2*S3] for level 1."""
    if level == 2:
        return [f[0], f[1] * f[2]]
    return [math.prod(f)]

def _apply_dot(s: Schedule, stage: str, decisions: dict, rng: random.Random, target: Target,
               constants: Sequence[str]) -> tuple[str, ...]:
    """The dot block of ``stage``: decision ``tensorize:<stage>`` (1: the target's best
    intrinsic for the dtypes, possible when B is constant; 0: plain vectors) and
    ``dot:<stage>`` ([rows, vectors] of the register block, dividing M and N)."""
    a, b = dot_operands(s.state, stage)  # type: ignore[misc]  # the rule checked it
    op = s.state.stage(stage).op
    (M, N), K = op.shape, op.reduce_axis[0].extent
    intr = best_intrinsic(target.arch, target.features, s.state.op_by_name(a).dtype,
                          s.state.op_by_name(b).dtype, op.dtype)
    can = intr is not None and b in constants and K % intr.group == 0
    use = decide(decisions, f"tensorize:{stage}", lambda v: v in ((0, 1) if can else (0,)),
                 lambda: 1 if can else 0)
    lanes = intr.lanes if use and intr is not None else target.vector_lanes(op.dtype)
    fits = target.vector_registers * 3 // 4
    blocks = [[r, v] for r in range(1, 9) for v in range(1, 5)
              if M % r == 0 and N % (v * lanes) == 0 and r * v <= fits]
    if not blocks:
        raise ScheduleError(f"stage {stage}: N={N} is no multiple of {lanes} lanes")
    rows, vectors = decide(decisions, f"dot:{stage}", lambda v: v in blocks,
                           lambda: rng.choice(blocks))
    return schedule_dot(s, stage, intr.name if use and intr is not None else None, rows,
                        vectors, lanes, prepack=b in constants)


def dot_decisions(workload: Workload, stage: str, target: Target,
                  constants: Sequence[str] = ()) -> dict | None:
    """The dot block's decisions a BLAS would take (``blocking.blocked_decisions`` asks
    for them): the target's intrinsic where it has one and B is constant, the register
    block of ``block_sizes``. None when N is no multiple of the lanes."""
    state = workload.schedule().state
    pair = dot_operands(state, stage)
    if pair is None:
        return None
    op = state.stage(stage).op
    (M, N), K = op.shape, op.reduce_axis[0].extent
    intr = best_intrinsic(target.arch, target.features, state.op_by_name(pair[0]).dtype,
                          state.op_by_name(pair[1]).dtype, op.dtype)
    use = intr is not None and pair[1] in constants and K % intr.group == 0
    lanes = intr.lanes if use and intr is not None else target.vector_lanes(op.dtype)
    if N % lanes:
        return None
    rows, vectors = block_sizes(M, N, lanes, target.vector_registers, rows_first=not (
        use and intr is not None and intr.broadcast_in_registers))
    return {f"tensorize:{stage}": int(use), f"dot:{stage}": [rows, vectors]}


def realize(workload: Workload, sketch: Sketch, decisions: dict | None, rng: random.Random,
            target: Target, constants: Sequence[str] = (),
            loose: frozenset = frozenset()) -> tuple[Schedule, dict]:
    """(schedule, the complete decisions used); ScheduleError if the combination is
    illegal (the caller samples another). A cache-read copy of an input in ``constants``
    may be pre-packed (decision ``prepack:<input>``). ``loose`` holds the ``(stage,
    axis)`` whose size is symbolic in the deployed kernel (``symbolic_axes``): their
    tiles need not divide the extent."""
    decisions = dict(decisions or {})
    s = workload.schedule()
    placed: set = set()
    for a in sketch.actions:
        if isinstance(a, Tile):
            _apply_tile(s, a.stage, decisions, rng,
                        target.vector_lanes(s.state.stage(a.stage).op.dtype),
                        target.vector_registers,
                        fma_block_floor(target, target.vector_registers),
                        frozenset(axis for stage, axis in loose if stage == a.stage))
            placed.add(a.stage)
        elif isinstance(a, FuseInto):
            _apply_fuse(s, a.stage, a.consumer, decisions, rng)
        elif isinstance(a, DotBlock):
            placed.update(_apply_dot(s, a.stage, decisions, rng, target, constants))
        elif isinstance(a, Rfactor):
            apply_rfactor(s, a.stage, decisions, rng, max_innermost(
                target.vector_lanes(s.state.stage(a.stage).op.dtype), target.vector_registers))
            placed.add(a.stage)
        else:
            apply_structural(s, a)
            if isinstance(a, CacheRead) and a.tensor in constants:
                apply_prepack(s, a, decisions, rng, target, placed)
    annotate(s, decisions, rng, target, placed)
    used = {k: v for k, v in decisions.items() if _used(k, s)}
    return s, used


def _used(key: str, s: Schedule) -> bool:
    if key.startswith("prepack:"):
        return True
    stage = key.split(":", 1)[1].split(".", 1)[0]
    return any(st.name == stage for st in s.state.stages) or key.startswith("rf")



__all__ = ["realize", "sample_factors", "register_block", "dot_decisions", "UNROLL_STEPS"]
