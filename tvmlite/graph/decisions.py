"""Whole-graph decisions, each made by measuring: the activation layout and which fused
kernels are split back into their parts.

Why measure: the layout pass's NHWC and the fusion pass's "fuse every epilogue" are
rules of thumb. NHWC wins when the channels fill vectors and loses when a model is all
tiny channel counts over large maps; a fused epilogue saves a trip through memory but a
heavy one (an erf, a HardSwish) can break the blocked kernel's vectorization. Only the
machine knows, so ``decide_layout`` builds the model's kernels in each candidate layout
(NCHW as imported, NHWC) and times whole runs, interleaved, keeping the faster;
``decide_splits`` builds the model once fused and once with its heavy kernels split
(``passes.split_kernels``), profiles both, and splits back each distinct kernel whose
fused time exceeds its parts' by more than the noise. Both use the schedules the build
would use: under ``search.apply_history_best`` the log's records, else the defaults.

Timing follows the measuring protocol's settings (a ``search.MeasureConfig``: ``number``
runs per timing, ``repeat`` interleaved timings, ``min_repeat_ms``, ``n_threads``), or an
injected timer, so the decision logic is testable without a clock; ``measure=False``
keeps the rules (NHWC, every fusion). A blocked NCHW[x]c layout is not a candidate: the
layout pass and the kernels know NCHW and NHWC only.

The decisions come back as a frozen ``GraphDecisions`` beside the optimized graph;
``lines()`` is what ``tvmlite compile`` and ``tvmlite tune MODEL.onnx`` print.

Map: GraphDecisions and SplitMeasure · timers (interleaved_model_timer,
interleaved_kernel_timer) · decide_layout (and concat_counts: the concats still copied)
· decide_splits · prepacked_weights.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from tvmlite.graph.build import GraphModule, build_graph
from tvmlite.graph.ir import Graph, GraphError, Kernel
from tvmlite.graph.kernel import kernel_key
from tvmlite.graph.passes import PIPELINE, choose_layout, fold_constants
from tvmlite.graph.passes.layout import DEFAULT_LAYOUT, LAYOUTS, WINDOWED
from tvmlite.graph.passes.split import parts_of, split_kernels
from tvmlite.target.target import Target

if TYPE_CHECKING:   # graph core does not import the search at run time
    from tvmlite.search.measure.protocol import MeasureConfig

__all__ = ["GraphDecisions", "SplitMeasure", "ModelTimer", "KernelTimer", "optimize_in",
           "decide_layout", "concat_counts", "decide_splits", "split_candidates",
           "prepacked_weights",
           "interleaved_model_timer", "interleaved_kernel_timer", "feeds_for",
           "LAYOUT_NOISE", "SPLIT_NOISE", "HEAVY_NODES", "HEAVY_OPS"]

Feeds = Mapping[str, np.ndarray]
ModelTimer = Callable[[Sequence[GraphModule], Feeds], Sequence[float]]
"""Seconds per whole run of each module on the feeds."""
KernelTimer = Callable[[Sequence[GraphModule], Feeds], Sequence[Mapping[str, float]]]
"""Seconds per call of each kernel (by name) of each module on the feeds."""

LAYOUT_NOISE = 0.03   # a layout must be this much faster to replace NHWC
SPLIT_NOISE = 0.05    # the parts must be this much faster than the fused kernel
HEAVY_NODES = 3       # nodes around an anchor that make its fusion worth measuring ...
HEAVY_OPS = frozenset({"erf", "gelu", "exp", "tanh", "sigmoid", "log", "sqrt", "div", "pow",
                       "hard_swish", "hard_sigmoid", "where"})   # ... or any one of these
_REPEAT, _MIN_MS = 9, 10.0   # the timers' settings without a MeasureConfig


@dataclass(frozen=True)
class SplitMeasure:
    """One distinct fused kernel measured against its parts: its kernels (the ones
    sharing its computation), the seconds of all their calls fused and split, and
    whether it was split back; ``as_tuned``: decided by the log, which holds records of
    one side only (a tuning tuned that side: ``decide_splits``), not by the times."""
    kernels: tuple[str, ...]
    fused: float
    parts: float
    split: bool
    as_tuned: bool = False


@dataclass(frozen=True)
class GraphDecisions:
    """What was chosen for a graph, and from what.

    ``layout`` is the activation layout; ``layout_how`` says how it was chosen:
    "measured" (``layout_seconds``: a whole run's median per candidate), "given",
    "default" (not measured: the layout pass's rule) or "nothing to choose" (no conv,
    pool or LRN). ``split`` names the kernels split back, ``split_measures`` the
    measurements behind it (empty: not measured). ``prepacked`` is, per kernel of a
    built module, the inputs whose packing runs once at load time; ``concats`` is
    ``concat_counts``: (copy kernels, the model's concats of run-time values)."""
    layout: str
    layout_how: str
    layout_seconds: tuple[tuple[str, float], ...] = ()
    split: tuple[str, ...] = ()
    split_measures: tuple[SplitMeasure, ...] = ()
    split_noise: float = SPLIT_NOISE
    prepacked: tuple[tuple[str, tuple[str, ...]], ...] | None = None
    concats: tuple[int, int] | None = None

    def layout_line(self) -> str:
        """``layout: NHWC (measured 1.31x faster than NCHW: ...)`` or how it was set."""
        if self.layout_how != "measured":
            return f"layout:   {self.layout} ({self.layout_how})"
        times = dict(self.layout_seconds)
        mine = times[self.layout]
        others = [(k, t) for k, t in self.layout_seconds if k != self.layout]
        if not others:
            return f"layout:   {self.layout} (measured {_ms(mine)} per run)"
        name, t = min(others, key=lambda kt: kt[1])
        ratio = t / mine if mine > 0 else 1.0
        how = f"{ratio:.2f}x faster than" if ratio >= 1 else \
            f"within the noise of ({1 / ratio:.2f}x slower than)"
        return (f"layout:   {self.layout} (measured {how} {name}: {_ms(mine)} against "
                f"{_ms(t)} per run, default kernels unless a log's records)")

    def split_line(self) -> str:
        """How many measured kernels were split back, and the figures of those."""
        if not self.split_measures:
            return "split:    " + (", ".join(self.split) if self.split else
                                   "not measured (every fusion kept)")
        done = [m for m in self.split_measures if m.split]
        head = (f"split:    {len(done)} of {len(self.split_measures)} heavy fused kernel(s) "
                f"split back (split when the parts are {self.split_noise:.0%} faster)")
        tuned = sum(m.as_tuned for m in self.split_measures)
        head += f", {tuned} as the log tuned them" if tuned else ""
        if not done:
            return head
        return head + ": " + "; ".join(
            f"{m.kernels[0]}{f' +{len(m.kernels) - 1}' if len(m.kernels) > 1 else ''} "
            f"{_ms(m.fused)} fused, {_ms(m.parts)} split" for m in done)

    def prepack_line(self) -> str | None:
        if self.prepacked is None:
            return None
        packed = [k for k, ins in self.prepacked if ins]
        return (f"weights:  pre-packed at load time in {len(packed)} of {len(self.prepacked)} "
                f"kernel(s)" + (f" ({_few(packed)})" if packed else ""))

    def concat_line(self) -> str | None:
        """How many of the model's run-time concats are still copies (``concat_counts``)."""
        if not self.concats or not self.concats[1]:
            return None
        copies, model = self.concats
        why = "the others taken apart by the convs and pools that read them" \
            if copies < model else "their readers cannot take them apart for less"
        return (f"concats:  {copies} copy kernel(s) for the model's {model} concat(s) of "
                f"run-time values ({why})")

    def lines(self) -> list[str]:
        """The lines the CLI prints."""
        out = [self.layout_line(), self.split_line()]
        extra = [self.concat_line(), self.prepack_line()]
        return out + [x for x in extra if x]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} us" if seconds < 1e-3 else f"{seconds * 1e3:.4g} ms"


def _few(names: Sequence[str], n: int = 4) -> str:
    return ", ".join(names[:n]) + (f" +{len(names) - n} more" if len(names) > n else "")


# -- timers ------------------------------------------------------------------------------------

def feeds_for(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs of the model's types: normal floats, zeros for integers and
    booleans (token ids, masks: index 0 is valid for every gather)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in graph.inputs:
        t = graph.types[name]
        dt = np.dtype(t.dtype)
        out[name] = rng.standard_normal(t.shape).astype(dt) if dt.kind == "f" else \
            np.zeros(t.shape, dt)
    return out


def _settings(config: "MeasureConfig | None") -> tuple[int, int, float, int | None]:
    if config is None:
        return 1, _REPEAT, _MIN_MS, None
    return config.number, config.repeat, config.min_repeat_ms, config.n_threads


def _set_threads(mods: Sequence[GraphModule], n: int | None) -> None:
    if n is not None:
        for m in mods:
            for k in m.kernels:
                if k.module is not None:
                    k.module.set_num_threads(n)


def interleaved_model_timer(config: "MeasureConfig | None" = None) -> ModelTimer:
    """A ModelTimer: ``repeat`` rounds, each timing ``number`` whole runs of every module
    in turn (raised until a timing lasts ``min_repeat_ms``), so the modules share the
    machine's state; the median per module."""
    number, repeat, min_ms, threads = _settings(config)

    def timer(mods: Sequence[GraphModule], feeds: Feeds) -> list[float]:
        _set_threads(mods, threads)
        runs = [m.time_evaluator(number=1, repeat=1) for m in mods]
        counts = []
        for run in runs:   # a warm-up run each, which also sizes ``number``
            first = run(feeds).median
            need = int(min_ms * 1e-3 / first) + 1 if first > 0 else 1
            counts.append(max(number, need))
        evaluators = [m.time_evaluator(number=n, repeat=1) for m, n in zip(mods, counts)]
        costs: list[list[float]] = [[] for _ in mods]
        for _ in range(repeat):
            for i, ev in enumerate(evaluators):
                costs[i].append(ev(feeds).median)
        return [statistics.median(c) for c in costs]
    return timer


def interleaved_kernel_timer(config: "MeasureConfig | None" = None) -> KernelTimer:
    """A KernelTimer: ``repeat`` rounds of ``GraphModule.profile`` over the modules in
    turn (weights packed once, as at load time); the median per kernel."""
    _, repeat, _, threads = _settings(config)

    def timer(mods: Sequence[GraphModule], feeds: Feeds) -> list[dict[str, float]]:
        _set_threads(mods, threads)
        seen: list[dict[str, list[float]]] = [{} for _ in mods]
        for _ in range(max(1, repeat // 3)):
            for i, m in enumerate(mods):
                for name, t in m.profile(feeds, repeat=3):
                    seen[i].setdefault(name, []).append(t)
        return [{k: statistics.median(v) for k, v in s.items()} for s in seen]
    return timer


# -- the layout --------------------------------------------------------------------------------

def optimize_in(g: Graph, layout: str) -> Graph:
    """``g`` through ``passes.PIPELINE`` with the layout pass computing in ``layout``."""
    for p in PIPELINE:
        g = choose_layout(g, layout) if p is choose_layout else p(g)
    return g


def _layout_arg(layout: str) -> str:
    if not isinstance(layout, str) or layout.upper() not in (*LAYOUTS, "AUTO"):
        raise GraphError(f"layout must be 'auto' or one of {LAYOUTS}, got {layout!r}")
    return layout.upper()


def decide_layout(graph: Graph, target: Any = None, layout: str = "auto",
                  measure: bool = True, timer: ModelTimer | None = None,
                  config: "MeasureConfig | None" = None, noise: float = LAYOUT_NOISE,
                  feeds: Feeds | None = None) -> tuple[Graph, GraphDecisions]:
    """``graph`` optimized (fused) in the chosen layout, and the decision.

    ``layout`` "NCHW"/"NHWC" is taken as given; "auto" measures both (``timer``, else
    ``interleaved_model_timer(config)``) and keeps the faster, NHWC unless NCHW is faster
    by more than ``noise``. Without a conv, pool or LRN there is nothing to choose;
    ``measure=False`` (or a target this machine cannot run, or a symbolic input
    dimension: no one size to time) keeps the default NHWC."""
    if graph.kernels is not None:
        raise GraphError(f"decide_layout: graph {graph.name!r} is optimized already; pass "
                         f"the graph as imported (frontend.from_onnx)")
    g, decisions = _chosen_layout(graph, target, layout, measure, timer, config, noise, feeds)
    return g, replace(decisions, concats=concat_counts(graph, g))


def concat_counts(imported: Graph, optimized: Graph) -> tuple[int, int]:
    """(concat kernels of ``optimized``, concats of run-time values in ``imported``): a
    concat the graph passes took apart (``passes.dissolve_concats``) is no copy; shape
    arithmetic's concats fold to constants and count in neither."""
    model = sum(n.op == "concat" for n in fold_constants(imported).nodes)
    return sum(k.nodes[-1].op == "concat" for k in optimized.kernels or ()), model


def _chosen_layout(graph: Graph, target: Any, layout: str, measure: bool,
                   timer: ModelTimer | None, config: "MeasureConfig | None", noise: float,
                   feeds: Feeds | None) -> tuple[Graph, GraphDecisions]:
    choice = _layout_arg(layout)
    if choice != "AUTO":
        return optimize_in(graph, choice), GraphDecisions(choice, "given")
    if not any(n.op in WINDOWED for n in graph.nodes):
        g = optimize_in(graph, DEFAULT_LAYOUT)
        return g, GraphDecisions(g.layout, "nothing to choose: no conv, pool or LRN")
    target = Target.resolve(target)
    unmeasurable = _unmeasurable(graph, target)
    if not measure or unmeasurable:
        why = "not measured" + (f": {unmeasurable}" if measure else "")
        return optimize_in(graph, DEFAULT_LAYOUT), GraphDecisions(DEFAULT_LAYOUT,
                                                                  f"default, {why}")
    candidates = {name: optimize_in(graph, name) for name in ("NCHW", "NHWC")}
    mods = [build_graph(g, target, quiet=True) for g in candidates.values()]
    seconds = list((timer or interleaved_model_timer(config))(mods, feeds or feeds_for(graph)))
    _check_times(seconds, len(mods), "timer")
    times = dict(zip(candidates, seconds))
    best = DEFAULT_LAYOUT
    for name, t in times.items():
        if t * (1 + noise) < times[best]:
            best = name
    return candidates[best], GraphDecisions(best, "measured", tuple(times.items()))


def _unmeasurable(graph: Graph, target: Target) -> str:
    """Why ``graph`` cannot be timed for ``target`` here ("" when it can)."""
    host = Target.host()
    if target.arch != host.arch or not set(target.features) <= set(host.features):
        return "the target is not this CPU"
    if any(not isinstance(d, int) for i in graph.inputs for d in graph.types[i].shape):
        return "symbolic input dimensions"
    return ""


def _check_times(seconds: Sequence[Any], n: int, what: str) -> None:
    if len(seconds) != n or not all(isinstance(t, (int, float)) and t >= 0 for t in seconds):
        raise TypeError(f"decisions: the {what} must return {n} non-negative numbers of "
                        f"seconds, got {list(seconds)!r}")


# -- splits ------------------------------------------------------------------------------------

def _heavy(k: Kernel, min_nodes: int) -> bool:
    parts = parts_of(k)
    if parts is None:
        return False
    around = parts[0] + parts[2]
    return len(around) >= min_nodes or any(n.op in HEAVY_OPS for n in around)


def split_candidates(g: Graph, min_nodes: int = HEAVY_NODES) -> list[list[str]]:
    """The fused kernels worth measuring against their parts, grouped by computation
    (``kernel_key``: identical kernels are decided together, as they are one tuning
    task): an anchor with ``min_nodes`` or more nodes around it, or one of
    ``HEAVY_OPS`` (a bias and a ReLU are not worth a measurement)."""
    if g.kernels is None:
        raise GraphError(f"split_candidates: graph {g.name!r} is not fused yet")
    groups: dict[str, list[str]] = {}
    for k in g.kernels:
        if _heavy(k, min_nodes):
            groups.setdefault(kernel_key(g, k), []).append(k.name)
    return list(groups.values())


def decide_splits(graph: Graph, target: Any = None, decisions: GraphDecisions | None = None,
                  measure: bool = True, timer: KernelTimer | None = None,
                  config: "MeasureConfig | None" = None, noise: float = SPLIT_NOISE,
                  min_nodes: int = HEAVY_NODES, feeds: Feeds | None = None
                  ) -> tuple[Graph, GraphDecisions]:
    """``graph`` (fused) with the kernels that run faster as their parts split back
    (``passes.split_kernels``), and ``decisions`` (else a record of the graph's layout)
    with the split and its measurements. Each group of ``split_candidates`` is split
    when its fused calls take longer than its parts' by more than ``noise`` in each of
    two timings (``timer``, else ``interleaved_kernel_timer(config)``); the measure
    records their means. Nothing is
    split without a measurement (``measure=False``, another machine's target, a symbolic
    input dimension).

    Under a log's records (``apply_history_best``) that cover one side of a group only,
    the fused kernel or its parts, that side is built whatever the times say: a tuning
    with ``--split auto`` decided before its tasks existed and tuned that side, and its
    compile must not pick the kernels it never tuned."""
    if graph.kernels is None:
        raise GraphError(f"decide_splits: graph {graph.name!r} is not fused yet (run "
                         f"decide_layout or graph.optimize first)")
    base = decisions or GraphDecisions(graph.layout, "as given")
    groups = split_candidates(graph, min_nodes)
    target = Target.resolve(target)
    if not measure or not groups or _unmeasurable(graph, target):
        return graph, replace(base, split=(), split_measures=(), split_noise=noise)
    split = split_kernels(graph, [n for grp in groups for n in grp])
    mods = [build_graph(g, target, quiet=True) for g in (graph, split)]
    time_kernels = timer or interleaved_kernel_timer(config)
    feeds = feeds or feeds_for(graph)
    names = {k.name for k in split.kernels or ()}
    # two independent measurements, each interleaving fused and split: a group splits
    # only when both say its parts win by more than the noise (a burst of other work on
    # a small machine can slow one kernel's rounds several-fold)
    votes: list[list[tuple[float, float]]] = [[] for _ in groups]
    for _ in range(2):
        per = list(time_kernels(mods, feeds))
        if len(per) != 2 or not all(isinstance(p, Mapping) for p in per):
            raise TypeError(f"decide_splits: the timer must return one mapping of kernel "
                            f"name to seconds per module, got {per!r}")
        fused_t, split_t = per
        for vote, grp in zip(votes, groups):
            vote.append((sum(_time_of(fused_t, n) for n in grp),
                         sum(_time_of(split_t, n + s) for n in grp
                             for s in ("_prologue", "", "_epilogue") if n + s in names)))
    tuned = [{k.name for k in m.kernels if k.record is not None} for m in mods]

    def measure_of(grp: list[str], vote: list[tuple[float, float]]) -> SplitMeasure:
        fused_t, parts_t = (statistics.mean(x[i] for x in vote) for i in (0, 1))
        parts = [n + s for n in grp for s in ("_prologue", "", "_epilogue") if n + s in names]
        # any record counts: a small budget may not reach every task of the side tuned
        fused_tuned, parts_tuned = bool(set(grp) & tuned[0]), bool(set(parts) & tuned[1])
        if fused_tuned != parts_tuned:   # the log tuned one side: build what was tuned
            return SplitMeasure(tuple(grp), fused_t, parts_t, parts_tuned, as_tuned=True)
        return SplitMeasure(tuple(grp), fused_t, parts_t,
                            all(f > p * (1 + noise) for f, p in vote))
    measures = [measure_of(grp, vote) for grp, vote in zip(groups, votes)]
    chosen = [n for m in measures if m.split for n in m.kernels]
    out = split_kernels(graph, chosen) if chosen else graph
    return out, replace(base, split=tuple(chosen), split_measures=tuple(measures),
                        split_noise=noise)


def _time_of(times: Mapping[str, float], name: str) -> float:
    t = times.get(name)
    if not isinstance(t, (int, float)) or t < 0:
        raise TypeError(f"decide_splits: the timer gave no time for kernel {name!r} "
                        f"(got {t!r})")
    return float(t)


def prepacked_weights(mod: GraphModule, decisions: GraphDecisions) -> GraphDecisions:
    """``decisions`` with ``prepacked`` read from the built ``mod``: per kernel, the
    inputs its schedule packs once at load time (the record's choice, or the default
    schedule's)."""
    return replace(decisions, prepacked=tuple(
        (k.name, tuple(p.input for p in k.code.packs)) for k in mod.kernels))

