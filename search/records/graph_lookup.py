"""The record of a graph kernel, for ``tvmlite.build(graph)`` under
``apply_history_best``.

A fused kernel of a graph is an ordinary compute, so its template-free records are
found by its workload key: ``GraphLookup(records)(key, tensors, target)`` keys the
kernel's tensors (``Workload.from_tensors``), takes the best valid record of that key
(``best_record``: this CPU first), and replays its Steps on those same tensors. A
kernel with no record here is asked of the lookup this one shadows (nested contexts),
else the build gives it its default schedule.

A kernel over a symbolic size (a model with ``Graph.sizes``) is found by its newest
dispatch table (``dispatch.latest_table``, what the dynamic search logs): the lookup
returns ``(DispatchKernel, summary)``, which the build compiles into the dispatching
kernel (``build_dispatch``) instead of lowering one schedule."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from tvmlite.graph.dispatch import Lookup
from tvmlite.schedule.schedule import Schedule
from tvmlite.search.records.best import best_record
from tvmlite.search.records.dispatch import (
    DispatchTable,
    build_dispatch,
    dispatch_sources,
    latest_table,
)
from tvmlite.search.records.record import Record
from tvmlite.search.records.workload import Workload

__all__ = ["GraphLookup", "record_summary", "DispatchKernel"]


@dataclass(frozen=True)
class DispatchKernel:
    """A dynamic kernel's tuned variants and table: ``build(target, name)`` is the
    dispatching Module (``name(L, ...)`` calling ``name_v<i>``), ``sources(target, name)``
    its C files' texts for a library export (variants first, the dispatcher last)."""
    workload: Workload
    table: DispatchTable

    def build(self, target: Any, name: str) -> Any:
        return build_dispatch(self.workload, self.table, target, name)

    def sources(self, target: Any, name: str) -> list[str]:
        return dispatch_sources(self.workload, self.table, target, name)


def record_summary(r: Record) -> dict[str, Any]:
    """What a model manifest says of the record a kernel came from."""
    return {"workload": r.workload.key, "tuner": r.tuner, "seed": r.seed,
            "runner": r.runner, "target": r.target.key,
            "seconds": r.result.mean_cost, "timestamp": r.result.timestamp}


class GraphLookup:
    """Template-free records by workload key, as a ``tvmlite.graph.dispatch`` lookup."""

    def __init__(self, records: Sequence[Record], outer: Lookup | None = None):
        self.by_key: dict[str, list[Record]] = {}
        self.records = list(records)
        for r in records:
            d = r.decisions
            if r.result.ok and not (isinstance(d, dict) and "template" in d):
                self.by_key.setdefault(r.workload.key, []).append(r)
        self.outer = outer

    def __call__(self, key: str, tensors: Sequence[Any], target: Any) -> tuple | None:
        wl = Workload.from_tensors(list(tensors), name="graph_kernel")
        if wl.is_dynamic:
            found = latest_table(self.records, wl)
            if found is not None:
                rec, table = found
                return DispatchKernel(wl, table), dict(record_summary(rec), dispatch=[
                    list(r) for r in table.ranges], variants=len(table.variants))
            return self.outer(key, tensors, target) if self.outer is not None else None
        mine = self.by_key.get(wl.key)
        rec = best_record(mine, wl.key, target) if mine else None
        if rec is None:
            return self.outer(key, tensors, target) if self.outer is not None else None
        return Schedule.from_steps(wl.outputs, rec.steps), record_summary(rec)
