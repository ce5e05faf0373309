"""The split-back pass: a fused kernel replaced by its prologue, anchor and epilogue
(nodes unchanged, kernels in run order, outputs unchanged against onnxruntime), and the
names it refuses."""
from __future__ import annotations

import pytest

from tvmlite.frontend import from_onnx
from tvmlite.graph import GraphError
from tvmlite.graph.build import build_graph
from tvmlite.graph.decisions import optimize_in
from tvmlite.graph.passes.split import parts_of, split_kernels, splittable


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_split_keeps_nodes_and_outputs(silu_conv_model, outputs_close, layout):
    m, feeds, ref = silu_conv_model
    fused = optimize_in(from_onnx(m), layout)
    split = split_kernels(fused, ["k0_conv"])
    assert split.nodes == fused.nodes
    names = [k.name for k in split.kernels]
    expect = (["k0_conv_prologue"] if layout == "NHWC" else []) + ["k0_conv", "k0_conv_epilogue"]
    assert names[:len(expect)] == expect and names[len(expect):] == [
        k.name for k in fused.kernels[1:]]
    assert [n for k in split.kernels for n in k.nodes] == [n for k in fused.kernels
                                                          for n in k.nodes]
    anchor = split.kernels[len(expect) - 2]
    assert [n.op for n in anchor.nodes] == ["conv"] and anchor.anchor == "conv"
    epilogue = split.kernels[len(expect) - 1]
    assert [n.op for n in epilogue.nodes] == ["add", "sigmoid", "mul"]
    assert anchor.output in epilogue.inputs and epilogue.anchor is None
    assert sum(k.flops for k in split.kernels) == sum(k.flops for k in fused.kernels)
    assert outputs_close(build_graph(split, quiet=True).run(feeds), ref)


def test_split_refuses_what_it_cannot_split(silu_conv_model):
    imported = from_onnx(silu_conv_model[0])
    with pytest.raises(GraphError, match="not fused yet"):
        split_kernels(imported, ["k0_conv"])
    fused = optimize_in(imported, "NCHW")
    with pytest.raises(GraphError, match="'k9' is not a kernel"):
        split_kernels(fused, ["k9"])
    lone = fused.kernels[2]          # the classifier's matmul, alone in its kernel
    assert not splittable(lone) and parts_of(lone) is None
    with pytest.raises(GraphError, match="nothing to split"):
        split_kernels(fused, [lone.name])
    assert split_kernels(fused, []).kernels == fused.kernels
