"""The graph passes, each on a hand-made graph: folding, Identity removal, batch norm
folding, dead nodes, layout, fusion; and print(graph) one line per kernel."""
from __future__ import annotations

import numpy as np
import pytest

from tvmlite.graph import PIPELINE, Graph, GraphError, Node, TensorType, optimize
from tvmlite.graph.ir import attrs_of
from tvmlite.graph.ops import evaluate
from tvmlite.graph.passes import fold_batch_norm, fold_constants, fuse, remove_dead, remove_identity

F = "float32"


def t(*shape):
    return TensorType(shape, F)


def conv(x, w, out):
    return Node("conv", (x, w), (out,), attrs_of({"strides": (1, 1), "pads": (1, 1, 1, 1),
                                                  "dilations": (1, 1), "group": 1}), out)


def interpret(g, feeds):
    env = {**g.constants, **feeds}
    for n in g.nodes:
        env[n.output] = evaluate(n, [env[i] for i in n.inputs if i])
    return [env[o] for o in g.outputs]


def test_pipeline_is_listed_in_order():
    names = [p.__name__ for p in PIPELINE]
    assert names.index("fold_constants") < names.index("remove_dead") < names.index("fuse")


def test_fold_constants_computes_all_constant_nodes():
    g = Graph((Node("transpose", ("w",), ("wt",), attrs_of({"perm": (1, 0)})),
               Node("matmul", ("x", "wt"), ("y",))), ("x",), ("y",),
              {"x": t(2, 3), "w": t(4, 3), "wt": t(3, 4), "y": t(2, 4)},
              {"w": np.arange(12, dtype=np.float32).reshape(4, 3)})
    f = fold_constants(g)
    assert [n.op for n in f.nodes] == ["matmul"]
    assert np.array_equal(f.constants["wt"], g.constants["w"].T)


def test_identity_removed_and_readers_rewired():
    g = Graph((Node("relu", ("x",), ("a",)), Node("identity", ("a",), ("b",)),
               Node("relu", ("b",), ("c",))), ("x",), ("c",),
              {"x": t(3), "a": t(3), "b": t(3), "c": t(3)})
    r = remove_identity(g)
    assert [n.op for n in r.nodes] == ["relu", "relu"] and r.nodes[1].inputs == ("a",)
    # an identity straight from an input to an output stays (nothing else computes it)
    g2 = Graph((Node("identity", ("x",), ("y",)),), ("x",), ("y",), {"x": t(3), "y": t(3)})
    assert [n.op for n in remove_identity(g2).nodes] == ["identity"]


def _bn_graph(bias: bool):
    rng = np.random.default_rng(0)
    c = {"w": rng.standard_normal((4, 2, 3, 3)).astype(np.float32),
         "s": rng.random(4).astype(np.float32), "b": rng.random(4).astype(np.float32),
         "m": rng.random(4).astype(np.float32), "v": rng.random(4).astype(np.float32) + .5,
         "cb": rng.random((4, 1, 1)).astype(np.float32)}
    nodes = [conv("x", "w", "c")]
    types = {"x": t(1, 2, 5, 5), "c": t(1, 4, 5, 5), "y": t(1, 4, 5, 5), "cc": t(1, 4, 5, 5),
             **{k: TensorType(v.shape, F) for k, v in c.items()}}
    src = "c"
    if bias:
        nodes.append(Node("add", ("c", "cb"), ("cc",)))
        src = "cc"
    nodes.append(Node("batch_norm", (src, "s", "b", "m", "v"), ("y",),
                      attrs_of({"epsilon": 1e-5})))
    return Graph(tuple(nodes), ("x",), ("y",), types, c)


@pytest.mark.parametrize("bias", [False, True])
def test_batch_norm_folds_into_the_conv(bias):
    g = _bn_graph(bias)
    f = remove_dead(fold_batch_norm(g))
    assert [n.op for n in f.nodes] == ["conv", "add"]
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(interpret(f, {"x": x})[0], interpret(g, {"x": x})[0],
                               rtol=1e-4, atol=1e-5)


def test_batch_norm_without_a_conv_is_scale_and_shift():
    g = _bn_graph(False)
    g = g.replace(nodes=(Node("relu", ("x",), ("c",)),) + g.nodes[1:],
                  types={**g.types, "c": t(1, 2, 5, 5), "y": t(1, 2, 5, 5)},
                  constants={**g.constants, **{k: g.constants[k][:2] for k in "sbmv"}})
    f = fold_batch_norm(g)
    assert [n.op for n in f.nodes] == ["relu", "mul", "add"]


