"""Tuning records: line round trip, hostile lines skipped with path:lineno warnings, two
concurrent writers, tolerant and fast loading, and choosing the best record."""
from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput, MeasureResult
from tvmlite.search.records.best import best_first, best_record, best_valid, better
from tvmlite.search.records.record import (
    FORMAT_VERSION,
    MAX_LINE,
    Record,
    RecordError,
    RecordWarning,
    RecordWriter,
    TargetMismatchWarning,
    append_record,
    load_records,
    make_record,
    target_matches,
)
from tvmlite.search.records.workload import Workload
from tvmlite.target.target import Target

REPO = Path(__file__).resolve().parents[3]
WL = Workload.from_op("matmul", 8, 8, 8)
WL2 = Workload.from_op("matmul", 16, 16, 16)


def steps_of(wl: Workload, factor: int) -> tuple:
    s = wl.schedule()
    C = wl.outputs[0]
    i, j = s[C].op.axis
    s[C].split(i, factor=factor)
    s[C].vectorize(j)
    return tuple(s.steps)


def host() -> Target:
    return Target.host()


def other_cpu() -> Target:
    return dataclasses.replace(host(), features=("made_up_feature",))


def rec(cost: float | None = 1e-4, factor: int = 2, wl: Workload = WL, target=None,
        **kw) -> Record:
    res = MeasureResult(costs=(cost, cost * 1.5)) if cost is not None else MeasureResult(
        error_no=MeasureErrorNo.COMPILE_ERROR, error_msg="cc: error: boom")
    return make_record(MeasureInput(wl, steps_of(wl, factor), kw.pop("decisions", None)), res,
                       target or host(), **kw)


def write_lines(path: Path, lines: list) -> None:
    path.write_bytes(b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n"
                              for x in lines))


# -- round trip --------------------------------------------------------------------------

def test_round_trip():
    r = rec(2e-4, factor=4, decisions={"tile": [4, 2], "unroll": 16}, tuner="xgb", seed=7)
    line = r.to_line()
    assert "\n" not in line and json.loads(line)["version"] == FORMAT_VERSION
    back = Record.from_json(json.loads(line))
    assert [s.to_json() for s in back.steps] == [s.to_json() for s in r.steps]
    assert back.result.costs == r.result.costs and back.key == r.key
    assert back.workload == WL and back.target == r.target
    assert (back.decisions, back.tuner, back.seed) == ({"tile": [4, 2], "unroll": 16}, "xgb", 7)
    assert back.result.timestamp == r.result.timestamp
    assert back.to_line() == line
    assert r.gflops == pytest.approx(2 * 8**3 / r.mean_cost / 1e9)


def test_error_record_round_trip():
    r = rec(None, tuner="random")
    back = Record.from_json(json.loads(r.to_line()))
    assert back.result.error_no == MeasureErrorNo.COMPILE_ERROR
    assert back.result.error_msg == "cc: error: boom" and back.result.costs == ()
    assert back.gflops == 0.0 and math.isinf(back.mean_cost)


@pytest.mark.parametrize("bad, pattern", [
    (dict(tuner="x; rm -rf /"), "tuner"),
    (dict(seed=True), "seed"),
    (dict(decisions={"a": float("nan")}), "finite"),
    (dict(decisions=object()), "plain JSON"),
    (dict(decisions=json.loads("[" * 40 + "]" * 40)), "deeper"),
])
def test_bad_record_fields(bad, pattern):
    with pytest.raises(RecordError, match=pattern):
        rec(**bad)


@pytest.mark.parametrize("res, pattern", [
    (MeasureResult(costs=(float("nan"),)), "finite"),
    (MeasureResult(costs=(-1.0,)), "finite number in"),
    (MeasureResult(costs=(0.0,)), "positive"),
    (MeasureResult(costs=()), "empty exactly when"),
    (MeasureResult(costs=(1.0,), error_no=MeasureErrorNo.RUN_TIMEOUT), "empty exactly when"),
])
def test_bad_results(res, pattern):
    with pytest.raises(RecordError, match=pattern):
        make_record(MeasureInput(WL, ()), res, host())


# -- hostile lines ------------------------------------------------------------------------

def mutated(mutate) -> str:
    d = rec(3e-4).to_json()
    mutate(d)
    return json.dumps(d)  # allow_nan: NaN / Infinity literals, as a hostile writer could


def step_with(d, step):
    d["steps"] = [step]


