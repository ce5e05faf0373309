"""The graph level: a model as frozen nodes over named values (``ir.py``), the passes
that fold, simplify and fuse it (``passes/``), and its build into one module of fused
kernels (``build.py``; ``tvmlite.build(graph)`` calls it).

Map: ir.py (Graph, Node, Kernel) · ops.py (kinds, types, numpy meaning) · compute.py
(nodes as te stages) · kernel.py (a fused kernel as one te compute and its default
schedule) · build.py (GraphModule) · passes/.
"""
from __future__ import annotations

from tvmlite.graph.ir import Graph, GraphError, Kernel, Node, TensorType
from tvmlite.graph.passes import PIPELINE, optimize

__all__ = ["Graph", "GraphError", "Kernel", "Node", "TensorType", "PIPELINE", "optimize"]
