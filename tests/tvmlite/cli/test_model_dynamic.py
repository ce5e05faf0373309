"""--shape NAME=1,1..512: a range makes a dimension symbolic; the symbolic tuning's
helpers (the lengths timed, the feeds at a size, the per-task lines)."""
from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from tvmlite.cli.model import format_shape, parse_shape
from tvmlite.cli.model_dynamic import lengths_to_time


def test_parse_shape_reads_ranges():
    assert parse_shape("input_ids=1,1..512") == ("input_ids", (1, (1, 512)))
    assert parse_shape("x=1,3,224,224") == ("x", (1, 3, 224, 224))
    assert format_shape((1, (1, 512), 768)) == "1,1..512,768"
    for bad in ("x=1,..4", "x=1,2..", "x=1;2", "x="):
        with pytest.raises(argparse.ArgumentTypeError, match="LO..HI"):
            parse_shape(bad)


def test_lengths_to_time_are_the_ends_and_the_middle():
    assert lengths_to_time(1, 512) == [1, 23, 512]
    assert lengths_to_time(5, 5) == [5]


def test_feeds_at_a_size():
    np = pytest.importorskip("numpy")
    from tvmlite import te
    from tvmlite.cli.model_times import feeds_at
    from tvmlite.graph.ir import Graph, Node, TensorType
    L = te.var("L")
    g = Graph((Node("relu", ("x",), ("y",)),), ("x", "ids"), ("y",),
              {"x": TensorType((1, L, 4), "float32"), "ids": TensorType((1, L), "int64"),
               "y": TensorType((1, L, 4), "float32")}, sizes=(("L", 1, 8),))
    f = feeds_at(g, {"L": 3})
    assert f["x"].shape == (1, 3, 4) and f["ids"].dtype == np.int64 and not f["ids"].any()


# -- the command: a tiny model over a range of L (conftest's symbolic_model) -----------------

QUICK = ("--population", "16", "--batch", "2", "--no-pretrained")


