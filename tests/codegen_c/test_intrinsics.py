"""codegen_c/intrinsics.py: every dot-product intrinsic, tensorized into a tiny GEMM,
against numpy -- the integer ones bit for bit over the whole uint8/int8 ranges (so a
saturating sequence would show), bf16 within its rounding -- on this machine where its CPU
has the instruction, the AArch64 ones under qemu, and the fallbacks forced by a target
without VNNI or dotprod (no instruction the target lacks may appear in the C): the named
AVX2 target's vpmaddwd on a B the pack widened to int16, refused on a B packed narrow."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import tvmlite
from tvmlite import ops, te
from tvmlite.runtime.module import generate_c
from tvmlite.schedules.dot import gemm_dot, lowp_matmul
from tvmlite.target.intrinsics import INTRINSICS, best_intrinsic
from tvmlite.target.target import Target
from tvmlite.testing.cross import cross_unavailable, run_on_target

HOST = Target.host()
X86 = [n for n, i in INTRINSICS.items() if i.arch == "x86_64" and not i.is_tile]  # tiles: test_amx
ARM = [n for n, i in INTRINSICS.items() if i.arch == "aarch64"]


def full_range(dtype: str, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    """Integers over the dtype's whole range, its ends included."""
    lo, hi = (0, 255) if dtype == "uint8" else (-128, 127)
    x = rng.integers(lo, hi + 1, shape).astype(dtype)
    x.flat[:2] = (lo, hi)
    return x


def gemm(name: str, a_dt: str, b_dt: str, M: int = 4, K: int = 24) -> tuple:
    """(schedule, tensors, inputs, numpy's result) of a GEMM tensorized with ``name``:
    two blocks of 2 rows x 2 vectors, so unrolled and parallel loops are exercised."""
    intr = INTRINSICS[name]
    N = 4 * intr.lanes
    rng = np.random.default_rng(0)
    if intr.dtypes[0][2] == "int32":
        tensors = ops.qmatmul(M, N, K, a_dt, b_dt)
        a, b = full_range(a_dt, (M, K), rng), full_range(b_dt, (K, N), rng)
        want = a.astype(np.int64) @ b.astype(np.int64)
        want = want.astype(np.int32)
    else:
        tensors = lowp_matmul(M, N, K)
        a = rng.standard_normal((M, K)).astype("bfloat16")
        b = rng.standard_normal((K, N)).astype("bfloat16")
        want = a.astype(np.float32) @ b.astype(np.float32)
    return gemm_dot(tensors, name, 2, 2), tensors, [a, b], want


def cases(names: list) -> list:
    return [pytest.param(n, a, b, id=f"{n}-{a}x{b}") for n in names
            for a, b, _ in INTRINSICS[n].dtypes]


def check(got: np.ndarray, want: np.ndarray) -> None:
    if want.dtype == np.int32:
        np.testing.assert_array_equal(got, want)
    else:   # bf16 inputs, float32 sums in another order: float32 rounding of K terms
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,a_dt,b_dt", cases(X86))
def test_x86_intrinsic_on_this_cpu(name, a_dt, b_dt):
    if name not in HOST.intrinsics:
        pytest.skip(f"this CPU lacks {name} ({INTRINSICS[name].instruction})")
    s, tensors, inputs, want = gemm(name, a_dt, b_dt)
    mod = tvmlite.build(s, tensors)
    assert f"tvmlite_{name}_" in mod.get_source()
    c = tvmlite.nd.empty(want.shape, tensors[2].dtype)
    mod(*inputs, c)
    check(c.numpy(), want)


def without(target: Target, *features: str) -> Target:
    return replace(target, features=tuple(f for f in target.features if f not in features),
                   name="")


@pytest.mark.parametrize("a_dt,b_dt", [("uint8", "int8"), ("int8", "int8"),
                                       ("uint8", "uint8"), ("int8", "uint8")])
def test_an_avx2_cpu_without_vnni_gets_vpmaddwd_on_b_widened_by_the_pack(a_dt, b_dt):
    """Zen 3's path (the named AVX2 target: no AVX-512, no VNNI; this CPU runs it):
    B pre-widened to int16 in the pack and A copied as int16 in the kernel, bit for bit
    over the full ranges."""
    if "avx2" not in HOST.features:
        pytest.skip("this CPU has no AVX2")
    target = Target.from_name("x86_64-avx2")
    intr = best_intrinsic(target.arch, target.features, a_dt, b_dt, "int32")
    assert intr is not None and intr.name == "pmaddwd_s16_avx2"
    s, tensors, inputs, want = gemm(intr.name, a_dt, b_dt)
    mod = tvmlite.build(s, tensors, target=target)
    src = mod.get_source()
    assert "dpbusd" not in src and "_mm512" not in src and "maddubs" not in src
    assert mod.pack("B", inputs[1]).dtype == np.int16
    assert any(st.kind == "cache_read" and st.dtype == "int16" for st in s.steps)
    c = tvmlite.nd.empty(want.shape, "int32")
    mod(*inputs, c)
    check(c.numpy(), want)


