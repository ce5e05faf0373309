"""Sketches: the high-level structure of a schedule, with every number left open.

As in Ansor, sketch rules walk the stages from the output back to the inputs and, for each
stage, every rule whose condition holds proposes one or more ways to continue (a rule may
end the walk's branching for that stage, as always-inline does). A sketch is the sequence
of structural *actions* taken: inline a stage, add a cache-write stage, rfactor, tile a
stage "SSRSRS", fuse a tiled stage into its consumer's tile, block a low-precision dot
around the target's dot-product intrinsic (``tensorize``).

This module is what a sketch *is* (the actions, the rules, the walk) and the stage set its
actions make (``structure``); ``realize.py`` turns a sketch and its decisions into a
concrete Schedule. Rfactor lives here because it adds a stage the walk must visit next, so
the walk applies it (with placeholder numbers) as the realization does.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tvmlite.checks import is_int  # decisions come from logs a user may edit
from tvmlite.ir.expr import TensorRead, Var, walk
from tvmlite.schedule.dot_block import dot_operands
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import State
from tvmlite.search.records.workload import Workload
from tvmlite.search.template_free import dag
from tvmlite.search.template_free.priors import MAX_INNERMOST, decide, divisors
from tvmlite.target.intrinsics import INTRINSICS
from tvmlite.te.tensor import PlaceholderOp

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
    stage (always-inline leaves nothing else to decide); the sketches a ``later`` rule
    took part in come after all others (the first sketch is a model's untuned kernel,
    ``graph/kernel.py``'s ``blocked_schedule``, and an option still on trial stays out of
    it)."""
    name: str
    condition: Callable[[State, str], bool]
    apply: Callable[[State, str], list]
    exclusive: bool = False
    later: bool = False


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


def row_operand(state: State, name: str) -> str | None:
    """The input a GEMM-like stage reads as A[i, k] (matmul, dense, batch_matmul): read
    with plain loop variables only (no window, so no convolution), a reduce axis in its
    last index, another spatial axis but not the innermost one (the vectorized axis,
    along which A is broadcast). None unless every input of the stage is still a
    placeholder, so the walk packs A before B and a sketch is not found twice (A then B,
    B then A)."""
    if state.stage(name).scope == "local" or not dag.has_data_reuse(state, name):
        return None
    op = state.stage(name).op
    spatial = [iv.name for iv in op.axis if iv.extent > 1]
    reduce = {iv.name for iv in op.reduce_axis}
    if len(spatial) < 2 or not reduce or not all(
            isinstance(t.op, PlaceholderOp) for t in op.input_tensors):
        return None
    reads = [n for n in walk(op.body) if isinstance(n, TensorRead)]
    if not all(isinstance(i, Var) for r in reads for i in r.indices):
        return None
    for r in reads:
        used = {i.name for i in r.indices}  # type: ignore[attr-defined]
        if (r.indices[-1].name in reduce and spatial[-1] not in used  # type: ignore[attr-defined]
                and used & set(spatial[:-1])):
            return r.tensor.name
    return None


RULES: tuple = (
    Rule("always-inline", dag.strictly_inlinable, lambda s, n: [[Inline(n)]], exclusive=True),
    # not exclusive: the search weighs the intrinsic's block against the tilings below
    Rule("tensorize-dot", _dot_rule, lambda s, n: [[DotBlock(n)]]),
    # before the fused tiling, so a stage fused into its epilogue (a conv + bias + relu)
    # may read its operand packed too
    Rule("add-cache-read",
         lambda s, n: s.stage(n).scope != "local" and bool(dag.packable_inputs(s, n)),
         lambda s, n: [[CacheRead(n, t)] for t in dag.packable_inputs(s, n)]),
    # A's rows packed inside the kernel as a BLAS packs its mc x kc block; with the rule
    # above on the revisit, a sketch packs A, B, both or neither and the search decides
    Rule("pack-a-panels", lambda s, n: row_operand(s, n) is not None,
         lambda s, n: [[CacheRead(n, str(row_operand(s, n)))]],  # the condition checked it
         later=True),  # measured slower than B's panel alone (docs/benchmarks.md)
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


def apply_structural(s: Schedule, action: Any) -> None:
    """Apply what changes the stage set, with placeholder numbers (names are all the
    sketch walk needs)."""
    if isinstance(action, Inline):
        s[action.stage].compute_inline()
    elif isinstance(action, CacheWrite):
        s.cache_write(s.tensor(action.stage), "local")
    elif isinstance(action, CacheRead):
        s.cache_read(s.tensor(action.tensor), "local", [s.tensor(action.stage)])
    elif isinstance(action, Rfactor):
        apply_rfactor(s, action.stage, {}, random.Random(0))


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
                    apply_structural(s2, a)
                grew = len(s2.state.stages) - len(s.state.stages)
                nxt = pos + grew if grew else pos - 1
                branches.append((s2, actions + tuple(proposal), used + (f"{rule.name}({name})",),
                                 nxt))
            if rule.exclusive:
                break
        else:
            branches.append((s, actions, used, pos - 1))   # skip
        stack.extend(reversed(branches))
    late = tuple(f"{r.name}(" for r in rules if r.later)
    return sorted(done, key=lambda sk: any(n in sk.description for n in late))


def structure(workload: Workload, sketch: Sketch) -> Schedule:
    """``workload``'s schedule with ``sketch``'s stage-changing actions applied (inline,
    cache stages, rfactor) and no numbers decided: the stages a realization tiles."""
    s = workload.schedule()
    for a in sketch.actions:
        if isinstance(a, (Inline, CacheWrite, CacheRead, Rfactor)):
            apply_structural(s, a)
    return s


def symbolic_axes(workload: Workload, sketch: Sketch) -> frozenset:
    """``(stage, axis)`` of every root axis with a symbolic extent once ``sketch``'s
    stage-changing actions are applied to ``workload`` (the dynamic compute): the axes
    whose tiles are loose (``loose_options``)."""
    s = structure(workload, sketch)
    return frozenset((st.name, it.name) for st in s.state.stages for it in st.roots
                     if not isinstance(it.extent, int))


def apply_rfactor(s: Schedule, stage: str, decisions: dict, rng: random.Random,
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



__all__ = ["Sketch", "Rule", "RULES", "generate_sketches", "symbolic_axes", "structure",
           "apply_structural", "apply_rfactor", "row_operand",
           "Inline", "CacheRead", "CacheWrite", "Rfactor", "DotBlock", "Tile", "FuseInto"]
