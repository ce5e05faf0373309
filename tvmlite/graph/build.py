"""``tvmlite.build(graph)``: every fused kernel compiled, and a module that runs them.

Each distinct kernel (``kernel_key``) is lowered and compiled once: with the schedule
of its record when a dispatch context (``search.apply_history_best``) knows its
workload key (``dispatch.current_lookup``), else with ``default_schedule``. The build
says how many kernels had no record. ``GraphModule.run`` checks the feeds (names,
shapes, dtypes, each error names the input) and calls the kernels in order;
``export_library`` writes the deployable C library (``tvmlite.codegen_c.model``).
"""
from __future__ import annotations

import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tvmlite.graph.dispatch import current_lookup
from tvmlite.graph.ir import Graph, GraphError
from tvmlite.graph.kernel import KernelCompute, default_schedule, kernel_compute, kernel_key
from tvmlite.graph.passes import optimize
from tvmlite.graph.passes.precision import check_precision
from tvmlite.graph.symbolic import shape_at
from tvmlite.runtime.arrays import empty
from tvmlite.runtime.module import Module, TimeResult, generate_c
from tvmlite.runtime.module import build as build_kernel
from tvmlite.schedule.schedule import Schedule
from tvmlite.target.target import Target
from tvmlite.te.bind import free_sizes

__all__ = ["GraphModule", "BuiltKernel", "KernelCode", "build_graph", "FeedError"]


class FeedError(GraphError):
    """A feed of ``GraphModule.run`` that does not match the model's inputs."""


@dataclass(frozen=True)
class KernelCode:
    """A kernel's C: its function name, source, declarations and pre-packed inputs;
    ``variants`` are the C files a dispatching kernel (a tuned dynamic kernel) calls,
    each compiled on its own, ``sizes`` the symbolic sizes it takes first (``int64_t``)."""
    name: str
    source: str
    decl: str
    packs: tuple[Any, ...]
    variants: tuple[str, ...] = ()
    sizes: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuiltKernel:
    """One kernel of the graph: its compute, schedule (or, for a tuned dynamic kernel,
    the lookup's dispatching kernel: variants and table), C, loaded module (None when
    built for another machine) and where its schedule came from (``record``: the
    record's summary, or None: the default schedule)."""
    name: str
    key: str
    compute: KernelCompute
    schedule: Any
    module: Module | None
    output: str
    record: Any
    code: KernelCode


def _runs_here(target: Target) -> bool:
    host = Target.host()
    return target.arch == host.arch and set(target.features) <= set(host.features)


def _schedule_of(kc: KernelCompute, key: str, target: Target,
                 largest: dict[str, int]) -> tuple[Any, Any]:
    """(Schedule or dispatching kernel, record summary or None) of a kernel: the
    lookup's answer, else the default schedule. A lookup answers a dynamic kernel with
    an object that builds its dispatcher (``build(target, name)`` -> Module,
    ``sources(target, name)`` -> C texts): core does not import the search."""
    lookup = current_lookup()
    found = lookup(key, kc.tensors, target) if lookup is not None else None
    if found is not None:
        return found
    return default_schedule(kc, target, largest), None


