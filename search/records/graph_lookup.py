"""The record of a graph kernel, for ``tvmlite.build(graph)`` under
``apply_history_best``.

A fused kernel of a graph is an ordinary compute, so its template-free records are
found by its workload key: ``GraphLookup(records)(key, tensors, target)`` keys the
kernel's tensors (``Workload.from_tensors``), takes the best valid record of that key
(``best_record``: this CPU first), and replays its Steps on those same tensors. A
kernel with no record here is asked of the lookup this one shadows (nested contexts),
else the build gives it its default schedule."""
from __future__ import annotations

from typing import Any, Sequence

from tvmlite.graph.dispatch import Lookup
from tvmlite.schedule.schedule import Schedule
from tvmlite.search.records.best import best_record
from tvmlite.search.records.record import Record
from tvmlite.search.records.workload import Workload

__all__ = ["GraphLookup", "record_summary"]


def record_summary(r: Record) -> dict[str, Any]:
    """What a model manifest says of the record a kernel came from."""
    return {"workload": r.workload.key, "tuner": r.tuner, "seed": r.seed,
            "runner": r.runner, "target": r.target.key,
            "seconds": r.result.mean_cost, "timestamp": r.result.timestamp}


class GraphLookup:
    """Template-free records by workload key, as a ``tvmlite.graph.dispatch`` lookup."""

    def __init__(self, records: Sequence[Record], outer: Lookup | None = None):
        self.by_key: dict[str, list[Record]] = {}
        for r in records:
            d = r.decisions
            if r.result.ok and not (isinstance(d, dict) and "template" in d):
                self.by_key.setdefault(r.workload.key, []).append(r)
        self.outer = outer

    def __call__(self, key: str, tensors: Sequence[Any], target: Any) -> tuple | None:
        wl = Workload.from_tensors(list(tensors), name="graph_kernel")
        mine = self.by_key.get(wl.key)
        rec = best_record(mine, wl.key, target) if mine else None
        if rec is None:
            return self.outer(key, tensors, target) if self.outer is not None else None
        return Schedule.from_steps(wl.outputs, rec.steps), record_summary(rec)
