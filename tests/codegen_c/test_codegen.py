"""Loop IR -> C: warning-free under -Wall -Werror, explicit SIMD (vector types, not
``omp simd``), OpenMP for parallel loops, no division or guard for perfect splits,
gathers and scatters lane by lane, register promotion, stack and heap buffers, helper
functions. Every kernel here is compiled and run against numpy."""
from __future__ import annotations

import dataclasses
import re
import shutil

import numpy as np
import pytest

import tvmlite
from tvmlite import ops, te
from tvmlite.codegen_c import compile_shared
from tvmlite.codegen_c.codegen import generate
from tvmlite.codegen_c.signature import cdecl
from tvmlite.runtime.module import Module, generate_c
from tvmlite.testing.check import check_module
from tvmlite.testing.workloads import ODD_MNK, matmul_reference, tiled_matmul

M, N, K = ODD_MNK


# -- helpers -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def target():
    return tvmlite.Target.host()


def strict_build(s, tensors, target, openmp=True):
    """Lower, generate and compile with -Werror (on top of the target's -Wall)."""
    target = dataclasses.replace(target, openmp=openmp and target.openmp)
    func, source, decl = generate_c(s, tensors, target)
    path = compile_shared(source, target, warnings_as_errors=True)
    return Module(func, source, decl, path, target, [st.name for st in s.state.stages])


def check(s, tensors, ref_fn, target, openmp=True, **kw):
    """Build with -Werror, run on seeded random inputs, compare with numpy."""
    return check_module(strict_build(s, tensors, target, openmp), tensors, ref_fn, **kw)


def kernel_body(src: str, name: str = "default_function") -> str:
    start = src.index(f"int32_t {name}(")
    return src[start:src.index("\n}\n", start)]


def matmul(m=M, n=N, k=K, dtype="float32"):
    return ops.matmul(m, n, k, dtype)


# -- kernels that must compile without a warning -------------------------------------------

def k_tiled_matmul():
    return (*tiled_matmul(M, N, K), matmul_reference, {})


def k_gemm_registers():
    A, B, C = matmul(16, 32, K)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 16)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    s[CC].reorder(k, ci, cj)
    s[CC].vectorize(cj)
    s[CC].unroll(ci)
    s[C].unroll(ii)                                  # every access at a constant offset
    s[C].vectorize(ji)
    s[C].parallel(io)
    return s, [A, B, C], matmul_reference, {}


def k_max_min_vectorized():
    A = te.placeholder((K, N), name="A")
    k1 = te.reduce_axis((0, K), name="k1")
    k2 = te.reduce_axis((0, K), name="k2")
    C = te.compute((N,), lambda j: te.max(A[k1, j], axis=k1), name="C")
    D = te.compute((N,), lambda j: te.min(A[k2, j] * C[j], axis=k2), name="D")
    s = te.create_schedule([C.op, D.op])
    for T, k in ((C, k1), (D, k2)):
        s[T].reorder(k, s[T].op.axis[0])
        s[T].vectorize(s[T].op.axis[0])

    def ref(a):
        c = a.max(axis=0)
        return c, (a * c).min(axis=0)
    return s, [A, C, D], ref, {}


def k_int_min_max():
    A = te.placeholder((M, N), "int32", name="A")
    k = te.reduce_axis((0, N), name="k")
    C = te.compute((M,), lambda i: te.max(A[i, k], axis=k), name="C")
    D = te.compute((M,), lambda i: te.min(A[i, 0] * 3, C[i]), name="D")
    s = te.create_schedule([C.op, D.op])
    s[D].vectorize(s[D].op.axis[0])

    def ref(a):
        c = a.max(axis=1)
        return c, np.minimum(a[:, 0] * 3, c)
    return s, [A, C, D], ref, {}