def build_graph(graph: Graph, target: Any = None, quiet: bool = False,
                precision: str | None = None) -> "GraphModule":
    """Compile every kernel of ``graph`` (optimized first when it is not fused yet);
    ``precision`` ("fp32", "bf16": ``passes.precision``) sets the graph's before it is
    optimized (a fused graph has its precision already: a different one is an error)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"build_graph: expected a tvmlite.graph.Graph, got "
                        f"{type(graph).__name__}")
    target = Target.resolve(target)
    if precision is not None and check_precision(precision) != graph.precision:
        if graph.kernels is not None:
            raise GraphError(f"build_graph: graph {graph.name!r} was optimized in "
                             f"{graph.precision}; pass precision={precision!r} with the "
                             f"graph as imported")
        graph = graph.replace(precision=precision)
    if graph.kernels is None:
        graph = optimize(graph)
    assert graph.kernels is not None
    largest = {n: hi for n, _, hi in graph.sizes}
    plans = []
    distinct: dict[str, tuple[KernelCompute, Any, Any]] = {}
    for k in graph.kernels:
        kc = kernel_compute(graph, k)
        key = kernel_key(graph, k)
        if key not in distinct:
            s, record = _schedule_of(kc, key, target, largest)
            distinct[key] = (kc, s, record)
        plans.append((k, kc, key))

    here = _runs_here(target)

    def compile_one(item: tuple[str, tuple[KernelCompute, Any, Any]]
                    ) -> tuple[str, tuple[Module | None, KernelCode]]:
        key, (kc, s, _) = item
        name = f"k_{key[:16]}"
        if not isinstance(s, Schedule):   # a tuned dynamic kernel: its dispatcher
            *variants, source = s.sources(target, name)
            dmod = s.build(target, name) if here else None
            decl = dmod.decl if dmod is not None else ""
            return key, (dmod, KernelCode(name, source, decl, tuple(getattr(
                dmod, "packs", ())), tuple(variants), tuple(free_sizes(list(kc.tensors)))))
        if not here:   # another machine's code: generated here, compiled at export
            func, source, decl = generate_c(s, list(kc.tensors), target, name)
            return key, (None, KernelCode(name, source, decl, tuple(getattr(func, "packs", ())),
                                          sizes=tuple(getattr(func, "sizes", ()))))
        # through the object export_library links, so an export compiles nothing again
        mod = build_kernel(s, list(kc.tensors), target, name=name, linkable=True)
        return key, (mod, KernelCode(mod.name, mod.source, mod.decl, tuple(mod.packs),
                                     sizes=mod.sizes))
    with ThreadPoolExecutor(max_workers=max(1, min(4, Target.host().cores))) as pool:
        built = dict(pool.map(compile_one, distinct.items()))
    kernels = tuple(BuiltKernel(k.name, key, kc, distinct[key][1], built[key][0], k.output,
                                distinct[key][2], built[key][1]) for k, kc, key in plans)
    missing = sum(1 for key, (_, _, r) in distinct.items() if r is None)
    if missing and not quiet:
        print(f"tvmlite.build: {missing} of {len(distinct)} distinct kernels had no tuning "
              f"record: default schedules", file=sys.stderr)
    return GraphModule(graph, kernels, target, missing)


class GraphModule:
    """A built model: ``run(feeds)`` returns the outputs in the model's order."""

    def __init__(self, graph: Graph, kernels: Sequence[BuiltKernel], target: Target,
                 kernels_without_record: int):
        self.graph, self.kernels, self.target = graph, tuple(kernels), target
        self.kernels_without_record = kernels_without_record

    def check_feeds(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The feeds as arrays of the inputs' types; a missing, unknown or ill-typed input
        is a FeedError naming it."""
        return self.bind_feeds(feeds)[0]

    def bind_feeds(self, feeds: Mapping[str, Any]) -> tuple[dict[str, np.ndarray],
                                                            dict[str, int]]:
        """``check_feeds``, and the value of each symbolic size (``Graph.sizes``), read
        from the inputs' shapes and checked against its range (a FeedError naming the
        input and axis)."""
        if not isinstance(feeds, Mapping):
            raise TypeError(f"run(feeds=...) takes a dict of input name to array, got "
                            f"{type(feeds).__name__}")
        g = self.graph
        unknown = [k for k in feeds if k not in g.inputs]
        if unknown:
            raise FeedError(f"run: {unknown[0]!r} is not an input of the model (inputs: "
                            f"{list(g.inputs)})")
        ranges = {n: (lo, hi) for n, lo, hi in g.sizes}
        sizes: dict[str, int] = {}
        arrays = {}
        for name in g.inputs:
            if name not in feeds:
                raise FeedError(f"run: input {name!r} is not given (inputs: {list(g.inputs)})")
            a = np.asarray(feeds[name])
            t = g.types[name]
            if a.ndim == len(t.shape):
                for d, (want, got) in enumerate(zip(t.shape, a.shape)):
                    n = getattr(want, "name", None)
                    if n in ranges and n not in sizes:
                        lo, hi = ranges[n]
                        if not lo <= got <= hi:
                            raise FeedError(f"run: input {name!r} has size {got} on axis {d} "
                                            f"({n}); the model runs at {n} in [{lo}, {hi}]")
                        sizes[n] = int(got)
            arrays[name] = a
        for name, a in arrays.items():
            t = g.types[name]
            want = shape_at(t.shape, sizes) if a.ndim == len(t.shape) else t.shape
            if tuple(a.shape) != tuple(want):
                shown = "" if want == tuple(t.shape) else f" (here {want})"
                raise FeedError(f"run: input {name!r} has shape {tuple(a.shape)}, the model "
                                f"takes {tuple(t.shape)}{shown}")
            if a.dtype.name != t.dtype:
                raise FeedError(f"run: input {name!r} has dtype {a.dtype.name}, the model "
                                f"takes {t.dtype}")
            arrays[name] = np.asarray(a, order="C")
        return arrays, sizes

    def _modules(self) -> list[Module]:
        mods = [k.module for k in self.kernels]
        if any(m is None for m in mods):
            raise GraphError(f"this model was built for {self.target.name or self.target.arch}"
                             f", which this machine cannot run: export_library it and run "
                             f"the library there (or under qemu)")
        return [m for m in mods if m is not None]

    def _runner(self, feeds: Mapping[str, Any]) -> tuple[Callable[[], None], dict]:
        calls, env = self._calls(feeds)
        bound = [mod.bind(*args) for mod, args in calls]

        def run() -> None:
            for call in bound:
                call()
        return run, env

    def _calls(self, feeds: Mapping[str, Any]) -> tuple[list, dict]:
        """(module, arguments) per kernel in run order -- weights a kernel reads
        pre-packed are packed here, once -- and the values by name."""
        mods = self._modules()
        env: dict[str, np.ndarray] = dict(self.graph.constants)
        fed, sizes = self.bind_feeds(feeds)
        env.update(fed)
        # a kernel holds bool values as int32 (no buffer holds bool: ir/dtypes.py)
        env = {k: v.astype(np.int32) if v.dtype == np.bool_ else v for k, v in env.items()}
        calls = []
        for k, mod in zip(self.kernels, mods):
            t = self.graph.types[k.output]
            dtype = "int32" if t.dtype == "bool" else t.dtype
            env[k.output] = empty(shape_at(t.shape, sizes), dtype)
            args = [env[v] for v in k.compute.arg_values] + [env[k.output]]
            packed = {p.input for p in mod.packs}
            if packed:   # a record pre-packs weights: pack them once, here
                args = [mod.pack(b.name, a) if b.name in packed else a
                        for a, b in zip(args, mod.arg_buffers)]
            calls.append((mod, args))
        return calls, env

    def run(self, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        """The model's outputs (copies, in the model's order) for ``feeds``."""
        run, env = self._runner(feeds)
        run()
        return [np.array(env[o], dtype=self.graph.types[o].dtype) for o in self.graph.outputs]

    def time_evaluator(self, number: int = 10, repeat: int = 3) -> Callable[..., TimeResult]:
        """A function timing ``number`` runs of the whole model per repeat on ``feeds``
        (seconds per run; the buffers are made once, outside the timing)."""
        def evaluate(feeds: Mapping[str, Any]) -> TimeResult:
            run, _ = self._runner(feeds)
            run()
            out = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                for _ in range(number):
                    run()
                out.append((time.perf_counter() - t0) / number)
            return TimeResult(tuple(out))
        return evaluate

    def profile(self, feeds: Mapping[str, Any], repeat: int = 5) -> list[tuple[str, float]]:
        """(kernel name, median seconds) of each kernel, in run order (weights packed
        once before, as the library's ``_init`` does: a pack is not a run's cost)."""
        calls, _ = self._calls(feeds)
        out = []
        for k, (mod, args) in zip(self.kernels, calls):
            call = mod.bind(*args)
            call()
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                call()
                times.append(time.perf_counter() - t0)
            out.append((k.name, statistics.median(times)))
        return out

    def export_library(self, directory: str | Path, name: str = "model") -> Path:
        """Write the deployable library into ``directory``; returns its ``lib<name>.so``."""
        from tvmlite.codegen_c.model import export_model  # codegen_c imports runtime
        return export_model(self, Path(directory), name)

    def __repr__(self) -> str:
        return (f"GraphModule({self.graph.name}, {len(self.kernels)} kernels, "
                f"{len({k.key for k in self.kernels})} distinct)")
