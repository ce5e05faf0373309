"""The comparison experiment: templated against template-free search on one operator, the
same budget and the same seeds.

Which search to use is an empirical question per operator and CPU, and one run of
each says little (both are random), so the experiment runs both for every seed and keeps
each run's best-so-far curve, then summarizes per method the median over seeds with the
min-max spread: final best, and how many trials and seconds it took to get within 90%
of that final best. Seed ``s`` drives both methods' run ``s``; the runs alternate
between methods so a machine that slows down mid-way hurts both alike.

Every run writes its own log (a shared log would let the second method skip candidates
the first one measured), and starts from an empty one: a resumed run's curve would
start in the middle. Drawing the curves is ``tvmlite.plots``'s job, the command and its
report files ``tvmlite.cli.compare``'s.

Map: tuners and tasks (``make_tuner``, ``templated_task``) · Run, MethodSummary,
summarize · run_compare · curves (CurvePoint, MethodCurves, best_by_trial, best_by_time,
band, method_curves) · Experiment, run_experiment.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from tvmlite.checks import check_int
from tvmlite.search.options import TuningOptions
from tvmlite.search.template_free.task import SearchTask
from tvmlite.search.templated import tuners
from tvmlite.search.templated.xgb_tuner import XGBTuner
from tvmlite.target.target import Target

__all__ = ["METHODS", "TUNERS", "REACH", "TIME_POINTS", "CurvePoint", "Experiment",
           "MethodCurves", "MethodSummary", "Run", "band", "best_by_time", "best_by_trial",
           "make_tuner", "method_curves", "run_compare", "run_experiment", "summarize",
           "templated_task"]

METHODS = ("templated", "template-free")
TUNERS = ("xgb", "ga", "random", "grid")
REACH = 0.9          # "within 90% of the final best": how fast a run gets there
TIME_POINTS = 200    # points of a curve against wall time


# -- the two searches --------------------------------------------------------------------

def templated_task(op: str, kwargs: dict, target: Target | str | None = None,
                   constants: Any = ()) -> Any:
    """The template of operator ``op`` at ``kwargs``; ValueError naming the operators
    that have templates when ``op`` has none."""
    import tvmlite.schedules  # noqa: F401 -- registers the library's templates
    from tvmlite.search import templated
    if op not in templated.TEMPLATES:
        raise ValueError(f"operator {op!r} has no schedule template (templates: "
                         f"{', '.join(sorted(templated.TEMPLATES))}); tune it with "
                         "--search template-free")
    return templated.create(op, dict(kwargs), target, constants=constants)


def make_tuner(name: str, task: Any, seed: int = 0, population: int | None = None) -> Any:
    """A templated tuner by its CLI name. ``population`` (when given) is the GA's
    population and the XGB tuner's plan size: the candidates one round considers."""
    if name not in TUNERS:
        raise ValueError(f"tuner {name!r} is unknown: use one of {', '.join(TUNERS)}")
    if name == "xgb":
        return XGBTuner(task, plan_size=population, seed=seed) if population else \
            XGBTuner(task, seed=seed)
    if name == "ga":
        size = max(2, population) if population else 100
        return tuners.GATuner(task, pop_size=size, elite_num=min(3, size), seed=seed)
    return {"random": tuners.RandomTuner, "grid": tuners.GridSearchTuner}[name](task, seed=seed)


# -- results -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    """One tuning run: its method and seed, every trial (search.task.Trial), the best
    record and the error counts."""
    method: str
    seed: int
    log: Path
    trials: tuple
    best: Any                        # search.record.Record or None
    errors: dict = field(default_factory=dict)    # error code -> count, errors only
    seconds: float = 0.0

    @property
    def final_gflops(self) -> float:
        """The run's best GFLOP/s at its end (0 when it found nothing valid)."""
        return max((t.best_gflops for t in self.trials), default=0.0)

    def reached(self, fraction: float = REACH) -> Any:
        """The first trial whose best-so-far is within ``fraction`` of the final best
        (None when the run found nothing valid)."""
        final = self.final_gflops
        if final <= 0:
            return None
        return next(t for t in self.trials if t.best_gflops >= fraction * final)


