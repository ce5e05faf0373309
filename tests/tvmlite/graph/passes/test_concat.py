"""The concat pass: a Fire module's channel concat taken apart by the conv and the pool
that read it (no concat left, outputs unchanged against onnxruntime), and the concats it
keeps: a graph output, a reader that mixes channels, a conv whose partial sums would
cost more than the copy."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from tvmlite import te  # noqa: E402
from tvmlite.frontend import from_onnx  # noqa: E402
from tvmlite.graph import Graph, Node, TensorType, optimize  # noqa: E402
from tvmlite.graph.build import build_graph  # noqa: E402
from tvmlite.graph.decisions import concat_counts, decide_layout  # noqa: E402
from tvmlite.graph.ir import attrs_of  # noqa: E402
from tvmlite.graph.passes import dissolve_concats  # noqa: E402


def fire(reader: str = "conv", out_channels: int = 3, concat_out: bool = False):
    """(model, feeds): x (1, 4, 6, 6) -> squeeze 1x1 -> expand 1x1 and 3x3 (5 channels
    each) -> concat, read by ``reader`` ("conv": a biased 1x1 conv and a max pool
    followed by a 3x3 conv; "1x1": the 1x1 conv alone; "softmax": a softmax over
    the channels; "group": a grouped conv) into ``out_channels``; ``concat_out``
    makes the concat a graph output too."""
    rng = np.random.default_rng(3)
    inits: dict[str, np.ndarray] = {}

    def conv(x: str, w: str, ci: int, co: int, k: int, out: str, group: int = 1) -> list:
        inits[w] = rng.standard_normal((co, ci // group, k, k))
        inits[w + "_b"] = rng.standard_normal(co)
        return [oh.make_node("Conv", [x, w, w + "_b"], [out + "_c"], pads=[k // 2] * 4,
                             group=group),
                oh.make_node("Relu", [out + "_c"], [out])]
    nodes = conv("x", "ws", 4, 3, 1, "s") + conv("s", "we1", 3, 5, 1, "e1") + \
        conv("s", "we3", 3, 5, 3, "e3") + [oh.make_node("Concat", ["e1", "e3"], ["cat"], axis=1)]
    outs = []
    if reader in ("conv", "1x1"):
        nodes += conv("cat", "wy", 10, out_channels, 1, "y")
        outs = ["y"]
    if reader == "conv":
        nodes += [oh.make_node("MaxPool", ["cat"], ["p"], kernel_shape=[2, 2], strides=[2, 2])]
        nodes += conv("p", "wz", 10, out_channels, 3, "z")
        outs = ["y", "z"]
    elif reader == "softmax":
        nodes += [oh.make_node("Softmax", ["cat"], ["y"], axis=1)]
        outs = ["y"]
    elif reader == "group":
        nodes += conv("cat", "wy", 10, out_channels, 1, "y", group=2)
        outs = ["y"]
    if concat_out:
        outs.append("cat")
    g = oh.make_graph(nodes, "fire", [oh.make_tensor_value_info("x", TP.FLOAT, (1, 4, 6, 6))],
                      [oh.make_tensor_value_info(o, TP.FLOAT, None) for o in outs],
                      [nh.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    return m, {"x": rng.standard_normal((1, 4, 6, 6)).astype(np.float32)}


def reference(m, feeds):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]
                                ).run(None, feeds)


def ops(g) -> list[str]:
    return [n.op for n in g.nodes]


def test_conv_and_pool_readers_take_the_concat_apart(outputs_close):
    m, feeds = fire()
    g = optimize(from_onnx(m))
    assert "concat" not in ops(g) and not any("concat" in k.name for k in g.kernels)
    # the 1x1 conv as two convs over the expand outputs, summed in the second's epilogue;
    # the pool once per part, its concat taken apart by the 3x3 conv after it
    assert ops(g).count("conv") == 3 + 2 + 2 and ops(g).count("max_pool") == 2
    assert outputs_close(build_graph(g, quiet=True).run(feeds), reference(m, feeds))


@pytest.mark.parametrize("case", [dict(concat_out=True), dict(reader="softmax"),
                                  dict(reader="group", out_channels=4), dict(out_channels=10)],
                         ids=["graph output", "channels mixed", "grouped conv",
                              "partial sums dearer than the copy"])
def test_concats_it_keeps(case, outputs_close):
    m, feeds = fire(**case)
    imported = from_onnx(m)
    assert dissolve_concats(imported) is imported
    g = optimize(imported)
    assert "concat" in ops(g)
    assert outputs_close(build_graph(g, quiet=True).run(feeds), reference(m, feeds))


def test_the_decisions_say_how_many_concats_are_still_copies():
    taken, _ = fire()
    kept, _ = fire(out_channels=10)
    for m, copies in ((taken, 0), (kept, 1)):
        g, decisions = decide_layout(from_onnx(m), layout="NHWC")
        assert decisions.concats == concat_counts(from_onnx(m), g) == (copies, 1)
        assert f"concats:  {copies} copy kernel(s) for the model's 1 concat(s)" in \
            "\n".join(decisions.lines())


def test_a_concat_over_a_symbolic_size_is_kept():
    """No one size to weigh the partial sums at: the copy stays (an imported model over
    a range is optimized at concrete sizes, so this is a graph built by hand)."""
    h = te.var("h")
    types = {"a": TensorType((1, 2, h, 4), "float32"), "b": TensorType((1, 3, h, 4), "float32"),
             "c": TensorType((1, 5, h, 4), "float32"), "w": TensorType((1, 5, 1, 1), "float32"),
             "y": TensorType((1, 1, h, 4), "float32")}
    conv = attrs_of({"strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1), "group": 1})
    g = Graph((Node("concat", ("a", "b"), ("c",), attrs_of({"axis": 1})),
               Node("conv", ("c", "w"), ("y",), conv)), ("a", "b"), ("y",), types,
              {"w": np.ones((1, 5, 1, 1), np.float32)})
    assert dissolve_concats(g) is g
    fixed = g.replace(types={k: TensorType(tuple(6 if d is h else d for d in t.shape), t.dtype)
                             for k, t in types.items()})
    assert "concat" not in ops(dissolve_concats(fixed))


def test_optimize_leaves_a_fused_graph_as_it_is():
    """``from_onnx`` over a symbolic size returns the graph optimized (at concrete sizes,
    carried over the range); through the passes again, its NHWC convs were taken for
    the model's own and built a conv reading outside its input."""
    g, _ = fire(reader="1x1")
    fused = optimize(from_onnx(g))
    assert optimize(fused) is fused
    m = onnx.load_from_string(g.SerializeToString())
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "h"
    symbolic = from_onnx(m, shapes={"x": (1, 4, (2, 8), 6)})
    assert symbolic.sizes and optimize(symbolic) is symbolic
