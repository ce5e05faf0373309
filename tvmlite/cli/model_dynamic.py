"""``tvmlite tune MODEL.onnx --shape NAME=1,1..512``: a model over a symbolic size.

``--shape`` with a range ``LO..HI`` makes that dimension symbolic for the whole graph
(``frontend.from_onnx``; the graph comes back fused, so no layout or split is measured:
there is no one size to time). Its kernels over the size are dynamic tasks, the others
static; ``search.budget.tune_model`` splits ``--trials`` between them by weight (that
module's rule) and tunes the static tasks with the TaskScheduler and each dynamic one
with the dynamic-shape search, whose dispatch table goes in the log.

What the fixed-size model tune promises holds here too: records are flushed as they are
measured, Ctrl-C or SIGTERM (``cli.interrupt``) loses at most the candidate being timed
and prints the tasks' lines from the log and the ``resume:`` command; with ``--resume``
the log's records count toward each task's share (a dynamic search counts its records
at every size and never measures a logged candidate again, and its dispatch table is
rebuilt from all of them). The progress line names the task being tuned and the model's
estimate *at the middle size* (``SymbolicEstimate``: the representative size nearest the
range's geometric middle; each task's best there, times its weight). The summary gives
one line per task (kind, weight, trials in the log of its share, the dispatch ranges of
a dynamic task) and the model built from the log against the untuned build and
onnxruntime at the range's ends and middle (``model_times.time_models_at``).

Map: the sizes timed · the per-task lines (from the log) · the progress estimate · the
command.
"""
from __future__ import annotations

import argparse
import math
import shlex
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tvmlite.cli.args import UsageError, tuning_options, warn_if_busy
from tvmlite.cli.interrupt import exit_code, sigterm_as_interrupt, stopped_how
from tvmlite.cli.model import format_shape
from tvmlite.cli.model_times import (
    format_latency,
    runs_here,
    time_models_at,
    times_lines,
    tuning_seconds,
)
from tvmlite.cli.progress import Progress
from tvmlite.graph.decisions import GraphDecisions
from tvmlite.graph.ir import Graph
from tvmlite.search.budget import split_budget, tune_model
from tvmlite.search.graph_tasks import extract_tasks
from tvmlite.search.measure.measurer import check_log_path
from tvmlite.search.records.best import best_record, is_retiming
from tvmlite.search.records.dispatch import latest_table
from tvmlite.search.records.record import Record, load_records, records_by_workload
from tvmlite.search.result import Trial
from tvmlite.target.target import Target

__all__ = ["symbolic_decisions", "cmd_model_tune_symbolic", "lengths_to_time", "task_lines",
           "task_records", "middle_size", "SymbolicEstimate"]


def symbolic_decisions(graph: Graph) -> GraphDecisions:
    """What a symbolic graph's layout is: the layout pass's default (not measured)."""
    return GraphDecisions(graph.layout, "default: a symbolic size has no one size to time")


# -- the sizes timed ---------------------------------------------------------------------------

def lengths_to_time(lo: int, hi: int) -> list[int]:
    """The range's ends and its geometric middle."""
    return sorted({lo, max(lo, min(hi, round((lo * hi) ** 0.5))), hi})


