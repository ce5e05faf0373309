"""Vector values the C writes in a form GCC vectorizes (``codegen_c.vector_casts``, the
preamble's min/max against a number): each kernel built vectorized and unvectorized,
both equal to numpy bit for bit, as these conversions and comparisons are exact."""
from __future__ import annotations

import math
import re

import numpy as np

import tvmlite
from tvmlite import te
from tvmlite.codegen_c.vector_casts import held_in_register, vector_cast_steps
from tvmlite.target.target import Target

HOST = Target.host()


def _vector_and_scalar(make_out, inputs: list, n: int, lanes: int | None = None) -> tuple:
    """(outputs of the vectorized build, of the unvectorized one, its C source) of the
    stages ``make_out(A...)`` returns, over 1-D inputs of ``n``; vectors of ``lanes``
    (default: the whole axis)."""
    tensors = [te.placeholder((n,), str(a.dtype), name=f"A{k}") for k, a in enumerate(inputs)]
    outs = make_out(*tensors)
    results, source = [], ""
    for vectorize in (True, False):
        s = te.create_schedule([o.op for o in outs])
        if vectorize:
            for o in outs:
                axis = s[o].op.axis[0]
                if lanes is not None:
                    axis = s[o].split(axis, factor=lanes)[1]
                s[o].vectorize(axis)
        mod = tvmlite.build(s, tensors + outs)
        got = [np.empty(n, o.dtype) for o in outs]
        mod(*inputs, *got)
        results.append(got)
        source = source or mod.get_source()
    return results[0], results[1], source


def test_narrowing_vector_casts_go_through_halves_and_keep_the_low_bits():
    assert vector_cast_steps("int32", "uint8") == ["int16", "uint8"]
    assert vector_cast_steps("int64", "int8") == ["int32", "int16", "int8"]
    assert vector_cast_steps("float32", "uint8") == ["int32", "int16", "uint8"]
    assert vector_cast_steps("int32", "int16") == ["int16"]
    assert vector_cast_steps("uint8", "int32") == ["int32"]
    n = 64
    ints = np.arange(-2000, -2000 + 67 * n, 67, dtype="int32")        # wraps in 8 bits
    longs = ints.astype("int64") * 3000001
    floats = np.linspace(0, 255.9, n).astype("float32")               # in range: exact
    vec, scalar, src = _vector_and_scalar(lambda a, b, c: [
        te.compute((n,), lambda i: te.cast(a[i], "uint8"), name="u"),
        te.compute((n,), lambda i: te.cast(a[i], "int8"), name="s"),
        te.compute((n,), lambda i: te.cast(b[i], "int8"), name="l"),
        te.compute((n,), lambda i: te.cast(c[i], "uint8"), name="f")], [ints, longs, floats], n)
    assert re.search(r"__builtin_convertvector\(__builtin_convertvector\([^;]*tvmlite_i16x\d+\)"
                     r", tvmlite_u8x\d+\)", src)
    want = [ints.astype("uint8"), ints.astype("int8"), longs.astype("int8"),
            floats.astype("uint8")]
    for got_v, got_s, w in zip(vec, scalar, want):
        np.testing.assert_array_equal(got_v, w)
        np.testing.assert_array_equal(got_s, w)


def test_widening_casts_of_narrow_vectors_are_held_in_a_register_and_floats_come_from_int32():
    assert vector_cast_steps("uint8", "float32") == ["int32", "float32"]
    assert vector_cast_steps("int16", "float64") == ["int32", "float64"]
    assert vector_cast_steps("int32", "float32") == ["float32"]
    assert held_in_register("uint8", "int32", 8) and held_in_register("int16", "int32", 4)
    assert held_in_register("uint8", "int32", 16)               # a 128-bit vector too
    assert not held_in_register("uint8", "int32", 32)           # a 256-bit one
    assert not held_in_register("int32", "uint8", 2)            # narrowing
    n = 64
    u = np.arange(256 - n, 256).astype("uint8")
    s = np.arange(-128, -128 + 4 * n, 4).astype("int8")
    vec, scalar, src = _vector_and_scalar(lambda a, b: [
        te.compute((n,), lambda i: te.cast(a[i], "int32"), name="ui"),
        te.compute((n,), lambda i: te.cast(b[i], "int32"), name="si"),
        te.compute((n,), lambda i: te.cast(a[i], "float32"), name="uf"),
        te.compute((n,), lambda i: te.cast(b[i], "float32"), name="sf")], [u, s], n, lanes=8)
    assert "tvmlite_inreg_u8x8(" in src and "tvmlite_inreg_i8x8(" in src
    want = [u.astype("int32"), s.astype("int32"), u.astype("float32"), s.astype("float32")]
    for got_v, got_s, w in zip(vec, scalar, want):
        np.testing.assert_array_equal(got_v, w)
        np.testing.assert_array_equal(got_s, w)
    vec, _, src = _vector_and_scalar(lambda a: [
        te.compute((n,), lambda i: te.cast(a[i], "int32"), name="ui")], [u], n, lanes=16)
    cut = min(16, HOST.vector_lanes("int32"))    # 16 lanes are cut into the target's vectors
    assert not held_in_register("uint8", "int32", cut) or f"tvmlite_inreg_u8x{cut}(" in src
    np.testing.assert_array_equal(vec[0], u.astype("int32"))