@dataclass(frozen=True)
class MethodSummary:
    """One method over all seeds: medians, and min/max of the final best."""
    method: str
    runs: int
    final_median: float
    final_min: float
    final_max: float
    trials_to_reach: float | None    # median over runs that found a valid schedule
    seconds_to_reach: float | None
    measured: int
    errors: dict


def summarize(runs: Sequence[Run]) -> list[MethodSummary]:
    """Per method (in METHODS order), the statistics the table and the report show."""
    out = []
    for method in METHODS:
        mine = [r for r in runs if r.method == method]
        if not mine:
            continue
        finals = [r.final_gflops for r in mine]
        hits = [t for t in (r.reached() for r in mine) if t is not None]
        errors: dict = {}
        for r in mine:
            for code, n in r.errors.items():
                errors[code] = errors.get(code, 0) + n
        out.append(MethodSummary(
            method, len(mine), statistics.median(finals), min(finals), max(finals),
            statistics.median(t.index for t in hits) if hits else None,
            statistics.median(t.elapsed for t in hits) if hits else None,
            sum(len(r.trials) for r in mine), errors))
    return out


# -- running -----------------------------------------------------------------------------

def run_compare(op: str, kwargs: dict, trials: int, seeds: int, out_dir: str | Path,
                tuner: str = "xgb", options: Any = None, population: int | None = None,
                on_trial: Callable[[str, int, Any], None] | None = None,
                on_run: Callable[[Run], None] | None = None,
                target: Target | str | None = None) -> list[Run]:
    """Run both methods for seeds 0..seeds-1 with ``trials`` measurements each, logging
    to ``out_dir/<method>_seed<s>.jsonl``. ``options`` (a TuningOptions; its seed is
    replaced by each run's) serve both; ``population`` also sizes the templated tuner
    (see ``make_tuner``). ``on_trial(method, seed, trial)`` sees every trial,
    ``on_run(run)`` every finished run. ``target`` (a Target or a name; default this
    machine) is what both compile for."""
    for name, v in (("trials", trials), ("seeds", seeds)):
        check_int(v, f"compare: {name}", 1)
    if tuner not in TUNERS:
        raise ValueError(f"compare: tuner {tuner!r} is unknown: use one of {', '.join(TUNERS)}")
    options = options or TuningOptions()
    tasks = {"templated": templated_task(op, kwargs, target),
             "template-free": SearchTask(func=op, kwargs=dict(kwargs), target=target)}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    logs = {(m, s): out / f"{m}_seed{s}.jsonl" for s in range(seeds) for m in METHODS}
    for log in logs.values():
        if log.exists() and log.stat().st_size > 0:
            raise ValueError(f"compare: {log} already exists; every run starts from an empty "
                             "log (a resumed curve would start mid-way): pick another --out "
                             "or delete the old logs")
    runs = []
    for seed in range(seeds):
        opts = replace(options, seed=seed)
        for method in METHODS:
            def callback(trial: Any, _m: str = method, _s: int = seed) -> None:
                if on_trial is not None:
                    on_trial(_m, _s, trial)
            start = time.perf_counter()
            if method == "templated":
                res = make_tuner(tuner, tasks[method], seed, population).tune(
                    trials, logs[method, seed], opts, callback)
            else:
                res = tasks[method].tune(trials, logs[method, seed], opts, callback)
            run = Run(method, seed, logs[method, seed], tuple(res.trials), res.best,
                      {k: v for k, v in res.errors.items() if k != "NO_ERROR"},
                      time.perf_counter() - start)
            runs.append(run)
            if on_run is not None:
                on_run(run)
    return runs


# -- curves ------------------------------------------------------------------------------

@dataclass(frozen=True)
class CurvePoint:
    """One point of a method's curve: at ``x`` (a trial or seconds), the median, min and
    max best-so-far GFLOP/s over the seeds that have a value there (NaN: none has)."""
    x: float
    median: float
    low: float
    high: float


