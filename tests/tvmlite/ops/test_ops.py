"""The operator library against its numpy references, through the te interpreter and
through tvmlite.build with the default schedule.

Three independent paths must agree: tvmlite.testing.references (numpy, written per layout), the
te interpreter running the compute definitions of tvmlite.ops, and the compiled C. The
references themselves are checked against brute-force loops on tiny shapes.
"""
from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

import tvmlite
from tvmlite import ops, te, testing
from tvmlite.ops import OPS

# Small odd shapes exercising strides, padding, dilation, groups, layouts and dtypes.
CASES: list[tuple[str, dict]] = [
    ("matmul", dict(M=5, N=7, K=9)),
    ("matmul", dict(M=3, N=4, K=6, dtype="int32")),
    ("batch_matmul", dict(B=2, M=5, N=3, K=7)),
    ("batch_matmul", dict(B=3, M=2, N=5, K=4, dtype="float64")),
    ("dense", dict(N=3, K=9, M=5)),
    ("dense", dict(N=3, K=9, M=5, bias=True)),
    ("dense", dict(N=2, K=7, M=6, bias=True, relu=True)),
    ("dense", dict(N=2, K=7, M=6, relu=True, dtype="int64")),
    ("conv1d", dict(N=2, L=11, CI=3, CO=4, kernel=3, stride=2, padding=1, dilation=2)),
    ("conv1d", dict(N=1, L=9, CI=2, CO=5, kernel=4, padding=2, layout="NCL")),
    ("conv2d_nchw", dict(N=1, CI=4, H=9, W=11, CO=6, kernel=3, stride=2, padding=1,
                         dilation=2, groups=2)),
    ("conv2d_nchw", dict(N=2, CI=3, H=7, W=5, CO=5, kernel=(3, 1))),
    ("conv2d_nchw", dict(N=1, CI=4, H=7, W=7, CO=4, kernel=3, padding=(1, 0), groups=4,
                         dtype="int32")),
    ("conv2d_nhwc", dict(N=1, H=9, W=11, CI=4, CO=6, kernel=3, stride=2, padding=1,
                         dilation=2, groups=2)),
    ("conv2d_nhwc", dict(N=2, H=6, W=7, CI=3, CO=2, kernel=(2, 3), stride=(1, 2),
                         padding=(0, 1), dtype="float64")),
    ("depthwise_conv2d_nchw", dict(N=1, C=3, H=9, W=9, kernel=3, stride=2, padding=1,
                                   dilation=2, multiplier=2)),
    ("depthwise_conv2d_nchw", dict(N=2, C=4, H=6, W=5, kernel=(3, 2))),
    ("depthwise_conv2d_nhwc", dict(N=1, H=9, W=7, C=3, kernel=3, stride=2, padding=1,
                                   dilation=2, multiplier=2)),
    ("depthwise_conv2d_nhwc", dict(N=1, H=5, W=5, C=5, kernel=3, padding=1)),
    ("conv3d_ndhwc", dict(N=1, D=5, H=7, W=6, CI=3, CO=2, kernel=3, stride=(1, 2, 1),
                          padding=1, dilation=(1, 1, 2))),
    ("max_pool2d", dict(N=1, C=3, H=9, W=8, kernel=3, stride=2, padding=1)),
    ("max_pool2d", dict(N=2, C=2, H=7, W=7, kernel=(2, 3), layout="NHWC")),
    ("max_pool2d", dict(N=1, C=2, H=7, W=6, kernel=3, stride=1, padding=1, dtype="int32")),
    ("avg_pool2d", dict(N=1, C=3, H=9, W=8, kernel=3, stride=2, padding=1)),
    ("avg_pool2d", dict(N=1, C=3, H=9, W=8, kernel=3, stride=2, padding=1,
                        count_include_pad=False)),
    ("avg_pool2d", dict(N=2, C=3, H=7, W=9, kernel=(3, 2), stride=(2, 1), padding=(1, 1),
                        layout="NHWC", count_include_pad=False)),
    ("softmax", dict(N=3, M=7)),
    ("softmax", dict(N=1, M=33, dtype="float64")),
    ("norm2", dict(N=5, M=7)),
    ("add", dict(shape=(3, 5, 2))),
    ("add", dict(shape=7, dtype="int32")),
    ("relu", dict(shape=(3, 5))),
    ("relu", dict(shape=(2, 3, 2, 3, 2), dtype="int64")),
    ("bias_add", dict(shape=(2, 3, 5), axis=1)),
    ("bias_add", dict(shape=(4, 3), axis=-1)),
    ("qmatmul", dict(M=5, N=7, K=9, data_zp=3, weight_zp=-2)),
    ("qmatmul", dict(M=3, N=4, K=8, dtype="int8", weight_dtype="uint8", weight_zp=5)),
    ("qdense", dict(N=3, K=9, M=5, data_zp=7, scale=0.37, out_zp=11, bias=True)),
    ("qdense", dict(N=2, K=8, M=6, dtype="int8", data_zp=-3, out_dtype="int8", out_zp=-5,
                    per_channel=True, relu=True)),
    ("qconv2d_nchw", dict(N=1, CI=4, H=7, W=9, CO=6, kernel=3, stride=2, padding=1,
                          dilation=2, groups=2, data_zp=5, weight_zp=1, scale=0.21,
                          out_zp=100, bias=True, relu=True)),
    ("qconv2d_nchw", dict(N=1, CI=4, H=6, W=6, CO=4, kernel=3, padding=1, groups=4,
                          data_zp=9, per_channel=True, out_dtype="int8")),
    ("qconv2d_nhwc", dict(N=2, H=6, W=5, CI=3, CO=4, kernel=(2, 3), padding=(0, 1),
                          data_zp=4, weight_zp=-1, scale=0.5, out_zp=128, bias=True)),
    ("qconv2d_nhwc", dict(N=1, H=7, W=7, CI=4, CO=8, kernel=3, stride=2, padding=1,
                          groups=4, dtype="int8", data_zp=-2, scale=0.13, relu=True)),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in args.items())}" for name, args in CASES]


