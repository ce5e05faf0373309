"""``tvmlite tune MODEL.onnx``: tune every fused kernel of a model under one budget.

    tvmlite tune MODEL.onnx --trials N --log L [--shape NAME=1,3,224,224] [--target T]
                 [--runner local|qemu|dask://HOST:PORT] [--layout auto|nchw|nhwc]
                 [--precision fp32|bf16] [--resume] [--verbose]

The model is imported (``frontend.from_onnx``), its activation layout is chosen
(``graph.decisions.decide_layout``: measured with ``--layout auto``), its distinct kernels
become tasks
(``search.extract_tasks``: ``task.weight`` is how often one run calls the kernel), and
the gradient ``TaskScheduler`` spends the ``--trials`` budget on them (the log's earlier
records count, so ``--resume`` continues), weighted so that the objective is the model's
latency. The progress line names the task being tuned and the model's estimated latency
(the weighted sum of the tasks' bests so far). The summary times the model built from
the log (``apply_history_best``) against the untuned build and onnxruntime
(``model_times``) and, with ``--precision bf16`` (the tasks are the bf16 kernels), the
error of the tuned bf16 build against the fp32 one; then one row per task, read from the
log, so an interrupted run prints the same table.

Map: the dispatch (model or operator) · the per-task table (pure) · the progress
estimate · the command.
"""
from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tvmlite.cli.args import IDENTIFIER, UsageError, resolve_target, tuning_options, warn_if_busy
from tvmlite.cli.interrupt import exit_code, sigterm_as_interrupt, stopped_how
from tvmlite.cli.model import format_shape, precision_lines
from tvmlite.cli.model_decisions import tune_decision_lines
from tvmlite.cli.model_dynamic import cmd_model_tune_symbolic
from tvmlite.cli.model_times import (
    format_latency,
    runs_here,
    time_models,
    times_lines,
    tuning_seconds,
)
from tvmlite.cli.progress import Progress
from tvmlite.cli.tune import cmd_tune
from tvmlite.frontend import from_onnx
from tvmlite.graph.build import build_graph
from tvmlite.graph.decisions import decide_layout, decide_splits
from tvmlite.graph.ir import Graph
from tvmlite.ops import OPS
from tvmlite.search.graph_tasks import extract_tasks
from tvmlite.search.measure.measurer import check_log_path
from tvmlite.search.records.best import best_record, is_retiming
from tvmlite.search.records.record import records_by_workload
from tvmlite.search.result import Trial
from tvmlite.search.template_free.scheduler import (
    EARLY_STOP_ROUNDS,
    EARLY_STOP_TRIALS,
    MIN_GAIN,
    TaskScheduler,
)
from tvmlite.search.templated.task import apply_history_best
from tvmlite.target.target import Target

__all__ = ["is_model_argument", "cmd_tune_any", "cmd_model_tune", "TaskRow", "task_rows",
           "estimate", "estimate_line", "summary_table", "ModelEstimate", "pin_layout"]


# -- the dispatch ------------------------------------------------------------------------------

def is_model_argument(op: str | None) -> bool:
    """Whether ``tvmlite tune``'s first argument names a model file rather than an
    operator: an operator name is an identifier of ``tvmlite.ops``; anything else that
    looks like a path (``.onnx``, a separator, an existing file) is a model, so a missing
    or a non-ONNX file gets the frontend's message, not "unknown operator"."""
    if op is None or op in OPS:
        return False
    return op.lower().endswith(".onnx") or not IDENTIFIER.match(op) or Path(op).is_file()


def cmd_tune_any(args: argparse.Namespace) -> int:
    """``tvmlite tune``: a model file goes to ``cmd_model_tune``, an operator (or
    ``--workload``) to the single-operator ``cmd_tune``."""
    if not args.workload and is_model_argument(args.op):
        return cmd_model_tune(args)
    if getattr(args, "shape", None):
        raise UsageError("--shape sets a model input's shape: it goes with `tvmlite tune "
                         "MODEL.onnx`; an operator takes its sizes as KEY=VALUE")
    if getattr(args, "layout", "nhwc") != "nhwc":
        raise UsageError("--layout chooses a model's activation layout: it goes with "
                         "`tvmlite tune MODEL.onnx`")
    if getattr(args, "split", "off") != "off":
        raise UsageError("--split splits a model's fused kernels: it goes with `tvmlite "
                         "tune MODEL.onnx`")
    return cmd_tune(args)


# -- the per-task table ------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskRow:
    """One task of a model as the log has it: its kernels, weight (calls per model run),
    records (trials), best seconds per call (None: nothing valid yet), whether that
    best was only emulated, and whether the scheduler stopped the task early (its best
    had stalled: ``TaskScheduler(early_stop_rounds=...)``)."""
    name: str
    kernels: tuple[str, ...]
    weight: int
    trials: int
    best: float | None
    emulated: bool = False
    stopped: bool = False