def k_select_mixed_dtypes():
    A = te.placeholder((M, N), name="A")
    Ints = te.placeholder((M, N), "int32", name="I")
    D = te.placeholder((M, N), "float64", name="D")
    C = te.compute((M, N), lambda i, j: te.if_then_else(
        Ints[i, j] > 0, te.cast(A[i, j], "float64"), D[i, j] * 2.0), name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].op.axis[1])
    return s, [A, Ints, D, C], lambda a, n, d: np.where(n > 0, a.astype(np.float64), d * 2), {}


def k_select_constants_vectorized():
    A = te.placeholder((M, N), name="A")
    C = te.compute((M, N), lambda i, j: te.if_then_else(A[i, j] > 0.25, 1.0, -1.0) *
                   te.max(A[i, j], 0.0), name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].op.axis[1])
    return s, [A, C], lambda a: np.where(a > 0.25, 1.0, -1.0).astype("float32") * \
        np.maximum(a, 0), {}


def k_floordiv_floormod():
    A = te.placeholder((M, N), "int32", name="A")
    C = te.compute((M, N), lambda i, j: te.floordiv(A[i, j], 3) + te.floormod(A[i, j] - j, -4) +
                   (i - 7) // 2, name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].op.axis[1])
    jj = np.arange(N)[None, :]
    ii = np.arange(M)[:, None]
    return s, [A, C], lambda a: a // 3 + (a - jj) % -4 + (ii - 7) // 2, {}


def k_gather_scatter():
    A = te.placeholder((N, M), name="A")
    C = te.compute((M, N), lambda i, j: A[j, i] * 2, name="C")
    D = te.compute((N, M), lambda i, j: C[j, i] + A[i, j], name="D")
    s = te.create_schedule([C.op, D.op])
    s[C].vectorize(s[C].op.axis[1])                  # strided read of A: a gather
    di, dj = s[D].op.axis
    s[D].reorder(dj, di)
    s[D].vectorize(di)                               # strided write of D: a scatter
    return s, [A, C, D], lambda a: (a.T * 2, a * 3), {}


MATH = [(te.exp, np.exp), (te.log, np.log), (te.sqrt, np.sqrt), (te.tanh, np.tanh),
        (te.sigmoid, lambda x: 1 / (1 + np.exp(-x))), (te.abs, np.abs)]


def k_math_vectorized():
    from scipy.special import erf
    A = te.placeholder((3, N), name="A")
    D = te.placeholder((3, N), "float64", name="D")
    fns = MATH + [(te.erf, erf)]

    def body(x):
        out = None
        for f, _ in fns:
            out = f(x) if out is None else out + f(x)
        return out
    C = te.compute((3, N), lambda i, j: body(A[i, j]), name="C")
    E = te.compute((3, N), lambda i, j: body(D[i, j]), name="E")
    s = te.create_schedule([C.op, E.op])
    s[C].vectorize(s[C].op.axis[1])
    s[E].vectorize(s[E].op.axis[1])

    def ref(a, d):
        def f(x):
            return sum(g(x) for _, g in fns)
        return f(a.astype(np.float64)).astype(np.float32), f(d)
    return s, [A, D, C, E], ref, dict(low=0.1, high=2.0)


def k_casts_and_int64():
    A = te.placeholder((M, N), name="A")
    L = te.placeholder((M, N), "int64", name="L")
    C = te.compute((M, N), lambda i, j: te.cast(A[i, j] * 100, "int64") + L[i, j] * 3000000000,
                   name="C")
    D = te.compute((M, N), lambda i, j: te.cast(C[i, j] % 1000, "float64") * 0.5, name="D")
    s = te.create_schedule([C.op, D.op])
    s[C].vectorize(s[C].op.axis[1])
    s[D].vectorize(s[D].op.axis[1])

    def ref(a, longs):
        c = (a * np.float32(100)).astype(np.int64) + longs * 3000000000
        return c, (c % 1000).astype(np.float64) * 0.5
    return s, [A, L, C, D], ref, {}


def k_big_local_buffer():
    """A region over 64 KiB is heap-allocated (aligned_alloc) inside the loop."""
    A = te.placeholder((4, 96, 256), name="A")
    B = te.compute((4, 96, 256), lambda b, i, j: A[b, i, j] * 2, name="B")
    C = te.compute((4, 96, 256), lambda b, i, j: B[b, i, j] + B[b, 95 - i, 255 - j], name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], s[C].op.axis[0])
    s[C].parallel(s[C].op.axis[0])
    s[C].vectorize(s[C].op.axis[2])
    return s, [A, C], lambda a: a * 2 + a[:, ::-1, ::-1] * 2, {}


