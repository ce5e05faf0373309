"""Quantized operators (tvmlite.ops.quantized): the rounding, the saturation and the
integer sums at the ends of their ranges, bit for bit against numpy, through the te
interpreter and the compiled C. (The library cases with random inputs are in
test_ops.py; the ONNX ops against onnxruntime in tests/tvmlite/frontend.)"""
from __future__ import annotations

import numpy as np
import pytest

import tvmlite
from tvmlite import ops, te, testing
from tvmlite.ops.quantized import quantize_value, round_half_even
from tvmlite.testing.references import requantize

RNG = np.random.default_rng(32)


def _run(tensors, inputs):
    """The compiled output (default schedule) and the interpreter's, which must agree."""
    out_t = tensors[-1]
    mod = tvmlite.build(te.create_schedule(out_t.op), list(tensors))
    out = np.empty(out_t.shape, out_t.dtype)
    mod(*inputs, out)
    np.testing.assert_array_equal(out, testing.evaluate_te(tensors, inputs))
    return out


def test_round_half_even_on_ties_and_fractions() -> None:
    x = np.array([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.49999997, 0.50000006,
                  1e6 + 0.5, -1e6 - 0.5, 7.0, -7.0, 0.0, 123.456, -99.5001], np.float32)
    X = te.placeholder(x.shape, "float32", name="X")
    R = te.compute(x.shape, lambda i: round_half_even(X[i]), name="R")
    np.testing.assert_array_equal(_run([X, R], [x]), np.rint(x).astype(np.int32))


@pytest.mark.parametrize("dtype,zp", [("uint8", 128), ("int8", -3), ("uint8", 0)])
def test_quantize_saturates_and_rounds_half_to_even(dtype: str, zp: int) -> None:
    scale = 0.25
    x = np.concatenate([np.arange(-80, 80, 0.125), [1e9, -1e9, 0.375, -0.375]]
                       ).astype(np.float32)
    X = te.placeholder(x.shape, "float32", name="X")
    Q = te.compute(x.shape, lambda i: quantize_value(X[i], scale, zp, dtype), name="Q")
    info = np.iinfo(dtype)
    want = np.clip(np.rint(x / np.float32(scale)) + zp, info.min, info.max).astype(dtype)
    np.testing.assert_array_equal(_run([X, Q], [x]), want)


@pytest.mark.parametrize("dtype,weight_dtype", [("uint8", "int8"), ("int8", "int8"),
                                                ("uint8", "uint8")])
def test_qdense_at_the_ends_of_the_ranges(dtype: str, weight_dtype: str) -> None:
    """Extreme inputs and zero points: the int32 sums are exact and the epilogue
    saturates both ways, with and without ReLU."""
    N, K, M = 3, 64, 16
    di, wi = np.iinfo(dtype), np.iinfo(weight_dtype)
    data = RNG.choice([di.min, di.max, 0, 1], (N, K)).astype(dtype)
    weight = RNG.choice([wi.min, wi.max, 0, 1], (M, K)).astype(weight_dtype)
    bias = RNG.integers(-20000, 20000, M).astype(np.int32)
    args = dict(N=N, K=K, M=M, dtype=dtype, weight_dtype=weight_dtype, data_zp=int(di.max) // 3,
                weight_zp=int(wi.min) // 5, scale=0.0071, out_zp=17, out_dtype="int8",
                bias=True, relu=True)
    tensors = ops.qdense(**args)
    acc = (data.astype(np.int64) - args["data_zp"]) @ (weight.astype(np.int64)
                                                        - args["weight_zp"]).T
    want = requantize(acc + bias, args["scale"], 17, "int8", relu=True)
    out = _run(tensors, [data, weight, bias])
    np.testing.assert_array_equal(out, want)
    assert out.min() == 17 and out.max() == 127    # the ReLU clip and the saturation
    np.testing.assert_array_equal(out, testing.reference("qdense", [data, weight, bias], **args))


def test_depthwise_qconv_nhwc_per_channel_weight_zero_points() -> None:
    """Depthwise (groups == CI) with a (CO,) int32 weight zero point tensor and a per
    channel scale, through the tensor-taking compute."""
    C, kh = 8, 3
    data = te.placeholder((1, 6, 6, C), "uint8", name="data")
    weight = te.placeholder((kh, kh, 1, C), "int8", name="weight")
    wzp = te.placeholder((C,), "int32", name="wzp")
    scale = te.placeholder((C,), "float32", name="scale")
    acc = ops.quantized.qconv2d_nhwc_compute(data, weight, 7, wzp, (1, 1), (1, 1, 1, 1),
                                             (1, 1), C, (6, 6))
    out = ops.quantized.requantize_compute(acc, scale, 3, "uint8")
    x = RNG.integers(0, 256, (1, 6, 6, C)).astype(np.uint8)
    w = RNG.integers(-128, 128, (kh, kh, 1, C)).astype(np.int8)
    z = RNG.integers(-4, 4, C).astype(np.int32)
    s = (RNG.random(C) * 0.01).astype(np.float32)
    xp = np.pad(x.astype(np.int64) - 7, ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = np.zeros((1, 6, 6, C), np.int64)
    for r in range(kh):
        for q in range(kh):
            want += xp[:, r:r + 6, q:q + 6, :] * (w[r, q, 0].astype(np.int64) - z)
    got = _run([data, weight, wzp, scale, out], [x, w, z, s])
    np.testing.assert_array_equal(got, requantize(want, s, 3, "uint8"))


@pytest.mark.parametrize("op,args,message", [
    ("qdense", dict(N=2, K=3, M=4, dtype="float32"), "qdense: dtype must be 'uint8' or 'int8'"),
    ("qdense", dict(N=2, K=3, M=4, data_zp=300), r"data_zp must be an int in \[0, 255\]"),
    ("qdense", dict(N=2, K=3, M=4, scale=0.0), "scale must be a positive float"),
    ("qdense", dict(N=2, K=3, M=4, out_dtype="int32"), "out_dtype must be 'uint8' or 'int8'"),
    ("qmatmul", dict(M=2, N=3, K=4, weight_zp=-129), r"weight_zp must be an int in \[-128"),
    ("qconv2d_nchw", dict(N=1, CI=3, H=5, W=5, CO=4, kernel=3, groups=2),
     "CI=3 must be divisible by groups=2"),
    ("qconv2d_nhwc", dict(N=1, H=5, W=5, CI=4, CO=4, kernel=3, relu=1),
     "relu must be True or False"),
])
def test_bad_arguments(op: str, args: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ops.OPS[op](**args)