def task_rows(tasks: Sequence[Any], log: str, target: Target,
              stopped: Collection[str] = ()) -> list[TaskRow]:
    """The rows of ``tasks`` from ``log``, read once: the trials count what the budget
    counts (this CPU's records, re-timings excluded), the best is the record
    ``tvmlite.build`` takes under ``apply_history_best`` (``best_record``, this CPU's).
    ``stopped``: the workload keys of the tasks this run stopped early."""
    mine = records_by_workload(log, {t.workload.key for t in tasks}, target)
    rows = []
    for t in tasks:
        recs = mine[t.workload.key]
        best = best_record(recs, t.workload.key, target, fallback=False) if recs else None
        rows.append(TaskRow(t.workload.name, tuple(t.kernel_names), int(t.weight),
                            sum(not is_retiming(r) for r in recs),
                            None if best is None else best.mean_cost,
                            bool(best is not None and best.emulated),
                            t.workload.key in stopped))
    return rows


def estimate(rows: Sequence[TaskRow]) -> tuple[float, int]:
    """(the weighted sum of the known bests, how many tasks have no best yet): the
    model's latency as the sum of its kernels' isolated timings."""
    known = sum(r.weight * r.best for r in rows if r.best is not None)
    return known, sum(r.best is None for r in rows)


def _names(kernels: Sequence[str], width: int) -> str:
    text = ", ".join(kernels)
    if len(text) <= width:
        return text
    return f"{kernels[0]} +{len(kernels) - 1} more"[:width]


def summary_table(rows: Sequence[TaskRow]) -> str:
    """One line per task: its number (the progress line's), kernels, weight, trials (a
    ``~`` after them: stopped early), best ms per call, and its share of the model's
    estimated time (weight x best over the sum), the tasks costing most first; a last
    line with the totals, and what the marks mean."""
    total, _ = estimate(rows)
    width = max([len("kernels"), *(min(36, len(", ".join(r.kernels))) for r in rows)])
    lines = [f"  {'#':>3} {'task':<12} {'kernels':<{width}} {'weight':>6} {'trials':>6} "
             f"{'best ms':>10} {'share':>6}"]
    order = sorted(range(len(rows)), key=lambda i: -(rows[i].weight * (rows[i].best or 0.0)))
    for i in order:
        r = rows[i]
        best = "-" if r.best is None else f"{r.best * 1e3:.4g}" + ("*" if r.emulated else "")
        share = "-" if r.best is None or total <= 0 else \
            f"{100 * r.weight * r.best / total:.1f}%"
        trials = f"{r.trials}" + ("~" if r.stopped else "")
        lines.append(f"  {i + 1:>3} {r.name[:12]:<12} {_names(r.kernels, width):<{width}} "
                     f"{r.weight:>6} {trials:>6} {best:>10} {share:>6}")
    lines.append(f"  {'':>3} {'total':<12} {'':<{width}} {sum(r.weight for r in rows):>6} "
                 f"{sum(r.trials for r in rows):>6} {total * 1e3:>10.4g}")
    if any(r.emulated for r in rows):
        lines.append("  * emulated: the kernel is checked correct; its time says nothing of "
                     "speed on the target")
    if any(r.stopped for r in rows):
        lines.append(f"  ~ stopped early: no {MIN_GAIN:.0%} gain in {EARLY_STOP_ROUNDS} of its "
                     f"rounds ({EARLY_STOP_TRIALS}+ trials) in a row; its trials went to the "
                     "other tasks")
    if rows and all(r.stopped for r in rows):
        lines.append("  every task stopped early: the tuning ended before spending --trials")
    return "\n".join(lines)


# -- the progress estimate ---------------------------------------------------------------------

class ModelEstimate:
    """What the progress line shows while a model tunes: the task of the latest trial
    and the model's estimated latency, the weighted sum of each task's best so far (a
    task starts from the log's best; one not measured yet is counted as unknown).
    ``see`` turns a task's Trial into one the ``Progress`` display counts against the
    whole budget (its index: the records of all the tasks in the log)."""

    def __init__(self, tasks: Sequence[Any], rows: Sequence[TaskRow]):
        self.names = [t.kernel_names[0] for t in tasks]
        self.weights = [int(t.weight) for t in tasks]
        self.flops = [t.workload.flops for t in tasks]
        self.best: list[float | None] = [r.best for r in rows]
        self.counts = [r.trials for r in rows]
        self.task: int | None = None

    def see(self, i: int, trial: Trial) -> Trial:
        self.task = i
        self.counts[i] = max(self.counts[i], trial.index)
        if trial.gflops > 0:
            seconds = self.flops[i] / (trial.gflops * 1e9)
            old = self.best[i]
            self.best[i] = seconds if old is None else min(old, seconds)
        return replace(trial, index=sum(self.counts))

    def latency(self) -> tuple[float, int]:
        """(the estimate in seconds over the known tasks, the tasks still unknown)."""
        known = sum(w * b for w, b in zip(self.weights, self.best) if b is not None)
        return known, sum(b is None for b in self.best)

    def status(self) -> str:
        known, unknown = self.latency()
        task = "" if self.task is None else \
            f"task {self.task + 1}/{len(self.names)} {self.names[self.task]}, "
        more = f" + {unknown} unknown" if unknown else ""
        return f"{task}model ~{format_latency(known)}{more}"


