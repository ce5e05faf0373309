"""``tvmlite.build``: one entry point for a schedule and for a whole model.

A schedule becomes one kernel (``runtime.module.build``); a ``tvmlite.graph.Graph``
becomes a model of kernels (``graph.build.build_graph``), as TVM's ``build`` takes a
``te`` schedule or a Relay/Relax module. The choice sits here, above both builds, so
neither imports the other's caller: the graph build calls the kernel build.
"""
from __future__ import annotations

from typing import Any, Sequence

from tvmlite.graph.build import build_graph
from tvmlite.graph.ir import Graph
from tvmlite.runtime.module import build as build_kernel
from tvmlite.schedule.schedule import Schedule
from tvmlite.target.target import Target

__all__ = ["build"]


def build(s: Schedule | Graph, args: Sequence[Any] | Target | str | None = None,
          target: Target | str | None = None, name: str = "default_function",
          explain: bool = False, precision: str | None = None) -> Any:
    """Build a schedule into a kernel Module (``build(s, args, target=None, name=...,
    explain=False)``: see ``tvmlite.runtime.module.build``), or a whole model:
    ``build(graph, target=None, precision=None)`` gives a
    ``tvmlite.graph.build.GraphModule`` (its second argument may be the target;
    ``precision="bf16"`` computes its convs and matmuls on bfloat16 weights and
    activations with float32 sums: ``graph.passes.precision``)."""
    if isinstance(s, Graph):
        return build_graph(s, target if target is not None else args, precision=precision)
    if precision is not None:
        raise TypeError("build: precision= is for a model (a tvmlite.graph.Graph); a "
                        "schedule computes in its tensors' dtypes")
    return build_kernel(s, args, target, name, explain)  # type: ignore[arg-type]  # a schedule's args