def test_min_and_max_against_a_number_keep_nan_and_the_sign_of_zero_of_the_general_form():
    special = [np.nan, -0.0, 0.0, 1.0, -1.0, np.inf, -np.inf, 0.5]
    a = np.array(special * 4, "float32")
    b = a[::-1].copy()
    vec, scalar, src = _vector_and_scalar(lambda x, y: [
        te.compute((a.size,), lambda i: te.max(x[i], 0.0), name="relu"),
        te.compute((a.size,), lambda i: te.min(te.max(x[i], -0.0), 1.0), name="clip"),
        te.compute((a.size,), lambda i: te.max(x[i], y[i]), name="general")], [a, b], a.size)
    assert "tvmlite_vmaxk_f32x" in src and "tvmlite_vmink_f32x" in src
    assert "tvmlite_vmax_f32x" in src                    # two tensors: the general form
    for got_v, got_s in zip(vec, scalar):
        np.testing.assert_array_equal(np.isnan(got_v), np.isnan(got_s))
        np.testing.assert_array_equal(got_v.view("int32")[~np.isnan(got_s)],
                                      got_s.view("int32")[~np.isnan(got_s)])
    assert np.isnan(vec[0][0]) and np.isnan(vec[1][0])


def test_a_vector_square_root_is_the_isas_and_rounds_as_numpy():
    """sqrt on vectors is the ISA's vector root where one divides the lanes (the
    compiler's macros choose: zmm, ymm, xmm, NEON), else one lane at a time; correctly
    rounded either way, NaN for a negative lane, as numpy's."""
    x = np.random.default_rng(0).uniform(0, 1e6, 96).astype(np.float32)
    x[:6] = [0.0, -0.0, -1.0, np.inf, np.nan, 1e-40]
    with np.errstate(invalid="ignore"):
        want = np.sqrt(x)
    for lanes in (4, 8, 16, 32, 6):    # 32: cut into the target's registers first
        (vec,), (sca,), src = _vector_and_scalar(lambda a: [te.compute(
            a.shape, lambda i: te.sqrt(a[i]), name="r")], [x], 96, lanes)
        np.testing.assert_array_equal(vec, want)
        np.testing.assert_array_equal(vec, sca)
        assert "tvmlite_vsqrt_f32x" in src and "__builtin_sqrtf(tvmlite_x" not in src


def test_a_vector_erf_is_within_3_ulps_of_math_erf():
    """GELU's erf on vectors (preamble's VERF: a rational fit, one division) instead of
    libm's erff once per lane; its sign, zeros, infinities and NaN as erf's."""
    x = np.random.default_rng(0).uniform(-6, 6, 4096).astype(np.float32)
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, 0.8, -0.79999995]
    (vec,), _, src = _vector_and_scalar(lambda a: [te.compute(
        a.shape, lambda i: te.erf(a[i]), name="e")], [x], 4096, 16)
    assert f"tvmlite_verf_f32x{min(16, HOST.vector_lanes('float32'))}" in src
    assert "erff" not in src
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    fin = ~np.isnan(want)
    np.testing.assert_array_equal(np.isnan(vec), ~fin)
    assert np.signbit(vec[1]) and vec[2] == 1 and vec[3] == -1
    rel = np.abs(vec[fin] - want[fin]) / np.maximum(np.abs(want[fin]), 1e-38)
    assert rel.max() < 3 * 2.0 ** -23
