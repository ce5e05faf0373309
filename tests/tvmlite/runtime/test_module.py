"""The built Module: argument checks (a clear TypeError/ValueError naming the argument,
never a crash), timing, threads, and export_library used from a C program without
Python."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import tvmlite
from tvmlite.testing.check import check_module
from tvmlite.testing.workloads import ODD_MNK, matmul_reference, tiled_matmul

M, N, K = ODD_MNK


# -- helpers -------------------------------------------------------------------------

def check(s, tensors, ref_fn, mod=None, name="default_function", **kw):
    """Build (unless ``mod`` is given), run on seeded random inputs, compare with numpy."""
    return check_module(mod or tvmlite.build(s, tensors, name=name), tensors, ref_fn, **kw)


@pytest.fixture(scope="module")
def mm():
    s, tensors = tiled_matmul()
    mod = check(s, tensors, matmul_reference)
    return mod, tensors


def arrays(dtype="float32"):
    rng = np.random.default_rng(1)
    a = tvmlite.asaligned(rng.uniform(-1, 1, (M, K)), dtype)
    b = tvmlite.asaligned(rng.uniform(-1, 1, (K, N)), dtype)
    c = tvmlite.asaligned(np.zeros((M, N), dtype))
    return a, b, c


# -- argument checks -------------------------------------------------------------------

def test_call_computes_and_returns_none(mm):
    mod, _ = mm
    a, b, c = arrays()
    assert mod(a, b, c) is None
    np.testing.assert_allclose(c, matmul_reference(a, b), rtol=1e-4, atol=1e-5)
    assert repr(mod) == "Module(default_function, args=['A', 'B', 'C'])"


def test_bind_checks_once_and_runs_on_the_same_arrays(mm):
    mod, _ = mm
    a, b, c = arrays()
    run = mod.bind(a, b, c)
    a[...] = 2 * a                         # the pointers are kept: new values are read
    assert run() is None
    np.testing.assert_allclose(c, matmul_reference(a, b), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="shape"):   # the checks run at bind time
        mod.bind(a, b, a)
    with pytest.raises(TypeError, match="dtype"):
        mod.bind(a, b, c.astype("float64"))


@pytest.mark.parametrize("n", [0, 2, 4])
def test_wrong_number_of_arrays(mm, n):
    mod, _ = mm
    args = (arrays() * 2)[:n]
    with pytest.raises(TypeError, match=rf"takes 3 arrays \(A, B, C\), got {n}"):
        mod(*args)


@pytest.mark.parametrize("pos,name", [(0, "A"), (1, "B"), (2, "C")])
@pytest.mark.parametrize("dtype", ["float64", "int32", "float16"])
def test_wrong_dtype(mm, pos, name, dtype):
    mod, _ = mm
    args = list(arrays())
    args[pos] = args[pos].astype(dtype)
    with pytest.raises(TypeError, match=rf"argument {name} must have dtype float32, got {dtype}"):
        mod(*args)


@pytest.mark.parametrize("pos,name,shape", [(0, "A", (K, M)), (1, "B", (K, N + 1)),
                                            (2, "C", (M * N,)), (2, "C", (1, M, N))])
def test_wrong_shape(mm, pos, name, shape):
    mod, _ = mm
    args = list(arrays())
    args[pos] = np.zeros(shape, "float32")
    with pytest.raises(ValueError, match=rf"argument {name} must have shape"):
        mod(*args)


@pytest.mark.parametrize("pos,name", [(0, "A"), (2, "C")])
def test_non_contiguous(mm, pos, name):
    mod, _ = mm
    args = list(arrays())
    big = np.zeros((args[pos].shape[0], args[pos].shape[1] * 2), "float32")
    args[pos] = big[:, ::2]                                  # right shape, strided
    with pytest.raises(ValueError, match=rf"argument {name} must be C-contiguous"):
        mod(*args)
    args[pos] = np.asfortranarray(np.zeros(args[pos].shape, "float32"))
    with pytest.raises(ValueError, match=rf"argument {name} must be C-contiguous"):
        mod(*args)


def test_read_only_output_and_read_only_input(mm):
    mod, _ = mm
    a, b, c = arrays()
    c.flags.writeable = False
    with pytest.raises(ValueError, match="argument C is an output and must be writeable"):
        mod(a, b, c)
    c = np.zeros_like(c)
    a.flags.writeable = False                                 # inputs may be read-only
    mod(a, b, c)
    np.testing.assert_allclose(c, matmul_reference(a, b), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bad", [[[1.0] * K] * M, None, 3.0, np.float32(1),
                                 memoryview(b"abcd"), "A"],
                         ids=["list", "none", "float", "np-scalar", "memoryview", "str"])
@pytest.mark.parametrize("pos,name", [(0, "A"), (2, "C")])
def test_non_ndarray(mm, bad, pos, name):
    mod, _ = mm
    args = list(arrays())
    args[pos] = bad
    with pytest.raises(TypeError, match=rf"argument {name} must be a numpy.ndarray"):
        mod(*args)


def test_errors_come_before_any_write(mm):
    mod, _ = mm
    a, b, c = arrays()
    c[:] = 7
    with pytest.raises(TypeError):
        mod(a, b.astype("float64"), c)
    assert (c == 7).all()


@pytest.fixture(scope="module")
def square():
    """A 16x16 matmul: square, so one array fits every argument's shape."""
    s, tensors = tiled_matmul(16, 16, 16)
    return check(s, tensors, matmul_reference)


