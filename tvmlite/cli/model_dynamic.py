"""``tvmlite tune MODEL.onnx --shape NAME=1,1..512``: a model over a symbolic size.

``--shape`` with a range ``LO..HI`` makes that dimension symbolic for the whole graph
(``frontend.from_onnx``; the graph comes back fused, so no layout or split is measured:
there is no one size to time). Its kernels over the size are dynamic tasks, the others
static; ``search.budget.tune_model`` splits ``--trials`` between them by weight (that
module's rule) and tunes the static tasks with the TaskScheduler and each dynamic one
with the dynamic-shape search, whose dispatch table goes in the log. The summary gives
one row per task (kind, weight, trials spent, the dispatch ranges of a dynamic task)
and the model's latency built from the log against the untuned build at the range's
ends and middle (Python runs of the built modules, interleaved, medians).
"""
from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tvmlite.cli.args import UsageError, tuning_options
from tvmlite.cli.model import format_shape
from tvmlite.cli.model_times import format_latency
from tvmlite.cli.progress import Progress
from tvmlite.graph.build import GraphModule, build_graph
from tvmlite.graph.decisions import GraphDecisions
from tvmlite.graph.ir import Graph
from tvmlite.search.budget import split_budget, tune_model
from tvmlite.search.graph_tasks import extract_tasks
from tvmlite.search.records.dispatch import latest_table
from tvmlite.search.records.record import load_records
from tvmlite.search.result import Trial
from tvmlite.search.templated.task import apply_history_best
from tvmlite.target.target import Target

__all__ = ["symbolic_decisions", "cmd_model_tune_symbolic", "lengths_to_time",
           "feeds_at", "task_lines"]


def symbolic_decisions(graph: Graph) -> GraphDecisions:
    """What a symbolic graph's layout is: the layout pass's default (not measured)."""
    return GraphDecisions(graph.layout, "default: a symbolic size has no one size to time")


def lengths_to_time(lo: int, hi: int) -> list[int]:
    """The range's ends and its geometric middle."""
    return sorted({lo, max(lo, min(hi, round((lo * hi) ** 0.5))), hi})


def feeds_at(graph: Graph, sizes: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """Feeds of the graph's input types at ``sizes``: normal floats, zeros for integer
    inputs (token ids: index 0 is valid for every gather)."""
    from tvmlite.graph.symbolic import shape_at
    rng = np.random.default_rng(seed)
    out = {}
    for name in graph.inputs:
        t = graph.types[name]
        shape, dt = shape_at(t.shape, sizes), np.dtype(t.dtype)
        out[name] = rng.standard_normal(shape).astype(dt) if dt.kind == "f" else \
            np.zeros(shape, dt)
    return out


def _median_times(mods: Sequence[GraphModule], feeds: dict, rounds: int = 5) -> list[float]:
    runs = [m.time_evaluator(number=1, repeat=1) for m in mods]
    times: list[list[float]] = [[] for _ in mods]
    for _ in range(rounds):   # interleaved: a burst of other work hits both alike
        for i, run in enumerate(runs):
            times[i].append(run(feeds).results[0])
    return [statistics.median(t) for t in times]


def task_lines(tasks: Sequence[Any], shares: Sequence[int], log: str) -> list[str]:
    """One line per task: kind, weight, share of the budget, the dispatch ranges."""
    records = load_records(log) if Path(log).is_file() else []
    lines = [f"  {'#':>3}  {'task':<28} {'kind':<8} {'weight':>6} {'trials':>6}  dispatch"]
    for i, (t, share) in enumerate(zip(tasks, shares)):
        kind = "dynamic" if t.dynamic else "static"
        table = latest_table(records, t.workload) if t.dynamic else None
        ranges = ", ".join(f"{lo}..{hi or ''}:v{v}" for lo, hi, v in table[1].ranges) \
            if table else ("-" if not t.dynamic else "no table")
        lines.append(f"  {i:>3}  {t.workload.name[:28]:<28} {kind:<8} {t.weight:>6} "
                     f"{share:>6}  {ranges}")
    return lines


def cmd_model_tune_symbolic(args: argparse.Namespace, graph: Graph, target: Target) -> int:
    """The tuning of a model with a symbolic size (the module docstring)."""
    if args.resume is False and Path(args.log).is_file() and Path(args.log).stat().st_size:
        raise UsageError(f"--log {args.log} exists: add --resume to continue that tuning, "
                         f"or pass another --log")
    tasks = extract_tasks(graph, target)
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
    progress = Progress(args.trials, sys.stderr, "quiet" if args.quiet else None,
                        label=Path(args.op).stem)

    def on_trial(i: int, trial: Trial) -> None:
        progress(trial)
    try:
        results = tune_model(tasks, args.trials, args.log, options, on_trial, args.seed)
    finally:
        progress.close()
    new = sum(r.measured for r in results)
    lines = [f"{args.op}: {len(tasks)} task(s), {new} new measurement(s) in {args.log}"]
    lines += task_lines(tasks, shares, args.log)
    if target.arch == Target.host().arch:
        untuned = build_graph(graph, target, quiet=True)
        with apply_history_best(args.log):
            tuned = build_graph(graph, target, quiet=True)
        for m in lengths_to_time(lo, hi):
            t_tuned, t_untuned = _median_times([tuned, untuned], feeds_at(graph, {size: m}))
            lines.append(f"model:    {size}={m}: tuned {format_latency(t_tuned)}, untuned "
                         f"{format_latency(t_untuned)} ({t_untuned / t_tuned:.2f}x)")
    shapes = [a for name, dims in args.shape for a in ("--shape", f"{name}={format_shape(dims)}")]
    lines.append("compile:  " + shlex.join(["tvmlite", "compile", args.op, "--log", args.log,
                                            *shapes, "--out", "dist"]))
    print("\n".join(lines))
    return 0
