"""Explaining a tuning record: the one place that turns a record into an ``Explanation``
(``search.explain(record)``, ``tvmlite explain LOG`` and the tuning summary's bound line
all call it).

A record is rebuilt from its Steps for this machine (as ``replay`` does) and explained
with its own measured time and its workload's flops, so the "measured" GFLOP/s is the
one the log holds. tvmlite core does not import ``search``, so a record is taken by what
it holds (workload, steps, result, mean_cost); ``search.records.explain`` checks that it
is a ``search.Record`` first.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tvmlite.codegen_c import compile_shared
from tvmlite.explain.report import Explanation, build_warnings, explain_schedule
from tvmlite.runtime.module import generate_c
from tvmlite.schedule.schedule import Schedule
from tvmlite.target.target import Target

if TYPE_CHECKING:  # only for annotations: tvmlite core does not import search (module doc)
    from tvmlite.search.records.record import Record

__all__ = ["bound_line", "explain_record", "record_warnings"]

_FIELDS = ("workload", "steps", "result", "mean_cost", "gflops")


def _check(record: Record) -> None:
    if not all(hasattr(record, a) for a in _FIELDS):
        raise TypeError(f"explain: expected a search.Record (from search.load_records or "
                        f"best_record), got {type(record).__name__}")
    if not record.result.ok:
        raise ValueError(f"explain: the record failed ({record.result.error_no.name}); "
                         "explain a record that ran (`tvmlite log show` lists them)")


def explain_record(record: Record, target: Target | None = None, **kwargs: Any) -> Explanation:
    """Explain ``record`` on ``target`` (default: this CPU). Keywords go to
    ``explain_schedule`` (peak=, bandwidth=, measure=, check_spills=, source=)."""
    _check(record)
    wl = record.workload
    s = Schedule.from_steps(wl.outputs, record.steps)
    kwargs.setdefault("source", f"{record.gflops:.2f} GFLOP/s measured, tuner "
                                f"{record.tuner or '-'}, tuned on {record.target.arch}")
    return explain_schedule(s, list(wl.tensors), target or Target.host(), record.mean_cost,
                            flops=wl.flops, name=wl.name, **kwargs)


def bound_line(record: Record, target: Target | None = None) -> str:
    """What bounds the record's kernel, in one line ("compute-bound, 91% of attainable",
    "compute-bound, at the peak (...)"), or "unknown: <why>" when it cannot be rebuilt
    here (a summary line must not fail)."""
    try:
        return explain_record(record, target, check_spills=False).one_line()
    except (ValueError, TypeError, OSError, RuntimeError) as err:
        return f"unknown: {err}"


def record_warnings(record: Record, target: Target | None = None) -> list[str]:
    """The scalar fallbacks and spill warning of the record's kernel as it is built for
    ``target`` (``build_warnings``; what ``TVMLITE_LOG=fallbacks`` prints)."""
    _check(record)
    target = target or Target.host()
    wl = record.workload
    func, source, _ = generate_c(Schedule.from_steps(wl.outputs, record.steps),
                                 list(wl.tensors), target, wl.name)
    return build_warnings(func, source, compile_shared(source, target), target)
