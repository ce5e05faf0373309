"""The C of each dot-product intrinsic (``tvmlite.target.intrinsics``): one static inline
helper per intrinsic and operand dtypes,

    tvmlite_<name>_<a><b>(acc, const A* a, const B* b) -> acc

taking and returning the accumulators as our GCC vector type (``tvmlite_i32x16``; a
cast to the vendor type is a free reinterpretation, the same 64 bytes) and reading
``group`` elements at ``a`` (broadcast to every lane) and ``lanes * group`` at ``b``.
The 4-byte broadcast goes through ``__builtin_memcpy``: any alignment, no aliasing
assumption. Only fixed text and names from the registry reach the C.

A tile intrinsic (AMX) is a helper per block of tiles, ``tvmlite_<name>_<a><b>_<R>x<C>``
(R, C tiles of 16: 1 or 2 each) returning nothing,

    (T* c, int64_t ldc, const A* a, int64_t lda, const B* b, int64_t ldb, int64_t steps,
     int32_t fresh)

that configures the tiles only when the thread's config is not already ours (tile config
is per thread: ``sttilecfg`` reads the one in use and ``ldtilecfg``, which costs about
what a block's steps do at 1024^3, runs only when it differs, e.g. on a thread's first
call or after another library's tiles; every helper configures all 8 tiles alike, so
block shapes never evict each other, and none releases them), loads the R x C tiles of C
(or, when ``fresh``, zeroes them with ``tilezero``: the sum starts there, which the
tensorize pass proved from the zeroing it removed), and for each step loads R tiles of A
(16 rows of 64 bytes, row stride lda), C tiles of B (16 k groups of 64 bytes, stride
ldb) and issues R x C ``tdpbusd``/``tdpbf16ps``, then stores C. The helpers carry their
own ``target`` attribute, so the kernel compiles whatever the flags; they run only after
``amx_permit_source``'s once-per-process ``arch_prctl(ARCH_REQ_XCOMP_PERM,
XFEATURE_XTILEDATA)`` succeeded (the kernel returns ``AMX_DENIED`` otherwise, never an
illegal instruction).

Map: ``helper_name`` · ``include_line`` · ``helper_source`` (per intrinsic: the VNNI and
BF16 one-instruction forms, vpmaddwd on an A and a B widened to int16, the exact AVX2 and
NEON widening fallbacks, sdot/udot) · ``tile_helper_name``, ``tile_helper_source``,
``amx_permit_source``, ``AMX_DENIED``.
"""
from __future__ import annotations

from tvmlite.ir.dtypes import C_HELPER, CTYPE, DTYPE_INFO, ITEMSIZE
from tvmlite.target.intrinsics import get_intrinsic

__all__ = ["helper_name", "include_line", "helper_source", "tile_helper_name",
           "tile_helper_source", "amx_permit_source", "AMX_DENIED"]

AMX_DENIED = -3   # the kernel's status when Linux refuses the tile data permission


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
    if name == "vpdpbusd_avx512vl":
        return [_LOAD4, "return (tvmlite_i32x8)_mm256_dpbusd_epi32((__m256i)acc, "
                "_mm256_set1_epi32(a4), _mm256_loadu_si256((const __m256i*)b));"]
    if name == "vdpbf16ps_avx512vl":
        return [_LOAD4, "return (tvmlite_f32x8)_mm256_dpbf16_ps((__m256)acc, "
                "(__m256bh)_mm256_set1_epi32(a4), (__m256bh)_mm256_loadu_si256("
                "(const __m256i*)b));"]
    if name == "vdpbf16ps_avx512":
        return [_LOAD4, "return (tvmlite_f32x16)_mm512_dpbf16_ps((__m512)acc, "
                "(__m512bh)_mm512_set1_epi32(a4), (__m512bh)_mm512_loadu_si512((const void*)b));"]
    if name in ("pmaddwd_s16_avx2", "pmaddwd_s16_avx512"):
        # A and B are int16 already (A's copy, B's pack): a's pair is one int32,
        # broadcast; vpmaddwd sums each lane's two products in int32, exactly
        w = 256 if name.endswith("avx2") else 512
        load = "_mm256_loadu_si256((const __m256i*)b)" if w == 256 else \
            "_mm512_loadu_si512((const void*)b)"
        return [_LOAD4, f"return acc + (tvmlite_i32x{w // 32})_mm{w}_madd_epi16("
                f"_mm{w}_set1_epi32(a4), {load});"]
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
    head = (f"{C_HELPER} {acc_type} {helper_name(name, a, b)}({acc_type} acc, "
            f"const {CTYPE[a]}* restrict a, const {CTYPE[b]}* restrict b) {{")
    return [head] + ["  " + line for line in _body(name, a, b)] + ["}"]


