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

No split, vectorize, unroll, inlining or compute_at: those can change the summation order
or the rounding of intermediates (an inlined stage is not stored, so not rounded to its
dtype). A stage whose steps the schedule refuses keeps its unscheduled loops.

Map: reference_steps · stage_steps (the rule for one stage) · contiguous_reads.
"""
from __future__ import annotations

from typing import Any, Sequence

from tvmlite.ir.expr import Reduce, TensorRead, Var, walk
from tvmlite.ir.symbolic import is_static
from tvmlite.schedule.state import ScheduleError, Stage, State, initial_state
from tvmlite.schedule.steps import AnnotateStep, ReorderStep, Step

__all__ = ["reference_steps", "stage_steps", "contiguous_reads"]


def reference_steps(workload: Any) -> tuple[Step, ...]:
    """The reference schedule of ``workload`` (anything with ``outputs``: a Workload, or
    a sequence of output tensors): per stage, the reorder and parallel of ``stage_steps``.
    Each stage's steps are replayed here; a stage whose steps raise ScheduleError is left
    unscheduled, so the result always replays."""
    outputs = getattr(workload, "outputs", workload)
    state = initial_state(tuple(outputs))
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


def reference_state(workload: Any) -> State:
    """The loop state the reference schedule gives (for printing and tests)."""
    state = initial_state(tuple(getattr(workload, "outputs", workload)))
    for step in reference_steps(workload):
        state, _ = step.apply(state)
    return state
