"""Timing whole built models for ``tvmlite tune MODEL.onnx``'s summary: the model built
from a log and untuned, each exported as the library ``tvmlite compile`` writes and
timed as ``tvmlite run`` times it (whole ``<name>_run`` calls), beside onnxruntime (when
installed: an optional peer; CPU provider, the same threads, all graph optimizations).
Each is timed in a fresh process, not the tuning's: ours in one, in interleaved rounds,
so the two share the machine's state; then onnxruntime's in another (its threads spin
after a run and would slow the next).

A model with a symbolic size (``Graph.sizes``) is built and exported once and timed at
each of the sizes given (``time_models_at(..., [1, 23, 512])``: one ``ModelTimes`` per
size, the libraries taking the size from the feeds' shapes), and onnxruntime runs the
ONNX file at each size too: the frontend makes a range only of an axis the file leaves
symbolic (``dim_param``), so the file takes feeds of every size in it, and of the sizes
``--shape`` fixed.
"""
from __future__ import annotations

import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tvmlite.errors import TvmliteError
from tvmlite.graph.build import build_graph
from tvmlite.graph.ir import Graph
from tvmlite.graph.library import ModelLibrary
from tvmlite.graph.symbolic import shape_at
from tvmlite.search.templated.task import apply_history_best
from tvmlite.target.target import Target

__all__ = ["ModelTimes", "ort_timer", "time_models", "time_models_at", "times_lines",
           "format_latency", "runs_here", "feeds_at", "tuning_seconds",
           "time_here", "main", "REPEAT"]

REPEAT = 25          # timed runs of each built model (and onnxruntime)
_ROUNDS = 5          # ... taken in this many interleaved rounds


@dataclass(frozen=True)
class ModelTimes:
    """Median seconds per whole run of the model: tuned (from the log), untuned, and
    onnxruntime's (None when it is not installed or could not run the model, ``ort_note``
    says why), with the threads each used; the fastest runs of ours beside (a median
    far above its minimum says the machine was busy meanwhile)."""
    tuned: float
    untuned: float
    ort: float | None
    ort_note: str
    threads: int
    repeat: int
    tuned_min: float = 0.0
    untuned_min: float = 0.0
    at: str = ""      # a symbolic model's size timed ("L=23"); "" for a fixed-size one


def runs_here(target: Target) -> bool:
    """Whether ``target``'s code runs on this machine (its arch, features it has): what
    can be timed; a cross target's kernels were only checked under emulation."""
    host = Target.host()
    return target.arch == host.arch and set(target.features) <= set(host.features)


