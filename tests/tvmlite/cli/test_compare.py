"""`tvmlite compare`: both searches with the same budget and seeds write a valid PNG
(made by matplotlib), a CSV of the curves, a report with the best loop nests, and print
the table; the statistics behind them on hand-made runs."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tvmlite.search.records.record import load_records
from tvmlite.search.result import Trial

from tvmlite import cli
from tvmlite.cli.compare import (CSV_COLUMNS, Run, _band, _by_time, _by_trial, make_tuner,
                                 summarize, templated_task, text_table)

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


# -- the statistics, on hand-made runs --------------------------------------------------------

def _run(method, seed, curve, step=1.0, errors=None):
    trials = tuple(Trial(i + 1, step * (i + 1), g, max(curve[:i + 1]), "NO_ERROR")
                   for i, g in enumerate(curve))
    return Run(method, seed, Path("x.jsonl"), trials, None, errors or {})


def test_summary_medians_and_time_to_90_percent():
    runs = [_run("templated", 0, [1, 5, 9, 10]), _run("templated", 1, [2, 2, 2, 20], step=2.0),
            _run("templated", 2, [0, 0, 0, 0], errors={"RUN_TIMEOUT": 4}),
            _run("template-free", 0, [10, 10, 10, 10])]
    assert runs[0].reached().index == 3            # 9 >= 0.9 * 10
    assert runs[1].reached().elapsed == 8.0
    assert runs[2].reached() is None
    tpl, free = summarize(runs)
    assert (tpl.final_median, tpl.final_min, tpl.final_max) == (10, 0, 20)
    assert tpl.trials_to_reach == 3.5 and tpl.seconds_to_reach == 5.5
    assert tpl.errors == {"RUN_TIMEOUT": 4} and tpl.measured == 12
    assert free.trials_to_reach == 1
    table = text_table([tpl, free], "ga")
    assert "templated (ga)" in table and "4/12" in table and "10.00 [0.00-20.00]" in table


def test_curves_by_trial_and_by_time_hold_the_best_so_far():
    run = _run("template-free", 0, [3, 1, 4])
    assert list(_by_trial(run, 5)) == [3, 3, 4, 4, 4]     # a short run keeps its last value
    by_time = _by_time(run, np.array([0.0, 0.5, 1.0, 2.5, 10.0]))
    assert np.isnan(by_time[:2]).all()           # nothing measured yet: no value, not 0
    assert list(by_time[2:]) == [3, 3, 4]


def test_wall_time_median_is_over_the_seeds_that_have_measured_something():
    """Seed 0 ends its first trial at 1 s, seed 1 at 4 s, seed 2 at 6 s: until a seed has
    measured something it is left out of the median (counting it as 0 made the curve
    halve and jump), and before any seed has, there is no value at all."""
    runs = [_run("template-free", 0, [10, 10, 12], step=1.0),
            _run("template-free", 1, [20, 20], step=4.0),
            _run("template-free", 2, [30], step=6.0)]
    grid = np.array([0.5, 1.0, 3.0, 4.0, 6.0, 9.0])
    mid, lo, hi = _band([_by_time(r, grid) for r in runs])
    assert np.isnan(mid[0]) and np.isnan(lo[0]) and np.isnan(hi[0])
    assert list(mid[1:]) == [10, 12, 16, 20, 20]      # 12 alone, then median of 12 and 20
    assert list(lo[1:]) == [10, 12, 12, 12, 12] and list(hi[1:]) == [10, 12, 20, 30, 30]
    # the median never falls as seeds join: each is a best-so-far curve
    assert (np.diff(mid[1:]) >= 0).all()


def test_every_templated_tuner_by_name():
    task = templated_task("matmul", {"M": 16, "N": 16, "K": 16})
    for name in ("xgb", "ga", "random", "grid"):
        assert make_tuner(name, task, seed=1, population=4).name == name
    with pytest.raises(ValueError, match="use one of xgb, ga, random, grid"):
        make_tuner("anneal", task)
    with pytest.raises(ValueError, match="--search template-free"):
        templated_task("relu", {"shape": (8,)})
