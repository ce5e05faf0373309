"""codegen_c/lowp.py and the C of the low-precision dtypes: the float16/bfloat16
conversions bit for bit against numpy and ml_dtypes (every 16-bit pattern, and float32
edges), elementwise computes within their rounding, int8/uint8/int16 arithmetic and an
int8 matmul with int32 accumulation bit for bit against numpy's integers, on this machine
and (cross-compiled, under qemu) on AArch64."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tvmlite
from tvmlite import te
from tvmlite.codegen_c.lowp import legalize, round_to
from tvmlite.ir.dtypes import numpy_dtype
from tvmlite.ir.expr import Cast, Const, Load, walk
from tvmlite.ir.stmt import Store, walk_stmts
from tvmlite.testing.cross import cross_unavailable, run_on_target

BF16 = np.dtype(ml_dtypes.bfloat16)


def _cast_both_ways(src: str, dst: str, n: int) -> tuple:
    """A placeholder of ``src`` cast to ``dst`` twice: in a vectorized stage (16 lanes) and
    in a scalar one; the schedule and its tensors."""
    A = te.placeholder((n,), src, name="A")
    V = te.compute((n,), lambda i: te.cast(A[i], dst), name="V")
    S = te.compute((n,), lambda i: te.cast(A[i], dst), name="S")
    s = te.create_schedule([V.op, S.op])
    _, vi = s[V].split(V.op.axis[0], factor=16)
    s[V].vectorize(vi)
    return s, [A, V, S]


def _run(s, tensors, *inputs):
    mod = tvmlite.build(s, tensors)
    outs = [tvmlite.nd.empty(t.shape, t.dtype) for t in tensors[len(inputs):]]
    mod(*inputs, *outs)
    return [o.numpy() for o in outs]


def _same_bits_or_both_nan(got: np.ndarray, want: np.ndarray) -> None:
    g, w = got.astype(np.float32), want.astype(np.float32)
    nan = np.isnan(w)
    np.testing.assert_array_equal(np.isnan(g), nan)
    bits = np.uint16 if got.itemsize == 2 else np.uint32
    bad = np.flatnonzero((got.view(bits) != want.view(bits)) & ~nan)
    assert bad.size == 0, f"{bad.size} differ, first {got[bad[:4]]} for {want[bad[:4]]}"


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_every_16_bit_pattern_converts_to_float32_exactly(name):
    x = np.arange(2**16, dtype=np.uint16).view(numpy_dtype(name))
    s, tensors = _cast_both_ways(name, "float32", x.size)
    for got in _run(s, tensors, x):
        _same_bits_or_both_nan(got, x.astype(np.float32))


def _f32_edges() -> np.ndarray:
    rng = np.random.default_rng(0)
    random_bits = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)
    halfway = (np.arange(2**16, dtype=np.uint32) << 16) | 0x8000   # bf16 ties
    f16_ties = ((np.arange(0, 2**15, 7, dtype=np.uint32) << 13) + 0x38000000) | 0x1000
    edges = np.array([0.0, -0.0, 65504.0, 65519.996, 65520.0, 2.0**-14, 2.0**-24, 2.0**-25,
                      3 * 2.0**-26, 2.0**-26, 1e-30, np.inf, -np.inf, np.nan, 3.4e38],
                     dtype=np.float32)
    return np.concatenate([random_bits.view(np.float32), halfway.view(np.float32),
                           f16_ties.view(np.float32), edges, -edges])


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_float32_rounds_to_nearest_even_as_numpy_and_ml_dtypes_do(name):
    x = _f32_edges()
    s, tensors = _cast_both_ways("float32", name, x.size)
    with np.errstate(over="ignore", invalid="ignore"):   # numpy warns at inf and NaN
        want = x.astype(numpy_dtype(name))
    for got in _run(s, tensors, x):
        _same_bits_or_both_nan(got, want)


def test_legalize_leaves_storage_floats_only_at_loads_stores_and_conversions():
    A = te.placeholder((8,), "bfloat16", name="A")
    B = te.compute((8,), lambda i: te.exp(A[i]) * 0.1
                   + te.cast(te.cast(A[i] * 3.0, "float16"), "bfloat16"), name="B")
    assert B.dtype == "bfloat16"
    func = tvmlite.lower(te.create_schedule(B.op), [A, B])
    body = legalize(func.body)
    (store,) = [x for x in walk_stmts(body) if isinstance(x, Store)]
    assert isinstance(store.value, Cast) and store.value.dtype == "bfloat16"
    assert store.value.value.dtype == "float32"
    for e in walk(store.value.value):
        if e.dtype in ("bfloat16", "float16"):      # a conversion, or the load under one
            assert isinstance(e, (Cast, Load)), e
        if isinstance(e, Const) and e.dtype == "float32" and e.value != 3.0:
            assert e.value == round_to(0.1, "bfloat16")


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_elementwise_low_precision_floats_within_their_rounding(name):
    """Computed in float32 and rounded once at the store: equal to numpy's float32
    arithmetic rounded to the type, up to one rounding of the reordered float32 value."""
    n = 203
    A = te.placeholder((n,), name, name="A")
    B = te.placeholder((n,), name, name="B")
    C = te.compute((n,), lambda i: te.max(A[i], B[i]) * A[i] + te.exp(B[i]) - 0.5, name="C")
    s = te.create_schedule(C.op)
    _, ci = s[C].split(C.op.axis[0], factor=32)
    s[C].vectorize(ci)
    rng = np.random.default_rng(1)
    a, b = (rng.uniform(-2, 2, n).astype(numpy_dtype(name)) for _ in range(2))
    (c,) = _run(s, [A, B, C], a, b)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    want = (np.maximum(af, bf) * af + np.exp(bf) - np.float32(round_to(0.5, name)))
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=2.0 ** (-7 if name ==
                               "bfloat16" else -10), atol=1e-3)
    assert c.dtype == numpy_dtype(name)


@pytest.mark.parametrize("name", ["int8", "uint8", "int16"])
def test_narrow_integer_arithmetic_wraps_as_numpy(name):
    """+ - * wrap (C would compute them in int), // and % floor, min/max and a select,
    vectorized and scalar, bit for bit."""
    n = 77
    A = te.placeholder((n,), name, name="A")
    B = te.placeholder((n,), name, name="B")

    def body(i):
        return (A[i] * B[i] - A[i] + te.floordiv(A[i], B[i]) + te.floormod(A[i], B[i])
                + te.max(A[i], B[i]) + te.if_then_else(A[i] > B[i], A[i], B[i] * 2))
    V = te.compute((n,), body, name="V")
    S = te.compute((n,), body, name="S")
    s = te.create_schedule([V.op, S.op])
    _, vi = s[V].split(V.op.axis[0], factor=32)
    s[V].vectorize(vi)
    info = np.iinfo(name)
    rng = np.random.default_rng(2)
    a, b = (rng.integers(info.min, info.max + 1, n).astype(name) for _ in range(2))
    b[b == 0] = 3
    a[:2], b[:2] = info.min, (-1 if info.min < 0 else 1)       # MIN // -1 wraps
    with np.errstate(over="ignore"):
        a64, b64 = a.astype(np.int64), b.astype(np.int64)
        want = (a64 * b64 - a64 + a64 // b64 + a64 % b64 + np.maximum(a64, b64)
                + np.where(a64 > b64, a64, (b64 * 2).astype(name))).astype(name)
    for got in _run(s, [A, B, V, S], a, b):
        np.testing.assert_array_equal(got, want)


def _int8_matmul(a_dtype: str, M: int = 7, N: int = 40, K: int = 23) -> tuple:
    """u8/s8 x s8 -> s32 matmul, vectorized over N, then requantized to int8 with a
    saturating cast: the schedule and its tensors."""
    A = te.placeholder((M, K), a_dtype, name="A")
    B = te.placeholder((K, N), "int8", name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k].astype("int32") * B[k, j].astype("int32"),
                                               axis=k), name="C")
    D = te.compute((M, N), lambda i, j: te.cast(C[i, j] // 8, "int8", saturate=True), name="D")
    s = te.create_schedule(D.op)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=16)
    s[C].reorder(i, jo, k, ji)
    s[C].vectorize(ji)
    _, dj = s[D].split(s[D].op.axis[1], factor=16)
    s[D].vectorize(dj)
    return s, [A, B, C, D]


def _int8_inputs(a_dtype: str, tensors) -> tuple:
    rng = np.random.default_rng(3)
    info = np.iinfo(a_dtype)
    a = rng.integers(info.min, info.max + 1, tensors[0].shape).astype(a_dtype)
    b = rng.integers(-128, 128, tensors[1].shape).astype(np.int8)
    c = a.astype(np.int32) @ b.astype(np.int32)
    return a, b, c, np.clip(c // 8, -128, 127).astype(np.int8)


@pytest.mark.parametrize("a_dtype", ["uint8", "int8"])
def test_int8_matmul_accumulates_in_int32_bit_for_bit(a_dtype):
    s, tensors = _int8_matmul(a_dtype)
    a, b, c, d = _int8_inputs(a_dtype, tensors)
    got_c, got_d = _run(s, tensors, a, b)
    np.testing.assert_array_equal(got_c, c)
    np.testing.assert_array_equal(got_d, d)


AARCH64 = cross_unavailable("aarch64-neon")


@pytest.mark.skipif(AARCH64 is not None, reason=f"AArch64 toolchain or qemu: {AARCH64}")
def test_int8_and_bfloat16_kernels_on_aarch64_under_qemu():
    """NEON has no bfloat16 arithmetic in armv8-a: the same bit operations, 128-bit vectors
    (a 16-lane vector is four registers); int8 lanes wrap as on x86."""
    s, tensors = _int8_matmul("uint8")
    a, b, c, d = _int8_inputs("uint8", tensors)
    got_c, got_d = run_on_target(s, tensors, "aarch64-neon", [a, b])
    np.testing.assert_array_equal(got_c, c)
    np.testing.assert_array_equal(got_d, d)

    x = np.concatenate([_f32_edges()[-40:], np.linspace(-3, 3, 57, dtype=np.float32)])
    X = te.placeholder((x.size,), "float32", name="X")
    H = te.compute((x.size,), lambda i: te.cast(X[i], "bfloat16"), name="H")
    Y = te.compute((x.size,), lambda i: te.exp(H[i]) * H[i], name="Y")
    s = te.create_schedule(Y.op)
    for t in (H, Y):
        _, ti = s[t].split(t.op.axis[0], factor=8)
        s[t].vectorize(ti)
    got_h, got_y = run_on_target(s, [X, H, Y], "aarch64-neon", [x])
    h = x.astype(BF16)
    _same_bits_or_both_nan(got_h, h)
    hf = h.astype(np.float32)
    small = np.abs(hf) < 80                      # exp's range (larger: inf * x, NaN)
    _same_bits_or_both_nan(got_y[small], (np.exp(hf[small]) * hf[small]).astype(BF16))


def test_vector_lanes_are_the_targets_vector_bits_over_the_element_bits():
    from tvmlite.target.target import Target
    from tvmlite.testing.cross import cross_unavailable
    why = cross_unavailable("aarch64-neon")
    if why:
        pytest.skip(why)
    neon = Target.from_name("aarch64-neon")
    assert [neon.vector_lanes(d) for d in ("int8", "uint8", "int16", "bfloat16", "float16")] \
        == [16, 16, 8, 8, 8]
    A = te.placeholder((64,), "int8", name="A")
    B = te.compute((64,), lambda i: A[i] + A[i], name="B")
    s = te.create_schedule(B.op)
    _, bi = s[B].split(B.op.axis[0], factor=neon.vector_lanes("int8"))
    s[B].vectorize(bi)
    src = tvmlite.runtime.module.generate_c(s, [A, B], neon)[1]
    assert "typedef int8_t tvmlite_i8x16 __attribute__((vector_size(16)));" in src


def test_compute_lanes_of_a_storage_float_are_float32s():
    from tvmlite.target.target import Target
    t = Target.from_name("x86_64-avx512")
    assert t.vector_lanes("bfloat16") == 32
    assert [t.compute_lanes(d) for d in ("bfloat16", "float16", "float32", "int8")] == \
        [16, 16, 16, 64]


def test_a_bfloat16_max_pool_is_exact_with_one_rounding_per_output():
    """A max of bf16 values is one of them: taken in float32 (a reduction stage of its
    own) and cast once at the store, it equals numpy's max bit for bit, and no partial
    max is rounded (the old form converted to bf16 at each of the 9 taps); each helper
    the C calls is forced inline (GCC left a 32-lane conversion out of line)."""
    from tvmlite.ops.nn import max_pool2d_compute
    x = te.placeholder((1, 9, 9, 32), "bfloat16", name="x")
    y = max_pool2d_compute(x, 3, 2, 1, "NHWC")
    assert y.dtype == "bfloat16" and y.op.input_tensors[0].dtype == "float32"
    xs = np.random.default_rng(0).standard_normal((1, 9, 9, 32)).astype(BF16)
    mod = tvmlite.build(te.create_schedule(y.op), [x, y])
    out = tvmlite.nd.empty(y.shape, "bfloat16")
    mod(xs, out)
    pad = np.pad(xs.astype(np.float32), ((0, 0), (1, 1), (1, 1), (0, 0)),
                 constant_values=-np.inf)
    want = np.max([pad[:, i:i + 9:2, j:j + 9:2] for i in range(3) for j in range(3)], axis=0)
    _same_bits_or_both_nan(out.numpy(), want.astype(BF16))
    src = mod.get_source()
    assert src.count("tvmlite_cvt_f32_bf16(") == 2   # its definition and the one store
    assert "static inline tvmlite" not in src and "always_inline" in src


def test_a_bfloat16_vector_is_cut_to_the_float32_registers_it_computes_in():
    """A 32-lane bf16 loop on AVX-512 stores 64 bytes but computes on 32 float32 lanes,
    two registers GCC lowers in part to scalars: lowering cuts it into float32's 16."""
    from tvmlite.target.target import Target
    A = te.placeholder((64,), "bfloat16", name="A")
    B = te.compute((64,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    _, bi = s[B].split(B.op.axis[0], factor=32)
    s[B].vectorize(bi)
    src = tvmlite.runtime.module.generate_c(s, [A, B], Target.from_name("x86_64-avx512"))[1]
    assert "tvmlite_f32x16" in src and "x32" not in src


def test_a_bfloat16_copy_and_padding_move_bits_without_a_conversion():
    """A stored value that is already bf16 -- a copy's load, a padding's select of one
    and a constant -- is stored as its bits: no round trip through float32 and back (the
    padding of a bf16 depthwise conv rounded every element it copied)."""
    x = te.placeholder((6, 32), "bfloat16", name="x")
    y = te.compute((8, 32), lambda i, c: te.if_then_else(
        te.all(i >= 1, i < 7), x[i - 1, c], te.const(0.0, "bfloat16")), name="y")
    s = te.create_schedule(y.op)
    s[y].vectorize(y.op.axis[1])
    xs = np.random.default_rng(0).standard_normal((6, 32)).astype(BF16)
    xs[0, :3] = [np.nan, np.inf, -0.0]
    mod = tvmlite.build(s, [x, y])
    out = tvmlite.nd.empty((8, 32), "bfloat16")
    mod(xs, out)
    want = np.pad(xs, ((1, 1), (0, 0)))
    np.testing.assert_array_equal(out.numpy().view(np.uint16), want.view(np.uint16))
    src = mod.get_source()
    assert "tvmlite_cvt_bf16_f32" not in src      # the data is never widened
