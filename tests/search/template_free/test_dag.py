"""search/template_free/dag.py: the per-stage facts that decide which sketch rules apply,
on the operator library's computes and on small hand-written ones."""
from __future__ import annotations

from tvmlite import ops, te
from tvmlite.search.template_free import dag


def _state(tensors):
    return te.create_schedule(tensors[-1].op).state


def test_matmul_has_reuse_and_packs_B_but_needs_no_rfactor():
    st = _state(ops.matmul(64, 64, 64))
    assert dag.is_reduction(st, "C")
    assert dag.has_data_reuse(st, "C")
    assert not dag.needs_rfactor(st, "C")
    # B is read as B[k, j]: j (the innermost axis) in its last index, i missing
    assert dag.packable_inputs(st, "C") == ["B"]
    assert not dag.inlinable(st, "C")               # an output and a reduction


def test_dense_epilogue_is_inlinable_and_hosts_the_product():
    st = _state(ops.dense(4, 8, 6, bias=True, relu=True))
    assert dag.inlinable(st, "bias_add") and dag.strictly_inlinable(st, "bias_add")
    assert not dag.inlinable(st, "relu")            # the output
    assert dag.consumers(st, "dense") == ["bias_add"]
    assert dag.fusible_consumer(st, "dense") == "bias_add"   # elementwise, same coordinates
    assert dag.fusible_consumer(st, "relu") is None


def test_consumers_look_through_inlined_stages():
    tensors = ops.dense(4, 8, 6, bias=True, relu=True)
    s = te.create_schedule(tensors[-1].op)
    s["bias_add"].compute_inline()
    assert dag.consumers(s.state, "dense") == ["relu"]
    assert dag.fusible_consumer(s.state, "dense") == "relu"
    assert not dag.inlinable(s.state, "bias_add")   # already placed


def test_padding_is_inlinable_but_not_by_rule():
    st = _state(ops.conv2d_nhwc(1, 6, 6, 4, 8, 3, padding=1))
    assert dag.inlinable(st, "pad")
    assert not dag.strictly_inlinable(st, "pad")    # a branch: its place is a decision
    assert dag.has_data_reuse(st, "conv2d_nhwc")


def test_depthwise_filter_reuse_counts_as_data_reuse():
    """Few multiply-adds per element, but the filter does not vary along h and w."""
    st = _state(ops.depthwise_conv2d_nhwc(1, 6, 6, 4, 3, padding=1))
    assert dag.has_data_reuse(st, "depthwise_conv2d_nhwc")


def test_a_padded_copy_pays_for_a_dense_conv_not_a_depthwise_one():
    """A dense 3x3 conv does 9 x 8 multiply-adds per padded element; a depthwise one 9."""
    st = _state(ops.conv2d_nhwc(1, 6, 6, 4, 8, 3, padding=1))
    assert dag.copy_pays(st, "pad")
    st = _state(ops.depthwise_conv2d_nhwc(1, 6, 6, 4, 3, padding=1))
    assert not dag.copy_pays(st, "pad")


def test_elementwise_and_row_reductions_have_no_reuse():
    st = _state(ops.softmax(2, 8))
    assert not any(dag.has_data_reuse(st, n) for n in ("maxelem", "expv", "expsum", "softmax"))
    assert dag.is_reduction(st, "expsum") and not dag.is_reduction(st, "expv")
    st = _state(ops.add((4, 4)))
    assert not dag.has_data_reuse(st, st.outputs[0])


def test_a_long_reduction_into_few_outputs_needs_rfactor():
    A = te.placeholder((2, 1024), name="A")
    k = te.reduce_axis((0, 1024), "k")
    S = te.compute((2,), lambda i: te.sum(A[i, k], axis=k), name="S")
    assert dag.needs_rfactor(_state([A, S]), "S")
    k2 = te.reduce_axis((0, 64), "k2")
    T = te.compute((2,), lambda i: te.sum(A[i, k2], axis=k2), name="T")
    assert not dag.needs_rfactor(_state([A, T]), "T")                  # too short


def test_an_expensive_stage_read_twice_is_not_strictly_inlinable():
    A = te.placeholder((8,), name="A")
    E = te.compute((8,), lambda i: te.exp(A[i]), name="E")
    F = te.compute((8,), lambda i: E[i] + E[7 - i], name="F")
    st = _state([A, F])
    assert dag.inlinable(st, "E")
    assert dag.strictly_inlinable(st, "E")            # one consumer stage (read twice)
    assert dag.fusible_consumer(st, "E") is None       # F reads E[7 - i], not E[i]
    G = te.compute((8,), lambda i: E[i] * 2.0, name="G")
    H = te.compute((8,), lambda i: F[i] + G[i], name="H")
    st2 = _state([A, H])
    assert dag.consumers(st2, "E") == ["F", "G"]
    assert not dag.strictly_inlinable(st2, "E")       # exp would be computed twice
    C = te.compute((8,), lambda i: A[i] * 3.0, name="C")
    D = te.compute((8,), lambda i: C[i] + C[7 - i], name="D")
    K = te.compute((8,), lambda i: D[i] + C[i], name="K")
    assert dag.strictly_inlinable(_state([A, K]), "C")  # cheap: fine to recompute
