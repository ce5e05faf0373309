"""tvmlite tune MODEL.onnx: a tiny conv+relu+gemm model tuned under one budget, interrupted
and resumed; the summary agrees with the log; the table and the progress estimate as
pure functions; bad model files and misplaced options are clear errors."""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from tvmlite.cli import model_times  # noqa: E402
from tvmlite.cli.commands import main  # noqa: E402
from tvmlite.cli.model_tune import (  # noqa: E402
    ModelEstimate,
    TaskRow,
    estimate,
    estimate_line,
    is_model_argument,
    summary_table,
    task_rows,
)
from tvmlite.cli.progress import Progress  # noqa: E402
from tvmlite.frontend import from_onnx  # noqa: E402
from tvmlite.search.graph_tasks import extract_tasks  # noqa: E402
from tvmlite.search.records.best import best_record, is_retiming  # noqa: E402
from tvmlite.search.records.record import load_records  # noqa: E402
from tvmlite.search.result import Trial  # noqa: E402
from tvmlite.target.target import Target  # noqa: E402

QUICK = ("--population", "16", "--batch", "2", "--no-pretrained")


def _model_file(tmp_path, batch="N"):
    rng = np.random.default_rng(3)
    nodes = [oh.make_node("Conv", ["data", "W"], ["c"], pads=[1, 1, 1, 1]),
             oh.make_node("Relu", ["c"], ["r"]), oh.make_node("Flatten", ["r"], ["f"]),
             oh.make_node("Gemm", ["f", "FW"], ["logits"], transB=1)]
    g = oh.make_graph(nodes, "tiny",
                      [oh.make_tensor_value_info("data", TP.FLOAT, (batch, 3, 8, 8))],
                      [oh.make_tensor_value_info("logits", TP.FLOAT, None)],
                      [nh.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W"),
                       nh.from_array(rng.standard_normal((5, 256)).astype(np.float32), "FW")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path / "tiny.onnx"
    onnx.save(m, str(path))
    return path


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# -- pure parts --------------------------------------------------------------------------------

ROWS = [TaskRow("conv", ("k0_conv", "k2_conv"), 2, 8, 1e-3),
        TaskRow("matmul", ("k1_matmul",), 1, 4, 2e-3),
        TaskRow("pool", ("k3_pool",), 1, 0, None)]


def test_summary_table_shares_order_and_totals():
    assert estimate(ROWS) == (pytest.approx(4e-3), 1)
    lines = summary_table(ROWS).splitlines()
    assert lines[0].split() == ["#", "task", "kernels", "weight", "trials", "best", "ms",
                                "share"]
    # weight x best: conv 2 ms, matmul 2 ms (ties keep the task order), pool unknown last
    assert lines[1].split() == ["1", "conv", "k0_conv,", "k2_conv", "2", "8", "1", "50.0%"]
    assert lines[2].split() == ["2", "matmul", "k1_matmul", "1", "4", "2", "50.0%"]
    assert lines[3].split() == ["3", "pool", "k3_pool", "1", "0", "-", "-"]
    assert lines[4].split() == ["total", "4", "12", "4"]
    many = TaskRow("conv", tuple(f"k{i}_conv" for i in range(20)), 20, 1, 1e-3, emulated=True)
    text = summary_table([many])
    assert "k0_conv +19 more" in text and "1*" in text and "emulated" in text


def test_summary_table_marks_the_tasks_stopped_early():
    rows = [replace(ROWS[0], stopped=True), *ROWS[1:]]
    lines = summary_table(rows).splitlines()
    assert lines[1].split()[5] == "8~" and lines[2].split()[4] == "4"
    assert any(line.startswith("  ~ stopped early") for line in lines)
    assert "every task stopped early" not in "\n".join(lines)
    assert "every task stopped early" in summary_table([replace(r, stopped=True) for r in rows])
    assert "~" not in summary_table(ROWS)


def test_estimate_line_says_what_is_missing():
    line = estimate_line(ROWS + [TaskRow("gemm", ("k4_gemm",), 1, 3, None)])
    assert line.startswith("estimate: 4 ms")
    assert "1 task(s) not reached: raise --trials" in line
    assert "1 task(s) without a valid trial" in line
    assert estimate_line(ROWS[:2]) == ("estimate: 4 ms, the sum of the kernels' best times "
                                       "x weight")


class _Task:
    def __init__(self, name, weight, flops):
        self.kernel_names, self.weight = [name], weight
        self.workload = type("W", (), {"flops": flops})()


def test_model_estimate_counts_the_whole_budget_and_unknown_tasks():
    tasks = [_Task("k0_conv", 2, 2e6), _Task("k1_matmul", 1, 1e6)]
    est = ModelEstimate(tasks, [TaskRow("conv", ("k0_conv",), 2, 3, 1e-3),
                                TaskRow("matmul", ("k1_matmul",), 1, 0, None)])
    assert est.status() == "model ~2 ms + 1 unknown"        # resumed: the log's best counts
    t = est.see(1, Trial(1, 0.5, 2.0, 2.0, "NO_ERROR"))      # 1e6 flops at 2 GFLOP/s
    assert t.index == 4 and est.latency() == (pytest.approx(2.5e-3), 0)
    assert est.status() == "task 2/2 k1_matmul, model ~2.5 ms"
    est.see(1, Trial(2, 0.6, 0.0, 2.0, "COMPILE_ERROR"))     # an error keeps the best
    assert est.latency()[0] == pytest.approx(2.5e-3)
    assert est.see(0, Trial(4, 0.7, 4.0, 4.0, "NO_ERROR")).index == 6
    assert est.latency()[0] == pytest.approx(2 * 0.5e-3 + 0.5e-3)


def test_a_model_argument_is_told_from_an_operator(tmp_path):
    assert not is_model_argument("matmul") and not is_model_argument(None)
    assert not is_model_argument("no_such_op")        # "unknown operator", as before
    assert is_model_argument("net.onnx") and is_model_argument("models/net")
    assert is_model_argument(str(_model_file(tmp_path)))


# -- the command -------------------------------------------------------------------------------

def test_bad_model_files_and_options_are_clear_errors(capsys, tmp_path):
    log = tmp_path / "l.jsonl"
    code, _, err = _run(capsys, "tune", tmp_path / "missing.onnx", "--trials", 4, "--log", log)
    assert code == 1 and "no model file at" in err
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00not a protobuf\xff" * 10)
    code, _, err = _run(capsys, "tune", junk, "--trials", 4, "--log", log)
    assert code == 1 and "is not a readable ONNX model" in err
    path = _model_file(tmp_path)
    code, _, err = _run(capsys, "tune", path, "--trials", 4, "--log", log)
    assert code == 1 and "symbolic dimension 'N'" in err and "--shape data=1" in err
    code, _, err = _run(capsys, "tune", path, "M=4", "--trials", 4, "--log", log)
    assert code == 2 and "not KEY=VALUE" in err
    code, _, err = _run(capsys, "tune", "matmul", "M=4", "N=4", "K=4", "--shape", "x=1,2",
                        "--trials", 4, "--log", log)
    assert code == 2 and "--shape sets a model input's shape" in err
    assert not log.exists()


def test_tune_interrupt_resume_and_a_summary_that_agrees_with_the_log(capsys, monkeypatch,
                                                                    tmp_path):
    path, log = _model_file(tmp_path), tmp_path / "tiny.jsonl"
    args = ["tune", path, "--trials", 4, "--log", log, "--shape", "data=1,3,8,8", *QUICK]
    seen = []
    original = Progress.__call__

    def interrupt_after_two(self, trial):
        original(self, trial)
        seen.append(trial.index)
        if len(seen) == 2:
            raise KeyboardInterrupt
    monkeypatch.setattr(Progress, "__call__", interrupt_after_two)
    code, _, err = _run(capsys, *args)
    assert code == 130 and "interrupted after 2 new trial(s)" in err
    assert seen == [1, 2] and len(load_records(log)) == 2
    assert "holds 2 of --trials 4" in err and "conv" in err      # the table, from the log
    again = shlex.split(err.strip().splitlines()[-1].removeprefix("resume:"))
    assert again[0] == "tvmlite" and again[-1] == "--resume"
    monkeypatch.setattr(Progress, "__call__", original)

    code, _, err = _run(capsys, *args)                            # not without --resume
    assert code == 2 and "--resume" in err and "2 record(s)" in err
    monkeypatch.setattr(model_times, "REPEAT", 5)
    code, out, err = _run(capsys, *again[1:])
    assert code == 0, err
    assert "holds 4 of --trials 4, 2 new (0 error(s))" in out
    assert "task 2/2 k1_matmul, model ~" in err      # the progress line: matmul went first
    records = load_records(log)
    trials = [r for r in records if not is_retiming(r)]
    keys = [r.key for r in trials]
    assert len(keys) == 4 == len(set(keys))                       # nothing measured twice
    # each task's best was re-timed against its default schedule: re-timings, not trials
    assert {r.key for r in records if is_retiming(r)} <= set(keys)
    tasks = extract_tasks(from_onnx(path, {"data": (1, 3, 8, 8)}))
    rows = task_rows(tasks, str(log), Target.host())
    for t, row in zip(tasks, rows):
        mine = [r for r in records if r.workload.key == t.workload.key and r.result.ok]
        assert row.trials == sum(not is_retiming(r) for r in mine) == 2
        assert row.best == best_record(mine, t.workload.key, Target.host(),
                                       fallback=False).mean_cost
    assert summary_table(rows) in out and estimate_line(rows) in out
    for head in ("layout:   NHWC (given)", "weights:  pre-packed at load time by ",
                 "model:    ", "untuned:  ", "onnxruntime: "):
        assert any(ln.startswith(head) for ln in out.splitlines()), out
    assert f"tvmlite compile {path} --log {log} --shape data=1,3,8,8 --out dist" in out


def test_sigterm_stops_a_model_tuning_with_its_table(tmp_path):
    """One subprocess: a real signal while trials run; the log keeps every record the
    run reported, and the table is printed. The budget is far more than the run reaches
    before its second record: under CI's load a 40-trial run once finished before the
    signal came."""
    path, log = _model_file(tmp_path, batch=1), tmp_path / "t.jsonl"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "tvmlite", "tune", str(path), "--trials",
                             "400", "--log", str(log), *QUICK], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and \
            (not log.exists() or len(log.read_text().splitlines()) < 2):
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    n = len(load_records(log))
    assert 2 <= n < 400 and "terminated after" in err and f"holds {n} of --trials 400" in err
    assert "resume:   tvmlite tune" in err and err.rstrip().endswith("--resume")
