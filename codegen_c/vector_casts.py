"""How a vector conversion is written so that GCC emits vector instructions for it.

GCC 12 writes some ``__builtin_convertvector`` conversions one lane at a time on AVX2
and NEON; ``vector_cast_steps`` routes them through intermediate dtypes it converts in
one or two instructions each, and ``held_in_register`` says when a 64-bit source vector
must first be put in a register (the ``tvmlite_inreg`` helper of ``preamble``). The
values are those of the direct conversion (each docstring says why).
"""
from __future__ import annotations

from tvmlite.ir.dtypes import (
    FLOAT_DTYPES,
    INT_DTYPES,
    ITEMSIZE,
)

_HALF_INT = {8: "int32", 4: "int16"}   # the signed integer of half an item size's bits


def vector_cast_steps(src: str, dst: str) -> list[str]:
    """The dtypes a vector conversion ``src -> dst`` goes through, ``dst`` last. GCC 12
    writes some conversions lane by lane on AVX2 and NEON, and each of their steps as one
    instruction or two:

    - an integer narrowed to a quarter or less of its width (int32 -> uint8, a
      requantize's store), or a float to an integer narrower than 32 bits, halves its
      width one step at a time (a float first becomes int32): some 35 instructions for
      int32x8 -> uint8x8, most of a quantized ResNet-50's epilogues on a Zen 3, against
      one pack per halving. Truncating in steps keeps the same low bits.
    - an integer narrower than 32 bits becomes a float through int32 (``vpmovzxbd`` and
      ``vcvtdq2ps``, not eight scalar converts); int32 holds every such value exactly.
    """
    steps = [dst]
    if dst in INT_DTYPES and src != "bool" and ITEMSIZE[dst] < 4 and (
            src in FLOAT_DTYPES or ITEMSIZE[src] > 2 * ITEMSIZE[dst]):
        width = 4 if src in FLOAT_DTYPES else ITEMSIZE[src]
        chain = ["int32"] if src in FLOAT_DTYPES else []
        while width > 2 * ITEMSIZE[dst]:
            chain.append(_HALF_INT[width])
            width //= 2
        steps = chain + steps
    elif dst in FLOAT_DTYPES and src in INT_DTYPES and ITEMSIZE[src] < 4:
        steps = ["int32", dst]
    return steps


def held_in_register(src: str, dst: str, lanes: int) -> bool:
    """A widening conversion whose source is a 64- or 128-bit vector (uint8x8, int16x4,
    uint8x16): GCC 12 on x86 converts such a vector lane by lane when it comes straight
    from memory (16 scalar loads and inserts for a uint8x8 -> int32x8, the taps of a
    quantized depthwise conv on Zen 3; 384 byte loads in a uint8x16 -> int32x16 one on
    Zen 4, 1.1 -> 0.17 ms) but with one ``vpmovzxbd`` once it is in a vector register,
    which the ``tvmlite_inreg`` helper asks for (an empty asm where there is SSE2:
    elsewhere the identity)."""
    return (src in INT_DTYPES and lanes * ITEMSIZE[src] in (8, 16)
            and ITEMSIZE[dst] > ITEMSIZE[src])
