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

The fallbacks are exact: ``pmaddwd_avx2`` widens both operands to int16 before
``vpmaddwd`` (``vpmaddubsw``, which multiplies bytes directly, saturates its int16 pair
sums: 255 * 127 * 2 > 32767, so it would be wrong for large activations), and
``smull_neon`` widens to int16 and multiplies into int32. Integer results are exact
(int32 wraps as numpy's does); ``vdpbf16ps`` sums each pair of bf16 products in float32
(round to nearest even, denormals flushed), so it agrees with a float32 loop within
float32 rounding of bf16 inputs, not bit for bit.

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
    instruction it is, for tables and messages."""
    name: str
    arch: str
    features: tuple[str, ...]
    lanes: int
    group: int
    dtypes: tuple[tuple[str, str, str], ...]
    instruction: str

    def takes(self, a: str, b: str, acc: str) -> bool:
        return (a, b, acc) in self.dtypes


INTRINSICS: dict[str, Intrinsic] = {i.name: i for i in (
    Intrinsic("vpdpbusd_avx512", "x86_64", ("avx512f", "avx512vnni"), 16, 4, _U8S8,
              "vpdpbusd zmm (AVX512-VNNI, _mm512_dpbusd_epi32)"),
    Intrinsic("vpdpbusd_avxvnni", "x86_64", ("avx2", "avxvnni"), 8, 4, _U8S8,
              "vpdpbusd ymm (AVX-VNNI, _mm256_dpbusd_avx_epi32)"),
    Intrinsic("pmaddwd_avx2", "x86_64", ("avx2",), 8, 4, _ANY_INT8,
              "vpmovsx/zxbw + vpmaddwd + vphaddd (AVX2, exact: no int16 saturation)"),
    Intrinsic("vdpbf16ps_avx512", "x86_64", ("avx512f", "avx512bf16"), 16, 2,
              (("bfloat16", "bfloat16", "float32"),),
              "vdpbf16ps zmm (AVX512-BF16, _mm512_dpbf16_ps)"),
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


def best_intrinsic(arch: str, features: tuple, a: str, b: str, acc: str) -> Intrinsic | None:
    """The fastest intrinsic a CPU of ``arch`` and ``features`` has for ``a`` x ``b`` ->
    ``acc`` (a fallback where the CPU lacks the dot-product instruction), or None."""
    for name in available(arch, features):
        if INTRINSICS[name].takes(a, b, acc):
            return INTRINSICS[name]
    return None