# -- the command -------------------------------------------------------------------------------

def _check_args(args: argparse.Namespace) -> None:
    """Options of the single-operator command that mean nothing for a model."""
    if args.params:
        raise UsageError(f"{' '.join(args.params)}: a model's sizes come from the model "
                         "(symbolic ones from --shape NAME=D0,D1,...), not KEY=VALUE")
    if args.search != "template-free" or args.tuner:
        raise UsageError("a model tunes with the template-free search (sketches per fused "
                         "kernel): drop --search templated / --tuner")
    if args.const:
        raise UsageError("--const: a model's weights are its constants already (the "
                         "search may pre-pack them): drop --const")


def _check_log(log: str, tasks: Sequence[Any], target: Target, resume: bool) -> None:
    """The log must be writable; without --resume, records of these tasks in it are a
    mistake (they would silently count toward the budget)."""
    path = Path(log)
    try:
        check_log_path(path)
    except ValueError as err:
        raise UsageError(f"--log: {err}") from None
    if resume or not path.is_file():
        return
    n = sum(r.trials for r in task_rows(tasks, log, target))
    if n:
        raise UsageError(f"--log {log} already holds {n} record(s) of this model's kernels: "
                         "add --resume to continue that tuning (they count toward --trials), "
                         "or pass another --log")


def _model_line(args: argparse.Namespace, graph: Graph, rows: Sequence[TaskRow]) -> str:
    kernels = sum(r.weight for r in rows)
    return (f"{args.op}: {len(graph.nodes)} nodes -> {kernels} fused kernels, {len(rows)} "
            f"task(s); {args.log} holds {sum(r.trials for r in rows)} of --trials "
            f"{args.trials}")


def _commands(args: argparse.Namespace, target: Target, layout: str) -> str:
    """The compile command building what was tuned: the same shapes, target and layout
    (given, so compile does not measure again and pick kernels the log has no record of),
    and ``--split auto`` when the tuning split: compile builds the side the log tuned."""
    shapes = [a for name, dims in args.shape
              for a in ("--shape", f"{name}={format_shape(dims)}")]
    flag = ["--target", target.name] if target.name and target.name != "host" else []
    precision = getattr(args, "precision", "fp32")
    flag += ["--precision", precision] if precision != "fp32" else []
    flag += ["--split", "auto"] if getattr(args, "split", "off") == "auto" else []
    return "compile:  " + shlex.join(["tvmlite", "compile", args.op, "--log", args.log,
                                      *shapes, *flag, "--out", "dist", "--layout",
                                      layout.lower()])


def pin_layout(argv: list[str], layout: str) -> list[str]:
    """``argv`` with ``--layout`` set to the layout chosen, so a resumed tuning tunes the
    same kernels whatever a new measurement would say."""
    out, skip = [], False
    for a in argv:
        if skip or a.startswith("--layout="):
            skip = False
            continue
        if a == "--layout":
            skip = True
            continue
        out.append(a)
    return out + ["--layout", layout.lower()]


ROUND_MIN, ROUND_MAX = 2, 16
MODEL_POPULATION = 256   # evolved per round and task: a model has tens of tasks