def k_stencil_compute_at():
    A = te.placeholder((M + 2, N + 2), name="A")
    B = te.compute((M + 2, N + 2), lambda i, j: A[i, j] * A[i, j], name="B")
    C = te.compute((M, N), lambda i, j: B[i, j] + B[i + 1, j + 1] + B[i + 2, j + 2], name="C")
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(*s[C].op.axis, 4, 8)
    s[B].compute_at(s[C], jo)
    s[C].vectorize(ji)
    s[C].parallel(io)

    def ref(a):
        b = a * a
        return b[:-2, :-2] + b[1:-1, 1:-1] + b[2:, 2:]
    return s, [A, C], ref, {}


def k_rfactor_parallel():
    A = te.placeholder((777,), name="A")
    k = te.reduce_axis((0, 777), name="k")
    C = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="C")
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, nparts=8)
    CF = s.rfactor(C, ko)
    s[CF].parallel(s[CF].op.axis[0])
    return s, [A, C], lambda a: np.array([a.astype(np.float64).sum()], "float32"), \
        dict(atol=1e-4)


def k_padding_scalar_fallback():
    A = te.placeholder((M, N), name="A")
    P = te.compute((M, N + 2), lambda i, j: te.if_then_else(
        te.all(j >= 1, j < N + 1), A[i, j - 1], 0.0), name="P")
    s = te.create_schedule(P.op)
    s[P].vectorize(s[P].op.axis[1])
    return s, [A, P], lambda a: np.pad(a, ((0, 0), (1, 1))), {}


def k_zero_dim():
    A = te.placeholder((N,), "float64", name="A")
    k = te.reduce_axis((0, N), name="k")
    C = te.compute((), lambda: te.sum(A[k] * A[k], axis=k), name="C")
    s = te.create_schedule(C.op)
    return s, [A, C], lambda a: np.array((a * a).sum()), {}


KERNELS = [k_tiled_matmul, k_gemm_registers, k_max_min_vectorized, k_int_min_max,
           k_select_mixed_dtypes, k_select_constants_vectorized, k_floordiv_floormod,
           k_gather_scatter, k_math_vectorized, k_casts_and_int64, k_big_local_buffer,
           k_stencil_compute_at, k_rfactor_parallel, k_padding_scalar_fallback, k_zero_dim]


@pytest.mark.parametrize("make", KERNELS, ids=lambda f: f.__name__[2:])
def test_compiles_without_warnings_and_computes(make, target):
    s, tensors, ref, kw = make()
    mod = check(s, tensors, ref, target, **kw)
    assert "simd" not in mod.get_source()


# -- what the C looks like -------------------------------------------------------------------

def test_vectorized_loop_uses_vector_types_not_omp_simd(target):
    s, tensors, ref, _ = k_tiled_matmul()
    src = check(s, tensors, ref, target).get_source()
    lanes = min(8, target.vector_lanes("float32"))
    assert f"typedef float tvmlite_f32x{lanes} __attribute__((vector_size({4 * lanes})));" \
        in src
    assert re.search(rf"\*\(tvmlite_f32x{lanes}_u\*\)\(C \+ ", kernel_body(src))
    assert "#pragma omp simd" not in src and "simd" not in src


