"""The C of each dot-product intrinsic (``tvmlite.target.intrinsics``): one static inline
helper per intrinsic and operand dtypes,

    tvmlite_<name>_<a><b>(acc, const A* a, const B* b) -> acc

taking and returning the accumulators as our GCC vector type (``tvmlite_i32x16``; a
cast to the vendor type is a free reinterpretation, the same 64 bytes) and reading
``group`` elements at ``a`` (broadcast to every lane) and ``lanes * group`` at ``b``.
The 4-byte broadcast goes through ``__builtin_memcpy``: any alignment, no aliasing
assumption. Only fixed text and names from the registry reach the C.

Map: ``helper_name`` · ``include_line`` · ``helper_source`` (per intrinsic: the VNNI and
BF16 one-instruction forms, vpmaddwd on a B the pack widened to int16, the exact AVX2 and
NEON widening fallbacks, sdot/udot).
"""
from __future__ import annotations

from tvmlite.ir.dtypes import CTYPE, DTYPE_INFO
from tvmlite.target.intrinsics import get_intrinsic

__all__ = ["helper_name", "include_line", "helper_source"]


def helper_name(name: str, a: str, b: str) -> str:
    return f"tvmlite_{name}_{DTYPE_INFO[a].short}{DTYPE_INFO[b].short}"


def include_line(name: str) -> str:
    """The vendor header the intrinsic's helper needs."""
    return "#include <arm_neon.h>" if get_intrinsic(name).arch == "aarch64" \
        else "#include <immintrin.h>"


_LOAD4 = "int32_t a4; __builtin_memcpy(&a4, a, 4);"


def _avx2_widen(dt: str) -> str:
    return "_mm256_cvtepu8_epi16" if dt == "uint8" else "_mm256_cvtepi8_epi16"


def _neon_widen(dt: str, x: str) -> str:
    if dt == "uint8":
        return f"vreinterpretq_s16_u16(vmovl_u8({x}))"
    return f"vmovl_s8({x})"


def _neon_load8(dt: str, p: str) -> str:
    return f"vld1_u8((const uint8_t*)({p}))" if dt == "uint8" else \
        f"vld1_s8((const int8_t*)({p}))"


def _body(name: str, a: str, b: str) -> list:
    if name == "vpdpbusd_avx512":
        return [_LOAD4, "return (tvmlite_i32x16)_mm512_dpbusd_epi32((__m512i)acc, "
                "_mm512_set1_epi32(a4), _mm512_loadu_si512((const void*)b));"]
    if name == "vpdpbusd_avxvnni":
        return [_LOAD4, "return (tvmlite_i32x8)_mm256_dpbusd_avx_epi32((__m256i)acc, "
                "_mm256_set1_epi32(a4), _mm256_loadu_si256((const __m256i*)b));"]
    if name == "vdpbf16ps_avx512":
        return [_LOAD4, "return (tvmlite_f32x16)_mm512_dpbf16_ps((__m512)acc, "
                "(__m512bh)_mm512_set1_epi32(a4), (__m512bh)_mm512_loadu_si512((const void*)b));"]
    if name in ("pmaddwd_s16_avx2", "pmaddwd_s16_avx512"):
        # B is int16 already (widened by the pack): a's pair as two int16 in one int32,
        # broadcast; vpmaddwd sums each lane's two products in int32, exactly
        w = 256 if name.endswith("avx2") else 512
        load = "_mm256_loadu_si256((const __m256i*)b)" if w == 256 else \
            "_mm512_loadu_si512((const void*)b)"
        return ["uint32_t p = (uint32_t)(uint16_t)(int16_t)a[0] | "
                "((uint32_t)(uint16_t)(int16_t)a[1] << 16);",
                f"return acc + (tvmlite_i32x{w // 32})_mm{w}_madd_epi16("
                f"_mm{w}_set1_epi32((int32_t)p), {load});"]
    if name == "pmaddwd_avx2":
        # lanes 0-3 then 4-7, each four int16 products summed in two vpmaddwd pairs; the
        # in-lane hadd leaves the lanes as 0 1 4 5 | 2 3 6 7, the permute restores them
        return [_LOAD4,
                "__m256i a16 = _mm256_broadcastq_epi64(_mm256_castsi256_si128("
                f"{_avx2_widen(a)}(_mm_cvtsi32_si128(a4))));",
                "__m256i b8 = _mm256_loadu_si256((const __m256i*)b);",
                f"__m256i lo = _mm256_madd_epi16({_avx2_widen(b)}(_mm256_castsi256_si128(b8)), "
                "a16);",
                f"__m256i hi = _mm256_madd_epi16({_avx2_widen(b)}(_mm256_extracti128_si256(b8, 1)),"
                " a16);",
                "return acc + (tvmlite_i32x8)_mm256_permute4x64_epi64("
                "_mm256_hadd_epi32(lo, hi), 0xD8);"]
    if name == "sdot_neon":
        return [_LOAD4, "return (tvmlite_i32x4)vdotq_s32((int32x4_t)acc, "
                "vreinterpretq_s8_s32(vdupq_n_s32(a4)), vld1q_s8(b));"]
    if name == "udot_neon":
        return [_LOAD4, "return (tvmlite_i32x4)vdotq_u32((uint32x4_t)acc, "
                "vreinterpretq_u8_s32(vdupq_n_s32(a4)), vld1q_u8(b));"]
    if name == "smull_neon":
        # a's four values twice (int16), lanes 0-1 and 2-3 of b widened; pairwise adds
        # of the four int32 products of each lane
        return [_LOAD4,
                f"int16x8_t a16 = {_neon_widen(a, _neon_as8(a, 'vdup_n_s32(a4)'))};",
                f"int16x8_t b01 = {_neon_widen(b, _neon_load8(b, 'b'))};",
                f"int16x8_t b23 = {_neon_widen(b, _neon_load8(b, 'b + 8'))};",
                "int16x4_t a4l = vget_low_s16(a16);",
                "int32x4_t p0 = vmull_s16(vget_low_s16(b01), a4l), "
                "p1 = vmull_high_s16(b01, a16);",
                "int32x4_t p2 = vmull_s16(vget_low_s16(b23), a4l), "
                "p3 = vmull_high_s16(b23, a16);",
                "return acc + (tvmlite_i32x4)vpaddq_s32(vpaddq_s32(p0, p1), "
                "vpaddq_s32(p2, p3));"]
    raise ValueError(f"codegen: no C for intrinsic {name!r}")


def _neon_as8(dt: str, x: str) -> str:
    return f"vreinterpret_u8_s32({x})" if dt == "uint8" else f"vreinterpret_s8_s32({x})"


def helper_source(name: str, a: str, b: str, acc_type: str) -> list:
    """The helper's C lines; ``acc_type`` is the accumulators' vector type name."""
    head = (f"static inline {acc_type} {helper_name(name, a, b)}({acc_type} acc, "
            f"const {CTYPE[a]}* restrict a, const {CTYPE[b]}* restrict b) {{")
    return [head] + ["  " + line for line in _body(name, a, b)] + ["}"]