def round_size(trials: int, tasks: int) -> int:
    """Measurements per round of a model's tuning: the budget over twice the tasks, so
    every task gets at least two rounds when the budget allows (the first one starting
    with the target's blocked candidate), between ``ROUND_MIN`` and ``ROUND_MAX`` -- a
    single operator's 64 would give the first task the whole of a small budget."""
    return max(ROUND_MIN, min(ROUND_MAX, trials // max(1, 2 * tasks)))


def cmd_model_tune(args: argparse.Namespace) -> int:
    _check_args(args)
    target = resolve_target(args)
    graph = from_onnx(Path(args.op), shapes=dict(args.shape))
    precision = getattr(args, "precision", "fp32")
    if graph.sizes:   # a range in --shape: static and dynamic tasks (model_dynamic.py)
        if precision != "fp32":
            raise UsageError(f"--precision {precision}: a model with a symbolic size (a "
                             f"range in --shape) is tuned in fp32 only; give fixed sizes")
        return cmd_model_tune_symbolic(args, graph, target)
    graph = graph.replace(precision=precision)
    # the layout is chosen before the tasks exist: they are the chosen layout's kernels
    fused, decisions = decide_layout(graph, target, getattr(args, "layout", "nhwc"))
    split = getattr(args, "split", "off") == "auto"
    # so are the splits (default kernels timed); a resumed tuning's log holds the side
    # it tuned, which decide_splits then keeps (as compile does with the same log)
    resumed = apply_history_best(args.log) if split and args.resume and \
        Path(args.log).is_file() else contextlib.nullcontext()
    with resumed:
        fused, decisions = decide_splits(fused, target, decisions, measure=split)
    tasks = extract_tasks(fused, target)
    _check_log(args.log, tasks, target, args.resume)
    # the scheduler first gives a round to each task it has not run in this process, in
    # order: on --resume, the tasks the log has no record of go first, so a budget that
    # an interruption cut short reaches them before the others get a second round
    logged = task_rows(tasks, args.log, target)
    order = sorted(range(len(tasks)), key=lambda i: logged[i].trials > 0)
    options = tuning_options(args, args.seed)
    if not args.batch:   # rounds small enough that every task gets some of the budget
        options = replace(options, measures_per_round=round_size(args.trials, len(tasks)))
    if not args.population:   # a few candidates per round need no 2048-strong evolution
        options = replace(options, population=MODEL_POPULATION)
    with options.make_runner() as runner:   # a runner that cannot run the target stops here
        runner.check_target(target)
    warn_if_busy(args)
    model = ModelEstimate(tasks, logged)
    progress = Progress(args.trials, sys.stderr, "quiet" if args.quiet else None,
                        label=Path(args.op).stem, status=model.status)

    def on_trial(i: int, trial: Trial) -> None:
        progress(model.see(order[i], trial))
    try:
        with sigterm_as_interrupt():
            scheduler = TaskScheduler([tasks[i] for i in order], seed=args.seed)
            results = scheduler.tune(args.trials, args.log, options, on_trial)
    except KeyboardInterrupt as stop:
        progress.close()
        how = stopped_how(stop)
        rows = task_rows(tasks, args.log, target)
        again = pin_layout(list(args.argv), decisions.layout) + ([] if args.resume else
                                                               ["--resume"])
        print(f"\n{how} after {progress.measured} new trial(s) (at most the candidate being "
              f"timed was lost)\n{_model_line(args, graph, rows)}\n"
              f"{decisions.layout_line()}\n{summary_table(rows)}\n"
              f"resume:   {shlex.join(['tvmlite', *again])}", file=sys.stderr)
        return exit_code(stop)
    finally:
        progress.close()
    if getattr(args, "verbose", False):
        rounds = sorted((r for res in results for r in res.rounds), key=lambda r: r.index)
        print("\n".join(r.line() for r in rounds))
    stopped = {tasks[order[j]].workload.key for j, r in enumerate(results) if r.stopped_early}
    rows = task_rows(tasks, args.log, target, stopped)
    new = sum(r.measured for r in results)
    errors = sum(v for r in results for k, v in r.errors.items() if k != "NO_ERROR")
    lines = [_model_line(args, graph, rows) + f", {new} new ({errors} error(s)): "
             + tuning_seconds(results)]
    lines += tune_decision_lines(decisions, tasks, args.log, target)
    if runs_here(target):
        threads = options.n_threads or target.cores
        lines += times_lines(time_models(Path(args.op), fused, target, args.log, threads))
        if precision != "fp32":
            with apply_history_best(args.log):
                lines += precision_lines(graph, build_graph(fused, target, quiet=True))
    else:
        lines.append(f"model:    not timed: {target.name} code does not run on this machine "
                     "(the kernels were checked under emulation); compile the library below "
                     "and run it there with `tvmlite run`")
    lines.append(estimate_line(rows))
    lines.append(summary_table(rows))
    lines.append(_commands(args, target, decisions.layout))
    print("\n".join(lines))
    return 0 if any(r.best is not None for r in rows) else 1


def estimate_line(rows: Sequence[TaskRow]) -> str:
    """The model's latency as its kernels' isolated bests add up, and what it lacks: tasks
    the budget did not reach (their kernels keep the default schedule) and tasks whose
    every trial failed."""
    known, _ = estimate(rows)
    untuned = sum(r.trials == 0 for r in rows)
    failed = sum(r.trials > 0 and r.best is None for r in rows)
    notes = ([f"{untuned} task(s) not reached: raise --trials (and --resume)"] if untuned
             else []) + ([f"{failed} task(s) without a valid trial (`tvmlite log show` "
                          "lists the errors)"] if failed else []) + \
        (["emulated"] if any(r.emulated for r in rows) else [])
    return (f"estimate: {format_latency(known)}, the sum of the kernels' best times x weight"
            + (f" ({'; '.join(notes)})" if notes else ""))
