"""Sampling priors that read the target, and the pre-pack decision of a sketch.

Each prior takes the CPU facts it depends on (vector lanes, vector registers, FMA
latency x pipes from ``Target.fma_latency_pipes``), so no number is one CPU's:
docs/how-it-works.md ("The priors read the target") lists them.

Map: decision helpers (``decide``, ``divisors``) · ``max_innermost`` · ``unroll_steps``
· ``fma_block_floor`` · pre-packing (``apply_prepack``).
"""
from __future__ import annotations

import random
from typing import Any, Callable

from tvmlite.checks import is_int  # decisions come from logs a user may edit
from tvmlite.schedule.schedule import Schedule
from tvmlite.target.target import Target

MAX_INNERMOST = 64         # max_innermost() of AVX-512 float32 (Ansor's fixed value)
MIN_INNERMOST = 16         # max_innermost never goes below this (a reduce axis's inner tile)
PREPACK_PROB = 0.5         # share of sampled constant-input copies made once, outside


def decide(decisions: dict, key: str, valid: Callable[[Any], bool],
           sample: Callable[[], Any]) -> Any:
    """The decision under ``key`` when ``valid``, else a fresh ``sample()`` written back."""
    value = decisions.get(key)
    if not valid(value):
        value = sample()
        decisions[key] = value
    return value


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` in increasing order: the perfect tile sizes of an extent."""
    return [d for d in range(1, n + 1) if n % d == 0]


# -- priors read from the target ----------------------------------------------------------

def max_innermost(lanes: int, registers: int) -> int:
    """Largest innermost tile: an eighth of the vector registers as whole vectors, as the
    templates' ``max_cols`` (64 float32 on AVX-512, 16 on AVX2 and NEON), at least
    ``MIN_INNERMOST``. Ansor fixes 64 for every CPU: on AVX2 a 64-wide vector tile is 8 of
    its 16 registers for one row of accumulators."""
    return max(MIN_INNERMOST, max(1, registers // 8) * lanes)


def unroll_steps(registers: int) -> tuple:
    """auto_unroll_max_step choices: none, then bodies of registers/2, 2x and 16x the
    vector registers (0, 16, 64, 512 on 32 registers; 0, 8, 32, 256 on 16), so an unrolled
    body's live values scale with the register file that has to hold them."""
    return (0, max(1, registers // 2), registers * 2, registers * 16)


def register_block_rows(registers: int, width: int) -> int:
    """Rows of a register block ``width`` vectors wide: its accumulators beside one row of
    the other operand's vectors and a broadcast (14 rows of 2 on 32 registers, 6 on 16)."""
    return max(1, (registers - 1 - width) // width)


def fma_block_floor(target: Target, registers: int) -> int:
    """Fewest accumulator vectors a reduction's register block should have: FMA latency
    x pipes of the target's family (``Target.fma_latency_pipes``, 4 x 2 on AVX-512) so
    independent chains keep every FMA pipe busy, capped at half the registers."""
    latency, pipes = target.fma_latency_pipes
    return max(1, min(latency * pipes, registers // 2))


def _prepack_widths(extent: int, lanes: int, registers: int) -> list[int]:
    """Panel widths a pre-packed copy may take: divisors of its last dimension that are
    whole vectors of the target (else any divisor), at most ``max_innermost``."""
    small = [d for d in divisors(extent) if d <= max_innermost(lanes, registers)] or [extent]
    return [d for d in small if d % lanes == 0] or small


def apply_prepack(s: Schedule, action: Any, decisions: dict, rng: random.Random,
                  target: Target, placed: set) -> None:
    """For a sketch's ``CacheRead`` action of a constant input: decide whether the copy
    of ``action.tensor`` is made once outside the kernel (pre-packed, in panels of the
    decided width; the new stage joins ``placed``) or inside it as before."""
    copy = next(st for st in s.state.stages if st.scope == "local"
                and [t.name for t in st.op.input_tensors] == [action.tensor]
                and action.stage in s.state.consumers(st.name))
    extent = copy.op.shape[-1]
    widths = _prepack_widths(extent, target.vector_lanes(copy.op.dtype), target.vector_registers)
    width = decide(decisions, f"prepack:{action.tensor}",
                   lambda v: v == 0 or (is_int(v, 1, extent) and extent % v == 0),
                   lambda: rng.choice(widths) if rng.random() < PREPACK_PROB else 0)
    if width:
        packed = s.prepack(s.tensor(copy.name), dim=len(copy.op.shape) - 1, factor=width)
        placed.add(packed.name)
