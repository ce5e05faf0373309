"""The CPU's dot-product instructions that ``tensorize`` can put in place of a loop nest.

Every intrinsic computes the same shape of work, one instruction (or a short exact
sequence) for a two-loop nest

    for x in range(lanes):          # spatial: the output's lanes, contiguous
        for r in range(group):      # reduce: summed inside each lane
            out[x] += acc(a[r]) * acc(b[x * group + r])

``a`` is one group of ``group`` elements broadcast to every lane (the activations'
row), ``b`` ``lanes`` groups laid out one after the other (the weights, pre-packed as
[N/lanes][K/group][lanes][group]: ``prepack(..., group_dim=..., group=...)``), ``out``
``lanes`` accumulators. What may differ is the instruction, the lane count, the dtypes it
takes and the CPU features it needs; the Target lists the ones it has
(``Target.intrinsics``), and the C of each lives in ``codegen_c/intrinsics.py``.

The fallbacks are exact. Without VNNI, ``pmaddwd_s16_avx2`` (and its AVX-512 form)
reads B pre-widened to int16 by the pack (``b_storage``: B is a constant, widened once at
load time) and A widened to int16 by a copy the kernel makes first (``a_storage``: a
``cache_read(..., dtype="int16")``, one pass over the activations), so the inner loop is
one broadcast load of A's pair, ``vpmaddwd`` and an add: a u8/s8 times int16 pair sum is
at most 2 * 255 * 32768 < 2**31, exact for every value. (Reading A's bytes and pairing
them in general registers costs six instructions a row per pair; on a Zen 3 the int16
copy took a 1024^3 GEMM's best block from 146 to about 190 GOP/s.)
``vpmaddubsw``, which multiplies bytes directly, is not used: it saturates its int16 pair
sums (2 * 255 * 128 > 32767), exact only for weights whose pairs are small, and a
weight is data, not something the kernel can know. ``pmaddwd_avx2`` widens both operands
in the loop (for a B that is packed without widening), and ``smull_neon`` widens to
int16 and multiplies into int32. Integer results are exact
(int32 wraps as numpy's does); ``vdpbf16ps`` sums each pair of bf16 products in float32
(round to nearest even, denormals flushed), so it agrees with a float32 loop within
float32 rounding of bf16 inputs, not bit for bit.

An intrinsic with ``b_storage`` (``a_storage``) reads B (A) stored as that dtype (the
pack or the copy converts it, exactly), so the loads it is matched against are
``Intrinsic.reads``; ``Intrinsic.takes`` names what it computes, the compute's dtypes.

**Tile intrinsics** (``Intrinsic.rows`` > 1: AMX ``tdpbusd``, ``tdpbf16ps``) compute a
four-loop nest, a block of C tiles over a whole reduction

    for i in range(rows):             # spatial: C's rows (``tile_rows`` per tile)
        for x in range(lanes):        # spatial: C's columns, contiguous
            for g in range(kgroups):  # reduce: groups of k (a multiple of ``kgroups``)
                for r in range(group):
                    out[i * ldc + x] += acc(a[i * lda + g * group + r])
                                        * acc(b[g * ldb + x * group + r])

with rows and lanes each 1 or 2 tiles of 16 (a 2 x 2 block: 4 C tiles fed by 2 A and 2
B tile loads per step). ``b`` is the VNNI packing above (a panel as wide as the block:
ldb = lanes * group), each k group's row 64 bytes, exactly the B tile's row; ``a`` is
read in place with its row stride, ``out`` is the accumulation block with its own.
They need the OS's permission for tile data (Linux ``arch_prctl``), which the generated
kernel asks once per process; refused, the kernel returns an error status.

Map: ``Intrinsic`` · ``INTRINSICS`` (preference order: faster first) · ``available``,
``best_intrinsic``, ``get_intrinsic``, ``missing_features``.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Intrinsic", "INTRINSICS", "available", "best_intrinsic", "get_intrinsic",
           "missing_features"]

_U8S8 = (("uint8", "int8", "int32"),)
_ANY_INT8 = tuple((a, b, "int32") for a in ("uint8", "int8") for b in ("uint8", "int8"))


@dataclass(frozen=True)
class Intrinsic:
    """One dot-product instruction as ``tensorize`` sees it (module doc): its ``name``,
    the ``arch`` and ``features`` (all needed) it runs with, ``lanes`` outputs of
    ``group`` products each, the (a, b, accumulator) ``dtypes`` it computes, and the
    instruction it is, for tables and messages; ``b_storage``, when set, the dtype the
    pack stores B as (the instruction reads B widened: ``reads``), ``a_storage`` the
    dtype of the copy of A the kernel reads (``cache_read(..., dtype=)``);
    ``broadcast_in_registers``: A's group reaches every lane through several register
    instructions, not one broadcast load (so a register block of fewer rows is
    cheaper: ``schedule.dot_block.block_sizes``); ``tile_rows`` (a tile intrinsic: the
    rows of one C tile, 0 for a vector one) and ``kgroups``, the k groups of one tile
    step (module doc)."""
    name: str
    arch: str
    features: tuple[str, ...]
    lanes: int
    group: int
    dtypes: tuple[tuple[str, str, str], ...]
    instruction: str
    b_storage: str = ""
    a_storage: str = ""
    broadcast_in_registers: bool = False
    tile_rows: int = 0
    kgroups: int = 1

    @property
    def is_tile(self) -> bool:
        """A tile intrinsic (AMX): a 4-loop nest of whole tiles (module doc)."""
        return self.tile_rows > 0

    def fits(self, M: int, N: int, K: int) -> bool:
        """Whether a GEMM of M x N x K splits into this intrinsic's nests: whole tiles of
        C (M, N multiples of the tile) and whole tile steps of k; any size for a vector
        intrinsic whose group divides K."""
        if self.is_tile:
            return M % self.tile_rows == 0 and N % self.lanes == 0 \
                and K % (self.kgroups * self.group) == 0
        return K % self.group == 0

    def takes(self, a: str, b: str, acc: str) -> bool:
        """Whether it computes ``a`` x ``b`` -> ``acc`` (the compute's dtypes)."""
        return (a, b, acc) in self.dtypes

    def storage(self) -> str:
        """How the operands must be stored, for messages ("" when as computed)."""
        parts = [f"{x} stored as {d} ({how} with dtype=\"{d}\")" for x, d, how in
                 (("A", self.a_storage, "cache_read A"), ("B", self.b_storage, "prepack B"))
                 if d]
        return " with " + " and ".join(parts) if parts else ""

    def reads(self, a: str, b: str, acc: str) -> bool:
        """Whether the kernel's operands as stored, ``a`` and ``b`` (A after its copy, B
        after its pack), are what the instruction reads: each in its storage dtype when
        the intrinsic has one (every value of the compute's dtypes fits it), else a
        dtype it takes."""
        return any(a == (self.a_storage or x) and b == (self.b_storage or y) and acc == z
                   for x, y, z in self.dtypes)


INTRINSICS: dict[str, Intrinsic] = {i.name: i for i in (
    Intrinsic("tdpbusd_amx", "x86_64", ("amx_tile", "amx_int8"), 16, 4, _U8S8,
              "tdpbusd tiles (AMX-INT8, _tile_dpbusd)", tile_rows=16, kgroups=16),
    Intrinsic("tdpbf16ps_amx", "x86_64", ("amx_tile", "amx_bf16"), 16, 2,
              (("bfloat16", "bfloat16", "float32"),),
              "tdpbf16ps tiles (AMX-BF16, _tile_dpbf16ps)", tile_rows=16, kgroups=16),
    Intrinsic("vpdpbusd_avx512", "x86_64", ("avx512f", "avx512vnni"), 16, 4, _U8S8,
              "vpdpbusd zmm (AVX512-VNNI, _mm512_dpbusd_epi32)"),
    Intrinsic("vpdpbusd_avxvnni", "x86_64", ("avx2", "avxvnni"), 8, 4, _U8S8,
              "vpdpbusd ymm (AVX-VNNI, _mm256_dpbusd_avx_epi32)"),
    Intrinsic("vpdpbusd_avx512vl", "x86_64", ("avx512vl", "avx512vnni"), 8, 4, _U8S8,
              "vpdpbusd ymm (AVX512-VNNI + VL, _mm256_dpbusd_epi32)"),
    Intrinsic("pmaddwd_s16_avx512", "x86_64", ("avx512f", "avx512bw"), 16, 2, _ANY_INT8,
              "vpbroadcastd + vpmaddwd zmm + vpaddd on A and B widened to int16 (AVX-512BW, "
              "exact)", b_storage="int16", a_storage="int16"),
    Intrinsic("pmaddwd_s16_avx2", "x86_64", ("avx2",), 8, 2, _ANY_INT8,
              "vpbroadcastd + vpmaddwd ymm + vpaddd on A and B widened to int16 (AVX2, exact)",
              b_storage="int16", a_storage="int16"),
    Intrinsic("pmaddwd_avx2", "x86_64", ("avx2",), 8, 4, _ANY_INT8,
              "vpmovsx/zxbw + vpmaddwd + vphaddd (AVX2, exact: no int16 saturation)",
              broadcast_in_registers=True),
    Intrinsic("vdpbf16ps_avx512", "x86_64", ("avx512f", "avx512bf16"), 16, 2,
              (("bfloat16", "bfloat16", "float32"),),
              "vdpbf16ps zmm (AVX512-BF16, _mm512_dpbf16_ps)"),
    Intrinsic("vdpbf16ps_avx512vl", "x86_64", ("avx512vl", "avx512bf16"), 8, 2,
              (("bfloat16", "bfloat16", "float32"),),
              "vdpbf16ps ymm (AVX512-BF16 + VL, _mm256_dpbf16_ps)"),
    Intrinsic("sdot_neon", "aarch64", ("neon", "dotprod"), 4, 4, (("int8", "int8", "int32"),),
              "sdot (ARMv8.2 dotprod, vdotq_s32)"),
    Intrinsic("udot_neon", "aarch64", ("neon", "dotprod"), 4, 4,
              (("uint8", "uint8", "int32"),), "udot (ARMv8.2 dotprod, vdotq_u32)"),
    Intrinsic("smull_neon", "aarch64", ("neon",), 4, 4, _ANY_INT8,
              "vmovl + vmull_s16 + vpaddq_s32 (NEON, exact)"),
)}


def get_intrinsic(name: object) -> Intrinsic:
    """The intrinsic called ``name``; a ValueError listing the known names otherwise."""
    if not isinstance(name, str) or name not in INTRINSICS:
        raise ValueError(f"unknown intrinsic {str(name)[:40]!r}; known: {sorted(INTRINSICS)}")
    return INTRINSICS[name]


def missing_features(intrinsic: Intrinsic, arch: str, features: tuple) -> list[str]:
    """What a CPU of ``arch`` and ``features`` lacks to run ``intrinsic`` (the arch
    itself when it differs), empty when it runs there."""
    if arch != intrinsic.arch:
        return [f"arch {intrinsic.arch}"]
    return [f for f in intrinsic.features if f not in features]


def available(arch: str, features: tuple) -> tuple[str, ...]:
    """The intrinsics a CPU of ``arch`` and ``features`` has, faster first."""
    return tuple(n for n, i in INTRINSICS.items() if not missing_features(i, arch, features))


def best_intrinsic(arch: str, features: tuple, a: str, b: str, acc: str,
                   shape: tuple[int, int, int] | None = None,
                   divides: tuple[int, int] | None = None) -> Intrinsic | None:
    """The fastest intrinsic a CPU of ``arch`` and ``features`` has for ``a`` x ``b`` ->
    ``acc`` (a fallback where the CPU lacks the dot-product instruction), or None. A tile
    intrinsic only for a GEMM ``shape`` (M, N, K) it fits (``Intrinsic.fits``): callers
    that schedule vectors of one row give no shape and never get one. ``divides`` =
    (output columns, reduction depth) skips an intrinsic whose lanes or group do not
    divide them, so 1000 columns take the 8-lane ymm form of an instruction whose zmm
    form needs 16 (SqueezeNet's classifier conv in bf16)."""
    for name in available(arch, features):
        intr = INTRINSICS[name]
        if divides is not None and (divides[0] % intr.lanes or divides[1] % intr.group):
            continue
        if intr.takes(a, b, acc) and (not intr.is_tile
                                      or (shape is not None and intr.fits(*shape))):
            return intr
    return None
