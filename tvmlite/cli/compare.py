"""Templated against template-free search on one operator, same budget, same seeds.

Which search to use is an empirical question per operator and CPU, and one run of
each says little (both are random), so ``compare`` runs both for every seed and keeps
each run's best-so-far curve, then reports per method the median over seeds with the
min-max spread: final best, and how many trials and seconds it took to get within 90%
of that final best. Seed ``s`` drives both methods' run ``s``; the runs alternate
between methods so a machine that slows down mid-way hurts both alike.

Every run writes its own log in the output folder (a shared log would let the second
method skip candidates the first one measured), and starts from an empty one: a
resumed run's curve would start in the middle.

Map: tuners and tasks (``make_tuner``, ``templated_task``) · Run, MethodSummary ·
run_compare · outputs (write_csv, plot, report_markdown, text_table) · compare.
"""
from __future__ import annotations

import csv
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tvmlite.checks import check_int
from tvmlite.target.target import Target
from tvmlite.search.records.workload import Workload
from tvmlite.search.records.explain import bound_line
from tvmlite.schedule.schedule import Schedule
from tvmlite.search.template_free.task import SearchTask
from tvmlite.search.options import TuningOptions
from tvmlite.search.templated.xgb_tuner import XGBTuner
from tvmlite.search.templated import tuners

__all__ = [
    "CSV_COLUMNS",
    "METHODS",
    "TUNERS",
    "CompareResult",
    "MethodSummary",
    "Run",
    "compare",
    "make_tuner",
    "plot",
    "report_markdown",
    "run_compare",
    "summarize",
    "templated_task",
    "text_table",
    "write_csv",
]

METHODS = ("templated", "template-free")
TUNERS = ("xgb", "ga", "random", "grid")
CSV_COLUMNS = ("method", "seed", "trial", "elapsed_s", "best_gflops")
REACH = 0.9


# -- the two searches --------------------------------------------------------------------

def templated_task(op: str, kwargs: dict, target: Any = None, constants: Any = ()) -> Any:
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
        return XGBTuner(task, seed=seed, **({"plan_size": population}
                                                   if population else {}))
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
                on_run: Callable[[Run], None] | None = None, target: Any = None) -> list[Run]:
    """Run both methods for seeds 0..seeds-1 with ``trials`` measurements each, logging
    to ``out_dir/<method>_seed<s>.jsonl``. ``options`` (a TuningOptions; its seed is
    replaced by each run's) serve both; ``population`` also sizes the templated tuner
    (see ``make_tuner``). ``on_trial(method, seed, trial)`` sees every trial,
    ``on_run(run)`` every finished run. ``target`` (a Target or a name; default this
    machine) is what both compile for."""
    from dataclasses import replace

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


# -- outputs -----------------------------------------------------------------------------