@dataclass(frozen=True)
class MethodCurves:
    """A method's best-so-far curves over its runs: against trials and against time."""
    method: str
    runs: int
    by_trial: tuple[CurvePoint, ...]
    by_time: tuple[CurvePoint, ...]


def band(curves: list) -> tuple:
    """Median, min and max over equal-length curves (numpy arrays), at each point over
    the curves that have a value there (NaN: that run had measured nothing yet, which
    is not a best of 0); NaN where none has."""
    stack = np.vstack(curves).astype(float)
    has = ~np.isnan(stack)
    mid, lo, hi = (np.full(stack.shape[1], np.nan) for _ in range(3))
    cols = has.any(axis=0)
    if cols.any():
        sub = stack[:, cols]
        mid[cols] = np.nanmedian(sub, axis=0)
        lo[cols], hi[cols] = np.nanmin(sub, axis=0), np.nanmax(sub, axis=0)
    return mid, lo, hi


def best_by_trial(run: Run, n: int) -> np.ndarray:
    """Best-so-far after trials 1..n; a run that stopped early keeps its last value."""
    values = np.zeros(n)
    for t in run.trials:
        if 1 <= t.index <= n:
            values[t.index - 1] = t.best_gflops
    return np.maximum.accumulate(values)


def best_by_time(run: Run, grid: Any) -> np.ndarray:
    """Best-so-far at each time of ``grid`` (a step function of the trials' ends); NaN
    before the run's first trial ended (nothing measured yet: no value, not 0)."""
    ends = np.array([t.elapsed for t in run.trials] or [0.0])
    best = np.maximum.accumulate(np.array([t.best_gflops for t in run.trials] or [0.0]))
    pos = np.searchsorted(ends, grid, side="right")
    if not run.trials:
        return np.full(len(grid), np.nan)
    return np.where(pos > 0, best[np.maximum(pos - 1, 0)], np.nan)


def _points(x: np.ndarray, curves: list) -> tuple[CurvePoint, ...]:
    mid, lo, hi = band(curves)
    return tuple(CurvePoint(float(a), float(m), float(low), float(high))
                 for a, m, low, high in zip(x, mid, lo, hi))


def method_curves(runs: Sequence[Run]) -> list[MethodCurves]:
    """Per method (in METHODS order) with at least one trial: the band over its runs at
    trials 1..the last, and at ``TIME_POINTS`` times from 0 to the last trial's end."""
    out = []
    for method in METHODS:
        mine = [r for r in runs if r.method == method and r.trials]
        if not mine:
            continue
        n = max(t.index for r in mine for t in r.trials)
        x = np.arange(1, n + 1)
        grid = np.linspace(0.0, max(r.trials[-1].elapsed for r in mine), TIME_POINTS)
        out.append(MethodCurves(method, len(mine),
                                _points(x, [best_by_trial(r, n) for r in mine]),
                                _points(grid, [best_by_time(r, grid) for r in mine])))
    return out


# -- the experiment ----------------------------------------------------------------------

@dataclass(frozen=True)
class Experiment:
    """What a comparison found: every run, the per-method summary and curves."""
    runs: tuple[Run, ...]
    summaries: tuple[MethodSummary, ...]
    curves: tuple[MethodCurves, ...]


def run_experiment(op: str, kwargs: dict, trials: int, seeds: int, out_dir: str | Path,
                   tuner: str = "xgb", options: Any = None, population: int | None = None,
                   on_trial: Callable[[str, int, Any], None] | None = None,
                   on_run: Callable[[Run], None] | None = None,
                   target: Target | str | None = None) -> Experiment:
    """``run_compare`` (same arguments), then its summary and curves."""
    runs = run_compare(op, kwargs, trials, seeds, out_dir, tuner, options, population,
                       on_trial, on_run, target)
    return Experiment(tuple(runs), tuple(summarize(runs)), tuple(method_curves(runs)))
