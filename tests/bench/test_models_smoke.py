"""``python -m bench models``: its options, its tables from rows (pure), the docs section it
writes between markers, its toy model files, and that an absent peer is an answer saying
why, not a crash (no timing, no tuning)."""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def _bench_module(name: str):
    """``bench.<name>``, with the ``bench`` package registered from the checkout (pytest
    runs in importlib mode: the repository root is not on sys.path)."""
    if "bench" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "bench", BENCH / "__init__.py", submodule_search_locations=[str(BENCH)])
        pkg = importlib.util.module_from_spec(spec)
        sys.modules["bench"] = pkg
        spec.loader.exec_module(pkg)
    return importlib.import_module(f"bench.{name}")


report = _bench_module("models_report")
onnx_models = _bench_module("onnx_models")
peers = _bench_module("peers")
models = _bench_module("models")

ARGS = argparse.Namespace(threads=2, repeat=25, trials_per_task=64, quick=False,
                          openvino_python="ov", torch_python="pt", tvm_python="tvm",
                          tvm_mcpu="sapphirerapids")
ROWS = [
    {"model": "a", "source": "light zoo", "tasks": 3,
     "tune": {"trials": 192, "seconds": 60.0, "search_s": 20.0, "measure_s": 30.0},
     "untuned": {"seconds": 0.004, "err": 1e-7}, "tuned": {"seconds": 0.002, "err": 1e-7},
     "ort": {"seconds": 0.004}, "openvino": {"seconds": 0.003, "err": 2e-7},
     "openvino-default": {"seconds": 0.001, "precision": "bf16", "err": 3e-2},
     "torch-eager": {"error": "not a torch model"}, "torch-compile": {"error": "not a torch model"},
     "tvm": {"error": "cannot run tvm: No such file"}},
    {"model": "b", "source": "torch.onnx.export", "tasks": 2,
     "tune": {"trials": 128, "seconds": 40.0, "search_s": 10.0, "measure_s": 20.0},
     "untuned": {"seconds": 0.01}, "tuned": {"seconds": 0.008}, "ort": {"seconds": 0.016},
     "openvino": {"seconds": 0.008}, "openvino-default": {"seconds": 0.004, "precision": "bf16"},
     "torch-eager": {"seconds": 0.032}, "torch-compile": {"seconds": 0.016,
                                                          "compile_seconds": 30.0},
     "tvm": {"seconds": 0.009, "trials": 128, "tuning_seconds": 300.0}},
]


