"""``search.extract_tasks(graph)``: one tuning task per distinct fused kernel of a model.

Kernels with the same computation (ops, shapes, attributes: ``graph.kernel.kernel_key``)
are one task whatever their weights' values; ``task.weight`` is how many times one run
of the model calls it, so the task scheduler's objective -- the weighted sum of the
tasks' best latencies -- is the model's latency. A kernel's weights are its constants
(``SearchTask(constants=...)``): the search may pre-pack them, the pack running once
at load time. The tasks' workloads are keyed exactly as ``tvmlite.build(graph)`` keys
the kernels it looks up under ``apply_history_best``, so a tuned record is found there.

In a graph with a symbolic dimension (``Graph.sizes``: ``L`` in ``[lo, hi]``) a kernel
whose shapes involve ``L`` is a dynamic task (``SearchTask(shapes={"L": (lo, hi)})``,
``task.dynamic``): it tunes once for the range with the dynamic-shape search and its
log gets a dispatch table, which ``apply_history_best`` builds into the kernel that
dispatches per size; a kernel without ``L`` stays static. ``task.flops`` of a dynamic
task are those at the largest size (the fusion pass counted them there).
"""
from __future__ import annotations

from typing import Any

from tvmlite.graph.ir import Graph
from tvmlite.graph.kernel import default_schedule, kernel_compute, kernel_key
from tvmlite.graph.passes import optimize
from tvmlite.search.records.workload import Workload
from tvmlite.search.template_free.task import SearchTask
from tvmlite.target.target import Target

__all__ = ["extract_tasks"]


def extract_tasks(graph: Graph, target: Any = None) -> list[SearchTask]:
    """The distinct kernels of ``graph`` (optimized first when not fused yet) as
    SearchTasks, in order of first use, each with ``weight``, ``kernel_names`` and
    ``dynamic`` (its shapes involve the graph's symbolic size)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"extract_tasks: expected a tvmlite.graph.Graph (from "
                        f"tvmlite.frontend.from_onnx), got {type(graph).__name__}")
    target = Target.resolve(target, "extract_tasks(target=...)")
    if graph.kernels is None:
        graph = optimize(graph)
    assert graph.kernels is not None
    ranges = {n: (lo, hi) for n, lo, hi in graph.sizes}
    largest = {n: hi for n, _, hi in graph.sizes}
    tasks: dict[str, SearchTask] = {}
    for k in graph.kernels:
        key = kernel_key(graph, k)
        if key in tasks:
            tasks[key].weight += 1
            tasks[key].kernel_names.append(k.name)
            continue
        kc = kernel_compute(graph, k)
        wl = Workload.from_tensors(list(kc.tensors), name=k.name.split("_", 1)[-1])
        shapes = {n: ranges[n] for n in wl.size_names if n in ranges} or None
        task = SearchTask(workload=wl, target=target, constants=list(kc.constants),
                          shapes=shapes)
        # measured first: a tuned model is never slower than its default build
        task.seed_steps = [default_schedule(kc, target, largest).steps]
        task.weight = 1
        task.kernel_names = [k.name]
        tasks[key] = task
    return list(tasks.values())
