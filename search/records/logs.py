"""Log tools behind ``tvmlite log show|best|merge|distill``: they return values and print
nothing, so the CLI decides how to show them and tests can check them.

Bad lines are skipped with a RecordWarning, as in ``load_records``.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tvmlite.checks import check_int
from tvmlite.errors import TvmliteError
from tvmlite.search.records.best import best_record, best_valid
from tvmlite.search.records.record import (
    Record,
    RecordError,
    RecordWriter,
    iter_records,
    load_records,
)

__all__ = ["show", "best", "merge", "distill", "pick_record", "RecordChoiceError"]


class RecordChoiceError(TvmliteError, LookupError):
    """The record asked for (a line, a workload) is not one the log can give: the user's
    choice, so the command line treats it as a usage error."""

_HEADER = f"{'line':>6}  {'workload':<28} {'tuner':<14} {'GFLOP/s':>10} {'mean ms':>11}  error"


def show(path: str | os.PathLike, limit: int | None = None) -> str:
    """A table of the log's records (the first ``limit`` of them, if given): line number,
    workload name and key prefix, tuner, GFLOP/s, mean milliseconds and error code."""
    check_int(limit, "show: limit", 1, error=RecordError, allow_none=True)
    rows, more = [_HEADER], 0
    for lineno, r in iter_records(path):
        if limit is not None and len(rows) > limit:
            more += 1
            continue
        ok = r.result.ok
        wl = f"{r.workload.name} {r.workload.key[:8]}"
        gflops = f"{r.gflops:10.3f}" if ok else f"{'-':>10}"
        ms = f"{r.mean_cost * 1e3:11.4f}" if ok else f"{'-':>11}"
        rows.append(f"{lineno:>6}  {wl:<28} {r.tuner or '-':<14} {gflops} {ms}  "
                    f"{r.result.error_no.name}")
    if len(rows) == 1:
        rows.append("(no records)")
    if more:
        rows.append(f"... {more} more record(s)")
    return "\n".join(rows)


def best(path: str | os.PathLike) -> list[Record]:
    """The best valid record (``best_valid``: real timings first, then the fastest; ties
    to the earliest) per (workload key, target arch and CPU features), in the order the
    groups first appear."""
    groups: dict[tuple, list[Record]] = {}
    for r in load_records(path):
        if r.result.ok:
            groups.setdefault((r.workload.key, r.target.arch, r.target.features), []).append(r)
    winners = [best_valid(recs) for recs in groups.values()]
    return [r for r in winners if r is not None]     # every group has a valid record


def _identity(r: Record) -> str:
    return hashlib.sha256(r.to_line().encode()).hexdigest()


def merge(inputs: Sequence[str | os.PathLike], out: str | os.PathLike) -> int:
    """Append every valid record of ``inputs`` to ``out``, skipping records identical to
    one already in ``out`` or earlier in ``inputs``; returns how many were written."""
    if isinstance(inputs, (str, bytes, os.PathLike)) or not isinstance(inputs, Sequence):
        raise RecordError(f"merge: inputs must be a list of log paths, got {inputs!r}")
    for p in inputs:
        if not Path(p).is_file():
            raise FileNotFoundError(f"merge: input log {os.fspath(p)!r} does not exist")
    seen = {_identity(r) for r in load_records(out, missing_ok=True)}
    written = 0
    with RecordWriter(out) as writer:
        for p in inputs:
            for r in load_records(p):
                ident = _identity(r)
                if ident not in seen:
                    seen.add(ident)
                    writer.append(r)
                    written += 1
    return written


def distill(path: str | os.PathLike, out: str | os.PathLike) -> int:
    """Write ``best(path)`` to ``out`` (replacing it atomically); returns the count."""
    records = best(path)
    folder = Path(out).parent
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".distill-", suffix=".jsonl")
    try:
        os.chmod(tmp, 0o644)
        with os.fdopen(fd, "w") as f:
            f.writelines(r.to_line() + "\n" for r in records)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(records)


def pick_record(log: str | os.PathLike, workload: str | None = None,
                line: int | None = None) -> tuple[int, Record]:
    """(line, record): the record on ``line`` of ``log``, else the best of ``workload``
    (a name or a key prefix), else the best of the log's only workload."""
    lines = list(iter_records(log))
    if line is not None:
        for n, rec in lines:
            if n == line:
                return n, rec
        raise RecordChoiceError(f"line {line} of {log} holds no valid record (`tvmlite log show "
                          f"{shlex.quote(str(log))}` numbers the lines)")
    found = {r.workload.key: r.workload for _, r in lines}
    if not found:
        raise LookupError(f"{log} holds no valid record")
    names = ", ".join(f"{k[:8]} ({w.name})" for k, w in found.items())
    if workload is not None:
        keys = [k for k, w in found.items() if w.name == workload] or \
            [k for k in found if k.startswith(workload.lower())]
        if len(keys) != 1:
            raise RecordChoiceError(f"--workload {workload!r} matches {len(keys)} workloads of "
                              f"{log}; choose one of: {names}")
    elif len(found) > 1:
        raise RecordChoiceError(f"{log} holds {len(found)} workloads; choose one with --workload "
                          f"NAME: {names}")
    else:
        keys = list(found)
    best = best_record([r for _, r in lines], keys[0])
    if best is None:
        raise LookupError(f"no record of {found[keys[0]].name} in {log} ran correctly; "
                          f"`tvmlite log show {shlex.quote(str(log))}` lists the errors")
    return next(n for n, r in lines if r is best), best
