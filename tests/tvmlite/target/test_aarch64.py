"""Every operator of tvmlite.ops, a few hypothesis-drawn schedules, the vectorized exp and
sigmoid, and OpenMP, built by the cross compiler for aarch64-neon and run under qemu user
mode, each compared with numpy. Skipped, with the reason shown (`pytest -rs`), when the
cross toolchain or qemu is not installed (`.ci/run` installs them)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tvmlite import ops, te
from tvmlite.testing.check import assert_allclose, random_inputs, reduction_length, reference
from tvmlite.testing.cross import cross_unavailable, run_on_target

REASON = cross_unavailable("aarch64-neon")
pytestmark = pytest.mark.skipif(REASON is not None,
                                reason=f"AArch64 toolchain or qemu unavailable: {REASON}")
TARGET = "aarch64-neon"

# small shapes: every case runs under emulation
CASES = {
    "matmul": dict(M=9, N=20, K=7),
    "batch_matmul": dict(B=2, M=5, N=9, K=6),
    "dense": dict(N=3, K=11, M=10, bias=True, relu=True),
    "conv1d": dict(N=1, L=13, CI=3, CO=5, kernel=3, stride=1, padding=2),
    "conv2d_nchw": dict(N=1, CI=3, H=9, W=7, CO=5, kernel=3, stride=2, padding=1),
    "conv2d_nhwc": dict(N=1, H=7, W=6, CI=4, CO=6, kernel=3, padding=1, dilation=2),
    "depthwise_conv2d_nchw": dict(N=1, C=4, H=8, W=8, kernel=3, padding=1),
    "depthwise_conv2d_nhwc": dict(N=1, H=9, W=9, C=6, kernel=3, stride=2, padding=1),
    "conv3d_ndhwc": dict(N=1, D=4, H=5, W=5, CI=3, CO=4, kernel=3, padding=1),
    "max_pool2d": dict(N=1, C=3, H=9, W=8, kernel=3, stride=2, padding=1),
    "avg_pool2d": dict(N=1, C=3, H=8, W=8, kernel=2),
    "softmax": dict(N=5, M=13),
    "norm2": dict(N=9, M=7),
    "add": dict(shape=(6, 10)),
    "relu": dict(shape=(7, 9)),
    "bias_add": dict(shape=(2, 5, 6), axis=1),
    # the quantized operators (uint8 data, int8 weights, int32 sums, a requantize)
    "qmatmul": dict(M=5, N=7, K=9, data_zp=3, weight_zp=-2),
    "qdense": dict(N=3, K=9, M=5, data_zp=7, scale=0.37, out_zp=11, bias=True),
    "qconv2d_nchw": dict(N=1, CI=4, H=7, W=7, CO=6, kernel=3, padding=1, groups=2,
                         data_zp=5, weight_zp=1, out_zp=100, relu=True),
    "qconv2d_nhwc": dict(N=1, H=6, W=5, CI=3, CO=4, kernel=3, padding=1,
                         data_zp=4, scale=0.5, out_zp=128),
}


def test_every_operator_has_a_case() -> None:
    assert set(CASES) == set(ops.OPS)


def _default_schedule(name: str, kwargs: dict) -> tuple:
    """The operator's template at its fallback config, else the unscheduled program."""
    import tvmlite.schedules
    template = getattr(tvmlite.schedules, name, None)
    if template is None:
        tensors = ops.OPS[name](**kwargs)
        return te.create_schedule(tensors[-1].op), tensors
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")    # the fallback config warns that it is one
        return template(**kwargs)


def _check(name: str, kwargs: dict, s, tensors, threads: int | None = None) -> None:
    inputs = random_inputs(tensors, seed=1)
    (got,) = run_on_target(s, tensors, TARGET, inputs, threads=threads)
    want = reference(name, inputs, **kwargs)
    assert_allclose(got, want, tensors[-1].dtype, reduction_length(tensors))


@pytest.mark.parametrize("name", sorted(CASES))
def test_default_schedule_runs_on_aarch64(name: str) -> None:
    s, tensors = _default_schedule(name, CASES[name])
    _check(name, CASES[name], s, tensors, threads=2)


def test_vectorized_exp_and_sigmoid_on_neon() -> None:
    """The vector exp (tvmlite_vexp) and square root (vsqrtq_f32) paths, 4 lanes and a
    16-lane vector split into four NEON registers, with no compiler warning
    (run_on_target builds with -Werror)."""
    for lanes in (4, 16):
        A = te.placeholder((6, 32), name="A")
        B = te.compute((6, 32), lambda i, j: te.exp(A[i, j]) + te.sigmoid(A[i, j] * 3.0)
                       + te.sqrt(A[i, j] * A[i, j] + 1.0), name="B")
        s = te.create_schedule(B.op)
        _, j = s[B].op.axis
        _, ji = s[B].split(j, factor=lanes)
        s[B].vectorize(ji)
        x = (np.random.default_rng(lanes).uniform(-20, 20, (6, 32))).astype("float32")
        (got,) = run_on_target(s, [A, B], TARGET, [x])
        want = np.exp(x) + 1 / (1 + np.exp(-3 * x)) + np.sqrt(x * x + 1)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_openmp_with_the_cross_toolchain() -> None:
    """A parallel loop runs on several emulated threads and writes every row."""
    from tvmlite.target import Target
    assert Target.from_name(TARGET).openmp, "the cross toolchain lacks OpenMP " \
        "(apt-get install libgomp1-arm64-cross)"
    A = te.placeholder((64, 16), name="A")
    B = te.compute((64, 16), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    i, j = s[B].op.axis
    s[B].parallel(i)
    s[B].vectorize(j)
    assert "#pragma omp parallel" in __import__("tvmlite").runtime.module.generate_c(
        s, [A, B], Target.from_name(TARGET))[1]
    x = np.arange(64 * 16, dtype="float32").reshape(64, 16)
    (got,) = run_on_target(s, [A, B], TARGET, [x], threads=4)
    np.testing.assert_array_equal(got, x * 2 + 1)


@settings(max_examples=5, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_hypothesis_drawn_matmul_schedules_on_aarch64(data) -> None:
    M, N, K = 7, 19, 13
    tensors = ops.matmul(M, N, K)
    C = tensors[-1]
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, ii = s[C].split(i, factor=data.draw(st.integers(1, M + 1), label="i factor"))
    jo, ji = s[C].split(j, factor=data.draw(st.sampled_from([1, 3, 4, 8, 16]), label="j"))
    ko, ki = s[C].split(k, factor=data.draw(st.integers(1, K + 1), label="k factor"))
    order = data.draw(st.permutations([io, ii, jo, ko, ki]), label="order")
    s[C].reorder(*order, ji)
    if data.draw(st.booleans(), label="vectorize"):
        s[C].vectorize(ji)
    if data.draw(st.booleans(), label="parallel") and order[0] in (io, jo, ii):
        s[C].parallel(order[0])
    if data.draw(st.booleans(), label="unroll"):
        s[C].unroll(ki)
    _check("matmul", dict(M=M, N=N, K=K), s, tensors)
