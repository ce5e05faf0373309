"""The C measuring harness on this machine: inputs from files or its seeded generator,
outputs written back, timings printed; bad usage is an error, not a crash."""
from __future__ import annotations

import numpy as np
import pytest

from tvmlite import te
from tvmlite.codegen_c import compile_shared
from tvmlite.codegen_c.harness import (HarnessError, build_harness, read_outputs,
                                       run_harness, write_inputs)
from tvmlite.runtime.module import generate_c
from tvmlite.target import Target
from tvmlite.testing.cross import TensorArg

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