HOSTILE = {
    "unknown step kind": (mutated(lambda d: step_with(d, {"kind": "exec", "stage": "C"})),
                          "unknown step kind"),
    "step naming C code": (mutated(lambda d: step_with(d, {
        "kind": "split", "stage": 'C"; system("rm', "iter": "i", "factor": 4})), "identifier"),
    "NaN cost": (mutated(lambda d: d.__setitem__("costs", [float("nan")])), "finite"),
    "Infinity cost": (mutated(lambda d: d.__setitem__("costs", [float("inf")])), "finite"),
    "negative cost": (mutated(lambda d: d.__setitem__("costs", [-1e-3])), "finite number in"),
    "string cost": (mutated(lambda d: d.__setitem__("costs", ["1e-3"])), "finite number"),
    "too many costs": (mutated(lambda d: d.__setitem__("costs", [1e-3] * 1001)), "at most 1000"),
    "costs with an error": (mutated(lambda d: d.__setitem__(
        "error", {"code": "RUN_TIMEOUT", "msg": ""})), "empty exactly when"),
    "unknown error code": (mutated(lambda d: d.__setitem__(
        "error", {"code": "EVIL", "msg": ""})), "unknown error code"),
    "wrong version": (mutated(lambda d: d.__setitem__("version", 2)),
                      "format version 2, this tvmlite reads 1"),
    "unknown key": (mutated(lambda d: d.__setitem__("exec", "x")), "unknown keys"),
    "bad workload": (mutated(lambda d: d["workload"]["compute"]["ops"][0].__setitem__(
        "dtype", "char*")), "workload: compute op 0"),
    "bad target": (mutated(lambda d: d["target"].__setitem__("cflags", ["-O2; rm -rf /"])),
                   "target: .*cflags"),
    "negative timestamp": (mutated(lambda d: d.__setitem__("timestamp", -5)), "timestamp"),
    "bool seed": (mutated(lambda d: d.__setitem__("seed", True)), "seed"),
    "truncated line": (rec(3e-4).to_line()[:500], "not valid JSON"),
    "deep nesting": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "non-object line": ("[1, 2, 3]", "must be a JSON object"),
    "invalid utf-8": (b'{"version": 1, "x": "\xff\xfe"}', "utf-8"),
    "huge line": ('{"pad": "' + "a" * (MAX_LINE + 10) + '"}', "longer than"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_line_is_skipped(tmp_path, case):
    bad, pattern = HOSTILE[case]
    good = rec(1e-4).to_line()
    log = tmp_path / "log.jsonl"
    write_lines(log, [good, bad, good])
    with pytest.warns(RecordWarning, match=f"{log}:2: skipped: .*{pattern}") as caught:
        records = load_records(log)
    assert len(records) == 2 and all(r.key == records[0].key for r in records)
    assert len([w for w in caught if issubclass(w.category, RecordWarning)]) == 1
    assert all(len(str(w.message)) < 300 + len(str(log)) for w in caught)


def test_a_thousand_garbage_lines_give_a_few_warnings_and_one_summary(tmp_path):
    log = tmp_path / "garbage.jsonl"
    good = rec(1e-4).to_line()
    write_lines(log, [good] + [f"garbage {i}" for i in range(1000)] + [good])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = load_records(log)
    assert len(records) == 2
    msgs = [str(w.message) for w in caught if issubclass(w.category, RecordWarning)]
    assert len(msgs) == 6
    assert [m.split(": skipped")[0] for m in msgs[:5]] == [f"{log}:{n}" for n in range(2, 7)]
    assert "1000 bad lines skipped in all" in msgs[5] and "995 more on lines 7, 8," in msgs[5]


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing_ok"):
        load_records(tmp_path / "nope.jsonl")
    assert load_records(tmp_path / "nope.jsonl", missing_ok=True) == []


def test_writer_and_torn_last_line(tmp_path):
    log = tmp_path / "sub" / "dir" / "log.jsonl"
    with RecordWriter(log) as w:
        w.append(rec(1e-4))
        w.append(rec(2e-4))
    with pytest.raises(RecordError, match="closed"):
        w.append(rec(1e-4))
    with open(log, "ab") as f:   # a writer killed in the middle of a line
        f.write(rec(3e-4).to_line()[:300].encode())
    append_record(log, rec(4e-4))
    with pytest.warns(RecordWarning, match=":3: skipped"):
        records = load_records(log)
    assert [r.result.costs[0] for r in records] == [1e-4, 2e-4, 4e-4]


def test_load_many_lines_parses_the_workload_and_target_once(tmp_path, monkeypatch):
    """What keeps loading a big log cheap, checked as behaviour (no wall-clock bound, which
    fails on a loaded machine): 10k lines of one workload validate and rebuild its compute
    and target once, not once per line."""
    log = tmp_path / "big.jsonl"
    log.write_text((rec(1e-4).to_line() + "\n") * 10_000)
    calls = {"workload": 0, "target": 0}
    wl_from_json, target_from_json = Workload.from_json, Target.from_json

    def count(what, parse):
        def counted(*args, **kw):
            calls[what] += 1
            return parse(*args, **kw)
        return counted
    monkeypatch.setattr(Workload, "from_json", count("workload", wl_from_json))
    monkeypatch.setattr(Target, "from_json", count("target", target_from_json))
    records = load_records(log)
    assert len(records) == 10_000
    assert records[0].workload is records[-1].workload
    assert calls == {"workload": 1, "target": 1}


WRITER = textwrap.dedent("""
    import json, os, sys, time
    from tvmlite.search.measure.inputs import MeasureInput, MeasureResult
    from tvmlite.search.records.record import append_record, make_record
    from tvmlite.search.records.workload import Workload
    from tvmlite.target import Target
    log, go, seed, target = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    target = Target.from_json(json.loads(target))
    wl = Workload.from_op("matmul", 8, 8, 8)
    decisions = {"padding": "x" * 20000}     # long lines, so that interleaving would show
    deadline = time.time() + 60
    while not os.path.exists(go) and time.time() < deadline:
        time.sleep(0.005)
    for i in range(500):
        res = MeasureResult(costs=(1e-4 + i * 1e-7,))
        append_record(log, make_record(MeasureInput(wl, (), decisions), res, target, "random",
                                       seed))
""")


def test_two_processes_append_concurrently(tmp_path):
    log, go = tmp_path / "shared.jsonl", tmp_path / "go"
    target = json.dumps(host().to_json())
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(go), str(seed),
                               target], cwd=REPO, stderr=subprocess.PIPE, text=True)
             for seed in (1, 2)]
    time.sleep(0.5)
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    lines = log.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 1001
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecordWarning)
        records = load_records(log)
    assert len(records) == 1000
    assert sorted(r.seed for r in records) == [1] * 500 + [2] * 500


