"""AMX tile intrinsics (tdpbusd, tdpbf16ps): blocks of 1 or 2 x 1 or 2 tiles tensorized
into a GEMM, against numpy -- u8 x s8 -> s32 bit for bit over the whole ranges, bf16
within float32 rounding of bf16 inputs -- where this CPU has AMX; the refusals (a shape
that is not whole tiles, B not pre-packed, a nest that is not a tile, a target without
AMX); and that a target without AMX never gets a tile intrinsic from best_intrinsic or
the qmatmul template's knob."""
from __future__ import annotations

import numpy as np
import pytest

import tvmlite
from tvmlite import ScheduleError, ops
from tvmlite.codegen_c.intrinsics import AMX_DENIED
from tvmlite.runtime.module import AmxDeniedError, generate_c
from tvmlite.schedule.dot_block import tile_block
from tvmlite.schedules.dot import gemm_dot, lowp_matmul
from tvmlite.search import templated
from tvmlite.target.intrinsics import INTRINSICS, best_intrinsic
from tvmlite.target.target import Target

HOST = Target.host()
# the lowering-only tests cut vectors as an AMX CPU does (512-bit: zeroings are x16), on
# any CPU
AMX_VECTOR_BYTES = 64
AVX512 = Target.from_name("x86_64-avx512")   # Zen 4's level of code: no AMX
AVX2 = Target.from_name("x86_64-avx2")       # Zen 3's


def needs(*features: str):
    missing = [f for f in features if f not in HOST.features]
    return pytest.mark.skipif(bool(missing), reason=f"this CPU lacks {', '.join(missing)}")


def full_range(dtype: str, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    lo, hi = (0, 255) if dtype == "uint8" else (-128, 127)
    x = rng.integers(lo, hi + 1, shape).astype(dtype)
    x.flat[:2] = (lo, hi)
    return x


@needs("amx_tile", "amx_int8")
@pytest.mark.parametrize("M, N, K", [(16, 16, 64), (32, 64, 128), (64, 32, 192)])
def test_tdpbusd_is_numpys_integer_matmul_bit_for_bit(M, N, K):
    intr = INTRINSICS["tdpbusd_amx"]
    tensors = ops.qmatmul(M, N, K, "uint8", "int8")
    rng = np.random.default_rng(M + N + K)
    a, b = full_range("uint8", (M, K), rng), full_range("int8", (K, N), rng)
    a[:] = 255
    b[:, 0] = -128    # the extreme sums: 255 * -128 * K, exact in int32
    mod = tvmlite.build(gemm_dot(tensors, intr.name, *tile_block(M, N, intr)), tensors)
    c = tvmlite.nd.empty((M, N), "int32")
    mod(a, b, c)
    want = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    np.testing.assert_array_equal(c.numpy(), want)
    assert "_tile_dpbusd" in mod.get_source()


@needs("amx_tile", "amx_int8", "amx_bf16")
def test_kernels_of_other_block_shapes_and_dtypes_alternating_on_a_thread_stay_exact():
    """The helpers skip ldtilecfg when the thread's config is already theirs: a 1x1 and a
    2x2 int8 block and a bf16 block, called in turn, must each still be exact."""
    rng = np.random.default_rng(7)
    runs = []
    for name, (M, N), dts in (("tdpbusd_amx", (16, 16), ("uint8", "int8")),
                              ("tdpbusd_amx", (32, 32), ("uint8", "int8")),
                              ("tdpbf16ps_amx", (32, 32), None)):
        intr = INTRINSICS[name]
        tensors = ops.qmatmul(M, N, 128, *dts) if dts else lowp_matmul(M, N, 128)
        mod = tvmlite.build(gemm_dot(tensors, name, *tile_block(M, N, intr)), tensors)
        if dts:
            a, b = full_range("uint8", (M, 128), rng), full_range("int8", (128, N), rng)
            want = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
        else:
            a, b = (rng.standard_normal(s).astype("bfloat16") for s in ((M, 128), (128, N)))
            want = a.astype(np.float32) @ b.astype(np.float32)
        runs.append((mod, a, b, want, tensors[2].dtype))
    assert "_tile_storeconfig" in runs[0][0].get_source()
    for _ in range(2):
        for mod, a, b, want, dtype in runs:
            c = tvmlite.nd.empty(want.shape, dtype)
            mod(a, b, c)
            if dtype == "int32":
                np.testing.assert_array_equal(c.numpy(), want)
            else:
                np.testing.assert_allclose(c.numpy(), want, rtol=1e-5, atol=1e-4)


@needs("amx_tile", "amx_bf16")
@pytest.mark.parametrize("M, N, K", [(16, 16, 32), (32, 32, 96)])
def test_tdpbf16ps_is_float32_of_the_bf16_inputs(M, N, K):
    intr = INTRINSICS["tdpbf16ps_amx"]
    tensors = lowp_matmul(M, N, K)
    rng = np.random.default_rng(K)
    a = rng.standard_normal((M, K)).astype("bfloat16")
    b = rng.standard_normal((K, N)).astype("bfloat16")
    mod = tvmlite.build(gemm_dot(tensors, intr.name, *tile_block(M, N, intr)), tensors)
    c = tvmlite.nd.empty((M, N), "float32")
    mod(a, b, c)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    want = a32.astype(np.float64) @ b32.astype(np.float64)
    bound = np.abs(a32).astype(np.float64) @ np.abs(b32).astype(np.float64)
    assert (np.abs(c.numpy() - want) <= 2 * K * np.finfo(np.float32).eps * bound + 1e-30).all()


@needs("amx_tile", "amx_int8")
def test_the_kernel_asks_the_tile_permission_once_before_any_tile():
    tensors = ops.qmatmul(32, 32, 64)
    _, src, _ = generate_c(gemm_dot(tensors, "tdpbusd_amx", 2, 2), tensors)
    assert "ARCH_REQ_XCOMP_PERM" in src and "__atomic_load_n" in src
    body = src[src.index("int32_t default_function("):]
    assert body.index(f"return {AMX_DENIED};") < body.index("tvmlite_tdpbusd_amx_")


def test_a_shape_that_is_not_whole_tiles_is_refused_with_the_reason():
    with pytest.raises(ScheduleError, match="multiples of the tile block 32 x 32 and of "
                                            "the tile step 64"):
        gemm_dot(ops.qmatmul(32, 32, 48), "tdpbusd_amx", 2, 2)
    with pytest.raises(ScheduleError, match="1 or 2 tiles each way"):
        gemm_dot(ops.qmatmul(48, 16, 64), "tdpbusd_amx", 3, 1)
    with pytest.raises(ScheduleError, match="pre-packed"):
        gemm_dot(ops.qmatmul(32, 32, 64), "tdpbusd_amx", 2, 2, prepack=False)


def test_a_nest_that_is_not_a_tile_is_refused_with_the_reason():
    tensors = ops.qmatmul(32, 32, 64)
    C = tensors[2]
    s = tvmlite.te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=4)
    with pytest.raises(ScheduleError, match="four innermost loops"):
        s[C].tensorize(j, "tdpbusd_amx")
    s[C].reorder(ko, i, j, ki)
    with pytest.raises(ScheduleError, match="spatial, spatial, reduce, reduce"):
        s[C].tensorize(ko, "tdpbusd_amx")


