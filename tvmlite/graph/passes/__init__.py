"""The graph passes, one per file, each a pure function ``Graph -> Graph``, run in the
order of ``PIPELINE`` by ``optimize`` (like ``lower``'s pipeline for loops).

Map (module: pass): quantize.py fold_qdq (QDQ patterns to integer kernels) ·
zero_points.py fold_zero_points (integer kernels as plain dot products) ·
precision.py lower_precision (a "bf16" graph's convs and matmuls on bf16) ·
constants.py fold_constants · identity.py remove_identity
(Dropout/Identity) · batch_norm.py fold_batch_norm · dead_nodes.py remove_dead ·
concat.py dissolve_concats (channel concats taken apart by their readers) ·
layout.py choose_layout · vector_channels.py whole_vector_channels (a conv's output
channels padded to whole vectors) · fusion.py fuse; split.py split_kernels (not in the pipeline:
measured decisions use it) and edit.py GraphEdit (the working copy a rewriting pass
adds values to). The modules are not named after their
functions, so importing one never shadows the function this package exports.
"""
from __future__ import annotations

from typing import Callable

from tvmlite.graph.ir import Graph
from tvmlite.graph.passes.batch_norm import fold_batch_norm
from tvmlite.graph.passes.concat import dissolve_concats
from tvmlite.graph.passes.constants import fold_constants
from tvmlite.graph.passes.dead_nodes import remove_dead
from tvmlite.graph.passes.fusion import fuse
from tvmlite.graph.passes.identity import remove_identity
from tvmlite.graph.passes.layout import choose_layout
from tvmlite.graph.passes.precision import lower_precision
from tvmlite.graph.passes.quantize import fold_qdq
from tvmlite.graph.passes.vector_channels import whole_vector_channels
from tvmlite.graph.passes.zero_points import fold_zero_points

PIPELINE: tuple[Callable[[Graph], Graph], ...] = (
    fold_qdq, fold_constants, remove_identity, fold_batch_norm, fold_constants,
    fold_zero_points, dissolve_concats, remove_dead, choose_layout, whole_vector_channels,
    lower_precision, fuse,
)


def optimize(g: Graph, debug: bool = False) -> Graph:
    """``g`` through every pass of ``PIPELINE``; ``debug`` prints the graph after each.
    A graph optimized already (fused: ``from_onnx`` of a model over a symbolic size
    returns one) comes back as it is: through the passes again, its NHWC convs were
    taken for the model's own and it built kernels that read outside their inputs."""
    if g.kernels is not None:
        return g
    for p in PIPELINE:
        g = p(g)
        if debug:
            print(f"-- after {p.__name__}\n{g}")
    return g


__all__ = ["PIPELINE", "optimize", "fold_qdq", "fold_constants", "remove_identity",
           "fold_batch_norm", "fold_zero_points", "dissolve_concats", "remove_dead",
           "choose_layout", "lower_precision", "fuse"]
