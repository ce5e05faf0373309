"""The schedule of the correctness reference: fast, and bit-identical to no schedule.

Every measured candidate is checked against its workload's reference outputs, computed
once per workload (per size for a dynamic one). The unscheduled nest is obviously right
but can be very slow: a matmul's ``i, j, k`` nest reads ``B[k, j]`` with a stride of a
whole row in its innermost loop. ``reference_steps`` gives a schedule that changes only
two things, neither of which changes a single output bit:

- **loop order of a reduction**: its reduce axes (in their own order) move to just outside
  the innermost spatial axis when the innermost loop then walks more of the stage's
  buffers contiguously (reads whose last index is exactly that axis, and the output). Each
  output element still accumulates its terms in the same order (``k`` ascending), and the
  C compiler does not reassociate floating point without ``-ffast-math``, so every sum,
  max and min comes out bit for bit the same.
- **parallel** on the outermost spatial loop of every stage: its iterations write disjoint
  output elements, each computed by one thread in the same order.

Reassociation is not the only freedom the compiler has: by default GCC contracts
``a * b + c`` into one fused multiply-add (``-ffp-contract=fast``; Clang's default ``on``
does it within an expression), and whether it does depends on how it vectorized the loop,
which the loop order and the CPU (its FMA units, its vector width) change -- on AMD Zen 4
and Zen 5 the reordered matmul and convolutions differed from the unscheduled ones by an
ulp or two. So the reference is compiled for ``reference_target(target)``: the target
with ``-ffp-contract=off`` (``NO_CONTRACT``), under which every multiply and every add is
one IEEE operation, rounded, in the program's order. Built that way, the reference and the
unscheduled nest are bit-identical by construction on every target and compiler, whatever
each vectorizes. Candidates keep the target's own flags (contraction is part of their
speed) and are compared with the reference within ``tvmlite.testing.tolerance``.

No split, vectorize, unroll, inlining or compute_at: those can change the summation order
or the rounding of intermediates (an inlined stage is not stored, so not rounded to its
dtype). A stage whose steps the schedule refuses keeps its unscheduled loops.

Map: reference_steps · stage_steps (the rule for one stage) · contiguous_reads ·
reference_target (the flags it is compiled with) · reference_state.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Sequence

from tvmlite.ir.expr import Reduce, TensorRead, Var, walk
from tvmlite.ir.symbolic import is_static
from tvmlite.schedule.state import ScheduleError, Stage, State, initial_state
from tvmlite.schedule.steps import AnnotateStep, ReorderStep, Step
from tvmlite.target.target import Target
from tvmlite.te.tensor import Tensor

if TYPE_CHECKING:  # the records package imports this one
    from tvmlite.search.records.workload import Workload

__all__ = ["reference_steps", "stage_steps", "contiguous_reads", "reference_target",
           "NO_CONTRACT"]

NO_CONTRACT = "-ffp-contract=off"   # GCC and Clang: no fused multiply-add unless written


def reference_target(target: Target) -> Target:
    """``target`` with floating-point contraction off (``NO_CONTRACT`` appended to its
    cflags): what the reference, and any build compared with it bit for bit, is compiled
    for. A later ``-ffp-contract`` flag wins, so this one goes last."""
    if target.cflags[-1:] == (NO_CONTRACT,):
        return target
    return dataclasses.replace(target, cflags=(*target.cflags, NO_CONTRACT))


def _outputs(workload: Workload | Sequence[Tensor]) -> tuple[Tensor, ...]:
    """The output tensors: a Workload's (or anything's with ``outputs``), or the sequence."""
    return tuple(workload) if isinstance(workload, Sequence) else tuple(workload.outputs)


def reference_steps(workload: Workload | Sequence[Tensor]) -> tuple[Step, ...]:
    """The reference schedule of ``workload`` (anything with ``outputs``: a Workload, or
    a sequence of output tensors): per stage, the reorder and parallel of ``stage_steps``.
    Each stage's steps are replayed here; a stage whose steps raise ScheduleError is left
    unscheduled, so the result always replays."""
    state = initial_state(_outputs(workload))
    steps: list[Step] = []
    for stage in state.stages:
        mine = stage_steps(stage)
        try:
            trial = state
            for step in mine:
                trial, _ = step.apply(trial)
        except ScheduleError:
            continue
        state = trial
        steps.extend(mine)
    return tuple(steps)


def stage_steps(stage: Stage) -> tuple[Step, ...]:
    """Reorder (if it makes the innermost loop more contiguous) and parallel for one
    unscheduled root stage; () for a stage already placed or transformed."""
    if stage.attach is not None or stage.relations or stage.leaves != stage.roots:
        return ()
    spatial = [it for it in stage.leaves if it.kind == "spatial"]
    reduce = [it for it in stage.leaves if it.kind == "reduce"]
    steps: list[Step] = []
    order = [it.name for it in stage.leaves]
    if spatial and reduce:
        inner_s, inner_r = spatial[-1].name, reduce[-1].name
        reads = contiguous_reads(stage)
        # the output is contiguous in its last axis, i.e. the innermost spatial one
        if reads.get(inner_s, 0) + 1 > reads.get(inner_r, 0):
            order = [it.name for it in spatial[:-1]] + [it.name for it in reduce] + [inner_s]
            steps.append(ReorderStep(stage.name, tuple(order)))
    outer = _parallel_axis(stage, order)
    if outer is not None:
        steps.append(AnnotateStep(stage.name, outer, "parallel"))
    return tuple(steps)


def _parallel_axis(stage: Stage, order: Sequence[str]) -> str | None:
    """The outermost spatial loop, if no reduce loop encloses it (one parallel region per
    reduce iteration would cost more than it saves). Leading loops of static extent 1
    (a batch of one) are skipped, so the parallel loop is one that has work to share."""
    kinds = {it.name: it for it in stage.leaves}
    for name in order:
        it = kinds[name]
        if it.kind == "reduce":
            return None
        if not (is_static(it.extent) and int(it.extent) == 1):
            return name
    return None


def contiguous_reads(stage: Stage) -> dict[str, int]:
    """For each axis name, how many distinct reads in the stage's body have exactly that
    axis variable as their last index (so walk memory contiguously along it)."""
    body = stage.op.body
    source = body.source if isinstance(body, Reduce) else body
    seen: set = set()
    counts: dict[str, int] = {}
    for node in walk(source):
        if not isinstance(node, TensorRead) or not node.indices:
            continue
        key = (id(node.tensor), str(node.indices))
        if key in seen:
            continue
        seen.add(key)
        last = node.indices[-1]
        if type(last) is Var:   # a loop variable itself, not a size or an expression
            counts[last.name] = counts.get(last.name, 0) + 1
    return counts


def reference_state(workload: Workload | Sequence[Tensor]) -> State:
    """The loop state the reference schedule gives (for printing and tests)."""
    state = initial_state(_outputs(workload))
    for step in reference_steps(workload):
        state, _ = step.apply(state)
    return state