def _dtype(args: dict) -> str:
    return args.get("dtype", "float32")


def test_every_op_has_a_case_and_a_reference() -> None:
    from tvmlite.testing.references import REFERENCES
    assert set(OPS) == {name for name, _ in CASES} == set(REFERENCES)


@pytest.mark.parametrize("name,args", CASES, ids=IDS)
def test_interpreter_matches_reference(name: str, args: dict) -> None:
    tensors = OPS[name](**args)
    inputs = testing.random_inputs(tensors, seed=1)
    got = testing.evaluate_te(tensors, inputs)
    want = testing.reference(name, inputs, **args)
    assert got.dtype == want.dtype == np.dtype(tensors[-1].dtype)
    testing.assert_allclose(got, want, tensors[-1].dtype, testing.reduction_length(tensors))


@pytest.mark.parametrize("name,args", CASES, ids=IDS)
def test_names_are_unique_identifiers(name: str, args: dict) -> None:
    tensors = OPS[name](**args)
    stages = te.collect_ops([tensors[-1]])
    names = [op.name for op in stages]
    assert len(names) == len(set(names)), names
    assert all(re.fullmatch(r"[A-Za-z_]\w*", n) for n in names)
    assert [t.op for t in tensors[:-1]] == [op for op in stages
                                            if isinstance(op, te.PlaceholderOp)]
    for op in stages:
        axes = [iv.name for iv in op.axis] + [iv.name for iv in op.reduce_axis]
        assert len(axes) == len(set(axes)), (op.name, axes)


def test_axis_names_come_from_the_layout() -> None:
    data, weight, out = ops.conv2d_nhwc(1, 8, 8, 4, 4, 3, padding=1)
    pad = out.op.input_tensors[0]
    assert pad.name == "pad" and [iv.name for iv in pad.op.axis] == ["n", "h", "w", "c"]
    assert [iv.name for iv in out.op.axis] == ["n", "h", "w", "f"]
    assert [iv.name for iv in out.op.reduce_axis] == ["ry", "rx", "rc"]
    _, _, out = ops.conv2d_nchw(1, 4, 8, 8, 4, 3)  # no padding: no pad stage
    assert [t.name for t in out.op.input_tensors] == ["data", "weight"]


# -- the references against brute force ------------------------------------------------