def test_parallel_is_openmp(target):
    s, tensors, ref, _ = k_tiled_matmul()
    src = check(s, tensors, ref, target).get_source()
    body = kernel_body(src)
    assert body.count("#pragma omp parallel for") == 1
    assert re.search(r"#pragma omp parallel for[^\n]*\n\s*for \(int64_t i_outer = 0;", body)
    serial = check(s, tensors, ref, target, openmp=False).get_source()
    assert "#pragma omp" not in serial


def _tiles_in_parallel(rows, cols: int, factor: int):
    A = te.placeholder((rows, cols), name="A")
    C = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(s[C].op.axis[0], factor=factor)
    s[C].parallel(io)
    return s, [A, C]


@pytest.mark.parametrize("rows, factor, schedule", [
    (16, 4, "static"),       # equal tiles
    (17, 4, "dynamic"),      # the last tile has one row of four: a guard on the loop
    ("M", 4, "dynamic"),     # tiles of a symbolic size: ceil(M / 4), the last partial
    ("M", 1, "static"),      # every iteration one row
])
def test_parallel_tiles_of_unequal_work_are_scheduled_dynamically(rows, factor, schedule,
                                                                   target):
    """A static partition gives the partial tiles (all at the end) to the last thread."""
    size = te.var("M") if rows == "M" else rows
    s, tensors = _tiles_in_parallel(size, 8, factor)
    mod = tvmlite.build(s, tensors, target=target)
    assert re.findall(r"#pragma omp parallel for schedule\((\w+)\)",
                      mod.get_source()) == [schedule]
    for m in ([1, 3, 4, 9, 17] if rows == "M" else [rows]):
        a = np.random.default_rng(m).standard_normal((m, 8)).astype("float32")
        c = np.full((m, 8), np.nan, "float32")
        mod(a, c)
        np.testing.assert_array_equal(c, a * 2.0)


def test_perfect_split_has_no_div_mod_or_if(target):
    A, B, C = matmul(16, 24, 12)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    ko, ki = s[C].split(k, factor=3)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].parallel(io)
    body = kernel_body(check(s, [A, B, C], matmul_reference, target).get_source())
    assert "/" not in body and "%" not in body and "if (" not in body, body


def test_imperfect_split_guards_only_its_last_tile(target):
    """17 by 4: four whole tiles without a guard, the last peeled after them with one
    (``passes.version.peel_tiles``)."""
    A = te.placeholder((M,), name="A")
    C = te.compute((M,), lambda i: A[i] + 1, name="C")
    s = te.create_schedule(C.op)
    s[C].split(s[C].op.axis[0], factor=4)
    body = kernel_body(check(s, [A, C], lambda a: a + 1, target).get_source())
    assert "i_outer < 4;" in body and body.count("if (") == 1
    assert "if (((i_inner + 16) < 17))" in body


def test_gathers_and_scatters_go_lane_by_lane(target):
    s, tensors, ref, kw = k_gather_scatter()
    body = kernel_body(check(s, tensors, ref, target).get_source())
    assert re.search(r"\(\{ int64_t tvmlite_b\d+ = ", body)                 # gather
    assert re.search(r"A\[tvmlite_b\d+ \+ 17\]", body)                        # stride M
    assert re.search(r"D\[tvmlite_b\d+ \+ 17\] = tvmlite_v\d+\[1\];", body)  # scatter


def test_small_local_accumulator_lives_in_registers(target):
    s, tensors, ref, _ = k_gemm_registers()
    body = kernel_body(check(s, tensors, ref, target).get_source())
    assert "C_local_r0" in body
    assert not re.search(r"float C_local\[", body)


def test_local_buffers_stack_and_heap(target):
    s, tensors, ref, _ = k_stencil_compute_at()
    body = kernel_body(check(s, tensors, ref, target).get_source())
    assert re.search(r"float B\[\d+\] __attribute__\(\(aligned\(64\)\)\);", body)
    s, tensors, ref, _ = k_big_local_buffer()
    body = kernel_body(check(s, tensors, ref, target).get_source())
    assert "float* restrict B = (float*)aligned_alloc(64, 98304);" in body
    assert "free(B);" in body
    # the heap buffer is allocated inside the parallel loop: private to each thread
    assert body.index("#pragma omp parallel for") < body.index("aligned_alloc")


