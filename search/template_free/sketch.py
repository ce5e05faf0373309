"""Sketches: the high-level structure of a schedule, with every number left open.

As in Ansor, sketch rules walk the stages from the output back to the inputs and, for each
stage, every rule whose condition holds proposes one or more ways to continue (a rule may
end the walk's branching for that stage, as always-inline does). A sketch is the sequence
of structural *actions* taken: inline a stage, add a cache-write stage, rfactor, tile a
stage "SSRSRS", fuse a tiled stage into its consumer's tile, block a low-precision dot
around the target's dot-product intrinsic (``tensorize``).

``realize(sketch, decisions, rng)`` turns a sketch into a real Schedule. Every open number
-- tile sizes, where a stage is computed, how many outer loops run in parallel, the
auto-unroll step, whether a constant input's packed copy is made once outside the kernel
-- is read from ``decisions`` (a plain dict, stored in tuning records);
a missing or no-longer-valid decision is sampled with ``rng`` and written back. So random
sampling is ``realize(sketch, {}, rng)`` and a mutation is "change one decision, realize
again": the search never edits Steps directly, and every candidate it builds is a Step
list that the core checked.

Decision keys: ``tile:<stage>.<axis>`` (inner factors, outermost first), ``fuse:<stage>``
(tile level 1 or 2 where it joins its consumer), ``rfactor:<stage>``, ``rfvec:<stage>``
and ``rfser:<stage>`` (factor, vector split and vector chunks per thread inside the
reduction of an rfactor), ``at:<stage>`` (index into the stage's candidate compute
locations; 0 = root, then inline where allowed), ``parallel:<stage>`` (outer loops fused
into the parallel loop), ``unroll:<stage>`` (auto_unroll_max_step), ``prepack:<input>``
(for an input the task declares constant: 0 = pack inside the kernel, as cache_read does,
else the panel width of the layout it is pre-packed in, ``tvmlite.schedule.prepack``),
``tensorize:<stage>`` (1: the dot block uses the target's intrinsic) and ``dot:<stage>``
(its [rows, vectors]).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tvmlite.checks import is_int  # decisions come from logs a user may edit
from tvmlite.schedule.dot_block import block_sizes, dot_operands, schedule_dot
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError, State
from tvmlite.search.records.workload import Workload
from tvmlite.search.template_free import dag
from tvmlite.search.template_free.annotate import annotate
from tvmlite.search.template_free.loose import LOOSE_COVER, sample_loose_factors
from tvmlite.search.template_free.priors import (
    MAX_INNERMOST,
    apply_prepack,
    decide,
    divisors,
    fma_block_floor,
    max_innermost,
    unroll_steps,
)
from tvmlite.target.intrinsics import INTRINSICS, best_intrinsic
from tvmlite.target.target import Target

UNROLL_STEPS = (0, 16, 64, 512)   # unroll_steps() of a 32-register target
WHOLE_VECTOR_PROB = 0.8    # share of sampled vectorized tiles that are whole vectors
BLOCK_TRIES = 16           # redraws of fresh tiles whose register block overflows
SPATIAL_LEVELS = 4         # "SSRSRS": four spatial levels ...
REDUCE_LEVELS = 2          # ... and two reduce levels


# -- actions ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Inline:
    stage: str


@dataclass(frozen=True)
class CacheWrite:
    stage: str


@dataclass(frozen=True)
class CacheRead:
    """A tile-local copy of ``tensor`` for ``stage`` (its place is a compute location)."""
    stage: str
    tensor: str


@dataclass(frozen=True)
class Rfactor:
    stage: str


@dataclass(frozen=True)
class Tile:
    """Multi-level tiling "SSRSRS" of a stage's spatial and reduce axes."""
    stage: str


@dataclass(frozen=True)
class FuseInto:
    """Tile ``consumer`` like ``stage``'s outer levels and compute ``stage`` in that tile."""
    stage: str
    consumer: str


@dataclass(frozen=True)
class DotBlock:
    """The register-blocked GEMM around the target's dot-product intrinsic
    (``tvmlite.schedule.dot_block``) for a ``sum_k acc(A[i, k]) * acc(B[k, j])`` output."""
    stage: str


@dataclass(frozen=True)
class Sketch:
    actions: tuple
    description: str

    def __str__(self) -> str:
        return self.description