def _naive_conv2d_nchw(x, w, stride, pad, dil, groups):
    N, CI, H, W = x.shape
    CO, cig, KH, KW = w.shape
    OH = (H + 2 * pad - dil * (KH - 1) - 1) // stride + 1
    OW = (W + 2 * pad - dil * (KW - 1) - 1) // stride + 1
    out = np.zeros((N, CO, OH, OW))
    for n, f, y, xx, c, ky, kx in itertools.product(range(N), range(CO), range(OH), range(OW),
                                                     range(cig), range(KH), range(KW)):
        iy, ix = y * stride + ky * dil - pad, xx * stride + kx * dil - pad
        if 0 <= iy < H and 0 <= ix < W:
            out[n, f, y, xx] += x[n, f // (CO // groups) * cig + c, iy, ix] * w[f, c, ky, kx]
    return out


def test_conv_reference_matches_brute_force() -> None:
    args = dict(N=2, CI=4, H=7, W=6, CO=6, kernel=3, stride=2, padding=2, dilation=2, groups=2)
    x, w = testing.random_inputs(ops.conv2d_nchw(**args), seed=3)
    want = _naive_conv2d_nchw(x, w, 2, 2, 2, 2)
    testing.assert_allclose(testing.reference("conv2d_nchw", [x, w], **args), want, "float32", 18)


@pytest.mark.parametrize("include", [True, False])
def test_pool_reference_matches_brute_force(include: bool) -> None:
    args = dict(N=1, C=2, H=7, W=6, kernel=3, stride=2, padding=1)
    (x,) = testing.random_inputs(ops.avg_pool2d(**args), seed=4)
    OH, OW = 4, 3
    mx, avg = np.full((1, 2, OH, OW), -np.inf), np.zeros((1, 2, OH, OW))
    for c, y, xx in itertools.product(range(2), range(OH), range(OW)):
        win = x[0, c, max(2 * y - 1, 0):2 * y + 2, max(2 * xx - 1, 0):2 * xx + 2]
        mx[0, c, y, xx] = win.max()
        avg[0, c, y, xx] = win.sum() / (9 if include else win.size)
    testing.assert_allclose(testing.reference("max_pool2d", [x], **args), mx, "float32")
    got = testing.reference("avg_pool2d", [x], **args, count_include_pad=include)
    testing.assert_allclose(got, avg, "float32", 9)


def test_reference_checks_its_inputs() -> None:
    a, b = testing.random_inputs(ops.matmul(3, 4, 5))
    with pytest.raises(ValueError, match="input B of matmul must be float32"):
        testing.reference("matmul", [a, b.T], M=3, N=4, K=5)
    with pytest.raises(ValueError, match="takes 2 inputs"):
        testing.reference("matmul", [a], M=3, N=4, K=5)
    with pytest.raises(ValueError, match="unknown operator"):
        testing.reference("matmult", [a, b], M=3, N=4, K=5)
    with pytest.raises(ValueError, match="bad arguments"):
        testing.reference("matmul", [a, b], M=3, N=4)


# -- argument validation --------------------------------------------------------------------

BAD: list[tuple[str, dict, str]] = [
    ("matmul", dict(M=0, N=4, K=4), "matmul: M must be a positive int"),
    ("matmul", dict(M=4, N=4.0, K=4), "matmul: N must be a positive int"),
    ("matmul", dict(M=4, N=4, K=4, dtype="complex64"), "matmul: dtype must be one of"),
    ("batch_matmul", dict(B=-1, M=2, N=2, K=2), "batch_matmul: B must be a positive int"),
    ("dense", dict(N=2, K=3, M=4, bias="yes"), "dense: bias must be True or False"),
    ("conv1d", dict(N=1, L=8, CI=2, CO=2, kernel=3, layout="NHWC"), "conv1d: layout must be"),
    ("conv1d", dict(N=1, L=2, CI=2, CO=2, kernel=3), "conv1d: the window along L"),
    ("conv2d_nchw", dict(N=1, CI=6, H=8, W=8, CO=4, kernel=3, groups=4),
     "conv2d_nchw: CI=6 must be divisible by groups=4"),
    ("conv2d_nchw", dict(N=1, CI=4, H=8, W=8, CO=6, kernel=3, groups=4),
     "conv2d_nchw: CO=6 must be divisible by groups=4"),
    ("conv2d_nchw", dict(N=1, CI=4, H=8, W=8, CO=4, kernel=(3, 3, 3)),
     "conv2d_nchw: kernel must be an int or a tuple of 2 ints"),
    ("conv2d_nhwc", dict(N=1, H=8, W=8, CI=4, CO=4, kernel=3, stride=0),
     "conv2d_nhwc: stride must be a positive int"),
    ("conv2d_nhwc", dict(N=1, H=8, W=8, CI=4, CO=4, kernel=3, padding=-1),
     "conv2d_nhwc: padding must be a non-negative int"),
    ("conv2d_nhwc", dict(N=1, H=4, W=8, CI=4, CO=4, kernel=3, dilation=2),
     "conv2d_nhwc: the window along H"),
    ("depthwise_conv2d_nchw", dict(N=1, C=4, H=8, W=8, kernel=3, multiplier=0),
     "depthwise_conv2d_nchw: multiplier must be a positive int"),
    ("depthwise_conv2d_nhwc", dict(N=1, H=8, W=8, C=0, kernel=3),
     "depthwise_conv2d_nhwc: C must be a positive int"),
    ("conv3d_ndhwc", dict(N=1, D=2, H=8, W=8, CI=2, CO=2, kernel=3),
     "conv3d_ndhwc: the window along D"),
    ("max_pool2d", dict(N=1, C=2, H=8, W=8, kernel=2, padding=2),
     "max_pool2d: padding along H \\(2\\) must be smaller than the kernel"),
    ("max_pool2d", dict(N=1, C=2, H=8, W=8, kernel=2, layout="NCL"),
     "max_pool2d: layout must be"),
    ("avg_pool2d", dict(N=1, C=2, H=8, W=8, kernel=2, dtype="int32"),
     "avg_pool2d: dtype must be one of float32, float64"),
    ("avg_pool2d", dict(N=1, C=2, H=8, W=8, kernel=2, count_include_pad=1),
     "avg_pool2d: count_include_pad must be True or False"),
    ("softmax", dict(N=2, M=3, dtype="int32"), "softmax: dtype must be one of float32"),
    ("norm2", dict(N=2, M=0), "norm2: M must be a positive int"),
    ("add", dict(shape=()), "add: shape must be a non-empty tuple"),
    ("relu", dict(shape=(2, 0)), "relu: shape must be a positive int"),
    ("bias_add", dict(shape=(2, 3), axis=2), "bias_add: axis must be an int in \\[-2, 2\\)"),
]


@pytest.mark.parametrize("name,args,message", BAD, ids=[m.split(":")[0] + "-" + str(i)
                                                        for i, (_, _, m) in enumerate(BAD)])
def test_bad_arguments_raise_value_error(name: str, args: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OPS[name](**args)


# -- the interpreter on hand-written computes ---------------------------------------------------

def test_interpreter_out_of_bounds_read_is_an_error_unless_guarded() -> None:
    A = te.placeholder((5,), name="A")
    a = np.arange(5, dtype="float32")
    bad = te.compute((5,), lambda i: A[i + 1], name="B")
    with pytest.raises(IndexError, match=r"compute B reads A out of bounds .* at i=4"):
        testing.evaluate_te([A, bad], [a])
    sel = te.compute((5,), lambda i: te.if_then_else(i < 4, A[i + 1], 0.0), name="B")
    np.testing.assert_array_equal(testing.evaluate_te([A, sel], [a]), [1, 2, 3, 4, 0])
    # the right side of && is not evaluated where the left side is false
    both = te.compute((5,), lambda i: te.if_then_else(te.all(i < 4, A[i + 1] > 2), 1.0, 0.0),
                      name="B")
    np.testing.assert_array_equal(testing.evaluate_te([A, both], [a]), [0, 0, 1, 1, 0])


def test_interpreter_integer_semantics_are_floor() -> None:
    Ints = te.placeholder((7,), "int32", name="I")
    out = te.compute((7,), lambda i: Ints[i] // 3 * 10 + Ints[i] % 3, name="out")
    x = np.arange(-3, 4, dtype="int32")
    np.testing.assert_array_equal(testing.evaluate_te([Ints, out], [x]), x // 3 * 10 + x % 3)


def test_interpreter_functions_casts_and_masked_reduction() -> None:
    A = te.placeholder((6,), name="A")
    a = np.linspace(-2, 2, 6).astype("float32")
    f = te.compute((6,), lambda i: te.sigmoid(A[i]) + te.erf(A[i]) * te.tanh(A[i])
                   + te.abs(A[i]) + te.cast(te.cast(A[i] * 2.0, "int32"), "float32"), name="f")
    from scipy.special import erf
    want = 1 / (1 + np.exp(-a)) + erf(a) * np.tanh(a) + abs(a) + np.trunc(a * 2)
    testing.assert_allclose(testing.evaluate_te([A, f], [a]), want.astype("float32"), "float32")
    k = te.reduce_axis((1, 6), name="k")  # a reduce axis that does not start at 0
    s = te.compute((2,), lambda i: te.max(A[k] * (i + 1).astype("float32"), axis=k,
                                          where=k % 2 == 1), name="s")
    np.testing.assert_allclose(testing.evaluate_te([A, s], [a]), [a[5], 2 * a[5]])


def test_interpreter_blocks_give_the_same_result() -> None:
    args = dict(N=2, CI=4, H=9, W=11, CO=6, kernel=3, stride=2, padding=1, dilation=2, groups=2)
    tensors = ops.conv2d_nchw(**args)
    inputs = testing.random_inputs(tensors)
    whole = testing.evaluate_te(tensors, inputs)
    for limit in (1, 50, 1000):  # single points, partial rows, partial reduce axes
        np.testing.assert_array_equal(testing.evaluate_te(tensors, inputs, max_elements=limit),
                                      whole)
    tensors = ops.norm2(40, 30)
    inputs = testing.random_inputs(tensors)
    testing.assert_allclose(testing.evaluate_te(tensors, inputs, max_elements=100),
                            testing.evaluate_te(tensors, inputs), "float32", 1200)


def test_interpreter_checks_its_inputs() -> None:
    tensors = ops.matmul(3, 4, 5)
    a, b = testing.random_inputs(tensors)
    with pytest.raises(ValueError, match="2 placeholders"):
        testing.evaluate_te(tensors, [a])
    with pytest.raises(ValueError, match="input for B must be float32"):
        testing.evaluate_te(tensors, [a, b.astype("float64")])
    with pytest.raises(ValueError, match="placeholder B is read .* not in tensors"):
        testing.evaluate_te([tensors[0], tensors[2]], [a])


# -- checks -----------------------------------------------------------------------------------

def test_random_inputs_are_seeded_and_in_range() -> None:
    tensors = ops.conv2d_nchw(1, 3, 5, 5, 2, 3, dtype="int32")
    x1, w1 = testing.random_inputs(tensors, seed=7)
    x2, _ = testing.random_inputs(tensors, seed=7)
    assert x1.dtype == np.int32 and x1.shape == (1, 3, 5, 5) and w1.shape == (2, 3, 3, 3)
    np.testing.assert_array_equal(x1, x2)
    assert x1.min() >= -8 and x1.max() < 8
    (f,) = testing.random_inputs(ops.relu((50, 50)), seed=0)
    assert f.dtype == np.float32 and f.min() >= -1 and f.max() < 1 and f.std() > 0.5


def test_tolerance_and_assert_allclose() -> None:
    assert testing.tolerance("int32") == (0.0, 0.0)
    r1, a1 = testing.tolerance("float32")
    r2, a2 = testing.tolerance("float32", 10000)
    assert r1 == pytest.approx(1.1e-4) and r2 > r1 and a2 > a1
    assert testing.tolerance("float64")[0] < 1e-9
    x = np.zeros((3, 4), "float32")
    testing.assert_allclose(x + 5e-5, x, "float32")
    y = x.copy()
    y[2, 1] = 0.5
    with pytest.raises(AssertionError, match=r"1 of 12 .* max abs error 0.5 at index \(2, 1\)"):
        testing.assert_allclose(y, x, "float32")
    with pytest.raises(AssertionError, match="shape mismatch"):
        testing.assert_allclose(x, x.T, "float32")
    nan = np.array([np.nan, 1.0])
    testing.assert_allclose(nan, nan, "float64")
    with pytest.raises(AssertionError):
        testing.assert_allclose(np.array([np.nan, 1.0]), np.array([0.0, 1.0]), "float64")
    with pytest.raises(AssertionError):
        testing.assert_allclose(np.array([3], "int32"), np.array([4], "int32"), "int32")


# -- compiled with the default schedule -------------------------------------------------------

@pytest.mark.parametrize("name,args", CASES, ids=IDS)
def test_default_schedule_build_matches_reference(name: str, args: dict) -> None:
    tensors = OPS[name](**args)
    out_t = tensors[-1]
    s = te.create_schedule(out_t.op)
    mod = tvmlite.build(s, tensors)
    inputs = testing.random_inputs(tensors, seed=2)
    out = np.empty(out_t.shape, out_t.dtype)
    mod(*inputs, out)
    want = testing.reference(name, inputs, **args)
    testing.assert_allclose(out, want, out_t.dtype, testing.reduction_length(tensors))
