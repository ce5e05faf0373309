"""Pre-packed constant inputs (``s.prepack``): the packed copy is computed once by its own
generated function, the kernel reads the panel layout, and pack + kernel together match
numpy and the unscheduled build, for matmul and a conv with a constant weight."""
from __future__ import annotations

import numpy as np
import pytest

import tvmlite
from tvmlite import ScheduleError, ops, te
from tvmlite.passes.pipeline import loop_nest
from tvmlite.runtime.arrays import empty
from tvmlite.schedule.schedule import Schedule
from tvmlite.testing.check import check_schedule, random_inputs
from tvmlite.testing.workloads import matmul_reference


def _mm_plain(M=24, N=32, K=20, factor=16):
    A, B, C = ops.matmul(M, N, K)
    s = te.create_schedule(C.op)
    BP = s.prepack(s.cache_read(B, "local", [C]), dim=1, factor=factor)
    return s, [A, B, C], BP


def _mm_tiled(M=24, N=32, K=20, factor=8):
    """Register tile through cache_write + compute_at reading 8-wide panels."""
    A, B, C = ops.matmul(M, N, K)
    s = te.create_schedule(C.op)
    BP = s.prepack(s.cache_read(B, "local", [C]), dim=1, factor=factor)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, factor)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    (k,) = s[CL].op.reduce_axis
    s[CL].reorder(k, ci, cj)
    s[CL].vectorize(cj)
    s[CL].unroll(ci)
    s[C].parallel(io)
    s[BP].parallel(s[BP].op.axis[0])       # schedules the pack function
    s[BP].vectorize(s[BP].op.axis[-1])
    return s, [A, B, C], BP


def _mm_whole(M=7, N=13, K=5, factor=13):
    """Odd sizes; one panel (factor = N): a plain copy moved out of the kernel."""
    return _mm_plain(M, N, K, factor)


