"""Dead-node removal: nodes and constants nothing reads on the way to the outputs go."""
from __future__ import annotations

from tvmlite.graph.ir import Graph


def remove_dead(g: Graph) -> Graph:
    """``g`` with only the nodes the outputs depend on, and only the constants they read."""
    live = set(g.outputs)
    kept = []
    for n in reversed(g.nodes):
        if any(o in live for o in n.outputs):
            kept.append(n)
            live.update(i for i in n.inputs if i)
    kept.reverse()
    consts = {k: v for k, v in g.constants.items() if k in live}
    types = {k: t for k, t in g.types.items()
             if k in live or k in g.inputs or any(k in n.outputs for n in kept)}
    if len(kept) == len(g.nodes) and len(consts) == len(g.constants):
        return g
    return g.replace(nodes=tuple(kept), constants=consts, types=types)