def _run(capsys, *argv):
    from tvmlite.cli.commands import main
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_symbolic_tune_interrupt_resume_and_summary(capsys, monkeypatch, tmp_path,
                                                    symbolic_model):
    """Interrupted in the dynamic task after 3 trials, refused without --resume, resumed
    to the budget: every trial measured once, each task's share reached, the dispatch
    table built, the summary timed at the range's ends and middle."""
    from tvmlite.cli import model_times
    from tvmlite.cli.model_dynamic import task_records
    from tvmlite.cli.progress import Progress
    from tvmlite.frontend import from_onnx
    from tvmlite.search.budget import split_budget
    from tvmlite.search.graph_tasks import extract_tasks
    from tvmlite.search.records.best import is_retiming
    from tvmlite.search.records.dispatch import latest_table
    from tvmlite.search.records.record import load_records
    from tvmlite.target.target import Target
    path, log = symbolic_model, tmp_path / "sym.jsonl"
    args = ["tune", path, "--trials", 6, "--log", log, "--shape", "x=1,1..4,16",
            "--shape", "z=1,16", *QUICK]
    seen, status = [], []
    original = Progress.__call__

    def interrupt_after_three(self, trial):
        original(self, trial)
        seen.append(trial.index)
        status.append(self.status())
        if len(seen) == 3:
            raise KeyboardInterrupt
    monkeypatch.setattr(Progress, "__call__", interrupt_after_three)
    code, _, err = _run(capsys, *args)
    first = [r for r in load_records(log) if not is_retiming(r)]
    n = len(first)   # 3 reported; a dynamic search logs its wave before reporting it
    assert code == 130 and n >= 3 and f"interrupted after {n} new trial(s)" in err, err
    assert seen == [1, 2, 3]
    assert status[0].startswith("task 2/2 k1_matmul (static), model ~")   # static first
    assert status[-1].startswith("task 1/2 k0_matmul (dynamic), model ~")
    assert status[-1].endswith("at L=3")      # the representative size (1, 3, 4) nearest 2
    assert f"holds {n} of --trials 6" in err and "no table" in err, err
    again = shlex.split(err.strip().splitlines()[-1].removeprefix("resume:"))
    assert again[0] == "tvmlite" and again[-1] == "--resume"
    monkeypatch.setattr(Progress, "__call__", original)

    code, _, err = _run(capsys, *args)                            # not without --resume
    assert code == 2 and "--resume" in err and f"{n} record(s)" in err
    monkeypatch.setattr(model_times, "REPEAT", 5)
    code, out, err = _run(capsys, *again[1:])
    assert code == 0, err
    assert f"holds 6 of --trials 6, {6 - n} new: " in out, out + err
    records = load_records(log)
    trials = [r for r in records if not is_retiming(r) and r.workload.sizes is not None
              or r.workload.key == first[0].workload.key]
    keys = [r.key for r in trials if not is_retiming(r)]
    assert len(keys) == 6 == len(set(keys))                       # nothing measured twice
    assert {r.key for r in first} <= set(keys)                    # the first run's count
    graph = from_onnx(path, {"x": (1, (1, 4), 16), "z": (1, 16)})
    tasks = extract_tasks(graph)
    shares = split_budget(tasks, 6)
    assert [len(rs) for rs in task_records(tasks, str(log), Target.host())] == shares
    dyn = next(t for t in tasks if t.dynamic)
    table = latest_table(records, dyn.workload)
    assert table is not None and set(table[1].tuned) == set(dyn.sizes)
    lines = out.splitlines()
    # the dynamic task's row: its trials column, then its dispatch ranges (one range or
    # several, "1..1:v0, 2..:v1", as the measured times decide)
    assert any(f" {shares[0]}/{shares[0]}  " in ln and "dynamic" in ln for ln in lines), out
    ort = importlib.util.find_spec("onnxruntime") is not None
    for m in (1, 2, 4):
        for head in (f"model:    L={m}: ", f"untuned:  L={m}: ", f"onnxruntime: L={m}: "):
            assert any(ln.startswith(head) for ln in lines), out
        peer = next(ln for ln in lines if ln.startswith(f"onnxruntime: L={m}: "))
        assert ("CPU provider" in peer) == ort, peer
    assert (f"compile:  tvmlite compile {path} --log {log} --shape x=1,1..4,16 --shape z=1,16 "
            "--out dist") in out


def test_sigterm_stops_a_symbolic_tuning_with_its_lines(tmp_path, symbolic_model):
    """One subprocess: a real signal while trials run; the log keeps every record the
    run reported, and the task lines and the resume command are printed."""
    from tvmlite.search.records.best import is_retiming
    from tvmlite.search.records.record import load_records
    path, log = symbolic_model, tmp_path / "t.jsonl"
    command = [sys.executable, "-m", "tvmlite", "tune", str(path), "--trials", "60", "--log",
               str(log), "--shape", "x=1,1..8,16", "--shape", "z=1,16", *QUICK]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=dict(os.environ, PYTHONUNBUFFERED="1")) as proc:
        for _ in range(1200):      # the static task's record, then the dynamic search's
            if proc.poll() is not None or (log.exists() and log.read_text().count("\n") >= 3):
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    n = sum(not is_retiming(r) for r in load_records(log))
    assert n >= 3 and f"terminated after {n} new trial(s)" in err
    assert f"holds {n} of --trials 60" in err
    assert "dynamic" in err and "resume:   tvmlite tune" in err
    assert err.rstrip().endswith("--resume")


@pytest.mark.parametrize("shape, message", [
    ("x=1,8..1,16", "1 <= lo <= hi, got (8, 1)"),
    ("x=1,0..8,16", "1 <= lo <= hi, got (0, 8)"),
    ("x=1,1..8", "the model declares 3"),
])
def test_a_bad_shape_range_is_a_clear_error(capsys, tmp_path, shape, message,
                                            symbolic_model):
    path, log = symbolic_model, tmp_path / "bad.jsonl"
    code, _, err = _run(capsys, "tune", path, "--shape", shape, "--shape", "z=1,16",
                        "--trials", 8, "--log", log)
    assert code == 1 and message in err and "Traceback" not in err
    assert not log.exists()