def test_a_target_without_amx_refuses_the_tile_intrinsic():
    tensors = ops.qmatmul(32, 32, 64)
    with pytest.raises(ScheduleError, match="needs amx_tile, amx_int8"):
        generate_c(gemm_dot(tensors, "tdpbusd_amx", 2, 2), tensors, target=AVX512)


@pytest.mark.parametrize("target", [AVX512, AVX2], ids=["avx512", "avx2"])
def test_a_target_without_amx_never_gets_it(target):
    for dts in (("uint8", "int8", "int32"), ("bfloat16", "bfloat16", "float32")):
        intr = best_intrinsic(target.arch, target.features, *dts, shape=(1024, 1024, 1024))
        assert intr is None or not intr.is_tile
    task = templated.create("qmatmul", dict(M=32, N=32, K=64), target=target,
                            constants=["B"])
    names = [e.value() for e in task.space.knobs["tensorize"].entities]
    assert not any(n.endswith("_amx") for n in names)


def test_best_intrinsic_gives_a_tile_only_for_a_shape_it_fits():
    feats = ("avx512f", "avx512vnni", "avx512bf16", "amx_tile", "amx_int8", "amx_bf16")
    u8s8 = ("uint8", "int8", "int32")
    assert best_intrinsic("x86_64", feats, *u8s8, shape=(64, 64, 128)).name == "tdpbusd_amx"
    assert best_intrinsic("x86_64", feats, *u8s8, shape=(64, 64, 100)).name \
        == "vpdpbusd_avx512"
    assert best_intrinsic("x86_64", feats, *u8s8, shape=(8, 64, 128)).name \
        == "vpdpbusd_avx512"
    assert best_intrinsic("x86_64", feats, *u8s8).name == "vpdpbusd_avx512"
    assert best_intrinsic("x86_64", feats, "bfloat16", "bfloat16", "float32",
                          shape=(32, 32, 64)).name == "tdpbf16ps_amx"


@needs("amx_tile", "amx_int8")
def test_the_template_knob_offers_amx_where_it_fits_and_builds_it():
    task = templated.create("qmatmul", dict(M=32, N=32, K=64), constants=["B"])
    names = [e.value() for e in task.space.knobs["tensorize"].entities]
    assert names[0] == "tdpbusd_amx" and names[-1] == "none" and len(names) == 3
    config = next(task.space.get(i) for i in range(len(task.space))
                  if task.space.get(i)["tensorize"].val == "tdpbusd_amx")
    mod = tvmlite.build(*task.instantiate(config))
    rng = np.random.default_rng(1)
    a, b = full_range("uint8", (32, 64), rng), full_range("int8", (64, 32), rng)
    c = tvmlite.nd.empty((32, 32), "int32")
    mod(a, b, c)
    np.testing.assert_array_equal(c.numpy(), a.astype(np.int32) @ b.astype(np.int32))


