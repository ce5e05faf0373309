"""Constant folding: a node whose inputs are all constants becomes a constant.

This covers shape arithmetic (Shape -> Gather -> Concat -> Reshape chains), ConstantOfShape
and any op on weights (a transposed or reshaped weight, a folded batch-norm scale): the
node is computed once by its numpy meaning (``graph.ops.evaluate``) at compile time."""
from __future__ import annotations

from tvmlite.graph.ir import Graph, TensorType
from tvmlite.graph.ops import evaluate


def fold_constants(g: Graph) -> Graph:
    """``g`` with every all-constant node replaced by its value."""
    consts = dict(g.constants)
    types = dict(g.types)
    kept = []
    for n in g.nodes:
        ins = [i for i in n.inputs if i]
        if ins and all(i in consts for i in ins) and n.output not in g.outputs:
            value = evaluate(n, [consts[i] for i in ins])
            consts[n.output] = value
            types[n.output] = TensorType(tuple(value.shape), value.dtype.name)
        else:
            kept.append(n)
    if len(kept) == len(g.nodes):
        return g
    return g.replace(nodes=tuple(kept), constants=consts, types=types)
