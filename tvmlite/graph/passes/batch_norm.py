"""BatchNormalization at inference is ``x * k + (beta - mean * k)`` with
``k = gamma / sqrt(var + eps)``, per channel (axis 1).

Folded into the Conv before it when that conv's output feeds only the batch norm
(weights scaled by ``k`` per output channel, the shift added as a bias), or into a
MatMul by a constant (columns scaled); else it becomes a per-channel multiply and add,
two elementwise nodes that fuse into the kernel before them.

Parameters that are not constants here (run-time inputs; a QDQ model's quantized
gamma and beta are DequantizeLinear nodes until ``fold_constants`` evaluates them) get
``k`` and the shift as per-channel nodes on them, so the constant folding after this
pass leaves the same multiply and add. The importer therefore keeps every inference
batch norm as one node: decomposed there, a QDQ model's batch norm was the formula's
subtract, square root, two divides, multiply and add in each kernel's epilogue."""
from __future__ import annotations

from typing import Any

import numpy as np

from tvmlite.graph.ir import Graph, Node, TensorType


def fold_batch_norm(g: Graph) -> Graph:
    """``g`` with every batch_norm folded into a conv, a matmul or a multiply and add."""
    if not any(n.op == "batch_norm" for n in g.nodes):
        return g
    consts, types = dict(g.constants), dict(g.types)
    nodes = list(g.nodes)
    uses: dict[str, int] = {}
    for n in nodes:
        for i in n.inputs:
            uses[i] = uses.get(i, 0) + 1
    producer = {n.output: k for k, n in enumerate(nodes)}

    def add_const(base: str, value: np.ndarray) -> str:
        name, k = base, 0
        while name in types:
            k += 1
            name = f"{base}_{k}"
        consts[name] = np.asarray(value, order="C")
        types[name] = TensorType(tuple(value.shape), value.dtype.name)
        return name

    out: list[Node | None] = []
    for idx, n in enumerate(nodes):
        if n.op != "batch_norm":
            out.append(n)
            continue
        params = [consts.get(i) for i in n.inputs[1:5]]
        if any(p is None for p in params):
            out += _scale_and_shift_nodes(n, types, add_const)
            continue
        gamma, beta, mean, var = (np.asarray(p, np.float64) for p in params)
        k = gamma / np.sqrt(var + n.attr("epsilon"))
        shift = beta - mean * k
        x = n.inputs[0]
        rank = len(types[x].shape)
        dtype = np.dtype(types[x].dtype)
        p = producer.get(x)
        prev = nodes[p] if p is not None else None
        single = uses.get(x, 0) == 1 and x not in g.outputs
        if prev is not None and single and prev.op == "conv" and prev.inputs[1] in consts:
            w = consts[prev.inputs[1]]
            w2 = add_const(prev.inputs[1] + "_bn", (w * k.reshape(-1, 1, 1, 1)).astype(w.dtype))
            pos = out.index(prev)
            out[pos] = Node("conv", (prev.inputs[0], w2), prev.outputs, prev.attrs, prev.name)
            b = add_const(n.output + "_shift", shift.reshape(-1, 1, 1).astype(dtype))
            out.append(Node("add", (x, b), n.outputs, (), n.name))
            continue
        conv = _biased_conv(prev, nodes, producer, consts, uses) if single else None
        if prev is not None and conv is not None:
            w, bias = consts[conv.inputs[1]], consts[prev.inputs[1]]
            w2 = add_const(conv.inputs[1] + "_bn", (w * k.reshape(-1, 1, 1, 1)).astype(w.dtype))
            b2 = add_const(prev.inputs[1] + "_bn", (bias.reshape(-1) * k + shift)
                           .reshape(-1, 1, 1).astype(bias.dtype))
            out[out.index(conv)] = Node("conv", (conv.inputs[0], w2), conv.outputs, conv.attrs,
                                        conv.name)
            out[out.index(prev)] = None
            out.append(Node("add", (prev.inputs[0], b2), n.outputs, (), n.name))
            continue
        shape = (-1,) + (1,) * (rank - 2)
        kc = add_const(n.output + "_scale", k.reshape(shape).astype(dtype))
        sc = add_const(n.output + "_shift", shift.reshape(shape).astype(dtype))
        out += _multiply_add(n, kc, sc, types)
    return g.replace(nodes=tuple(o for o in out if o is not None), constants=consts,
                     types=types)


def _fresh(types: dict, base: str, value_type: TensorType) -> str:
    """A value name not in ``types`` (``base``, else ``base_``...), typed there."""
    name = base
    while name in types:
        name += "_"
    types[name] = value_type
    return name


def _multiply_add(n: Node, k: str, shift: str, types: dict) -> list[Node]:
    """Batch norm ``n`` as ``x * k + shift`` (per-channel values ``k`` and ``shift``)."""
    mid = _fresh(types, n.output + "_scaled", types[n.inputs[0]])
    return [Node("mul", (n.inputs[0], k), (mid,), (), n.name),
            Node("add", (mid, shift), n.outputs, (), n.name)]


def _scale_and_shift_nodes(n: Node, types: dict, add_const: Any) -> list[Node]:
    """``x * k + shift`` of a batch norm whose parameters are values, not constants:
    ``k = gamma / sqrt(var + eps)`` and ``shift = beta - mean * k`` as nodes on them,
    reshaped per channel (axis 1); new values' types go into ``types``."""
    x = types[n.inputs[0]]
    shape = (x.shape[1],) + (1,) * (len(x.shape) - 2)
    per_channel = TensorType(shape, x.dtype)
    nodes: list[Node] = []

    def emit(op: str, *inputs: str, attrs: tuple = ()) -> str:
        name = _fresh(types, f"{n.output}_{op}", per_channel)
        nodes.append(Node(op, inputs, (name,), attrs, n.name))
        return name
    gamma, beta, mean, var = (emit("reshape", i, attrs=(("shape", shape),))
                              for i in n.inputs[1:5])
    eps = add_const(n.output + "_eps", np.asarray(n.attr("epsilon"), x.dtype))
    k = emit("div", gamma, emit("sqrt", emit("add", var, eps)))
    shift = emit("sub", beta, emit("mul", mean, k))
    return nodes + _multiply_add(n, k, shift, types)


def _biased_conv(add: Node | None, nodes: list[Node], producer: dict[str, int],
                 consts: dict, uses: dict[str, int]) -> Node | None:
    """The conv of ``add = conv(x, w) + bias`` (constant w and per-channel bias, the conv
    read only by the add), or None."""
    if add is None or add.op != "add" or add.inputs[1] not in consts:
        return None
    p = producer.get(add.inputs[0])
    conv = nodes[p] if p is not None else None
    if conv is None or conv.op != "conv" or conv.inputs[1] not in consts or \
            uses.get(conv.output, 0) != 1:
        return None
    co = consts[conv.inputs[1]].shape[0]
    return conv if consts[add.inputs[1]].shape == (co, 1, 1) else None