@pytest.mark.parametrize("make", [_mm_plain, _mm_tiled, _mm_whole])
def test_matmul_pack_then_kernel_matches_numpy(make):
    s, tensors, BP = make()
    mod = check_schedule(s, tensors, matmul_reference, atol=1e-4)   # mod(a, b, c): packs, then runs
    a, b = random_inputs(tensors[:2], seed=3)
    bp = mod.pack("B", b)                                  # once, at load time
    factor = BP.shape[-1]
    assert bp.shape == (b.shape[1] // factor, b.shape[0], factor)
    np.testing.assert_array_equal(bp, b.reshape(b.shape[0], -1, factor).transpose(1, 0, 2))
    [p] = mod.packs
    assert (p.input, p.packed, p.func.name) == ("B", BP.name, "default_function_pack_B")
    assert [x.name for x in mod.func.args] == ["A", BP.name, "C"]
    for _ in range(2):                                     # the kernel alone, twice
        c = empty((a.shape[0], b.shape[1]), "float32")
        c[...] = np.nan
        mod.run_packed(a, bp, c)
        np.testing.assert_allclose(c, matmul_reference(a, b), rtol=1e-4, atol=1e-4)
    assert mod.time_evaluator(number=1, repeat=1)(a, b, c).median > 0   # packs once first
    src = mod.get_source()
    assert "int32_t default_function_pack_B(const float* restrict B, float* restrict" in src


def test_conv_with_constant_weight_matches_the_unscheduled_build():
    data, weight, out = ops.conv2d_nhwc(1, 6, 6, 8, 16, 3, padding=1)
    ref_mod = tvmlite.build(te.create_schedule(out.op), [data, weight, out])
    for factor, tile in ((16, 16), (8, 8), (4, 8)):
        s = te.create_schedule(out.op)
        WP = s.prepack(s.cache_read(weight, "local", [s.state.outputs[0]]), dim=3,
                       factor=factor)
        assert WP.shape == (16 // factor, 3, 3, 8, factor)
        n, h, w, f = s[out].op.axis
        fo, fi = s[out].split(f, factor=tile)
        s[out].vectorize(fi)
        s[out].parallel(h)
        tensors = [data, weight, out]
        d, wt = random_inputs(tensors[:2], seed=factor)
        want = np.empty(tuple(out.shape), np.float32)
        ref_mod(d, wt, want)
        mod = tvmlite.build(s, tensors)
        got = np.full_like(want, np.nan)
        mod(d, wt, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        wp = mod.pack("weight", wt)
        got2 = np.full_like(want, np.nan)
        mod.run_packed(d, wp, got2)
        np.testing.assert_array_equal(got2, got)


def test_replayed_steps_give_the_same_kernel_and_pack_function():
    s, tensors, _ = _mm_tiled()
    s2 = Schedule.from_steps([tensors[2]], [st.to_json() for st in s.steps])
    assert s2.steps == s.steps
    assert tvmlite.build(s2, tensors).get_source() == tvmlite.build(s, tensors).get_source()
    assert 's.prepack("B_local", dim=1, factor=8)' in str(s)


def test_loop_nest_features_see_the_kernel_only():
    s, tensors, BP = _mm_plain()
    nest = loop_nest(s, tensors)
    assert [b.name for b in nest.args] == ["A", BP.name, "C"] and not nest.packs


# -- bad input: clear errors ----------------------------------------------------------------

def test_prepack_refuses_what_is_not_a_copy_of_one_input():
    A, B, C = ops.matmul(8, 8, 8)
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="is an output"):
        s.prepack(C, dim=0, factor=4)
    A = te.placeholder((8, 8), name="A")
    T = te.compute((8, 8), lambda i, j: A[i, j] * 2, name="T")
    U = te.compute((8, 8), lambda i, j: T[i, j] + A[i, j], name="U")
    s = te.create_schedule(U.op)
    with pytest.raises(ScheduleError, match="also read by"):
        s.prepack(T, dim=1, factor=4)           # A is read by U too
    V = te.compute((8, 8), lambda i, j: T[i, j] + 1, name="V")
    s = te.create_schedule(V.op)
    TL = s.cache_read(T, "local", [V])
    with pytest.raises(ScheduleError, match="exactly one input placeholder"):
        s.prepack(TL, dim=1, factor=4)          # a copy of a stage, not of an input


def test_prepack_factor_and_placement_errors():
    A, B, C = ops.matmul(8, 12, 8)
    s = te.create_schedule(C.op)
    BL = s.cache_read(B, "local", [C])
    with pytest.raises(ScheduleError, match=r"does not divide .* use one of \[1, 2, 3, 4, 6, 12\]"):
        s.prepack(BL, dim=1, factor=5)
    with pytest.raises(ScheduleError, match="prepack dim"):
        s.prepack(BL, dim=2, factor=4)
    BP = s.prepack(BL, dim=1, factor=4)
    with pytest.raises(ScheduleError, match="pack stage"):
        s[BP].compute_at(s[C], s[C].op.axis[0])
    with pytest.raises(ScheduleError, match="pack stage"):
        s[BP].compute_inline()
    with pytest.raises(ValueError, match="packs \\['B'\\], not 'A'"):
        tvmlite.build(s, [A, B, C]).pack("A", np.zeros((8, 8), np.float32))
    with pytest.raises(ValueError, match="argument B must have shape"):
        tvmlite.build(s, [A, B, C]).pack("B", np.zeros((8, 8), np.float32))


# -- a packed copy stored widened (dtype=) ----------------------------------------------

def _int_add(dtype: str = "int8"):
    """C = A + B (B int8, read bare, no cast): a reader whose arithmetic is int8."""
    A = te.placeholder((4, 8), dtype, name="A")
    B = te.placeholder((4, 8), dtype, name="B")
    C = te.compute((4, 8), lambda i, j: A[i, j] + B[i, j], name="C")
    return A, B, C


def test_a_widened_pack_keeps_the_values_and_the_readers_arithmetic():
    A, B, C = _int_add()
    s = te.create_schedule(C.op)
    BP = s.prepack(s.cache_read(B, "local", [C]), dim=1, factor=4, dtype="int16")
    assert BP.dtype == "int16"
    assert 'dtype="int16"' in str(s)
    step = s.steps[-1].to_json()
    assert step["dtype"] == "int16"
    s2 = Schedule.from_steps([C], [st.to_json() for st in s.steps])
    assert s2.steps == s.steps
    mod = tvmlite.build(s, [A, B, C])
    a = np.array(np.arange(32).reshape(4, 8) * 9 - 128, np.int8)
    b = np.full((4, 8), 100, np.int8)
    c = empty((4, 8), "int8")
    mod(a, b, c)
    np.testing.assert_array_equal(np.asarray(c), a + b)   # int8 wraps as numpy's does
    assert mod.pack("B", b).dtype == np.int16


def test_a_plain_pack_record_has_no_dtype_key():
    s, _, _ = _mm_plain()
    assert "dtype" not in s.steps[-1].to_json()


def test_a_pack_cannot_narrow_or_convert_floats():
    A, B, C = _int_add("int32")
    s = te.create_schedule(C.op)
    BL = s.cache_read(B, "local", [C])
    with pytest.raises(ScheduleError, match="cannot hold every int32"):
        s.prepack(BL, dim=1, factor=4, dtype="int16")
    with pytest.raises(ScheduleError, match="only be widened from an integer"):
        s.prepack(BL, dim=1, factor=4, dtype="float32")
    A, B, C = _int_add("uint8")
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="cannot hold every uint8"):
        s.prepack(s.cache_read(B, "local", [C]), dim=1, factor=4, dtype="int8")


# -- a widened cache_read (A's int16 copy for AVX2's vpmaddwd) -------------------------------

def test_a_widened_cache_read_keeps_the_values_and_a_widening_reader_reads_it_directly():
    A = te.placeholder((4, 8), "uint8", name="A")
    wide = te.compute((4, 8), lambda i, j: te.cast(A[i, j], "int32") * 3, name="W")
    bare = te.compute((4, 8), lambda i, j: A[i, j] + A[i, j], name="U")   # uint8 wraps
    for out in (wide, bare):
        s = te.create_schedule(out.op)
        AW = s.cache_read(A, "global", [out], dtype="int16")
        assert AW.dtype == "int16" and 'dtype="int16"' in str(s)
        assert s.steps[-1].to_json()["dtype"] == "int16"
        assert Schedule.from_steps([out], [st.to_json() for st in s.steps]).steps == s.steps
        body = str(s.state.stage(out.op.name).op.body)
        assert ("uint8(" in body) == (out is bare)   # cast back only where read bare
        mod = tvmlite.build(s, [A, out])
        a = np.array(np.arange(32).reshape(4, 8) * 8, np.uint8)
        got = empty((4, 8), out.dtype)
        mod(a, got)
        want = a.astype(np.int32) * 3 if out is wide else a + a
        np.testing.assert_array_equal(np.asarray(got), want)


def test_a_plain_cache_read_record_has_no_dtype_key_and_a_copy_cannot_narrow():
    A, B, C = _int_add("int32")
    s = te.create_schedule(C.op)
    s.cache_read(B, "global", [C])
    assert "dtype" not in s.steps[-1].to_json()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="cache_read dtype=int16 cannot hold every int32"):
        s.cache_read(B, "global", [C], dtype="int16")
    with pytest.raises(ScheduleError, match="only be widened from an integer"):
        s.cache_read(B, "global", [C], dtype="float32")
