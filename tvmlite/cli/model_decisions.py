"""The whole-graph decisions in ``tvmlite tune MODEL.onnx``'s summary header: the layout
(``graph.decisions``) and, per task, whether the schedule the library will use -- the
log's best record (``best_record``, this CPU's), else the default schedule the task's
first round measured (``task.seed_steps``) -- packs a weight once at load time.

Why read steps rather than build: the tuned build happens inside the model timing; its
schedules are these, and a schedule packs exactly when it has a ``prepack`` (a panel
layout) or ``constant`` (a plain copy) step, so the line costs one read of the log.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tvmlite.graph.decisions import GraphDecisions
from tvmlite.search.records.best import best_record
from tvmlite.search.records.record import records_by_workload
from tvmlite.target.target import Target

__all__ = ["PACK_STEPS", "packs", "packed_tasks", "tune_decision_lines"]

PACK_STEPS = ("prepack", "constant")   # the Step kinds that pack an input at load time


def packs(steps: Sequence[Any]) -> bool:
    """Whether a schedule's ``steps`` pack an input once, at load time."""
    return any(getattr(s, "kind", None) in PACK_STEPS for s in steps)


def packed_tasks(tasks: Sequence[Any], log: str | Path, target: Target) -> list[str]:
    """The kernel names of the tasks whose schedule in the library packs a weight."""
    mine = records_by_workload(log, {t.workload.key for t in tasks}, target)
    out = []
    for t in tasks:
        recs = mine[t.workload.key]
        best = best_record(recs, t.workload.key, target, fallback=False) if recs else None
        steps = best.steps if best is not None else (t.seed_steps[0] if t.seed_steps else ())
        if packs(steps):
            out.append(t.kernel_names[0])
    return out


def tune_decision_lines(decisions: GraphDecisions, tasks: Sequence[Any], log: str | Path,
                        target: Target) -> list[str]:
    """The header's lines: the layout and how it was chosen, the fusions split back
    (``--split auto``: measured before the tasks were extracted), and the tasks whose
    schedules pre-pack their weights."""
    packed = packed_tasks(tasks, log, target)
    few = ", ".join(packed[:4]) + (f" +{len(packed) - 4} more" if len(packed) > 4 else "")
    split = [decisions.split_line()] if decisions.split_measures or decisions.split else []
    return [decisions.layout_line(), *split,
            f"weights:  pre-packed at load time by {len(packed)} of {len(tasks)} task(s)' "
            f"schedules" + (f" ({few})" if packed else "")]