def tile_helper_name(name: str, a: str, b: str, row_tiles: int, col_tiles: int) -> str:
    return f"{helper_name(name, a, b)}_{row_tiles}x{col_tiles}"


_TILES = 8   # every helper configures all 8 tiles alike: one config for any block shape
_TILE_OP = {"tdpbusd_amx": ("_tile_dpbusd", "amx-tile,amx-int8"),
            "tdpbf16ps_amx": ("_tile_dpbf16ps", "amx-tile,amx-bf16")}


def tile_helper_source(name: str, a: str, b: str, acc: str, row_tiles: int,
                       col_tiles: int) -> list:
    """The C lines of one tile block's helper (module doc); tiles 0..R*C-1 hold C, the
    next R hold A and the last C hold B (at most 8 tiles)."""
    if name not in _TILE_OP or row_tiles not in (1, 2) or col_tiles not in (1, 2):
        raise ValueError(f"codegen: no C for tile intrinsic {name!r} {row_tiles}x{col_tiles}")
    op, feats = _TILE_OP[name]
    intr = get_intrinsic(name)
    ct, at, bt = CTYPE[acc], CTYPE[a], CTYPE[b]
    rows, cols = intr.tile_rows, intr.lanes
    kstep = intr.kgroups * intr.group   # elements of k in one tile step (64 bytes of A)
    cfg = [1] + [0] * 15 + [64, 0] * _TILES + [0, 0] * (16 - _TILES) + [rows] * _TILES \
        + [0] * (16 - _TILES)
    lines = [f'__attribute__((target("{feats}")))',
             f"static void {tile_helper_name(name, a, b, row_tiles, col_tiles)}({ct}* c, "
             f"int64_t ldc, const {at}* a, int64_t lda, const {bt}* b, int64_t ldb, "
             "int64_t steps, int32_t fresh) {",
             "  static const uint8_t want[64] __attribute__((aligned(64))) = {"
             + ", ".join(map(str, cfg)) + "};",
             "  uint8_t cur[64] __attribute__((aligned(64)));",
             "  _tile_storeconfig(cur);",
             "  if (__builtin_memcmp(cur, want, 64) != 0) _tile_loadconfig(want);"]
    ctile = [(r, q, r * col_tiles + q) for r in range(row_tiles) for q in range(col_tiles)]
    at0, bt0 = row_tiles * col_tiles, row_tiles * col_tiles + row_tiles
    lines.append("  if (fresh) {")
    lines += [f"    _tile_zero({t});" for _, _, t in ctile]
    lines.append("  } else {")
    for r, q, t in ctile:
        lines.append(f"    _tile_loadd({t}, c + {r * rows} * ldc + {q * cols}, "
                     f"ldc * {ITEMSIZE[acc]});")
    lines.append("  }")
    lines.append("  for (int64_t s = 0; s < steps; ++s) {")
    for r in range(row_tiles):
        lines.append(f"    _tile_loadd({at0 + r}, a + {r * rows} * lda + s * {kstep}, "
                     f"lda * {ITEMSIZE[a]});")
    for q in range(col_tiles):
        lines.append(f"    _tile_loadd({bt0 + q}, b + s * {intr.kgroups} * ldb + "
                     f"{q * cols * intr.group}, ldb * {ITEMSIZE[b]});")
    for r, q, t in ctile:
        lines.append(f"    {op}({t}, {at0 + r}, {bt0 + q});")
    lines.append("  }")
    for r, q, t in ctile:
        lines.append(f"  _tile_stored({t}, c + {r * rows} * ldc + {q * cols}, "
                     f"ldc * {ITEMSIZE[acc]});")
    lines.append("}")
    return lines


def amx_permit_source() -> list:
    """``tvmlite_amx_permit()``: 0 once Linux lets this process use tile data, else
    ``AMX_DENIED``. The request is made once per process; threads racing to make it make
    the same idempotent system call, so a relaxed flag is enough."""
    return ["#include <sys/syscall.h>", "#include <unistd.h>",
            "static int32_t tvmlite_amx_permit(void) {",
            "  static int tvmlite_amx_state = 0;   /* 0 unknown, 1 granted, -1 refused */",
            "  int s = __atomic_load_n(&tvmlite_amx_state, __ATOMIC_ACQUIRE);",
            "  if (s == 0) {",
            "#ifdef SYS_arch_prctl",
            "    s = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */,",
            "                18 /* XFEATURE_XTILEDATA */) == 0 ? 1 : -1;",
            "#else",
            "    s = -1;",
            "#endif",
            "    __atomic_store_n(&tvmlite_amx_state, s, __ATOMIC_RELEASE);",
            "  }",
            f"  return s == 1 ? 0 : {AMX_DENIED};",
            "}"]