@needs("amx_tile", "amx_int8")
def test_a_refused_tile_permission_is_a_clear_error(monkeypatch):
    """The kernel's status when Linux refuses the permission (simulated: this VM grants
    it) becomes AmxDeniedError naming the fix, not a crash."""
    tensors = ops.qmatmul(32, 32, 64)
    mod = tvmlite.build(gemm_dot(tensors, "tdpbusd_amx", 2, 2), tensors)
    monkeypatch.setattr(mod, "_kernel", lambda *ptrs: AMX_DENIED)
    a, b = np.zeros((32, 64), np.uint8), np.zeros((64, 32), np.int8)
    with pytest.raises(AmxDeniedError, match="refused this process the tile data"):
        mod(a, b, tvmlite.nd.empty((32, 32), "int32"))


def _qmatmul_packed(M: int, N: int, K: int):
    """A u8 x s8 matmul's schedule with B packed in 32-column panels of VNNI groups of 4:
    (schedule, tensors, the pack's stage, C's stage), for a test to lay its tiles out."""
    tensors = ops.qmatmul(M, N, K)
    C = tensors[2]
    s = tvmlite.te.create_schedule(C.op)
    BP = s.prepack(s.cache_read(s.tensor("B"), "global", [C]), dim=1, factor=32,
                   group_dim=0, group=4)
    return s, tensors, BP, s[C]


def _split_k_tile(M: int, N: int, K: int, chunks: int):
    """A 2x2 tile nest over K / chunks, the reduction's other loop around it: the sum of
    each nest but the first goes on from the last, so only the zeroing sits before the
    outer loop, not before the tile."""
    s, tensors, BP, o = _qmatmul_packed(M, N, K)
    i, j = o.op.axis
    (k,) = o.op.reduce_axis
    io, ii = o.split(i, factor=32)
    jo, ji = o.split(j, factor=32)
    ko, kin = o.split(k, factor=K // chunks)
    kg, ki = o.split(kin, factor=4)
    o.reorder(io, jo, ko, ii, ji, kg, ki)
    o.tensorize(ii, "tdpbusd_amx")
    s[BP].parallel(s[BP].op.axis[0])
    return s, tensors


def test_a_fresh_tile_takes_the_zeroing_in_and_a_continued_sum_keeps_loading_c():
    """Lowering only (no AMX needed): the GEMM block's tiles start at zero (tilezero, the
    zeroing dropped), written straight into C; a K split keeps the zeroing and the loads."""
    tensors = ops.qmatmul(64, 64, 128)
    fresh = str(tvmlite.lower(gemm_dot(tensors, "tdpbusd_amx", 2, 2), tensors,
                              vector_bytes=AMX_VECTOR_BYTES))
    assert "C[" in fresh and "] = tdpbusd_amx(" in fresh and "x16(0)" not in fresh
    assert "local" not in fresh
    s, tensors = _split_k_tile(64, 64, 128, 2)
    going_on = str(tvmlite.lower(s, tensors, vector_bytes=AMX_VECTOR_BYTES))
    assert "] += tdpbusd_amx(" in going_on and "x16(0)" in going_on


def test_a_zeroing_of_a_wider_block_is_not_taken_in():
    """The zeroing of all of C's columns sits before the loop over the column blocks, not
    right before one tile: each tile keeps loading C."""
    s, tensors, BP, o = _qmatmul_packed(32, 64, 64)
    i, j = o.op.axis
    (k,) = o.op.reduce_axis
    jo, ji = o.split(j, factor=32)
    ko, kin = o.split(k, factor=64)
    kg, ki = o.split(kin, factor=4)
    o.reorder(ko, jo, i, ji, kg, ki)
    o.tensorize(i, "tdpbusd_amx")
    s[BP].parallel(s[BP].op.axis[0])
    text = str(tvmlite.lower(s, tensors, vector_bytes=AMX_VECTOR_BYTES))
    assert "] += tdpbusd_amx(" in text and "x16(0)" in text


@needs("amx_tile", "amx_int8")
def test_fresh_and_continued_tiles_are_bit_exact():
    rng = np.random.default_rng(5)
    a, b = full_range("uint8", (64, 256), rng), full_range("int8", (256, 64), rng)
    want = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    s, tensors = _split_k_tile(64, 64, 256, 4)
    for (sched, ts), fresh in (((gemm_dot(ops.qmatmul(64, 64, 256), "tdpbusd_amx", 2, 2),
                                 ops.qmatmul(64, 64, 256)), 1), ((s, tensors), 0)):
        mod = tvmlite.build(sched, ts)
        c = tvmlite.nd.empty((64, 64), "int32")
        mod(a, b, c)
        np.testing.assert_array_equal(c.numpy(), want)
        call = [ln for ln in mod.get_source().splitlines()
                if ln.strip().startswith("tvmlite_tdpbusd_amx_u8i8_2x2(")]
        assert len(call) == 1 and call[0].endswith(f", {fresh});")
