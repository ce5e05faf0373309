"""`tvmlite compare`: both searches with the same budget and seeds write a valid PNG
(made by matplotlib), a CSV of the curves, a report with the best loop nests, and print
the table (on hand-made runs too)."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tvmlite import cli
from tvmlite.cli.compare import CSV_COLUMNS, Run, summarize, text_table
from tvmlite.search.records.record import load_records
from tvmlite.search.result import Trial

ROOT = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ARGS = ["matmul", "M=16", "N=16", "K=16", "--trials", "4", "--population", "8"]


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")   # see test_cli.py: a shared 2-core machine


def test_compare_writes_curves_plot_and_report(capsys, tmp_path):
    out = tmp_path / "report"
    code = cli.main(["compare", *ARGS, "--seeds", "2", "--out", str(out), "--quiet"])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    assert "templated (xgb)" in stdout and "template-free" in stdout and "report.md" in stdout

    png = (out / "curves.png").read_bytes()
    assert png.startswith(PNG_SIGNATURE) and b"Matplotlib" in png[:4096]

    with open(out / "curves.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert {(r["method"], r["seed"]) for r in rows} == \
        {(m, s) for m in ("templated", "template-free") for s in ("0", "1")}
    for method in ("templated", "template-free"):
        for seed in ("0", "1"):
            curve = [r for r in rows if r["method"] == method and r["seed"] == seed]
            assert [int(r["trial"]) for r in curve] == [1, 2, 3, 4]
            best = [float(r["best_gflops"]) for r in curve]
            times = [float(r["elapsed_s"]) for r in curve]
            assert best == sorted(best) and times == sorted(times)

    report = (out / "report.md").read_text()
    for part in ("| templated (xgb) |", "| template-free |", "## Errors", "## Best schedules",
                 "def matmul(A: float32[16, 16]", "90%"):
        assert part in report, part

    for method in ("templated", "template-free"):   # one log per method and seed
        for seed in (0, 1):
            records = load_records(out / f"{method}_seed{seed}.jsonl")
            assert len(records) == 4 and {r.seed for r in records} == {seed}
    assert {r.tuner for r in load_records(out / "templated_seed0.jsonl")} == {"xgb"}

    code = cli.main(["compare", *ARGS, "--seeds", "1", "--out", str(out), "--quiet"])
    assert code == 1 and "already exists" in capsys.readouterr().err


def test_compare_as_a_subprocess(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "tvmlite", "compare", "matmul", "M=16",
                           "N=16", "K=16", "--trials", "2", "--seeds", "1", "--population", "8",
                           "--tuner", "random", "--out", str(tmp_path / "cmp")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "templated (random)" in proc.stdout and "template-free seed 0" in proc.stderr
    assert (tmp_path / "cmp" / "curves.png").read_bytes().startswith(PNG_SIGNATURE)


# -- the table, on hand-made runs (the experiment's own tests: tests/search/test_compare.py)

def _run(method, seed, curve, step=1.0, errors=None):
    trials = tuple(Trial(i + 1, step * (i + 1), g, max(curve[:i + 1]), "NO_ERROR")
                   for i, g in enumerate(curve))
    return Run(method, seed, Path("x.jsonl"), trials, None, errors or {})


def test_text_table_names_the_tuner_and_counts_errors():
    runs = [_run("templated", 0, [1, 5, 9, 10]), _run("templated", 1, [2, 2, 2, 20], step=2.0),
            _run("templated", 2, [0, 0, 0, 0], errors={"RUN_TIMEOUT": 4}),
            _run("template-free", 0, [10, 10, 10, 10])]
    table = text_table(summarize(runs), "ga")
    assert "templated (ga)" in table and "4/12" in table and "10.00 [0.00-20.00]" in table