def middle_size(tasks: Sequence[Any], lo: int, hi: int) -> int:
    """The size the progress estimate is at: the dynamic tasks' representative size
    (measured in every tuning) nearest the range's geometric middle; the middle itself
    when no task is dynamic."""
    mid = lengths_to_time(lo, hi)[len(lengths_to_time(lo, hi)) // 2]
    sizes = next((list(t.sizes) for t in tasks if t.dynamic), [mid])
    return min(sizes, key=lambda m: (abs(math.log(m / mid)), m))


# -- the per-task lines ------------------------------------------------------------------------

def task_records(tasks: Sequence[Any], log: str, target: Target) -> list[list[Record]]:
    """Each task's trials in ``log`` (this CPU's, re-timings and dispatch records left
    out), read once: a static task's records of its workload, a dynamic task's records
    at any size of its symbolic workload (its probes between sizes too) -- what the
    budget counts."""
    records = [r for r in load_records(log) if r.target.same_cpu(target)] \
        if Path(log).is_file() else []
    static = {t.workload.key: i for i, t in enumerate(tasks) if not t.dynamic}
    dynamic = {t.workload.base_key: i for i, t in enumerate(tasks) if t.dynamic}
    out: list[list[Record]] = [[] for _ in tasks]
    for r in records:
        if is_retiming(r):
            continue
        i = dynamic.get(r.workload.base_key) if r.workload.sizes is not None else \
            static.get(r.workload.key)
        if i is not None:
            out[i].append(r)
    return out


def task_lines(tasks: Sequence[Any], shares: Sequence[int], log: str,
               target: Target) -> list[str]:
    """One line per task, from the log (so an interrupted run prints the same lines):
    kind, weight, trials in the log of its share of the budget, the dispatch ranges of a
    dynamic task ("no table" until its search has ended once)."""
    records = load_records(log) if Path(log).is_file() else []
    counts = [len(rs) for rs in task_records(tasks, log, target)]
    lines = [f"  {'#':>3}  {'task':<28} {'kind':<8} {'weight':>6} {'trials':>9}  dispatch"]
    for i, (t, share, n) in enumerate(zip(tasks, shares, counts)):
        kind = "dynamic" if t.dynamic else "static"
        table = latest_table(records, t.workload) if t.dynamic else None
        ranges = ", ".join(f"{lo}..{hi or ''}:v{v}" for lo, hi, v in table[1].ranges) \
            if table else ("-" if not t.dynamic else "no table")
        lines.append(f"  {i + 1:>3}  {t.workload.name[:28]:<28} {kind:<8} {t.weight:>6} "
                     f"{f'{n}/{share}':>9}  {ranges}")
    return lines


# -- the progress estimate ---------------------------------------------------------------------

class SymbolicEstimate:
    """What the progress line shows while a symbolic model tunes: the task of the latest
    trial and the model's estimated latency at ``size`` (``middle_size``), the weighted
    sum of each task's best so far there (a static task's best, a dynamic task's best
    record at that size, re-read from the log after each of its valid trials: its
    trials do not say their size). ``see`` turns a task's Trial into one the
    ``Progress`` display counts against the whole budget (its index: the trials of all
    the tasks in the log)."""

    def __init__(self, tasks: Sequence[Any], log: str, target: Target, name: str,
                 size: int):
        self.tasks, self.log, self.target, self.name, self.size = tasks, log, target, name, size
        logged = task_records(tasks, log, target)
        self.start = [len(rs) for rs in logged]      # a dynamic task's Trial.index: this run's
        self.counts = list(self.start)
        self.keys = [t.workload.at({name: size}).key if t.dynamic else t.workload.key
                     for t in tasks]
        self.best = [self._best(rs, k) for rs, k in zip(logged, self.keys)]
        self.task: int | None = None

    def _best(self, records: Sequence[Record], key: str) -> float | None:
        rec = best_record(records, key, self.target, fallback=False) \
            if any(r.workload.key == key for r in records) else None
        return None if rec is None else rec.mean_cost

    def see(self, i: int, trial: Trial) -> Trial:
        self.task = i
        t = self.tasks[i]
        if t.dynamic:
            self.counts[i] = self.start[i] + trial.index
            if trial.gflops > 0:
                key = self.keys[i]
                self.best[i] = self._best(records_by_workload(self.log, [key],
                                                              self.target)[key], key)
        else:      # a static task's Trial.index counts its records in the log
            self.counts[i] = max(self.counts[i], trial.index)
            if trial.gflops > 0:
                seconds = t.workload.flops / (trial.gflops * 1e9)
                old = self.best[i]
                self.best[i] = seconds if old is None else min(old, seconds)
        return replace(trial, index=sum(self.counts))

    def latency(self) -> tuple[float, int]:
        """(the estimate at ``size`` in seconds over the known tasks, the tasks unknown)."""
        known = sum(t.weight * b for t, b in zip(self.tasks, self.best) if b is not None)
        return known, sum(b is None for b in self.best)

    def status(self) -> str:
        known, unknown = self.latency()
        task = "" if self.task is None else \
            f"task {self.task + 1}/{len(self.tasks)} {self.tasks[self.task].kernel_names[0]}" \
            f" ({'dynamic' if self.tasks[self.task].dynamic else 'static'}), "
        more = f" + {unknown} unknown" if unknown else ""
        return f"{task}model ~{format_latency(known)}{more} at {self.name}={self.size}"


# -- the command -------------------------------------------------------------------------------

def _check_log(log: str, tasks: Sequence[Any], target: Target, resume: bool) -> None:
    """The log must be writable; without --resume, records of these tasks in it are a
    mistake (they would silently count toward the budget)."""
    try:
        check_log_path(Path(log))
    except ValueError as err:
        raise UsageError(f"--log: {err}") from None
    n = 0 if resume else sum(len(rs) for rs in task_records(tasks, log, target))
    if n:
        raise UsageError(f"--log {log} already holds {n} record(s) of this model's kernels: "
                         "add --resume to continue that tuning (they count toward --trials), "
                         "or pass another --log")


def _head(args: argparse.Namespace, tasks: Sequence[Any], log_trials: int) -> str:
    return (f"{args.op}: {len(tasks)} task(s); {args.log} holds {log_trials} of --trials "
            f"{args.trials}")


def cmd_model_tune_symbolic(args: argparse.Namespace, graph: Graph, target: Target) -> int:
    """The tuning of a model with a symbolic size (the module docstring)."""
    tasks = extract_tasks(graph, target)
    _check_log(args.log, tasks, target, args.resume)
    try:
        shares = split_budget(tasks, args.trials)
    except ValueError as err:
        raise UsageError(str(err)) from None
    options = tuning_options(args, args.seed)
    (size, lo, hi), = graph.sizes
    dyn = sum(t.dynamic for t in tasks)
    print(f"{args.op}: {size} in [{lo}, {hi}]: {len(graph.kernels or ())} fused kernels, "
          f"{len(tasks)} task(s) ({dyn} dynamic, {len(tasks) - dyn} static); --trials "
          f"{args.trials} split by weight x sizes per candidate: {list(shares)}",
          file=sys.stderr)
    with options.make_runner() as runner:   # a runner that cannot run the target stops here
        runner.check_target(target)
    warn_if_busy(args)
    model = SymbolicEstimate(tasks, args.log, target, size, middle_size(tasks, lo, hi))
    progress = Progress(args.trials, sys.stderr, "quiet" if args.quiet else None,
                        label=Path(args.op).stem, status=model.status)

    def on_trial(i: int, trial: Trial) -> None:
        progress(model.see(i, trial))
    try:
        with sigterm_as_interrupt():
            results = tune_model(tasks, args.trials, args.log, options, on_trial, args.seed)
    except KeyboardInterrupt as stop:
        progress.close()
        again = list(args.argv) + ([] if args.resume else ["--resume"])
        # counted from the log: a dynamic search logs a wave of measurements before it
        # reports them, so the log may hold more than the progress line has shown
        logged = sum(len(rs) for rs in task_records(tasks, args.log, target))
        print(f"\n{stopped_how(stop)} after {logged - sum(model.start)} new trial(s) (at "
              f"most the candidate being timed was lost)\n{_head(args, tasks, logged)}\n"
              + "\n".join(task_lines(tasks, shares, args.log, target))
              + f"\nresume:   {shlex.join(['tvmlite', *again])}", file=sys.stderr)
        return exit_code(stop)
    finally:
        progress.close()
    if getattr(args, "verbose", False):
        rounds = sorted((r for res in results for r in res.rounds), key=lambda r: r.index)
        print("\n".join(r.line() for r in rounds))
    logged = sum(len(rs) for rs in task_records(tasks, args.log, target))
    lines = [_head(args, tasks, logged) + f", {logged - sum(model.start)} new: "
             + tuning_seconds(results), *task_lines(tasks, shares, args.log, target)]
    if runs_here(target):
        threads = options.n_threads or target.cores
        for t in time_models_at(Path(args.op), graph, target, args.log, threads,
                                lengths_to_time(lo, hi)):
            lines += times_lines(t)
    else:
        lines.append(f"model:    not timed: {target.name} code does not run on this machine "
                     "(the kernels were checked under emulation); compile the library below "
                     "and run it there with `tvmlite run`")
    shapes = [a for name, dims in args.shape for a in ("--shape", f"{name}={format_shape(dims)}")]
    flag = ["--target", target.name] if target.name and target.name != "host" else []
    lines.append("compile:  " + shlex.join(["tvmlite", "compile", args.op, "--log", args.log,
                                            *shapes, *flag, "--out", "dist"]))
    print("\n".join(lines))
    return 0
