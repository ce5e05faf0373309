"""schedules/dot.py: the qmatmul template's ``tensorize`` knob (the target's best
intrinsic, or none) -- every config builds and is bit for bit numpy's integer matmul --
and the recipe's block sizes and refusals."""
from __future__ import annotations

import inspect
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import tvmlite
from tvmlite import ScheduleError, ops
from tvmlite.ops import OPS
from tvmlite.schedules.dot import block_sizes, gemm_dot, lowp_matmul
from tvmlite.search import templated
from tvmlite.target.intrinsics import best_intrinsic
from tvmlite.target.target import Target
from tvmlite.testing.check import random_inputs

HOST = Target.host()


def test_the_template_has_the_operators_signature():
    tmpl = templated.TEMPLATES["qmatmul"]
    assert tmpl.signature == inspect.signature(OPS["qmatmul"]).replace(
        return_annotation=tmpl.signature.return_annotation)


def options(task) -> list:
    return [e.value() for e in task.space.knobs["tensorize"].entities]


def test_the_knob_offers_the_targets_best_intrinsic_only_for_a_constant_b():
    args = dict(M=4, N=32, K=8)
    best = best_intrinsic(HOST.arch, HOST.features, "uint8", "int8", "int32")
    assert best is not None
    task = templated.create("qmatmul", args, constants=["B"])
    assert options(task) == [best.name, "none"]
    assert options(templated.create("qmatmul", args)) == ["none"]
    assert options(templated.create("qmatmul", dict(args, data_zp=3), constants=["B"])) \
        == ["none"]


def test_every_config_builds_and_is_numpys_integer_matmul():
    M, N, K = 2, 32, 8
    task = templated.create("qmatmul", dict(M=M, N=N, K=K), constants=["B"])
    a, b = random_inputs(ops.qmatmul(M, N, K)[:2])
    a = (a.astype(np.int32) * 16 + 15).astype(np.uint8)     # up to 255: no saturation
    b = (b.astype(np.int32) * 16).astype(np.int8)           # down to -128
    want = a.astype(np.int32) @ b.astype(np.int32)
    space = task.space
    configs = [space.get(i) for i in range(len(space))]
    with ThreadPoolExecutor(2) as pool:      # the compiler runs outside the GIL
        mods = list(pool.map(lambda c: tvmlite.build(*task.instantiate(c)), configs))
    for config, mod in zip(configs, mods):
        c = tvmlite.nd.empty((M, N), "int32")
        mod(a, b, c)
        np.testing.assert_array_equal(c.numpy(), want, err_msg=str(config))


def test_block_sizes_divide_and_fit_the_registers():
    assert block_sizes(1024, 1024, 16, 32) == (8, 2)
    assert block_sizes(7, 48, 16, 32) == (7, 3)
    assert block_sizes(5, 16, 16, 16) == (5, 1)
    assert block_sizes(3, 16, 8, 16) == (3, 2)
    # a broadcast built in registers (vpmaddwd on int16 B): fewer rows, more vectors
    assert block_sizes(1024, 1024, 8, 16) == (8, 1)
    assert block_sizes(1024, 1024, 8, 16, rows_first=False) == (2, 4)


def test_gemm_dot_refuses_a_block_that_does_not_divide_and_an_unpacked_b():
    tensors = lowp_matmul(4, 32, 6)
    with pytest.raises(ScheduleError, match="multiples of the block"):
        gemm_dot(tensors, "vdpbf16ps_avx512", 3, 1)
    with pytest.raises(ScheduleError, match="pre-packed"):
        gemm_dot(tensors, "vdpbf16ps_avx512", 2, 1, prepack=False)
