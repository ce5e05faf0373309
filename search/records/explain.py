"""``search.explain(record)``: the explanation (``tvmlite.explain``) of a tuning record,
and picking the record to explain from a log (``tvmlite explain LOG``).

A record is rebuilt from its Steps for this machine (as ``replay`` does) and explained
with its own measured time and its workload's flops, so the "measured" GFLOP/s is the
one the log holds.
"""
from __future__ import annotations

from typing import Any

from tvmlite.explain.report import Explanation, explain_schedule
from tvmlite.schedule.schedule import Schedule
from tvmlite.search.records.record import Record
from tvmlite.target.target import Target

__all__ = ["bound_line", "explain"]


def explain(record: Record, target: Target | None = None, **kwargs: Any) -> Explanation:
    """Explain ``record`` on ``target`` (default: this CPU). Keywords go to
    ``tvmlite.explain.explain_schedule`` (peak=, bandwidth=, measure=, check_spills=)."""
    if not isinstance(record, Record):
        raise TypeError(f"explain: expected a search.Record (from search.load_records or "
                        f"best_record), got {type(record).__name__}")
    if not record.result.ok:
        raise ValueError(f"explain: the record failed ({record.result.error_no.name}); "
                         "explain a record that ran (`tvmlite log show` lists them)")
    wl = record.workload
    s = Schedule.from_steps(wl.outputs, record.steps)
    kwargs.setdefault("source", f"{record.gflops:.2f} GFLOP/s measured, tuner "
                                f"{record.tuner or '-'}, tuned on {record.target.arch}")
    return explain_schedule(s, list(wl.tensors), target or Target.host(), record.mean_cost,
                            flops=wl.flops, name=wl.name, **kwargs)


def bound_line(record: Record, target: Target | None = None) -> str:
    """What bounds the record's kernel, in one line ("compute-bound, 91% of attainable"),
    or "unknown: <why>" when it cannot be rebuilt here (a summary line must not fail)."""
    try:
        return explain(record, target, check_spills=False).one_line()
    except (ValueError, TypeError, OSError, RuntimeError) as err:
        return f"unknown: {err}"
