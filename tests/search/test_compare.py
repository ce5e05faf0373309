"""The comparison experiment on hand-made runs: summary medians, the time to 90%, the
best-so-far curves against trials and time (a seed counts only once it has measured
something), the curve points, and every templated tuner by name."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tvmlite.search.compare import (
    CurvePoint,
    Run,
    band,
    best_by_time,
    best_by_trial,
    make_tuner,
    method_curves,
    summarize,
    templated_task,
)
from tvmlite.search.result import Trial


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


def test_curves_by_trial_and_by_time_hold_the_best_so_far():
    run = _run("template-free", 0, [3, 1, 4])
    assert list(best_by_trial(run, 5)) == [3, 3, 4, 4, 4]   # a short run keeps its last value
    by_time = best_by_time(run, np.array([0.0, 0.5, 1.0, 2.5, 10.0]))
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
    mid, lo, hi = band([best_by_time(r, grid) for r in runs])
    assert np.isnan(mid[0]) and np.isnan(lo[0]) and np.isnan(hi[0])
    assert list(mid[1:]) == [10, 12, 16, 20, 20]      # 12 alone, then median of 12 and 20
    assert list(lo[1:]) == [10, 12, 12, 12, 12] and list(hi[1:]) == [10, 12, 20, 30, 30]
    # the median never falls as seeds join: each is a best-so-far curve
    assert (np.diff(mid[1:]) >= 0).all()


def test_method_curves_are_points_per_method_in_order():
    runs = [_run("template-free", 0, [3, 1, 4]), _run("template-free", 1, [5], step=2.0),
            _run("templated", 0, [1, 2]), _run("templated", 1, [])]
    tpl, free = method_curves(runs)
    assert (tpl.method, tpl.runs, free.method, free.runs) == ("templated", 1, "template-free", 2)
    assert free.by_trial == (CurvePoint(1.0, 4.0, 3.0, 5.0), CurvePoint(2.0, 4.0, 3.0, 5.0),
                             CurvePoint(3.0, 4.5, 4.0, 5.0))
    assert len(free.by_time) == 200 and free.by_time[-1].x == 3.0
    assert math.isnan(free.by_time[0].median) and free.by_time[-1].median == 4.5
    assert method_curves([_run("templated", 0, [])]) == []


def test_every_templated_tuner_by_name():
    task = templated_task("matmul", {"M": 16, "N": 16, "K": 16})
    for name in ("xgb", "ga", "random", "grid"):
        assert make_tuner(name, task, seed=1, population=4).name == name
    with pytest.raises(ValueError, match="use one of xgb, ga, random, grid"):
        make_tuner("anneal", task)
    with pytest.raises(ValueError, match="--search template-free"):
        templated_task("relu", {"shape": (8,)})