def test_an_avx512_cpu_without_vnni_gets_the_zmm_form():
    target = without(HOST, "avx512vnni", "avxvnni")
    assert not {"vpdpbusd_avx512", "vpdpbusd_avxvnni"} & set(target.intrinsics)
    intr = best_intrinsic(target.arch, target.features, "uint8", "int8", "int32")
    want = "pmaddwd_s16_avx512" if "avx512bw" in HOST.features else "pmaddwd_s16_avx2"
    assert intr is not None and intr.name == want


def int8_block_with_b_packed(b_dtype: str):
    """A 4x32x8 int8 GEMM whose B is packed as `b_dtype` (A read as bytes) and whose
    block is laid out for pmaddwd_s16: the stage and the 8-lane column axis to tensorize."""
    tensors = ops.qmatmul(4, 32, 8)
    s = te.create_schedule(tensors[2].op)
    C = tensors[2]
    BB = s.cache_read(tensors[1], "global", [C])
    s.prepack(BB, dim=1, factor=8, group_dim=0, group=2, dtype=b_dtype)
    CL = s.cache_write(C, "local")
    ci, cj = s[CL].op.axis
    (k,) = s[CL].op.reduce_axis
    ko, ki = s[CL].split(k, factor=2)
    cjo, cji = s[CL].split(cj, factor=8)
    s[CL].reorder(ko, ci, cjo, cji, ki)
    return s[CL], cji


def test_a_b_packed_without_widening_is_refused_by_the_int16_intrinsic():
    stage, lanes = int8_block_with_b_packed("")                 # int8, not int16
    with pytest.raises(tvmlite.ScheduleError, match='B stored as int16 .*dtype="int16"'):
        stage.tensorize(lanes, "pmaddwd_s16_avx2")


def test_an_a_read_as_bytes_is_refused_by_the_int16_intrinsic():
    stage, lanes = int8_block_with_b_packed("int16")
    with pytest.raises(tvmlite.ScheduleError,
                       match='A stored as int16 \\(cache_read A with dtype="int16"\\)'):
        stage.tensorize(lanes, "pmaddwd_s16_avx2")


def test_tensorizing_with_an_instruction_the_target_lacks_names_the_feature():
    s, tensors, _, _ = gemm("vpdpbusd_avx512", "uint8", "int8")
    target = without(Target.from_name("x86_64-avx512"), "avx512vnni")
    with pytest.raises(tvmlite.ScheduleError, match="needs avx512vnni.*pmaddwd_avx2"):
        generate_c(s, tensors, target)


ARM_REASON = cross_unavailable("aarch64-neon")
needs_qemu = pytest.mark.skipif(ARM_REASON is not None,
                                reason=f"AArch64 toolchain or qemu unavailable: {ARM_REASON}")


def dotprod_target() -> Target:
    """ARMv8.2-A with dotprod: the named NEON target with the feature and its flag."""
    base = Target.from_name("aarch64-neon")
    flags = tuple("-march=armv8.2-a+dotprod" if f.startswith("-march=") else f
                  for f in base.cflags)
    return replace(base, features=base.features + ("dotprod",), cflags=flags, name="")


# one emulated run per intrinsic (each costs a second or two under qemu); the fallback's
# u8 x s8 is what neither sdot nor udot computes
ARM_CASES = [pytest.param("sdot_neon", "int8", "int8", id="sdot_neon"),
             pytest.param("udot_neon", "uint8", "uint8", id="udot_neon"),
             pytest.param("smull_neon", "uint8", "int8", id="smull_neon-uint8xint8")]
assert {p.values[0] for p in ARM_CASES} == set(ARM)


@needs_qemu
@pytest.mark.parametrize("name,a_dt,b_dt", ARM_CASES)
def test_aarch64_intrinsic_under_qemu(name, a_dt, b_dt):
    target = dotprod_target()   # `qemu-aarch64 -cpu max` runs dotprod
    assert name in target.intrinsics
    s, tensors, inputs, want = gemm(name, a_dt, b_dt)
    (got,) = run_on_target(s, tensors, target, inputs, threads=2)
    check(got, want)


@needs_qemu
def test_aarch64_without_dotprod_refuses_sdot_and_has_the_neon_fallback():
    target = Target.from_name("aarch64-neon")
    assert target.intrinsics == ("smull_neon",)
    s, tensors, _, _ = gemm("sdot_neon", "int8", "int8")
    with pytest.raises(tvmlite.ScheduleError, match="needs dotprod"):
        generate_c(s, tensors, target)
    intr = best_intrinsic(target.arch, target.features, "int8", "int8", "int32")
    assert intr is not None and intr.name == "smull_neon"
    _, source, _ = generate_c(gemm(intr.name, "int8", "int8")[0], tensors, target)
    assert "vdotq" not in source
