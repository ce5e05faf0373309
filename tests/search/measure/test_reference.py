"""The reference schedule: bit-identical to the unscheduled build, and the loop order the
rule says (reduce axes just outside the innermost spatial axis when that is contiguous)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tvmlite
from tvmlite import te
from tvmlite.ops import OPS
from tvmlite.runtime.arrays import full
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.steps import AnnotateStep, ReorderStep
from tvmlite.search.measure.builder import LocalBuilder
from tvmlite.search.measure.inputs import MeasureInput
from tvmlite.search.measure.reference import (
    NO_CONTRACT,
    reference_state,
    reference_steps,
    reference_target,
)
from tvmlite.search.records.workload import Workload
from tvmlite.target.target import CompilerNotFoundError, Target
from tvmlite.testing.check import evaluate_te, random_inputs, reduction_length, tolerance

try:
    Target.host()
except CompilerNotFoundError:  # pragma: no cover - every CI image has a C compiler
    pytest.skip("no C compiler", allow_module_level=True)

# every operator of tvmlite.ops at a small shape (and its layouts and options)
CASES = [
    ("matmul", dict(M=13, N=17, K=19)),
    ("matmul", dict(M=8, N=8, K=8, dtype="float64")),
    ("matmul", dict(M=5, N=6, K=7, dtype="int32")),
    ("batch_matmul", dict(B=2, M=5, N=9, K=7)),
    ("dense", dict(N=6, K=11, M=9)),
    ("dense", dict(N=3, K=8, M=5, bias=True, relu=True)),
    ("conv1d", dict(N=2, L=9, CI=3, CO=5, kernel=3, padding=1)),
    ("conv1d", dict(N=1, L=9, CI=3, CO=4, kernel=3, stride=2, layout="NCL")),
    ("conv2d_nchw", dict(N=1, CI=4, H=7, W=6, CO=5, kernel=3, padding=1)),
    ("conv2d_nchw", dict(N=2, CI=4, H=6, W=6, CO=4, kernel=3, stride=2, groups=2)),
    ("conv2d_nhwc", dict(N=2, H=6, W=7, CI=4, CO=6, kernel=3, padding=1)),
    ("conv2d_nhwc", dict(N=1, H=7, W=7, CI=4, CO=4, kernel=2, stride=2, dilation=1, groups=2)),
    ("depthwise_conv2d_nchw", dict(N=1, C=4, H=6, W=6, kernel=3, padding=1, multiplier=2)),
    ("depthwise_conv2d_nhwc", dict(N=2, H=6, W=5, C=3, kernel=3, stride=2)),
    ("conv3d_ndhwc", dict(N=1, D=4, H=5, W=5, CI=3, CO=4, kernel=3, padding=1)),
    ("max_pool2d", dict(N=1, C=3, H=8, W=7, kernel=3, stride=2, padding=1)),
    ("max_pool2d", dict(N=2, C=3, H=6, W=6, kernel=2, layout="NHWC")),
    ("avg_pool2d", dict(N=1, C=3, H=7, W=7, kernel=3, stride=2, padding=1)),
    ("avg_pool2d", dict(N=1, C=2, H=6, W=6, kernel=3, padding=1, layout="NHWC",
                        count_include_pad=False)),
    ("softmax", dict(N=5, M=13)),
    ("norm2", dict(N=9, M=11)),
    ("add", dict(shape=(4, 9))),
    ("relu", dict(shape=(3, 4, 5))),
    ("bias_add", dict(shape=(2, 6, 5), axis=1)),
    # the quantized operators (uint8 data, int8 weights, int32 sums, a requantize)
    ("qmatmul", dict(M=5, N=7, K=9, data_zp=3, weight_zp=-2)),
    ("qdense", dict(N=3, K=9, M=5, data_zp=7, scale=0.37, out_zp=11, bias=True)),
    ("qconv2d_nchw", dict(N=1, CI=4, H=7, W=7, CO=6, kernel=3, padding=1, groups=2,
                          data_zp=5, weight_zp=1, out_zp=100, relu=True)),
    ("qconv2d_nhwc", dict(N=1, H=6, W=5, CI=3, CO=4, kernel=3, padding=1,
                          data_zp=4, scale=0.5, out_zp=128)),
]


def run(s: Schedule, tensors: list, inputs: list) -> list[np.ndarray]:
    """The outputs of schedule ``s`` on ``inputs`` (outputs start as NaN / a sentinel),
    built as the reference is: without floating-point contraction."""
    mod = tvmlite.build(s, tensors, target=reference_target(Target.host()))
    sizes: dict = {}
    for t, x in zip([t for t in tensors if isinstance(t.op, te.PlaceholderOp)], inputs):
        for d, n in zip(t.shape, x.shape):
            if not isinstance(d, int):
                sizes[str(d)] = n
    arrays, outs, it = [], [], iter(inputs)
    for t in tensors:
        if isinstance(t.op, te.PlaceholderOp):
            arrays.append(next(it))
        else:
            shape = tuple(d if isinstance(d, int) else sizes[str(d)] for d in t.shape)
            # a value no kernel computes here: NaN, or the integer type's lowest
            sentinel = np.nan if t.dtype.startswith("float") else np.iinfo(t.dtype).min
            out = full(shape, sentinel, t.dtype)
            outs.append(out)
            arrays.append(out)
    mod(*arrays)
    return outs


def check_bit_identical(tensors: list, inputs: list) -> list[np.ndarray]:
    """Reference-steps outputs equal the unscheduled ones exactly; returns them."""
    outputs = [t for t in tensors if not isinstance(t.op, te.PlaceholderOp)]
    plain = run(Schedule.create(outputs), tensors, inputs)
    fast = run(Schedule.from_steps(outputs, reference_steps(outputs)), tensors, inputs)
    for p, f in zip(plain, fast):
        assert np.array_equal(p, f), f"max difference {np.nanmax(np.abs(p - f))}"
    return fast


@pytest.mark.parametrize("op,args", CASES, ids=[f"{op}-{i}" for i, (op, _) in enumerate(CASES)])
def test_every_op_is_bit_identical_and_matches_numpy(op: str, args: dict) -> None:
    tensors = OPS[op](**args)
    inputs = random_inputs(tensors, seed=3)
    got = check_bit_identical(tensors, inputs)[-1]
    want = evaluate_te(tensors, inputs)
    want = want[-1] if isinstance(want, (list, tuple)) else want
    rtol, atol = tolerance(tensors[-1].dtype, reduction_length(tensors))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def test_covers_every_op() -> None:
    assert {op for op, _ in CASES} == set(OPS)


def loop_order(outputs: list, stage: str) -> list[str]:
    return [it.name for it in reference_state(outputs).stage(stage).leaves]


def test_loop_order_follows_contiguity() -> None:
    C = OPS["matmul"](8, 8, 8)[-1]          # A[i, k] * B[k, j]: B and C contiguous in j
    assert loop_order([C], "C") == ["i", "k", "j"]
    D = OPS["dense"](8, 8, 8)[-1]           # data[i, k] * weight[j, k]: both in k
    assert loop_order([D], "dense") == ["i", "j", "k"]
    assert reference_steps([D]) == (AnnotateStep("dense", "i", "parallel"),)
    conv = OPS["conv2d_nhwc"](2, 6, 6, 4, 8, 3)[-1]   # HWIO weight and output: in f
    assert loop_order([conv], conv.op.name) == ["n", "h", "w", "ry", "rx", "rc", "f"]
    # the lowered nest: parallel outermost spatial, the init before the reduce loops
    text = str(tvmlite.lower(Schedule.from_steps([C], reference_steps([C])),
                             [*C.op.input_tensors, C]))
    assert "parallel for i in range(8)" in text
    assert text.index("for k in") < text.index("for j in range(8):\n        C[")


def test_parallel_skips_a_batch_of_one_and_never_sits_inside_a_reduction() -> None:
    conv = OPS["conv2d_nhwc"](1, 6, 6, 4, 8, 3)[-1]
    assert AnnotateStep(conv.op.name, "h", "parallel") in reference_steps([conv])
    A = te.placeholder((16, 8), name="A")
    k = te.reduce_axis((0, 16), name="k")
    colsum = te.compute((8,), lambda j: te.sum(A[k, j], axis=k), name="colsum")
    assert reference_steps([colsum]) == (ReorderStep("colsum", ("k", "j")),)
    check_bit_identical([A, colsum], random_inputs([A, colsum]))


def test_user_compute_with_two_reductions_and_two_outputs() -> None:
    """A layer norm written by hand (mean and variance reductions) with a second output."""
    n, m = 6, 37
    X = te.placeholder((n, m), name="X")
    k1 = te.reduce_axis((0, m), name="k1")
    total = te.compute((n,), lambda i: te.sum(X[i, k1], axis=k1), name="total")
    mean = te.compute((n,), lambda i: total[i] / m, name="mean")
    k2 = te.reduce_axis((0, m), name="k2")
    sq = te.compute((n,), lambda i: te.sum((X[i, k2] - mean[i]) * (X[i, k2] - mean[i]),
                                           axis=k2), name="sq")
    var = te.compute((n,), lambda i: sq[i] / m, name="var")
    norm = te.compute((n, m), lambda i, j: (X[i, j] - mean[i]) / te.sqrt(var[i] + 1e-5),
                      name="norm")
    # a stage with two reductions whose last indices disagree: Y[r, q] against Z[q, j]
    Y = te.placeholder((5, 7), name="Y")
    Z = te.placeholder((7, 9, 5), name="Z")
    r = te.reduce_axis((0, 5), name="r")
    q = te.reduce_axis((0, 7), name="q")
    two = te.compute((9, 4), lambda j, c: te.sum(Y[r, q] * Z[q, j, r] * c, axis=[r, q]),
                     name="two")
    tensors = [X, Y, Z, norm, two]
    inputs = random_inputs(tensors, seed=5)
    got = check_bit_identical(tensors, inputs)
    x = inputs[0].astype(np.float64)
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)
    y, z = inputs[1].astype(np.float64), inputs[2].astype(np.float64)
    want2 = np.einsum("rq,qjr->j", y, z)[:, None] * np.arange(4)[None, :]
    np.testing.assert_allclose(got[1], want2, rtol=1e-4, atol=1e-4)
    assert loop_order([norm, two], "two") == ["j", "c", "r", "q"]   # tie (1 vs 1): kept


def test_dynamic_matmul_at_several_sizes() -> None:
    wl = Workload.from_op("matmul", te.var("M"), 24, 20)
    steps = reference_steps(wl)
    assert steps == (ReorderStep("C", ("i", "k", "j")), AnnotateStep("C", "i", "parallel"))
    for m in (1, 3, 17):
        A = np.random.default_rng(m).uniform(-1, 1, (m, 20)).astype("float32")
        B = np.random.default_rng(m + 1).uniform(-1, 1, (20, 24)).astype("float32")
        got = check_bit_identical(list(wl.tensors), [A, B])[0]
        np.testing.assert_allclose(got, A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)


def test_build_reference_uses_the_steps_and_caches(tmp_path: Path) -> None:
    wl = Workload.from_op("matmul", 16, 16, 16)
    builder = LocalBuilder(n_parallel=1, cache_dir=tmp_path)
    ref = builder.build_reference(wl)
    assert ref.ok and "omp parallel" in ref.source
    assert builder.build_reference(wl) is ref
    plain = builder.build([MeasureInput(wl, ())])[0]
    assert plain.ok and plain.lib_path != ref.lib_path   # the reference's identity moved
    dyn = Workload.from_op("matmul", te.var("M"), 8, 8)
    for m in (2, 5):
        r = builder.build_reference(dyn.at({"M": m}))
        assert r.ok and r.sizes == (m,) and "omp parallel" in r.source


def test_a_refused_stage_falls_back_to_unscheduled(monkeypatch: pytest.MonkeyPatch) -> None:
    from tvmlite.schedule.state import ScheduleError
    from tvmlite.search.measure import reference as reference_mod

    C = OPS["matmul"](4, 4, 4)[-1]

    def refusing(stage):
        return (ReorderStep(stage.name, ("nope",)),)
    monkeypatch.setattr(reference_mod, "stage_steps", refusing)
    with pytest.raises(ScheduleError):
        Schedule.from_steps([C], refusing(reference_state([C]).stage("C")))
    assert reference_steps([C]) == ()


def test_the_reference_is_compiled_without_contraction(tmp_path: Path) -> None:
    host = Target.host()
    ref_target = reference_target(host)
    assert ref_target.cflags == (*host.cflags, NO_CONTRACT)
    assert reference_target(ref_target) == ref_target          # appended once
    wl = Workload.from_op("matmul", 8, 8, 8)
    builder = LocalBuilder(n_parallel=1, cache_dir=tmp_path)
    ref = builder.build_reference(wl)
    same_steps = builder.build([MeasureInput(wl, reference_steps(wl))])[0]
    # the same C, other flags: another library (a candidate keeps the target's flags)
    assert ref.ok and same_steps.ok and ref.source == same_steps.source
    assert ref.lib_path != same_steps.lib_path