# -- choosing the best ---------------------------------------------------------------------

def test_target_matches():
    assert target_matches(host(), dataclasses.replace(host(), cores=host().cores + 3))
    assert not target_matches(host(), other_cpu())


def test_best_record_lowest_cost_ignores_errors(tmp_path):
    log = tmp_path / "log.jsonl"
    records = [rec(3e-4, 2), rec(None, 4), rec(1e-4, 8), rec(1e-4, 4), rec(5e-5, 2, WL2)]
    for r in records:
        append_record(log, r)
    best = best_record(log, WL)
    assert best.mean_cost == records[2].mean_cost and best.key == records[2].key  # earliest tie
    assert best_record(records, WL.key).key == records[2].key
    assert best_record(records, WL2).key == records[4].key
    with pytest.raises(RecordError, match="2 workloads"):
        best_record(records)
    assert best_record(records[:3]).key == records[2].key       # one workload: None is fine
    assert best_record([rec(None)], WL) is None
    assert best_record([], None) is None
    with pytest.raises(RecordError, match="workload must be"):
        best_record(records, workload=42)


def test_best_record_target_filter_and_fallback():
    here, there = rec(2e-4, 2), rec(1e-4, 4, target=other_cpu())
    with warnings.catch_warnings():
        warnings.simplefilter("error", TargetMismatchWarning)
        assert best_record([here, there], WL).key == here.key   # faster, but another CPU
        assert best_record([here, there], WL, target=other_cpu()).key == there.key
    with pytest.warns(TargetMismatchWarning, match="made_up_feature"):
        assert best_record([there], WL).key == there.key
    assert best_record([there], WL, fallback=False) is None


def test_best_valid_is_the_one_rule_for_the_best_record():
    """ok results only, real timings before emulated ones, lowest cost, ties to the
    earliest; best_first orders by the same rule, better compares by it."""
    emulated = dataclasses.replace(rec(1e-6, 8), emulated=True)
    slow, fast, tie, bad = rec(3e-4, 2), rec(1e-4, 4), rec(1e-4, 8), rec(None)
    records = [bad, emulated, slow, fast, tie]
    assert best_valid(records) is fast and best_valid([bad]) is None and best_valid([]) is None
    assert best_valid([emulated, bad]) is emulated        # emulated only: still the best
    assert best_first(records) == [fast, tie, slow, emulated]
    assert better(fast, slow) and not better(tie, fast) and not better(bad, None)
    assert better(slow, None) and better(slow, emulated) and not better(emulated, slow)
    assert best_record(records, WL) is fast
