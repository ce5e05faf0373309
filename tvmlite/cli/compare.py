"""``tvmlite compare``'s outputs: templated against template-free search on one operator,
same budget, same seeds.

The experiment (both searches over the seeds, the summary, the curves) is
``tvmlite.search.compare``; the picture is ``tvmlite.plots``. This module writes what a
comparison leaves behind in its output folder -- ``curves.csv``, ``curves.png`` and
``report.md`` -- and the table the command prints. Every experiment name is re-exported
here for callers of the old home.

Map: write_csv · plot · report_markdown, text_table · CompareResult, compare.
"""
from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tvmlite.plots import plot_compare_curves
from tvmlite.schedule.schedule import Schedule
from tvmlite.search.compare import (
    METHODS,
    REACH,
    TUNERS,
    MethodSummary,
    Run,
    make_tuner,
    method_curves,
    run_compare,
    run_experiment,
    summarize,
    templated_task,
)
from tvmlite.search.records.best import best_valid
from tvmlite.search.records.explain import bound_line
from tvmlite.search.records.record import Record
from tvmlite.search.records.workload import Workload
from tvmlite.target.target import Target

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

CSV_COLUMNS = ("method", "seed", "trial", "elapsed_s", "best_gflops")


def write_csv(runs: Sequence[Run], path: str | Path) -> None:
    """One row per trial: method, seed, trial, elapsed seconds, best GFLOP/s so far."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for r in runs:
            for t in r.trials:
                w.writerow([r.method, r.seed, t.index, f"{t.elapsed:.6f}",
                            f"{t.best_gflops:.6g}"])


def plot(runs: Sequence[Run], path: str | Path, title: str = "") -> None:
    """Two panels, best-so-far against trials and against wall time: per method the
    median over seeds with a min-max band (``tvmlite.plots.plot_compare_curves``)."""
    plot_compare_curves(method_curves(runs), path, title)


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


def _loop_nest(rec: Record) -> str:
    import tvmlite
    wl = rec.workload
    s = Schedule.from_steps(wl.outputs, rec.steps)
    func = tvmlite.lower(s, list(wl.tensors), wl.name,
                         vector_bytes=rec.target.vector_bytes)
    steps = "\n".join(f"# {st}" for st in rec.steps) or "# (no steps: the unscheduled program)"
    return f"{steps}\n{func}"


def _bound_line(rec: Record) -> str:
    return bound_line(rec)


def report_markdown(runs: Sequence[Run], workload: Workload, trials: int, tuner: str = "xgb",
                    target: Target | None = None) -> str:
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
        rec = best_valid(r.best for r in runs if r.method == method and r.best is not None)
        if rec is None:
            lines += [f"### {method}: no valid schedule", ""]
            continue
        seed = next(r.seed for r in runs if r.best is rec)
        lines += [f"### {method}: {rec.gflops:.2f} GFLOP/s ({rec.mean_cost * 1e3:.4g} ms, "
                  f"seed {seed})", "", f"bound: {_bound_line(rec)}", "", "```",
                  _loop_nest(rec), "```", ""]
    return "\n".join(lines)


@dataclass(frozen=True)
class CompareResult:
    """What ``compare`` ran and wrote: the runs, the summary, the files, the table."""
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
            target: Target | str | None = None) -> CompareResult:
    """``run_experiment`` and write curves.csv, curves.png and report.md into ``out_dir``."""
    target = Target.resolve(target)
    exp = run_experiment(op, kwargs, trials, seeds, out_dir, tuner, options, population,
                         on_trial, on_run, target)
    runs, summaries = list(exp.runs), list(exp.summaries)
    out = Path(out_dir)
    workload = Workload.from_op(op, **kwargs)
    write_csv(runs, out / "curves.csv")
    args = ", ".join(f"{k}={v}" for k, v in workload.args.items())
    plot_compare_curves(exp.curves, out / "curves.png",
                        f"{workload.name}({args}): best so far over {seeds} seed(s)")
    (out / "report.md").write_text(report_markdown(runs, workload, trials, tuner, target))
    return CompareResult(runs, summaries, out / "curves.csv", out / "curves.png",
                         out / "report.md", text_table(summaries, tuner))