def _square_arrays(n=16):
    rng = np.random.default_rng(2)
    return tuple(rng.uniform(-1, 1, (n, n)).astype("float32") for _ in range(2))


@pytest.mark.parametrize("call", ["a,b,a", "a,b,b", "view", "slices"])
def test_output_overlapping_an_input_is_refused(square, call):
    a, b = _square_arrays()
    if call == "a,b,a":
        args, names = (a, b, a), ("C", "A")
    elif call == "a,b,b":
        args, names = (a, b, b), ("C", "B")
    elif call == "view":
        args, names = (a, b, a.reshape(16, 16)[:]), ("C", "A")
    else:  # two overlapping windows of one flat buffer: C starts inside A
        flat = np.zeros(16 * 16 + 8, "float32")
        flat[:256] = a.ravel()
        args, names = (flat[:256].reshape(16, 16), b, flat[8:].reshape(16, 16)), ("C", "A")
    before = [x.copy() for x in args]
    with pytest.raises(ValueError, match=rf"output {names[0]} overlaps input {names[1]}"):
        square(*args)
    for x, y in zip(args, before):
        np.testing.assert_array_equal(x, y)  # refused before anything was written
    with pytest.raises(ValueError, match="overlaps"):
        square.time_evaluator(number=1, repeat=1)(*args)


def test_inputs_may_share_memory_and_disjoint_slices_are_accepted(square):
    a, _ = _square_arrays()
    c = np.empty((16, 16), "float32")
    square(a, a, c)  # A @ A: the kernel only reads its inputs
    np.testing.assert_allclose(c, matmul_reference(a, a), rtol=1e-4, atol=1e-5)
    flat = np.zeros(3 * 256, "float32")  # three disjoint windows of one buffer
    x, y, z = (flat[i * 256:(i + 1) * 256].reshape(16, 16) for i in range(3))
    x[:], y[:] = _square_arrays()
    square(x, y, z)
    np.testing.assert_allclose(z, matmul_reference(x, y), rtol=1e-4, atol=1e-5)


def test_int_and_float64_modules_check_their_dtypes():
    for dtype in ("int32", "float64"):
        s, tensors = tiled_matmul(dtype=dtype)
        mod = check(s, tensors, lambda a, b: a @ b, rtol=1e-12)
        a, b, c = (x.astype(dtype) for x in arrays())
        with pytest.raises(TypeError, match=rf"argument A must have dtype {dtype}"):
            mod(a.astype("float32"), b, c)


def test_build_rejects_bad_kernel_name():
    s, tensors = tiled_matmul()
    with pytest.raises(ValueError, match="identifier"):
        tvmlite.build(s, tensors, name="x; int y")


# -- timing and threads ------------------------------------------------------------------

def test_time_evaluator(mm):
    mod, _ = mm
    a, b, c = arrays()
    res = mod.time_evaluator(number=3, repeat=4)(a, b, c)
    assert isinstance(res, tvmlite.TimeResult)
    assert len(res.results) == 4 and all(t > 0 for t in res.results)
    assert min(res.results) <= res.median <= max(res.results)
    assert min(res.results) <= res.mean <= max(res.results)
    assert res.min == min(res.results)
    assert "median" in repr(res)
    np.testing.assert_allclose(c, matmul_reference(a, b), rtol=1e-4, atol=1e-5)   # ran the kernel


