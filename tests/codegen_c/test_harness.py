"""The C measuring harness on this machine: inputs from files or its seeded generator,
outputs written back, timings printed; bad usage is an error, not a crash; a pre-packed
input packed once by its pack function before the kernel runs on the packed buffer."""
from __future__ import annotations

import numpy as np
import pytest

from tvmlite import ops, te
from tvmlite.codegen_c import compile_shared
from tvmlite.codegen_c.harness import (
    HarnessError,
    build_harness,
    prelude,
    read_outputs,
    run_harness,
    write_inputs,
)
from tvmlite.runtime.module import generate_c
from tvmlite.target import Target
from tvmlite.testing.cross import TensorArg, harness_packs

TARGET = Target.host()


@pytest.fixture(scope="module")
def kernel():
    A = te.placeholder((5, 12), name="A")
    N = te.placeholder((12,), name="N", dtype="int32")
    B = te.compute((5, 12), lambda i, j: A[i, j] * N[j].astype("float32"), name="B")
    s = te.create_schedule(B.op)
    _, j = s[B].op.axis
    _, ji = s[B].split(j, factor=4)
    s[B].vectorize(ji)
    lib = compile_shared(generate_c(s, [A, N, B], TARGET, "k")[1], TARGET)
    args = [TensorArg(t) for t in (A, N, B)]
    return lib, args, build_harness(args, TARGET)


def test_inputs_from_files_outputs_to_files(kernel, tmp_path) -> None:
    lib, args, exe = kernel
    a = np.random.default_rng(0).random((5, 12), dtype=np.float32)
    n = np.arange(12, dtype=np.int32) - 4
    write_inputs(tmp_path, args, [a, n])
    res = run_harness(exe, lib, "k", args, inputs_dir=tmp_path, outputs_dir=tmp_path,
                      number=3, repeat=2)
    assert res.number == 3 and len(res.costs) == 2 and all(c > 0 for c in res.costs)
    (b,) = read_outputs(tmp_path, args)
    np.testing.assert_array_equal(b, a * n.astype(np.float32))


def test_seeded_inputs_repeat_and_differ_by_seed(kernel, tmp_path) -> None:
    lib, args, exe = kernel
    outs = []
    for seed, d in ((7, "a"), (7, "b"), (8, "c")):
        (tmp_path / d).mkdir()
        run_harness(exe, lib, "k", args, seed=seed, outputs_dir=tmp_path / d, repeat=0)
        outs.append(read_outputs(tmp_path / d, args)[0])
    assert np.isfinite(outs[0]).all()
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[0], outs[2])


def test_missing_library_and_bad_args_are_errors(kernel, tmp_path) -> None:
    lib, args, exe = kernel
    with pytest.raises(HarnessError, match="could not be loaded") as info:
        run_harness(exe, tmp_path / "missing.so", "k", args)
    assert info.value.kind == "failed"
    with pytest.raises(HarnessError, match="bad usage"):
        run_harness(exe, lib, "k", args[:2])
    with pytest.raises(ValueError, match="dtypes"):
        build_harness([], TARGET)


# -- pre-packed constant inputs ------------------------------------------------------------
BROKEN_PACK = """
int32_t k_pack_B(const float* restrict B, float* restrict B_packed) {
  BODY
  return 0;
}
"""


def _prepacked_matmul(M=5, N=16, K=3, factor=8):
    A, B, C = ops.matmul(M, N, K)
    s = te.create_schedule(C.op)
    s.prepack(s.cache_read(B, "local", [C]), dim=1, factor=factor)
    func, source, _ = generate_c(s, [A, B, C], TARGET, "k")
    return func, source, [TensorArg(t) for t in (A, B, C)]


def _with_pack_body(source: str, body: str) -> str:
    """The real kernel with its pack function replaced by a hand-written one."""
    head, _ = source.split("int32_t k_pack_B(", 1)   # the pack function comes last
    return head + BROKEN_PACK.replace("BODY", body)


def test_pack_function_runs_once_and_the_kernel_reads_its_buffer(tmp_path) -> None:
    func, source, args = _prepacked_matmul()
    packs = harness_packs(func)
    assert [p["fn"] for p in packs] == ["k_pack_B"]
    assert "typedef int32_t (*tvmlite_pack_fn_0)(const float*, float*);" in \
        prelude(args, packs)
    assert "typedef int32_t (*tvmlite_kernel_fn)(const float*, const float*, float*);" in \
        prelude(args, packs)
    lib = compile_shared(source, TARGET)
    exe = build_harness(args, TARGET, packs=packs)
    rng = np.random.default_rng(1)
    a, b = rng.random((5, 3), dtype=np.float32), rng.random((3, 16), dtype=np.float32)
    write_inputs(tmp_path, args, [a, b])
    res = run_harness(exe, lib, "k", args, inputs_dir=tmp_path, outputs_dir=tmp_path,
                      number=2, repeat=2, packs=packs)
    assert res.packed == ("k_pack_B",) and len(res.costs) == 2
    (c,) = read_outputs(tmp_path, args)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-6)
    # without its packs the same harness refuses to run (it would hand over B unpacked)
    with pytest.raises(HarnessError, match="bad usage"):
        run_harness(exe, lib, "k", args, repeat=0)


def test_a_failing_or_wrong_pack_is_an_error_or_a_wrong_output(tmp_path) -> None:
    func, source, args = _prepacked_matmul()
    packs = harness_packs(func)
    exe = build_harness(args, TARGET, packs=packs)
    failing = compile_shared(_with_pack_body(source, "(void)B; (void)B_packed; return 7;"),
                             TARGET)
    with pytest.raises(HarnessError, match="k_pack_B returned 7") as info:
        run_harness(exe, failing, "k", args, repeat=0, packs=packs)
    assert info.value.kind == "failed" and "pack function failed" in str(info.value)
    # a pack that copies B as it is (no panels): the kernel's output is wrong
    unpacked = compile_shared(_with_pack_body(
        source, "for (int i = 0; i < 48; ++i) B_packed[i] = B[i];"), TARGET)
    rng = np.random.default_rng(2)
    a, b = rng.random((5, 3), dtype=np.float32), rng.random((3, 16), dtype=np.float32)
    write_inputs(tmp_path, args, [a, b])
    run_harness(exe, unpacked, "k", args, inputs_dir=tmp_path, outputs_dir=tmp_path,
                repeat=0, packs=packs)
    (c,) = read_outputs(tmp_path, args)
    assert not np.allclose(c, a @ b, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="pack 'k_pack_B' needs input 'W'"):
        build_harness(args, TARGET, packs=[{**packs[0], "input": "W"}])