# -- rules ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    """A sketch rule: ``condition(state, stage)`` says whether it applies; ``apply``
    returns the action lists it proposes; ``exclusive`` rules stop other rules on the
    stage (always-inline leaves nothing else to decide)."""
    name: str
    condition: Callable[[State, str], bool]
    apply: Callable[[State, str], list]
    exclusive: bool = False


def _tile_with_fusion(state: State, name: str) -> list:
    consumer = dag.fusible_consumer(state, name)  # not None: the rule's condition checked it
    return [[Tile(name), FuseInto(name, consumer)]]  # type: ignore[arg-type]


def _dot_rule(state: State, name: str) -> bool:
    """An output that is a dot of dtypes some intrinsic computes (int8 -> int32, bf16 ->
    float32): whether this target has one, and B is constant, realize decides."""
    pair = dot_operands(state, name) if name in state.outputs else None
    if pair is None:
        return False
    a, b = (state.op_by_name(n).dtype for n in pair)
    acc = state.stage(name).op.dtype
    return any(i.takes(a, b, acc) for i in INTRINSICS.values())


RULES: tuple = (
    Rule("always-inline", dag.strictly_inlinable, lambda s, n: [[Inline(n)]], exclusive=True),
    # not exclusive: the search weighs the intrinsic's block against the tilings below
    Rule("tensorize-dot", _dot_rule, lambda s, n: [[DotBlock(n)]]),
    # before the fused tiling, so a stage fused into its epilogue (a conv + bias + relu)
    # may read its operand packed too
    Rule("add-cache-read",
         lambda s, n: s.stage(n).scope != "local" and bool(dag.packable_inputs(s, n)),
         lambda s, n: [[CacheRead(n, t)] for t in dag.packable_inputs(s, n)]),
    Rule("multi-level-tiling-with-fusion",
         lambda s, n: dag.has_data_reuse(s, n) and dag.fusible_consumer(s, n) is not None,
         _tile_with_fusion, exclusive=True),
    Rule("add-cache-write",
         lambda s, n: dag.has_data_reuse(s, n) and dag.fusible_consumer(s, n) is None
         and s.stage(n).scope != "local",
         lambda s, n: [[CacheWrite(n)]]),
    Rule("multi-level-tiling", lambda s, n: dag.has_data_reuse(s, n),
         lambda s, n: [[Tile(n)]], exclusive=True),
    Rule("add-rfactor", dag.needs_rfactor, lambda s, n: [[Rfactor(n)]]),
)


def _structural(s: Schedule, action: Any) -> None:
    """Apply what changes the stage set, with placeholder numbers (names are all the
    sketch walk needs)."""
    if isinstance(action, Inline):
        s[action.stage].compute_inline()
    elif isinstance(action, CacheWrite):
        s.cache_write(s.tensor(action.stage), "local")
    elif isinstance(action, CacheRead):
        s.cache_read(s.tensor(action.tensor), "local", [s.tensor(action.stage)])
    elif isinstance(action, Rfactor):
        _apply_rfactor(s, action.stage, {}, random.Random(0))


def generate_sketches(workload: Workload, rules: Sequence[Rule] = RULES,
                      max_sketches: int = 16) -> list[Sketch]:
    """Every sketch the rules produce for ``workload`` (at most ``max_sketches``).

    A rule that adds a stage (cache write, rfactor) leaves the walk on the same position,
    so the new stage is considered next, as in Ansor. A stage no rule claims is skipped:
    the annotation step still parallelizes, vectorizes and unrolls it.
    """
    done: list[Sketch] = []
    base = workload.schedule()
    # (schedule so far, its actions, the rules used, the stage position still to visit)
    stack: list[tuple[Schedule, tuple, tuple[str, ...], int]] = [
        (base, (), (), len(base.state.stages) - 1)]
    while stack and len(done) < max_sketches:
        s, actions, used, pos = stack.pop()
        if pos < 0:
            done.append(Sketch(actions, "; ".join(used) or "skip"))
            continue
        name = s.state.stages[pos].name
        if s.state.stage(name).attach is not None or any(
                isinstance(a, (Tile, FuseInto)) and a.stage == name for a in actions):
            stack.append((s, actions, used, pos - 1))
            continue
        branches: list[tuple[Schedule, tuple, tuple[str, ...], int]] = []
        for rule in rules:
            if not rule.condition(s.state, name):
                continue
            for proposal in rule.apply(s.state, name):
                s2 = s.copy()
                for a in proposal:
                    _structural(s2, a)
                grew = len(s2.state.stages) - len(s.state.stages)
                nxt = pos + grew if grew else pos - 1
                branches.append((s2, actions + tuple(proposal), used + (f"{rule.name}({name})",),
                                 nxt))
            if rule.exclusive:
                break
        else:
            branches.append((s, actions, used, pos - 1))   # skip
        stack.extend(reversed(branches))
    return done


# -- realization -------------------------------------------------------------------------

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


def structure(workload: Workload, sketch: Sketch) -> Schedule:
    """``workload``'s schedule with ``sketch``'s stage-changing actions applied (inline,
    cache stages, rfactor) and no numbers decided: the stages a realization tiles."""
    s = workload.schedule()
    for a in sketch.actions:
        if isinstance(a, (Inline, CacheWrite, CacheRead, Rfactor)):
            _structural(s, a)
    return s


def symbolic_axes(workload: Workload, sketch: Sketch) -> frozenset:
    """``(stage, axis)`` of every root axis with a symbolic extent once ``sketch``'s
    stage-changing actions are applied to ``workload`` (the dynamic compute): the axes
    whose tiles are loose (``loose_options``)."""
    s = structure(workload, sketch)
    return frozenset((st.name, it.name) for st in s.state.stages for it in st.roots
                     if not isinstance(it.extent, int))


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
    for p_it, c_it in zip(spatial, cons.roots):
        f = decisions.get(f"tile:{stage}.{p_it.name}")
        if f is None:                      # extent 1: nothing to tile
            outer[0].append(c_it.name)
            continue
        names = _split_levels(s, consumer, c_it.name, _consumer_factors(f, level))
        for lv in range(level):
            outer[lv].append(names[lv])
        inner.append(names[level])
    order = [n for lv in outer for n in lv] + inner
    s[consumer].reorder(*order)
    s[stage].compute_at(s[consumer], outer[-1][-1])


def _consumer_factors(f: list[int], level: int) -> list[int]:
    """Inner factors that cut a consumer axis like the producer's first ``level`` levels:
    [S1, S2*S3] for level 2, [S1*S2*S3] for level 1."""
    if level == 2:
        return [f[0], f[1] * f[2]]
    return [math.prod(f)]


def _apply_rfactor(s: Schedule, stage: str, decisions: dict, rng: random.Random,
                   limit: int = MAX_INNERMOST) -> None:
    """Split the innermost reduce axis, rfactor its inner part into a spatial axis of the
    new ``<stage>_rf`` stage, and cut that axis into (parallel outer, serial chunks inside
    the reduction loops, vector inner)."""
    st = s.state.stage(stage)
    red = [it for it in st.roots if it.kind == "reduce"][-1]
    factor = decide(decisions, f"rfactor:{stage}",
                    lambda v: is_int(v, 1, red.extent),
                    lambda: rng.choice([d for d in divisors(red.extent) if d <= 4096]))
    ko, ki = s[stage].split(red.name, factor=factor)
    rf = s.rfactor(s.tensor(stage), ki, 0)
    rf_stage = s.state.stage(rf.name)
    spatial = rf_stage.roots[0]
    vec = decide(decisions, f"rfvec:{stage}",
                 lambda v: is_int(v, 1, limit) and factor % v == 0,
                 lambda: rng.choice([d for d in divisors(factor) if d <= limit]))
    outer, inner = s[rf.name].split(spatial.name, factor=vec)
    chunks = factor // vec
    serial = decide(decisions, f"rfser:{stage}",
                    lambda v: is_int(v, 1, chunks) and chunks % v == 0,
                    lambda: rng.choice(divisors(chunks)))
    reduces = [it.name for it in rf_stage.roots if it.kind == "reduce"]
    others = [it.name for it in rf_stage.roots[1:] if it.kind == "spatial"]
    # ``serial`` vector chunks inside the reduction: each thread then walks ``serial *
    # vec`` contiguous elements per step of the reduction instead of ``vec`` (a 2-D
    # reduction read in 256-byte pieces a page apart defeats the prefetchers)
    chunk = list(s[rf.name].split(outer, factor=serial)) if serial > 1 else [outer]
    s[rf.name].reorder(chunk[0], *others, *reduces, *chunk[1:], inner)


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
            _apply_rfactor(s, a.stage, decisions, rng, max_innermost(
                target.vector_lanes(s.state.stage(a.stage).op.dtype), target.vector_registers))
            placed.add(a.stage)
        else:
            _structural(s, a)
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


__all__ = ["Sketch", "Rule", "RULES", "generate_sketches", "realize", "sample_factors",
           "symbolic_axes", "structure",
           "UNROLL_STEPS", "register_block", "max_innermost", "unroll_steps", "fma_block_floor",
           "Inline", "CacheRead", "CacheWrite", "Rfactor", "DotBlock", "dot_decisions",
           "Tile", "FuseInto", "ScheduleError"]