def test_help_names_the_options():
    proc = subprocess.run([sys.executable, "-m", "bench", "models", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    for flag in ("--tuned", "--peers", "--trials-per-task", "--openvino-python",
                 "--torch-python", "--tvm-python", "--quick", "--doc", "--cache"):
        assert flag in proc.stdout, flag


def test_speedups_are_the_peers_time_over_the_tuned_one():
    assert report.speedup(ROWS[0], "ort") == 2.0
    assert report.speedup(ROWS[1], "torch-eager") == 4.0
    assert report.speedup(ROWS[0], "tvm") is None           # skipped: no figure
    untuned_only = {k: v for k, v in ROWS[0].items() if k not in ("tuned", "tune")}
    assert report.ours(untuned_only) == "untuned"
    assert report.speedup(untuned_only, "ort") == 1.0


def test_tables_have_a_geomean_and_say_why_a_peer_is_missing():
    latency, speed, tuning, errors = report.tables(ROWS, ARGS)
    assert "TVM MetaSchedule" in latency.columns and latency.rows[0][-1] == "bf16"
    assert any("a, not measured" in n and "cannot run tvm" in n for n in latency.notes)
    gm = speed.rows[-1]
    assert gm[0] == "geometric mean"
    ort = speed.columns.index("x onnxruntime")
    assert abs(gm[ort] - 2.0) < 1e-12                        # sqrt(2.0 * 2.0)
    assert tuning.rows[1][tuning.columns.index("TVM tune s")] == 300.0
    assert errors.rows[0][errors.columns.index("OpenVINO default")] == 3e-2


def test_doc_section_replaces_only_the_text_between_the_markers(tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# B\n\nbefore\n\n{report.BEGIN}\nold\n{report.END}\n\nafter\n")
    res = tmp_path / "models.json"
    tables = [{"title": t.title, "columns": list(t.columns), "rows": [list(r) for r in t.rows],
               "notes": list(t.notes)} for t in report.tables(ROWS, ARGS)]
    res.write_text(json.dumps({"command": "python -m bench models --quick", "commit": "abc",
                               "date": "2026-12-02T17:00", "load": 0.5, "cpu": "target: host",
                               "tvm_mcpu": "sapphirerapids", "tables": tables}))
    report.write_doc(res, page)
    text = page.read_text()
    assert text.startswith("# B\n\nbefore\n\n") and text.endswith("\n\nafter\n")
    assert "old" not in text and "Smoke run" in text and "| geometric mean |" in text
    assert report.BEGIN in (ROOT / "docs" / "benchmarks.md").read_text()


def test_toy_models_are_written_once_and_import(tmp_path):
    from tvmlite.frontend import from_onnx
    for name in ("mobilenet_v2", "bert_encoder"):
        m = onnx_models.model_file(name, True, tmp_path / name, torch_python=None)
        assert m.source == "onnx.helper" and not m.from_torch
        assert from_onnx(m.path).inputs == (m.input_name,)
        x = onnx_models.input_file(m)
        assert np.load(x).shape == m.shape
        stamp = m.path.stat().st_mtime_ns
        assert onnx_models.model_file(name, True, tmp_path / name, None).path.stat() \
            .st_mtime_ns == stamp


def test_an_absent_peer_answers_why(tmp_path):
    worker = _bench_module("model_worker")
    answer = peers.run_answering([sys.executable, "-c", "import no_such_peer_module"],
                                 peers.base_env(), worker.RESULT)
    assert "no_such_peer_module" in answer["error"]
    missing = peers.run_answering([str(tmp_path / "no-python"), "-V"], peers.base_env(),
                                  worker.RESULT)
    assert missing["error"].startswith("cannot run")


def test_the_llvm_cpu_name_is_a_name_or_none():
    cpu = peers.llvm_cpu()
    assert cpu is None or (cpu and " " not in cpu)
    assert peers.cpu_slug()


def test_answers_are_kept_and_fresh_retimes_but_keeps_tunings(tmp_path):
    models = _bench_module("models")
    calls = []

    def measure():
        calls.append(1)
        return {"seconds": 1.0}

    def run(fresh: bool):
        return models.Run(argparse.Namespace(cache=tmp_path, threads=2, fresh=fresh))
    path = tmp_path / "a.json"
    assert run(False).cached(path, {"k": 1}, measure) == {"seconds": 1.0}
    run(False).cached(path, {"k": 1}, measure)
    assert len(calls) == 1                              # reused
    run(False).cached(path, {"k": 2}, measure)          # other settings: measured again
    run(True).cached(path, {"k": 2}, measure)           # --fresh: re-timed
    run(True).cached(path, {"k": 2}, measure, tuning=True)   # a tuning is kept
    assert len(calls) == 3
    assert run(False).cached(tmp_path / "e.json", {}, lambda: {"error": "x"}) == {"error": "x"}
    assert not (tmp_path / "e.json").exists()           # errors are not kept


def test_a_figure_is_the_median_process_and_the_report_gives_the_spread():
    answers = [{"seconds": t, "version": "x"} for t in (0.007, 0.0032, 0.0044)]
    answer = models.across_processes(answers)
    assert answer == {"seconds": 0.0044, "version": "x",
                      "process_seconds": [0.007, 0.0032, 0.0044]}
    failed = models.across_processes([answers[0], {"error": "crashed"}])
    assert failed == {"error": "crashed"}
    rows = [dict(ROWS[1], tvm={**ROWS[1]["tvm"], "process_seconds": [0.0032, 0.009]})]
    latency = report.tables(rows, argparse.Namespace(**vars(ARGS), processes=3))[0]
    assert "each contender in 3 fresh processes" in latency.title
    assert "b, fastest-slowest process, ms -- TVM MetaSchedule 3.2-9" in latency.notes
