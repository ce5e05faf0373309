"""Layout: one data layout for the whole graph.

Every conv and pool of the graph computes in the same layout, so no conversion sits
between kernels; conversions would be needed only at the model's inputs and outputs.
The layout chosen is NCHW, the models' own, so there are none: the pass checks that
every 4-D windowed op reads a 4-D NCHW value and records the choice on the graph."""
from __future__ import annotations

from tvmlite.graph.ir import Graph, GraphError

LAYOUT = "NCHW"


def choose_layout(g: Graph) -> Graph:
    """``g`` with ``layout`` set to the one layout its windowed ops compute in."""
    for n in g.nodes:
        if n.op in ("conv", "max_pool", "avg_pool", "lrn") and len(g.types[n.inputs[0]].shape) != 4:
            raise GraphError(f"node {n.name!r} ({n.op}): input {n.inputs[0]!r} is not 4-D "
                             f"{LAYOUT} ({g.types[n.inputs[0]]})")
    return g if g.layout == LAYOUT else g.replace(layout=LAYOUT)