def test_root_intermediate_is_heap_allocated_and_freed(target):
    A = te.placeholder((M, N), name="A")
    B = te.compute((M, N), lambda i, j: A[i, j] + 1, name="B")
    C = te.compute((M, N), lambda i, j: B[i, j] * B[i, j], name="C")
    s = te.create_schedule(C.op)
    body = kernel_body(check(s, [A, C], lambda a: (a + 1) ** 2, target).get_source())
    assert "float* restrict B = (float*)aligned_alloc(64, 1600);" in body
    assert "if (B == NULL) {" in body
    assert body.index("free(B);") < body.rindex("return tvmlite_status;")


def test_constants_are_exact(target):
    s, tensors, ref, _ = k_max_min_vectorized()
    src = check(s, tensors, ref, target).get_source()
    assert "(-__builtin_inff())" in src and "__builtin_inff()" in src
    s, tensors, ref, _ = k_int_min_max()
    assert "(-2147483647 - 1)" in check(s, tensors, ref, target).get_source()
    s, tensors, ref, _ = k_casts_and_int64()
    assert "3000000000LL" in check(s, tensors, ref, target).get_source()


def test_generate_is_deterministic_and_cdecl_matches():
    s, tensors, _, _ = k_gemm_registers()
    outputs = [st.name for st in s.state.stages]
    f1 = tvmlite.lower(s, tensors, vector_bytes=32)
    f2 = tvmlite.lower(s, tensors, vector_bytes=32)
    assert generate(f1, outputs) == generate(f2, outputs)
    decl = cdecl(f1, outputs)
    assert decl == ("int32_t default_function(const float* A, const float* B, float* C);\n"
                    "double default_function_time(const float* A, const float* B, float* C, "
                    "int32_t number);\n"
                    "void default_function_set_num_threads(int32_t n);\n")


@pytest.mark.parametrize("name", ["int", "free", "tvmlite_status", "__x"])
def test_tensor_named_like_c_identifier_is_rejected(name):
    """Names become C identifiers: keywords, libc functions we call and our own prefix
    are refused up front, with the name in the message."""
    with pytest.raises(ValueError, match=name):
        te.placeholder((4, 5), name=name)


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang is not installed")
def test_clang_builds_the_gemm_recipe_without_warnings():
    """The same C must work with clang (without libomp it runs serially)."""
    from tvmlite.schedules.recipes import gemm_packed
    target = tvmlite.Target.host(compiler="clang")
    s, tensors = gemm_packed(24, 64, 20, block_cols=2 * target.vector_lanes("float32"),
                             block_rows=5)
    check(s, tensors, matmul_reference, target)


def test_vector_exp_and_sigmoid_match_libm_and_keep_special_values():
    import numpy as np

    import tvmlite
    from tvmlite import te
    n = 1024
    A = te.placeholder((n,), name="A")
    special = [np.nan, np.inf, -np.inf, 0.0, 100.0, -200.0]
    a = np.concatenate([np.linspace(-87, 88, n - len(special)), special]).astype("float32")
    for func, ref in ((te.exp, np.exp), (te.sigmoid, lambda x: 1 / (1 + np.exp(-x)))):
        out = te.compute((n,), lambda i: func(A[i]), name="out")
        s = te.create_schedule(out.op)
        s[out].vectorize(s[out].op.axis[0])
        mod = tvmlite.build(s, [A, out])
        assert "tvmlite_vexp_f32x" in mod.get_source()
        got = np.empty(n, "float32")
        mod(a, got)
        with np.errstate(all="ignore"):
            want = ref(a.astype("float64"))
            tail = want[-len(special):].astype("float32")
        np.testing.assert_allclose(got[:-len(special)], want[:-len(special)], rtol=3e-7,
                                   atol=1e-37)
        np.testing.assert_array_equal(got[-len(special):], tail)
