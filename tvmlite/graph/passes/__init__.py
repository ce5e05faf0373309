"""The graph passes, one per file, each a pure function ``Graph -> Graph``, run in the
order of ``PIPELINE`` by ``optimize`` (like ``lower``'s pipeline for loops).

Map: fold_constants · remove_identity (Dropout/Identity) · fold_batch_norm ·
dead_nodes · layout · fuse.
"""
from __future__ import annotations

from typing import Callable

from tvmlite.graph.ir import Graph
from tvmlite.graph.passes.dead_nodes import remove_dead
from tvmlite.graph.passes.fold_batch_norm import fold_batch_norm
from tvmlite.graph.passes.fold_constants import fold_constants
from tvmlite.graph.passes.fuse import fuse
from tvmlite.graph.passes.layout import choose_layout
from tvmlite.graph.passes.remove_identity import remove_identity

PIPELINE: tuple[Callable[[Graph], Graph], ...] = (
    fold_constants, remove_identity, fold_batch_norm, fold_constants, remove_dead,
    choose_layout, fuse,
)


def optimize(g: Graph, debug: bool = False) -> Graph:
    """``g`` through every pass of ``PIPELINE``; ``debug`` prints the graph after each."""
    for p in PIPELINE:
        g = p(g)
        if debug:
            print(f"-- after {p.__name__}\n{g}")
    return g


__all__ = ["PIPELINE", "optimize", "fold_constants", "remove_identity", "fold_batch_norm",
           "remove_dead", "choose_layout", "fuse"]
