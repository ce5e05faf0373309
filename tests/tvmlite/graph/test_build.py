"""tvmlite.build(graph): small onnx.helper models and one light zoo model, each checked
against onnxruntime (max error <= 1e-3 * max|ref| + 1e-4)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

import tvmlite  # noqa: E402
from tvmlite.frontend import from_onnx  # noqa: E402
from tvmlite.frontend.light import light_model  # noqa: E402
from tvmlite.graph import optimize  # noqa: E402
from tvmlite.graph.build import FeedError, GraphModule  # noqa: E402
from tvmlite.graph.kernel import default_schedule, kernel_compute  # noqa: E402
from tvmlite.target.target import Target  # noqa: E402

RNG = np.random.default_rng(0)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = oh.make_graph(nodes, "m", [oh.make_tensor_value_info(n, TP.FLOAT, s) for n, s in inputs],
                      [oh.make_tensor_value_info(o, TP.FLOAT, None) for o in outputs],
                      [nh.from_array(np.asarray(v), k) for k, v in inits])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def w(*shape, positive=False):
    a = RNG.standard_normal(shape).astype(np.float32)
    return np.abs(a) + 0.5 if positive else a


def check(m, mod=None):
    g = from_onnx(m)
    feeds = {n: RNG.standard_normal(g.types[n].shape).astype(np.float32) for n in g.inputs}
    mod = mod or tvmlite.build(g)
    ours = mod.run(feeds)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, feeds)
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape
        assert np.abs(a - b).max() <= 1e-3 * np.abs(b).max() + 1e-4
    return mod


def test_cnn_block_conv_bn_relu_pool_gemm_softmax():
    nodes = [oh.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1], name="conv1"),
             oh.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"]),
             oh.make_node("Relu", ["bn"], ["r"]),
             oh.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             oh.make_node("Conv", ["p", "W2"], ["c2"], group=2, strides=[2, 2],
                          auto_pad="SAME_UPPER"),
             oh.make_node("Add", ["c2", "c3"], ["res"]),
             oh.make_node("AveragePool", ["p"], ["c3"], kernel_shape=[3, 3], strides=[2, 2],
                          pads=[1, 1, 1, 1], count_include_pad=1),
             oh.make_node("GlobalAveragePool", ["res"], ["gp"]),
             oh.make_node("Flatten", ["gp"], ["f"]),
             oh.make_node("Gemm", ["f", "FW", "FB"], ["y"], transB=1, alpha=0.5),
             oh.make_node("Softmax", ["y"], ["z"])]
    # topological order for onnxruntime: c3 before the add
    nodes[5], nodes[6] = nodes[6], nodes[5]
    m = model(nodes, [("x", (1, 3, 9, 9))], ["y", "z"],
              [("W", w(8, 3, 3, 3)), ("B", w(8)), ("s", w(8)), ("b", w(8)), ("m", w(8)),
               ("v", w(8, positive=True)), ("W2", w(8, 4, 3, 3)), ("FW", w(5, 8)),
               ("FB", w(5))])
    mod = check(m)
    assert isinstance(mod, GraphModule) and mod.kernels_without_record == len(
        {k.key for k in mod.kernels})
    fused = [k.nodes for k in mod.graph.kernels]
    # NHWC: the input's transpose, then the conv with its bias and batch norm folded
    assert [n.op for n in fused[0]] == ["transpose", "conv", "add", "relu"]
    assert mod.graph.layout == "NHWC"


def test_one_element_weights_are_read_as_tensors():
    """A 1x1x1x1 conv weight or a 1x1 matmul operand is one element, but the anchor
    indexes it: it is a buffer, not the literal an elementwise node reads one-element
    constants as (Hypothesis drew such a conv, which failed to build)."""
    check(model([oh.make_node("Conv", ["x", "W"], ["c"]),
                 oh.make_node("MatMul", ["c", "M"], ["y"])],
                [("x", (1, 1, 4, 1))], ["y"], [("W", w(1, 1, 1, 1)), ("M", w(1, 1))]))


def test_transformer_ops():
    d = 8
    nodes = [oh.make_node("MatMul", ["x", "Wq"], ["q"]),
             oh.make_node("Reshape", ["q", "hs"], ["qh"]),
             oh.make_node("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
             oh.make_node("Transpose", ["qh"], ["kt"], perm=[0, 2, 3, 1]),
             oh.make_node("MatMul", ["qt", "kt"], ["att"]),
             oh.make_node("Div", ["att", "scale"], ["atts"]),
             oh.make_node("Softmax", ["atts"], ["p"], axis=-1),
             oh.make_node("MatMul", ["p", "qt"], ["ctx"]),
             oh.make_node("Transpose", ["ctx"], ["ct"], perm=[0, 2, 1, 3]),
             oh.make_node("Reshape", ["ct", "flat"], ["cf"]),
             oh.make_node("Add", ["cf", "x"], ["res"]),
             oh.make_node("LayerNormalization", ["res", "g", "beta"], ["ln"], axis=-1),
             oh.make_node("Pow", ["ln", "two"], ["sq"]),
             oh.make_node("Sqrt", ["sq"], ["ab"]),
             oh.make_node("Mul", ["ab", "half"], ["h"]),
             oh.make_node("Erf", ["h"], ["e"]),
             oh.make_node("Tanh", ["e"], ["t"]),
             oh.make_node("ReduceMean", ["t"], ["rm"], axes=[-1], keepdims=1),
             oh.make_node("Sub", ["t", "rm"], ["y"])]
    m = model(nodes, [("x", (1, 4, d))], ["y"],
              [("Wq", w(d, d)), ("hs", np.array([1, 4, 2, 4], np.int64)),
               ("scale", np.float32(2.0)), ("flat", np.array([1, 4, d], np.int64)),
               ("g", w(d)), ("beta", w(d)), ("two", np.float32(2.0)),
               ("half", np.float32(0.5))], opset=17)
    check(m)


def test_mobilenet_ops_and_gather_where():
    nodes = [oh.make_node("Conv", ["x", "W"], ["c"], group=4, pads=[1, 1, 1, 1]),
             oh.make_node("Clip", ["c", "lo", "hi"], ["r6"]),
             oh.make_node("HardSwish", ["r6"], ["hs"]),
             oh.make_node("HardSigmoid", ["hs"], ["hsg"]),
             oh.make_node("LeakyRelu", ["hsg"], ["lr"], alpha=0.1),
             oh.make_node("Sigmoid", ["lr"], ["sg"]),
             oh.make_node("Gather", ["sg", "idx"], ["gt"], axis=1),
             oh.make_node("Equal", ["gt", "gt"], ["eq"]),
             oh.make_node("Where", ["eq", "gt", "zero"], ["y"])]
    m = model(nodes, [("x", (1, 4, 6, 6))], ["y"],
              [("W", w(4, 1, 3, 3)), ("lo", np.float32(0)), ("hi", np.float32(6)),
               ("idx", np.array([3, 0], np.int64)), ("zero", np.float32(0))], opset=14)
    check(m)


def test_light_squeezenet_with_random_weights():
    m = light_model("squeezenet", seed=0)
    # compare logits: drop the final softmax
    last = m.graph.node[-1]
    assert last.op_type == "Softmax"
    m.graph.output[0].name = last.input[0]
    del m.graph.node[-1]
    mod = check(m)
    assert len(mod.graph.kernels) < len(m.graph.node)


def test_run_checks_feeds_by_name():
    mod = tvmlite.build(from_onnx(model([oh.make_node("Relu", ["x"], ["y"])], [("x", (2, 3))],
                                        ["y"])))
    with pytest.raises(FeedError, match="'nope' is not an input"):
        mod.run({"nope": np.zeros((2, 3), np.float32)})
    with pytest.raises(FeedError, match="input 'x' has shape"):
        mod.run({"x": np.zeros((3, 2), np.float32)})
    with pytest.raises(FeedError, match="input 'x' has dtype float64"):
        mod.run({"x": np.zeros((2, 3))})
    with pytest.raises(FeedError, match="input 'x' is not given"):
        mod.run({})
    t = mod.time_evaluator(number=2, repeat=2)({"x": np.ones((2, 3), np.float32)})
    assert len(t.results) == 2


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
@pytest.mark.parametrize("attrs", [{"pads": [0, 0, 1, 1]}, {"ceil_mode": 1},
                                   {"pads": [1, 1, 1, 1], "ceil_mode": 1},
                                   # the last window would start in the end padding: dropped
                                   {"pads": [1, 1, 1, 1], "ceil_mode": 1, "size": 5,
                                    "kernel_shape": [2, 2]},
                                   {"pads": [0, 1, 1, 0], "count_include_pad": 1}])
def test_pools_with_asymmetric_pads_and_ceil_mode(op, attrs):
    if op == "MaxPool":
        attrs = {k: v for k, v in attrs.items() if k != "count_include_pad"}
    attrs = {"kernel_shape": [3, 3], **attrs}
    size = attrs.pop("size", 8)
    check(model([oh.make_node(op, ["x"], ["y"], strides=[2, 2], **attrs)],
                [("x", (1, 2, size, size))], ["y"]))


def test_embedding_gather_with_run_time_indices():
    table = w(10, 8)
    g = oh.make_graph([oh.make_node("Gather", ["E", "ids"], ["y"]),
                       oh.make_node("Relu", ["y"], ["z"])], "emb",
                      [oh.make_tensor_value_info("ids", TP.INT64, (2, 3))],
                      [oh.make_tensor_value_info("z", TP.FLOAT, None)], [nh.from_array(table, "E")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    ids = np.array([[1, 9, -1], [0, 3, 3]], np.int64)
    ours = tvmlite.build(from_onnx(m)).run({"ids": ids})[0]
    ref = ort.InferenceSession(m.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"ids": ids})[0]
    np.testing.assert_array_equal(ours, ref)


@pytest.mark.parametrize("size", [7, 13])
def test_convs_whose_rows_divide_into_no_register_block_are_blocked_and_right(size):
    """w = 7 (rows of one vector) and w = 13, prime (rows with a remainder block): on 16
    vector registers neither has a block of two-vector rows, and both used to get the
    generic schedule, one accumulator per output vector."""
    m = model([oh.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
              [("x", (1, 16, size, size))], ["y"], [("w", w(32, 16, 3, 3))])
    mod = tvmlite.build(from_onnx(m))
    (kernel,) = [k for k in mod.kernels if "conv" in k.name]
    assert "cache_write" in str(kernel.schedule)         # a local accumulator block
    check(m, mod)


def test_a_long_row_axis_takes_six_rows_and_a_remainder_on_avx2():
    """w = 56 = 4 x 14: four dividing rows of two vectors, or six and a remainder block of
    two, which holds 12 accumulators and ran faster (graph.kernel.blocked_schedule)."""
    m = model([oh.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
              [("x", (1, 16, 56, 56))], ["y"], [("w", w(32, 16, 3, 3))])
    g = optimize(from_onnx(m))
    (k,) = [k for k in g.kernels if k.anchor == "conv"]
    steps = str(default_schedule(kernel_compute(g, k), Target.from_name("x86_64-avx2")))
    assert 'split("w_inner_inner", factor=6)' in steps
    check(m)
