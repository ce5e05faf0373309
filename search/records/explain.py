"""``search.explain(record)``: the explanation of a tuning record. The logic lives in
``tvmlite.explain.record``; this entry point checks that it is given a ``search.Record``
(tvmlite core cannot import search to check it) and keeps the names ``explain`` and
``bound_line`` where ``search`` users and ``tvmlite.cli`` find them.
"""
from __future__ import annotations

from typing import Any

from tvmlite.explain.record import bound_line, explain_record
from tvmlite.explain.report import Explanation
from tvmlite.search.records.record import Record
from tvmlite.target.target import Target

__all__ = ["bound_line", "explain"]


def explain(record: Record, target: Target | None = None, **kwargs: Any) -> Explanation:
    """Explain ``record`` on ``target`` (default: this CPU). Keywords go to
    ``tvmlite.explain.explain_schedule`` (peak=, bandwidth=, measure=, check_spills=)."""
    if not isinstance(record, Record):
        raise TypeError(f"explain: expected a search.Record (from search.load_records or "
                        f"best_record), got {type(record).__name__}")
    return explain_record(record, target, **kwargs)