def write_csv(runs: Sequence[Run], path: str | Path) -> None:
    """One row per trial: method, seed, trial, elapsed seconds, best GFLOP/s so far."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for r in runs:
            for t in r.trials:
                w.writerow([r.method, r.seed, t.index, f"{t.elapsed:.6f}",
                            f"{t.best_gflops:.6g}"])


def _band(curves: list) -> tuple:
    """Median, min and max over equal-length curves (numpy arrays), at each point over
    the curves that have a value there (NaN: that run had measured nothing yet, which
    is not a best of 0); NaN where none has."""
    import numpy as np
    stack = np.vstack(curves).astype(float)
    has = ~np.isnan(stack)
    mid, lo, hi = (np.full(stack.shape[1], np.nan) for _ in range(3))
    cols = has.any(axis=0)
    if cols.any():
        sub = stack[:, cols]
        mid[cols] = np.nanmedian(sub, axis=0)
        lo[cols], hi[cols] = np.nanmin(sub, axis=0), np.nanmax(sub, axis=0)
    return mid, lo, hi


def _by_trial(run: Run, n: int) -> Any:
    """Best-so-far after trials 1..n; a run that stopped early keeps its last value."""
    import numpy as np
    values = np.zeros(n)
    for t in run.trials:
        if 1 <= t.index <= n:
            values[t.index - 1] = t.best_gflops
    return np.maximum.accumulate(values)


def _by_time(run: Run, grid: Any) -> Any:
    """Best-so-far at each time of ``grid`` (a step function of the trials' ends); NaN
    before the run's first trial ended (nothing measured yet: no value, not 0)."""
    import numpy as np
    ends = np.array([t.elapsed for t in run.trials] or [0.0])
    best = np.maximum.accumulate(np.array([t.best_gflops for t in run.trials] or [0.0]))
    pos = np.searchsorted(ends, grid, side="right")
    if not run.trials:
        return np.full(len(grid), np.nan)
    return np.where(pos > 0, best[np.maximum(pos - 1, 0)], np.nan)


def plot(runs: Sequence[Run], path: str | Path, title: str = "") -> None:
    """Two panels, best-so-far against trials and against wall time: per method the
    median over seeds with a min-max band. Drawn on a bare Agg canvas (no pyplot), so
    the caller's matplotlib backend and figures are left alone."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator
    fig = Figure(figsize=(11, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    by_trial, by_time = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for method, color in zip(METHODS, ("tab:blue", "tab:orange")):
        mine = [r for r in runs if r.method == method and r.trials]
        if not mine:
            continue
        label = f"{method} (median of {len(mine)})"
        n = max(t.index for r in mine for t in r.trials)
        x = np.arange(1, n + 1)
        mid, lo, hi = _band([_by_trial(r, n) for r in mine])
        by_trial.plot(x, mid, color=color, label=label, drawstyle="steps-post")
        by_trial.fill_between(x, lo, hi, color=color, alpha=0.2, linewidth=0, step="post")
        grid = np.linspace(0.0, max(r.trials[-1].elapsed for r in mine), 200)
        mid, lo, hi = _band([_by_time(r, grid) for r in mine])
        by_time.plot(grid, mid, color=color, label=label, drawstyle="steps-post")
        by_time.fill_between(grid, lo, hi, color=color, alpha=0.2, linewidth=0, step="post")
    for ax, xlabel in ((by_trial, "trials"), (by_time, "wall time (s)")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel("best GFLOP/s so far")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    by_trial.xaxis.set_major_locator(MaxNLocator(integer=True))
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, format="png")


def _fmt(v: float | None, unit: str = "") -> str:
    if v is None:
        return "-"
    return f"{v:.1f}{unit}" if unit else (f"{v:g}" if v == int(v) else f"{v:.1f}")


def _rows(summaries: Sequence[MethodSummary], tuner: str) -> list[list[str]]:
    head = ["method", "final best GFLOP/s (median [min-max])", "trials to 90%",
            "time to 90%", "errors"]
    rows = [head]
    for s in summaries:
        name = f"{s.method} ({tuner})" if s.method == "templated" else s.method
        rows.append([name, f"{s.final_median:.2f} [{s.final_min:.2f}-{s.final_max:.2f}]",
                     _fmt(s.trials_to_reach), _fmt(s.seconds_to_reach, "s"),
                     f"{sum(s.errors.values())}/{s.measured}"])
    return rows


def text_table(summaries: Sequence[MethodSummary], tuner: str = "xgb") -> str:
    """The comparison as aligned plain text, as ``tvmlite compare`` prints it."""
    rows = _rows(summaries, tuner)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def _loop_nest(rec: Any) -> str:
    import tvmlite
    wl = rec.workload
    s = Schedule.from_steps(wl.outputs, rec.steps)
    func = tvmlite.lower(s, list(wl.tensors), wl.name,
                         vector_bytes=rec.target.vector_bytes)
    steps = "\n".join(f"# {st}" for st in rec.steps) or "# (no steps: the unscheduled program)"
    return f"{steps}\n{func}"


def _bound_line(rec: Any) -> str:
    return bound_line(rec)


def report_markdown(runs: Sequence[Run], workload: Any, trials: int, tuner: str = "xgb",
                    target: Any = None) -> str:
    """report.md: what was compared, the table, errors by code, and each method's best
    schedule (over all seeds) as its Steps and loop nest."""
    summaries = summarize(runs)
    seeds = sorted({r.seed for r in runs})
    args = ", ".join(f"{k}={v}" for k, v in workload.args.items())
    lines = [f"# templated vs template-free: {workload.name}({args})", "",
             f"- workload key `{workload.key[:16]}`, {workload.flops:,} flops per run",
             f"- budget: {trials} trials per run, seeds {seeds[0]}..{seeds[-1]} "
             f"({len(seeds)} per method); templated tuner: {tuner}"]
    if target is not None:
        lines.append(f"- target: {target.name + ', ' if target.name else ''}{target.arch}, "
                     f"{target.cores} cores, "
                     f"{target.vector_bits}-bit vectors, {' '.join(target.features)}")
    lines += ["- curves: `curves.csv`, `curves.png`; logs: `<method>_seed<s>.jsonl`", "",
              "## Results", "",
              f"Final best per run, median over seeds [min-max]; trials and time to reach "
              f"{REACH:.0%} of each run's final best, median over the runs that found a "
              "valid schedule; errors / trials measured.", ""]
    rows = _rows(summaries, tuner)
    lines += ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    lines += ["", "## Errors", ""]
    for s in summaries:
        codes = ", ".join(f"{k} {v}" for k, v in sorted(s.errors.items())) or "none"
        lines.append(f"- {s.method}: {codes}")
    lines += ["", "## Best schedules", ""]
    for method in METHODS:
        best = [r.best for r in runs if r.method == method and r.best is not None]
        if not best:
            lines += [f"### {method}: no valid schedule", ""]
            continue
        rec = min(best, key=lambda b: b.mean_cost)
        seed = next(r.seed for r in runs if r.best is rec)
        lines += [f"### {method}: {rec.gflops:.2f} GFLOP/s ({rec.mean_cost * 1e3:.4g} ms, "
                  f"seed {seed})", "", f"bound: {_bound_line(rec)}", "", "```",
                  _loop_nest(rec), "```", ""]
    return "\n".join(lines)


@dataclass(frozen=True)
class CompareResult:
    runs: list
    summaries: list
    csv: Path
    png: Path
    report: Path
    table: str


def compare(op: str, kwargs: dict, trials: int, seeds: int, out_dir: str | Path,
            tuner: str = "xgb", options: Any = None, population: int | None = None,
            on_trial: Callable[[str, int, Any], None] | None = None,
            on_run: Callable[[Run], None] | None = None,
            target: Any = None) -> CompareResult:
    """``run_compare`` and write curves.csv, curves.png and report.md into ``out_dir``."""
    target = Target.resolve(target)
    runs = run_compare(op, kwargs, trials, seeds, out_dir, tuner, options, population,
                       on_trial, on_run, target)
    out = Path(out_dir)
    workload = Workload.from_op(op, **kwargs)
    summaries = summarize(runs)
    write_csv(runs, out / "curves.csv")
    args = ", ".join(f"{k}={v}" for k, v in workload.args.items())
    plot(runs, out / "curves.png", f"{workload.name}({args}): best so far over {seeds} seed(s)")
    (out / "report.md").write_text(report_markdown(runs, workload, trials, tuner, target))
    return CompareResult(runs, summaries, out / "curves.csv", out / "curves.png",
                         out / "report.md", text_table(summaries, tuner))
