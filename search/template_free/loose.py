"""Tiles of a symbolic axis: the factors a dynamic task's policies split it by.

A schedule tuned at one size of a symbolic ``M`` is deployed for a range of sizes, so
the tiles of ``M`` should not be chosen for the size tuned at alone (DietCode's point:
tiles of a dynamic axis are shape-independent and the edge is guarded; Ansor's perfect
tiles fit one size). ``realize._apply_tile`` draws the tiles of the axes
``sketch.symbolic_axes`` names with ``sample_loose_factors``, and
``evolution.mutate_loose_tile`` moves within ``loose_choices``.
"""
from __future__ import annotations

import math
import random

from tvmlite.search.template_free.priors import MAX_INNERMOST, divisors

__all__ = ["LOOSE_COVER", "loose_options", "loose_choices", "sample_loose_factors"]

# a symbolic axis's tile covers less than this many times the size: the outer loop runs at
# least once and at most half a tile is guarded off. At 4 (a variant chosen at 7 could
# have a tile streaming the other operand once up to 27), GMM tunings found kernels at
# M <= 7 half as fast: wide tiles at tiny sizes leave cores idle
LOOSE_COVER = 2


def loose_options(registers: int, innermost: bool = True) -> list[int]:
    """Tile factors of an axis whose size is symbolic in the deployed kernel: 2^a and
    3 * 2^a up to 4096 and, for the innermost level (a register block's rows), every
    count up to half the vector registers. They depend on the target only, never on the
    size tuned at: divisors of the tuned size alone (Ansor's perfect tiles) fit it
    exactly -- at 21, 3 x 7; at 53, a prime, only 1 or 53 -- and pay a remainder at
    every other size the kernel serves (DietCode's point: tiles of a dynamic axis are
    shape-independent, the edge is guarded). Outer levels only count blocks, where two
    per octave suffice: with every count there too, the best kernels found at the large
    sizes of GMM tunings ran slower (the space grew, the budget not)."""
    small = set(range(1, max(2, registers // 2) + 1)) if innermost else set()
    return sorted(small | {b << a for b in (1, 3) for a in range(13) if (b << a) <= 4096})


def loose_choices(extent: int, others: int, innermost: bool, registers: int,
                  limit: int = MAX_INNERMOST) -> list[int]:
    """Factors one level of a symbolic axis's tile may take when the other levels
    multiply to ``others``: ``loose_options`` and the perfect tiles of the size tuned at
    (so the space holds Ansor's too), the whole tile below ``LOOSE_COVER`` times
    ``extent`` (blocks past the size are skipped); the innermost at most ``limit``."""
    room = (LOOSE_COVER * extent - 1) // others
    fit = {d for d in loose_options(registers, innermost) if d <= room}
    if extent % others == 0:
        fit |= set(divisors(extent // others))
    return sorted(d for d in fit if not innermost or d <= limit) or [1]


def sample_loose_factors(extent: int, parts: int, rng: random.Random, registers: int,
                         max_innermost: int = MAX_INNERMOST, multiple_of: int = 1) -> list[int]:
    """Inner factors (outermost first) of a symbolic axis at ``extent``, each level from
    ``loose_choices``, innermost first (a multiple of ``multiple_of`` when one fits)."""
    inner: list[int] = []
    for level in range(parts - 1):
        fit = loose_choices(extent, math.prod(inner or [1]), level == 0, registers,
                            max_innermost)
        if level == 0:
            fit = [d for d in fit if d % multiple_of == 0] or fit
        inner.append(rng.choice(fit))
    return inner[::-1]
