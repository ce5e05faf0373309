"""Log tools: show, best, merge (with de-duplication) and distill on a small log."""
from __future__ import annotations

import dataclasses
import re

import pytest

from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput, MeasureResult
from tvmlite.search.records import logs
from tvmlite.search.records.record import (
    RecordError,
    RecordWarning,
    append_record,
    load_records,
    make_record,
)
from tvmlite.search.records.workload import Workload
from tvmlite.target.target import Target

WL = Workload.from_op("matmul", 8, 8, 8)
WL2 = Workload.from_op("add", (4, 4))


def record(wl, cost, factor=2, target=None, tuner="ga"):
    s = wl.schedule()
    C = wl.outputs[0]
    s[C].split(s[C].op.axis[0], factor=factor)
    res = MeasureResult(costs=(cost,), timestamp=1000.0 + factor) if cost else MeasureResult(
        error_no=MeasureErrorNo.RUN_TIMEOUT, error_msg="too slow", timestamp=1000.0)
    return make_record(MeasureInput(wl, tuple(s.steps)), res, target or Target.host(), tuner)


@pytest.fixture()
def small_log(tmp_path):
    other = dataclasses.replace(Target.host(), features=("other_cpu",))
    recs = [record(WL, 3e-6, 2), record(WL, None, 4), record(WL, 1e-6, 4),
            record(WL2, 2e-6, 2, tuner="xgb"), record(WL2, 4e-6, 4),
            record(WL, 5e-7, 2, target=other)]
    path = tmp_path / "log.jsonl"
    for r in recs[:3]:
        append_record(path, r)
    with open(path, "a") as f:
        f.write("this line is not JSON\n")
    for r in recs[3:]:
        append_record(path, r)
    return path, recs


def test_show(small_log):
    path, _ = small_log
    with pytest.warns(RecordWarning, match=":4: skipped"):
        table = logs.show(path)
    lines = table.splitlines()
    assert "GFLOP/s" in lines[0] and "mean ms" in lines[0] and len(lines) == 7
    assert re.match(rf"\s+1\s+matmul {WL.key[:8]}\s+ga\s+[0-9.]+\s+0\.0030\s+NO_ERROR$",
                    lines[1])
    assert lines[2].split()[-1] == "RUN_TIMEOUT" and " - " in lines[2]
    assert re.match(rf"\s+5\s+add {WL2.key[:8]}\s+xgb\s", lines[4])   # line numbers skip 4
    gflops = float(lines[3].split()[4])
    assert gflops == pytest.approx(WL.flops / 1e-6 / 1e9, rel=1e-3)
    with pytest.warns(RecordWarning):
        short = logs.show(path, limit=2).splitlines()
    assert len(short) == 4 and short[-1] == "... 4 more record(s)"
    with pytest.raises(RecordError, match="limit"):
        logs.show(path, limit=0)


def test_best(small_log):
    path, recs = small_log
    with pytest.warns(RecordWarning):
        winners = logs.best(path)
    assert [(w.workload.key, w.key, w.target.features) for w in winners] == [
        (WL.key, recs[2].key, recs[2].target.features),
        (WL2.key, recs[3].key, recs[3].target.features),
        (WL.key, recs[5].key, ("other_cpu",))]


def test_merge_dedupes(small_log, tmp_path):
    path, recs = small_log
    second = tmp_path / "second.jsonl"
    append_record(second, recs[0])                       # already in the first log
    append_record(second, record(WL, 2e-6, 8))           # new
    out = tmp_path / "merged" / "out.jsonl"
    append_record(out, recs[3])                          # already in out
    with pytest.warns(RecordWarning):
        written = logs.merge([path, second, path], out)
    assert written == 5 + 1
    merged = load_records(out)
    assert len(merged) == 7 and len({r.to_line() for r in merged}) == 7
    with pytest.warns(RecordWarning):
        assert logs.merge([path, second], out) == 0
    with pytest.raises(RecordError, match="list of log paths"):
        logs.merge(str(path), out)
    with pytest.raises(FileNotFoundError, match="nope"):
        logs.merge([tmp_path / "nope.jsonl"], out)


def test_distill(small_log, tmp_path):
    path, recs = small_log
    out = tmp_path / "best.jsonl"
    out.write_text("old content that must go\n")
    with pytest.warns(RecordWarning):
        assert logs.distill(path, out) == 3
    kept = load_records(out)                              # no warning: the old line is gone
    assert [r.key for r in kept] == [recs[2].key, recs[3].key, recs[5].key]
    host_only = [r for r in kept if r.target.features == Target.host().features]
    assert sorted(r.workload.key for r in host_only) == sorted([WL.key, WL2.key])