def test_time_evaluator_min_repeat_ms(mm):
    """min_repeat_ms raises the calls per repeat until one repeat lasts that long by the
    C timer's own clock, and results are seconds per call (what the timer returns), not
    per repeat. Checked on the calls the evaluator makes, not against the wall clock,
    which a loaded machine stretches."""
    mod, _ = mm
    a, b, c = arrays()
    calls = []
    timer = mod._timer

    def recording(*args):
        t = timer(*args)
        calls.append((args[-1], t))      # (calls timed, seconds per call)
        return t
    mod._timer = recording
    try:
        res = mod.time_evaluator(number=1, repeat=2, min_repeat_ms=30)(a, b, c)
    finally:
        mod._timer = timer
    probes, repeats = calls[:-2], calls[-2:]
    assert len(res.results) == 2 and list(res.results) == [t for _, t in repeats]
    n = repeats[0][0]
    assert repeats[1][0] == n and probes and probes[-1][0] == n
    assert probes[-1][1] * n * 1e3 >= 30              # the last probe lasted 30 ms
    assert all(t * k * 1e3 < 30 for k, t in probes[:-1])   # the shorter ones did not
    assert [k for k, _ in probes] == sorted({k for k, _ in probes})   # raised, never lowered
    np.testing.assert_allclose(c, matmul_reference(a, b), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw", [dict(number=0), dict(repeat=0), dict(number=True),
                                dict(repeat=2.0), dict(number=-1)])
def test_time_evaluator_bad_arguments(mm, kw):
    mod, _ = mm
    with pytest.raises(ValueError, match="time_evaluator"):
        mod.time_evaluator(**kw)


def test_time_evaluator_checks_arrays(mm):
    mod, _ = mm
    a, b, c = arrays()
    with pytest.raises(ValueError, match="argument C must have shape"):
        mod.time_evaluator()(a, b, c[:, :3])