def feeds_at(graph: Graph, sizes: dict[str, int] | None = None,
             seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded feeds of the graph's input types (at ``sizes`` for a symbolic graph):
    normal floats, zeros for integers and booleans (token ids, masks: index 0 is valid
    for every gather)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in graph.inputs:
        t = graph.types[name]
        shape, dt = shape_at(t.shape, sizes or {}), np.dtype(t.dtype)
        out[name] = rng.standard_normal(shape).astype(dt) if dt.kind == "f" else \
            np.zeros(shape, dt)
    return out


def _export(graph: Graph, target: Target, log: str | None, folder: Path) -> None:
    ctx = apply_history_best(log) if log else contextlib.nullcontext()
    with ctx:
        mod = build_graph(graph, target, quiet=True)
    mod.export_library(folder, name="model")


def ort_timer(model: Path, feeds: dict, threads: int) -> tuple[Callable[[int], list[float]]
                                                               | None, str]:
    """A function timing ``n`` onnxruntime runs (CPU provider, ``threads`` intra-op
    threads, all graph optimizations), or None and why not."""
    try:   # here, not at the top: onnxruntime is an optional peer
        import onnxruntime as ort
    except ImportError:
        return None, "onnxruntime is not installed (`pip install onnxruntime` adds it)"
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        sess.run(None, feeds)
    except Exception as err:  # noqa: BLE001 -- a peer's failure: say it, skip the figure
        return None, f"onnxruntime could not run the model: {type(err).__name__}: {err}"

    def timed(n: int) -> list[float]:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            sess.run(None, feeds)
            out.append(time.perf_counter() - t0)
        return out
    return timed, ""


def time_models(model: Path, graph: Graph, target: Target, log: str, threads: int,
                repeat: int | None = None) -> ModelTimes:
    """Build the model from ``log`` and untuned, export both as libraries, and time
    ``repeat`` (default ``REPEAT``) whole runs of each, in interleaved rounds, then as
    many of onnxruntime's."""
    return time_models_at(model, graph, target, log, threads, [None], repeat)[0]


def time_models_at(model: Path, graph: Graph, target: Target, log: str, threads: int,
                   at: Sequence[int | None], repeat: int | None = None) -> list[ModelTimes]:
    """``time_models`` at each size of ``at`` (the value of the graph's one symbolic size;
    None for a fixed-size graph): the libraries are built and exported once here, then
    timed in a fresh process (at each size in turn, tuned and untuned interleaved), and
    onnxruntime after them in another: not in this one, whose tuning threads and caches
    would slow what it times (``/work/shared/PEERS.md``: ~2.7x)."""
    repeat = REPEAT if repeat is None else repeat
    per = max(1, -(-repeat // _ROUNDS))
    sizes = [{} if m is None else {graph.sizes[0][0]: m} for m in at]
    with tempfile.TemporaryDirectory(prefix="tvmlite-tune-") as tmp:
        folder = Path(tmp)
        for kind, from_log in (("tuned", log), ("untuned", None)):
            _export(graph, target, from_log, folder / kind)
        for i, s in enumerate(sizes):
            np.savez(folder / f"feeds{i}.npz", *feeds_at(graph, s).values())
        spec = {"folder": tmp, "names": list(graph.inputs), "sizes": len(sizes),
                "threads": threads, "per": per, "rounds": _ROUNDS, "model": str(model)}
        ours = _in_fresh_process({**spec, "what": "ours"})
        # after ours, not interleaved: onnxruntime's intra-op threads spin a while after
        # each run (its default), which would slow the next runs of ours on a small CPU
        peer = _in_fresh_process({**spec, "what": "ort"})
    out = []
    for i, s in enumerate(sizes):
        tuned, untuned, ort = ours["tuned"][i], ours["untuned"][i], peer["ort"][i]
        out.append(ModelTimes(statistics.median(tuned), statistics.median(untuned),
                              statistics.median(ort) if ort is not None else None,
                              peer["notes"][i], threads, per * _ROUNDS, min(tuned),
                              min(untuned), "".join(f"{k}={v}" for k, v in s.items())))
    return out


def _in_fresh_process(spec: dict) -> dict:
    path = Path(spec["folder"]) / f"{spec['what']}.json"
    path.write_text(json.dumps(spec))
    code = f"from tvmlite.cli.model_times import main; main([{str(path)!r}])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise TvmliteError(f"timing the built model ({spec['what']}) in a fresh process "
                           f"failed (exit {done.returncode}):\n{tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def time_here(spec: dict) -> dict:
    """What the fresh process times (``spec`` from ``time_models_at``): ``ours`` -- the
    exported libraries, ``rounds`` rounds of ``per`` runs of each at each size, tuned and
    untuned in turn -- or ``ort``: ``per * rounds`` onnxruntime runs at each size (None
    and why not, when it cannot)."""
    folder = Path(spec["folder"])
    feeds = []
    for i in range(spec["sizes"]):
        with np.load(folder / f"feeds{i}.npz") as data:
            feeds.append({n: data[f"arr_{j}"] for j, n in enumerate(spec["names"])})
    per, rounds = spec["per"], spec["rounds"]
    if spec["what"] == "ours":
        libs = {k: ModelLibrary(folder / k) for k in ("tuned", "untuned")}
        times: dict[str, list[list[float]]] = {k: [[] for _ in feeds] for k in libs}
        for lib in libs.values():
            lib.set_num_threads(spec["threads"])
        for i, f in enumerate(feeds):
            for _ in range(rounds):
                for k, lib in libs.items():
                    times[k][i] += lib.time_run(f, per)
        return times
    out: dict[str, list[Any]] = {"ort": [], "notes": []}
    for f in feeds:
        timer, note = ort_timer(Path(spec["model"]), f, spec["threads"])
        out["ort"].append(timer(per * rounds) if timer is not None else None)
        out["notes"].append(note)
    return out


def main(argv: Sequence[str]) -> None:
    """The fresh process's entry: time what the spec file names, print the JSON."""
    print(json.dumps(time_here(json.loads(Path(argv[0]).read_text()))))


def tuning_seconds(results: Sequence[Any]) -> str:
    """Where a tuning's time went, over its tasks' TuneResults: ``1.2s searching + 3.4s
    measuring``."""
    return (f"{sum(r.search_seconds for r in results):.1f}s searching + "
            f"{sum(r.measure_seconds for r in results):.1f}s measuring")


def format_latency(seconds: float) -> str:
    """``2.71 us`` below a millisecond, else ``12.34 ms``."""
    return f"{seconds * 1e6:.3g} us" if seconds < 1e-3 else f"{seconds * 1e3:.4g} ms"


def times_lines(t: ModelTimes) -> list[str]:
    """The summary's latency lines: the tuned model against the untuned build and
    onnxruntime (speedups as their time over ours)."""
    at = f"{t.at}: " if t.at else ""
    lines = [f"model:    {at}{format_latency(t.tuned)} tuned (median of {t.repeat} runs of "
             f"the library, {t.threads} thread(s); min {format_latency(t.tuned_min)})",
             f"untuned:  {at}{format_latency(t.untuned)} (min {format_latency(t.untuned_min)}; "
             f"tuned is {_ratio(t.untuned / t.tuned)})"]
    if t.ort is None:
        lines.append(f"onnxruntime: {at}not compared: {t.ort_note}")
    else:
        lines.append(f"onnxruntime: {at}{format_latency(t.ort)} (CPU provider, {t.threads} "
                     f"intra-op thread(s); tuned is {_ratio(t.ort / t.tuned)})")
    if t.tuned > t.untuned:
        lines.append("          (the log's bests lose to the default schedules: too few "
                     "trials per task yet; raise --trials, with --resume)")
    return lines


def _ratio(speedup: float) -> str:
    """``2.50x faster`` or ``1.60x slower`` (``speedup``: their time over ours)."""
    return f"{speedup:.2f}x faster" if speedup >= 1 else f"{1 / speedup:.2f}x slower"