def test_batch_norm_of_values_is_scale_and_shift_nodes_that_fold_once_they_are_constant():
    g = _bn_graph(False)
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 5)).astype(np.float32)
    want = interpret(g, {"x": x})[0]
    # run-time parameters: k and the shift computed by nodes, the same output
    params = {k: g.constants[k] for k in "sbmv"}
    run_time = g.replace(inputs=("x", *params),
                         constants={k: v for k, v in g.constants.items() if k not in params})
    f = fold_batch_norm(run_time)
    assert "batch_norm" not in [n.op for n in f.nodes]
    np.testing.assert_allclose(interpret(f, {"x": x, **params})[0], want, rtol=1e-5, atol=1e-6)
    # gamma computed from constants (a QDQ model's dequantized gamma): a multiply and an
    # add of constants after the folding that follows, no divide or square root left
    computed = g.replace(nodes=(Node("mul", ("s0", "one"), ("s",)),) + g.nodes,
                         constants={**g.constants, "s0": g.constants["s"],
                                    "one": np.ones(1, np.float32)},
                         types={**g.types, "s0": g.types["s"], "one": t(1)})
    computed = computed.replace(constants={k: v for k, v in computed.constants.items()
                                           if k != "s"})
    f = remove_dead(fold_constants(fold_batch_norm(computed)))
    assert [n.op for n in f.nodes] == ["conv", "mul", "add"]
    assert all(i in f.constants for n in f.nodes[1:] for i in n.inputs[1:])
    np.testing.assert_allclose(interpret(f, {"x": x})[0], want, rtol=1e-5, atol=1e-6)


def test_dead_nodes_and_constants_go():
    g = Graph((Node("relu", ("x",), ("a",)), Node("add", ("x", "k"), ("dead",))), ("x",),
              ("a",), {"x": t(3), "a": t(3), "dead": t(3), "k": t(3)},
              {"k": np.ones(3, np.float32)})
    d = remove_dead(g)
    assert [n.op for n in d.nodes] == ["relu"] and "k" not in d.constants


def test_fusion_one_anchor_with_its_elementwise_and_residual():
    nodes = (conv("x", "w", "c"), Node("add", ("c", "b"), ("cb",)),
             Node("relu", ("cb",), ("r",)), conv("r", "w2", "c2"),
             Node("add", ("c2", "r"), ("res",)), Node("relu", ("res",), ("y",)),
             Node("reshape", ("y",), ("f",), attrs_of({"shape": (1, 64)})),
             Node("sigmoid", ("f",), ("z",)))
    types = {"x": t(1, 4, 4, 4), "w": t(4, 4, 3, 3), "w2": t(4, 4, 3, 3), "b": t(4, 1, 1),
             **{v: t(1, 4, 4, 4) for v in ("c", "cb", "r", "c2", "res", "y")},
             "f": t(1, 64), "z": t(1, 64)}
    consts = {k: np.zeros(types[k].shape, np.float32) for k in ("w", "w2", "b")}
    g = fuse(Graph(nodes, ("x",), ("z",), types, consts))
    # the reshape after a conv starts a kernel: a conv stores its block through
    # elementwise nodes only
    assert [[n.op for n in k.nodes] for k in g.kernels] == [
        ["conv", "add", "relu"], ["conv", "add", "relu"], ["reshape", "sigmoid"]]
    assert g.kernels[1].inputs == ("r", "w2")
    text = str(g)
    assert text.count("\n  k") == 3 and "k1_conv: conv+add+relu -> y" in text


def test_fusion_closes_diamonds_and_keeps_arithmetic_out_of_an_anchors_prologue():
    """A GELU-like diamond after a matmul is one kernel; an activation before a matmul
    is its own kernel (fused, it would be recomputed at every read), a transpose is not;
    a value read outside its kernel cuts it (the add joined the first kernel, whose relu
    the transpose reads too: cut after the relu)."""
    w = np.ones((4, 4), np.float32)
    nodes = (Node("matmul", ("x", "w"), ("h",)), Node("tanh", ("h",), ("a",)),
             Node("mul", ("h", "a"), ("g",)), Node("relu", ("g",), ("r",)),
             Node("transpose", ("r",), ("tr",), attrs_of({"perm": (1, 0)})),
             Node("matmul", ("tr", "w"), ("m2",)), Node("exp", ("m2",), ("e",)),
             Node("matmul", ("e", "w"), ("y",)), Node("add", ("r", "r"), ("side",)))
    types = {v: t(4, 4) for v in ("x", "w", "h", "a", "g", "r", "tr", "m2", "e", "y", "side")}
    g = fuse(Graph(nodes, ("x",), ("y", "side"), types, {"w": w}))
    assert [[n.op for n in k.nodes] for k in g.kernels] == [
        ["matmul", "tanh", "mul", "relu"], ["add"], ["transpose", "matmul", "exp"],
        ["matmul"]]


def test_injective_chain_without_anchor_is_one_kernel():
    g = optimize(Graph((Node("relu", ("x",), ("a",)),
                        Node("transpose", ("a",), ("b",), attrs_of({"perm": (1, 0)})),
                        Node("tanh", ("b",), ("c",))), ("x",), ("c",),
                       {"x": t(2, 3), "a": t(2, 3), "b": t(3, 2), "c": t(3, 2)}))
    assert len(g.kernels) == 1 and g.kernels[0].anchor is None and g.layout == "NCHW"


def test_graph_errors():
    with pytest.raises(GraphError, match="no outputs"):
        Graph((), ("x",), (), {"x": t(1)})
    with pytest.raises(GraphError, match="cycle"):
        Graph((Node("relu", ("b",), ("a",)), Node("relu", ("a",), ("b",))), ("x",), ("b",),
              {"x": t(1), "a": t(1), "b": t(1)})