def test_time_evaluator_warns_on_misaligned_arrays(mm):
    mod, _ = mm
    a, b, c = arrays()
    raw = np.empty(a.size + 32, np.float32)           # to start one float past a line
    off = raw[(-raw.ctypes.data % 64) // 4 + 1:][:a.size].reshape(a.shape)
    off[...] = a
    with pytest.warns(tvmlite.runtime.module.MisalignedWarning, match="A not 64-byte aligned"):
        mod.time_evaluator(number=1, repeat=1)(off, b, c)
    np.testing.assert_allclose(c, matmul_reference(a, b), rtol=1e-4, atol=1e-5)   # still correct


def test_set_num_threads(mm):
    mod, _ = mm
    try:
        for n in (1, 2, 3):
            mod.set_num_threads(n)
            a, b, c = arrays()
            mod(a, b, c)
            np.testing.assert_allclose(c, matmul_reference(a, b), rtol=1e-4, atol=1e-5)
        for bad in (0, -1, True, 1.5, "2"):
            with pytest.raises(ValueError, match="set_num_threads"):
                mod.set_num_threads(bad)
    finally:
        mod.set_num_threads(os.cpu_count() or 1)


# -- export_library --------------------------------------------------------------------------

def test_export_library_writes_so_h_c(mm, tmp_path):
    mod, _ = mm
    out = mod.export_library(tmp_path / "sub" / "k.so")
    assert out == tmp_path / "sub" / "k.so"
    assert out.read_bytes() == mod.lib_path.read_bytes()
    assert (tmp_path / "sub" / "k.c").read_text() == mod.get_source()
    header = (tmp_path / "sub" / "k.h").read_text()
    assert "int32_t default_function(const float* A, const float* B, float* C);" in header
    assert "default_function_time" in header and "default_function_set_num_threads" in header
    assert "#ifndef TVMLITE_DEFAULT_FUNCTION_H" in header
    with pytest.raises(ValueError, match=r"\.so"):
        mod.export_library(tmp_path / "k.dll")


C_PROGRAM = r"""
#include <stdio.h>
#include "k.h"

static float A[%(M)d * %(K)d], B[%(K)d * %(N)d], C[%(M)d * %(N)d];

int main(void) {
  for (int i = 0; i < %(M)d * %(K)d; ++i) A[i] = (float)(i %% 7) * 0.25f - 0.75f;
  for (int i = 0; i < %(K)d * %(N)d; ++i) B[i] = (float)(i %% 5) * 0.5f - 1.0f;
  mm_kernel_set_num_threads(2);
  if (mm_kernel(A, B, C) != 0) return 1;
  double checksum = 0.0;
  for (int i = 0; i < %(M)d * %(N)d; ++i) checksum += (double)C[i] * (double)(i %% 13 + 1);
  printf("checksum %%.9g\n", checksum);
  printf("first %%.9g last %%.9g\n", (double)C[0], (double)C[%(M)d * %(N)d - 1]);
  double t = mm_kernel_time(A, B, C, 2);
  return t > 0.0 ? 0 : 2;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler named cc")
def test_exported_library_runs_from_c_without_python(tmp_path):
    s, tensors = tiled_matmul()
    mod = check(s, tensors, matmul_reference, name="mm_kernel")
    mod.export_library(tmp_path / "k.so")
    main = tmp_path / "main.c"
    main.write_text(C_PROGRAM % dict(M=M, N=N, K=K))
    exe = tmp_path / "main"
    subprocess.run(["cc", "-std=gnu11", "-Wall", "-Werror", "-O1", str(main), "-o", str(exe),
                    f"-I{tmp_path}", str(tmp_path / "k.so"), f"-Wl,-rpath,{tmp_path}"],
                   check=True, capture_output=True, text=True, timeout=120)
    env = dict(os.environ, LD_LIBRARY_PATH=str(tmp_path))
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    got = dict(re.findall(r"(checksum|first|last) (\S+)", proc.stdout))

    a = ((np.arange(M * K) % 7) * 0.25 - 0.75).astype("float32").reshape(M, K)
    b = ((np.arange(K * N) % 5) * 0.5 - 1.0).astype("float32").reshape(K, N)
    c = matmul_reference(a, b)
    weights = (np.arange(M * N) % 13 + 1).astype(np.float64)
    want = float((c.ravel().astype(np.float64) * weights).sum())
    assert float(got["checksum"]) == pytest.approx(want, rel=1e-5, abs=1e-4)
    assert float(got["first"]) == pytest.approx(float(c.ravel()[0]), rel=1e-5, abs=1e-6)
    assert float(got["last"]) == pytest.approx(float(c.ravel()[-1]), rel=1e-5, abs=1e-6)


# -- TVM's spellings: entry_name, time_evaluator(func_name, dev, ...), nd arrays --------

def test_time_evaluator_takes_tvms_signature_and_nd_arrays(mm):
    mod, _ = mm
    a, b, c = arrays()
    dev = tvmlite.cpu(0)
    na, nb, nc = (tvmlite.nd.array(x, dev) for x in (a, b, c))
    res = mod.time_evaluator(mod.entry_name, dev, number=2)(na, nb, nc)
    assert len(res.results) == 1                       # TVM's default repeat
    np.testing.assert_allclose(nc.numpy(), matmul_reference(a, b), rtol=1e-4, atol=1e-5)
    res = mod.time_evaluator(mod.entry_name, dev, number=1, repeat=3,
                             cooldown_interval_ms=1, repeats_to_cooldown=2)(na, nb, nc)
    assert len(res.results) == 3


@pytest.mark.parametrize("args, kw, err, match", [
    (("nope",), {}, ValueError, "entry_name"),
    ((), {"dev": "cpu"}, TypeError, "tvmlite.cpu"),
    ((), {"cooldown_interval_ms": -1}, ValueError, "cooldown_interval_ms"),
    ((), {"repeats_to_cooldown": 0}, ValueError, "repeats_to_cooldown"),
])
def test_time_evaluator_refuses_bad_tvm_arguments(mm, args, kw, err, match):
    mod, _ = mm
    with pytest.raises(err, match=match):
        mod.time_evaluator(*args, **kw)


def test_a_module_writes_an_nd_array_output_in_place(mm):
    mod, _ = mm
    a, b, _ = arrays()
    c = tvmlite.nd.empty(mod.func.args[2].shape, "float32", tvmlite.cpu(0))
    mod(tvmlite.nd.array(a), tvmlite.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), matmul_reference(a, b), rtol=1e-4, atol=1e-5)
