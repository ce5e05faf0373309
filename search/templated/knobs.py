"""Knobs of a config space: the entities a knob chooses among, and how each policy
enumerates them and picks a fallback.

An entity applies itself to a schedule by emitting Steps (SplitEntity splits a loop into
its sizes, ReorderEntity permutes loops, AnnotateEntity unrolls/vectorizes them,
OtherOptionEntity is a plain value). ``space.py`` builds knobs from ``define_*`` calls.

Map: limits and SpaceError · entities · Knob · split enumeration and fallback · argument
checks · ``make_knob``.
"""
from __future__ import annotations

import itertools
import json
import math
import random
from dataclasses import dataclass, field
from typing import Any, Sequence

from tvmlite.checks import check_int, is_int
from tvmlite.errors import TvmliteError
from tvmlite.schedule.schedule import LoopAxis, Schedule
from tvmlite.target.target import Target
from tvmlite.te.tensor import IterVar

MAX_ENTITIES = 100_000          # per knob; more means the policy or max_factor is too loose
MAX_REORDER = 720               # 6! ; longer axis lists get a fixed sample of permutations
MAX_SPLIT_OUTPUTS = 8
MAX_ANNOTATE_AXES = 8
ANNOTATE_POLICIES = ("unroll", "vectorize", "try_unroll_vec")
_ANN_STEP = {"unroll": "unroll", "vec": "vectorize"}
_ANN_CODE = {"none": 0.0, "unroll": 1.0, "vec": 2.0}


class SpaceError(TvmliteError, ValueError):
    """A bad knob definition, or a config that does not belong to its space."""


# -- entities: one choice of one knob ----------------------------------------------------

@dataclass(frozen=True)
class SplitEntity:
    """Split factors outermost first: ``axis == (f0_loop * f1 + f1_loop) * f2 + ...``.
    The outermost factor may cover more than the extent (an imperfect split: guarded)."""
    size: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", tuple(self.size))

    def apply(self, s: Schedule, stage: Any, axis: Any) -> list[LoopAxis]:
        """Split ``axis`` innermost factor first; returns the loops outermost first."""
        handle, loops, rest = s[stage], [], axis
        for f in reversed(self.size[1:]):
            rest, inner = handle.split(rest, factor=f)
            loops.append(inner)
        return [rest] + loops[::-1]

    def value(self) -> list:
        return list(self.size)


@dataclass(frozen=True)
class ReorderEntity:
    """A permutation: loop ``k`` of the new order is ``axes[perm[k]]``."""
    perm: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "perm", tuple(self.perm))

    def apply(self, s: Schedule, stage: Any, axes: Sequence[Any]) -> list:
        if len(axes) != len(self.perm):
            raise SpaceError(f"reorder entity {list(self.perm)} needs {len(self.perm)} axes, "
                             f"got {len(axes)}; pass the axes the knob was defined with")
        order = [axes[i] for i in self.perm]
        s[stage].reorder(*order)
        return order

    def value(self) -> list:
        return list(self.perm)


@dataclass(frozen=True)
class AnnotateEntity:
    """One annotation per axis: "none", "unroll" or "vec" (vectorize)."""
    anns: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "anns", tuple(self.anns))

    def apply(self, s: Schedule, stage: Any, axes: Sequence[Any]) -> None:
        if len(axes) != len(self.anns):
            raise SpaceError(f"annotate entity {list(self.anns)} needs {len(self.anns)} axes, "
                             f"got {len(axes)}; pass the axes the knob was defined with")
        for axis, ann in zip(axes, self.anns):
            if ann != "none":
                s[stage].annotate(axis, _ANN_STEP[ann])

    def value(self) -> list:
        return list(self.anns)


@dataclass(frozen=True)
class OtherOptionEntity:
    """One value of a ``define_knob`` list; the template reads ``.val``."""
    val: Any

    def value(self) -> Any:
        return self.val


# -- knobs ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Knob:
    """A named list of entities. ``definition`` is what produced them (kind, extent,
    policy...): two definitions are the same knob exactly when it is equal."""
    name: str
    kind: str
    definition: tuple
    entities: tuple
    fallback: int
    _index: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index.update({canonical_json(e.value()): i for i, e in enumerate(self.entities)})

    def __len__(self) -> int:
        return len(self.entities)

    def index_of(self, value: Any) -> int:
        """Which entity a JSON value (as ``to_json`` wrote it) names; SpaceError if none."""
        try:
            return self._index[canonical_json(value)]
        except (KeyError, TypeError, ValueError):
            raise SpaceError(f"knob {self.name!r}: {short_repr(value)} is not one of its "
                             f"{len(self)} choices (the record was made by another version "
                             "of the template, or edited)") from None

    def vector(self, i: int) -> list[float]:
        """Numbers a cost model can split on: factors, permutation, annotation codes, or
        the option value (its index when not a number)."""
        e = self.entities[i]
        if isinstance(e, SplitEntity):
            return [float(f) for f in e.size]
        if isinstance(e, ReorderEntity):
            return [float(p) for p in e.perm]
        if isinstance(e, AnnotateEntity):
            return [_ANN_CODE[a] for a in e.anns]
        v = e.val
        num = isinstance(v, (int, float)) and math.isfinite(v)
        return [float(v) if num else float(i)]


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON (sorted keys, no spaces, no NaN): knob values compared
    and stored by their text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def short_repr(v: Any) -> str:
    """``repr(v)`` cut to 60 characters, for error messages about template arguments."""
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def check_space_int(v: Any, what: str, lo: int, hi: int | None = None) -> int:
    """``v`` if it is an int in ``[lo, hi]``, else a SpaceError naming ``what``."""
    return check_int(v, what, lo, hi, error=SpaceError)


# -- split enumeration -----------------------------------------------------------------

def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def _factorizations(n: int, parts: int, out: list, prefix: tuple, name: str) -> None:
    """Every ordered ``parts``-tuple of positive ints whose product is ``n``."""
    if parts == 1:
        out.append(prefix + (n,))
        if len(out) > MAX_ENTITIES:
            raise SpaceError(f"define_split({name!r}): more than {MAX_ENTITIES} "
                             "factorizations; pass max_factor=, policy='power2' or candidates=")
        return
    for d in _divisors(n):
        _factorizations(n // d, parts - 1, out, prefix + (d,), name)


def _power2_splits(extent: int, parts: int) -> list[tuple]:
    """Inner factors are powers of two whose product is at most ``extent``; the outermost
    is the remainder ``ceil(extent / product)``."""
    out: list[tuple] = []

    def go(prefix: tuple, prod: int) -> None:
        if len(prefix) == parts - 1:
            out.append((-(-extent // prod),) + prefix)
            return
        p = 1
        while prod * p <= extent:
            go((p,) + prefix, prod * p)
            p *= 2
    go((), 1)
    return sorted(out)


def _split_entities(d: tuple, name: str) -> list[tuple]:
    _, extent, parts, policy, candidates, max_factor = d
    if policy == "factors":
        sizes: list = []
        _factorizations(extent, parts, sizes, (), name)
    elif policy == "power2":
        sizes = _power2_splits(extent, parts)
    else:
        sizes = list(candidates)
    if max_factor is not None:
        sizes = [z for z in sizes if z[-1] <= max_factor]
    if not sizes:
        raise SpaceError(f"define_split({name!r}): no split of extent {extent} into {parts} "
                         f"parts has an innermost factor <= max_factor={max_factor}; raise it")
    return sizes


def vector_friendly(target: Target) -> tuple[int, ...]:
    """Preferred innermost factors of a fallback split, best first: the target's float32
    lanes (one whole native vector: 16 with AVX-512, 8 with AVX2), then each half down
    to 1. A knob does not know its loop's dtype; float32 is the widest lane count any
    dtype has, so every dtype's vector divides the first choice."""
    n, out = target.vector_lanes("float32"), []
    while n >= 1:
        out.append(n)
        n //= 2
    return tuple(out)


def _split_fallback(sizes: list[tuple], friendly: tuple[int, ...]) -> int:
    """The innermost factor is the first of ``friendly`` (``vector_friendly(target)``)
    that some choice has; among those, the outer factors are as equal as possible (least
    spread of their logarithms); ties go to larger outer factors (more parallel and
    cache-block work outside)."""
    def key(i: int) -> tuple:
        z = sizes[i]
        rank = friendly.index(z[-1]) if z[-1] in friendly else len(friendly)
        logs = [math.log(f) for f in z[:-1]]
        mean = sum(logs) / len(logs)
        spread = round(sum((x - mean) ** 2 for x in logs), 9)
        return (rank, spread, tuple(-f for f in z), i)
    return min(range(len(sizes)), key=key)


def check_candidate_sizes(cands: Any, extent: int, parts: int, name: str) -> tuple:
    """``define_split(policy='candidates')``'s factor lists, checked against the axis's
    ``extent`` and ``parts`` outputs (a SpaceError naming knob ``name`` otherwise)."""
    if not isinstance(cands, (list, tuple)) or not cands:
        raise SpaceError(f"define_split({name!r}, policy='candidates') needs candidates=, a "
                         f"non-empty list of factor lists, e.g. [[-1, 4], [-1, 8]]")
    out = []
    for c in cands:
        if not isinstance(c, (list, tuple)) or len(c) != parts:
            raise SpaceError(f"define_split({name!r}): candidate {short_repr(c)} must be a list of "
                             f"{parts} factors (num_outputs), outermost first")
        inner = [check_space_int(f, f"define_split({name!r}): factor in {short_repr(c)}", 1)
                 for f in c[1:]]
        outer = -(-extent // math.prod(inner))
        if c[0] != -1 and c[0] != outer:
            raise SpaceError(f"define_split({name!r}): candidate {list(c)} does not cover "
                             f"extent {extent}: its outermost factor must be {outer} "
                             f"(ceil({extent} / {math.prod(inner)})) or -1")
        out.append((outer,) + tuple(inner))
    if len(set(out)) != len(out):
        raise SpaceError(f"define_split({name!r}): candidates repeat a split: {out}")
    return tuple(out)


# -- the define_* API -------------------------------------------------------------------

def axis_extent(axis: Any, schedule: Schedule | None, name: str) -> int:
    """The extent ``define_split`` splits: an int, or an axis of ``schedule``."""
    if is_int(axis):
        return check_space_int(axis, f"define_split({name!r}): axis extent", 1)
    if isinstance(axis, IterVar):
        return axis.extent
    if isinstance(axis, (LoopAxis, str)):
        if schedule is None:
            raise SpaceError(f"define_split({name!r}): axis {axis!r} is a loop of a schedule; "
                             "pass schedule=s so its extent can be read (or pass the extent, "
                             "or an IterVar from s[T].op.axis)")
        loop = axis.name if isinstance(axis, LoopAxis) else axis
        stages = [axis.stage] if isinstance(axis, LoopAxis) else \
            [st.name for st in schedule.state.stages]
        found = [it.extent for st in stages for it in schedule.state.stage(st).leaves
                 if it.name == loop]
        if len(found) != 1:
            raise SpaceError(f"define_split({name!r}): {'no' if not found else 'more than one'}"
                             f" loop named {loop!r} in the schedule; pass a LoopAxis "
                             "(s[T].split returns them) or the extent")
        return found[0]
    raise SpaceError(f"define_split({name!r}): axis must be an IterVar, a LoopAxis, a loop "
                     f"name or an int extent, got {short_repr(axis)}")


def check_axes_count(axes: Any, what: str, hi: int) -> int:
    """The number of ``axes`` (a list of 1 to ``hi`` loops), else a SpaceError."""
    if not isinstance(axes, (list, tuple)) or not 1 <= len(axes) <= hi:
        raise SpaceError(f"{what}: axes must be a list of 1 to {hi} loops, got {short_repr(axes)}")
    return len(axes)


def check_knob_name(name: Any) -> None:
    """A SpaceError unless ``name`` is a non-empty string of at most 64 characters."""
    if not isinstance(name, str) or not name or len(name) > 64:
        raise SpaceError(f"a knob name must be a non-empty string of at most 64 characters, "
                         f"got {short_repr(name)}")


def make_knob(name: str, kind: str, d: tuple, friendly: tuple[int, ...]) -> Knob:
    """Enumerate a definition's entities and pick its fallback (a split's innermost
    factor: the first of ``friendly`` that it has)."""
    if kind == "split":
        sizes = _split_entities(d, name)
        return Knob(name, kind, d, tuple(map(SplitEntity, sizes)),
                    _split_fallback(sizes, friendly))
    if kind == "reorder":
        n, cands = d[1], d[3]
        if cands is None:
            if math.factorial(n) <= MAX_REORDER:
                cands = tuple(itertools.permutations(range(n)))
            else:   # identity, then a fixed sample: the same space in every process
                rng, picked = random.Random(n), {tuple(range(n))}
                while len(picked) < MAX_REORDER:
                    picked.add(tuple(rng.sample(range(n), n)))
                cands = (tuple(range(n)),) + tuple(sorted(picked - {tuple(range(n))}))
        ident = tuple(range(n))
        return Knob(name, kind, d, tuple(map(ReorderEntity, cands)),
                    cands.index(ident) if ident in cands else 0)
    if kind == "annotate":
        n, policy = d[1], d[2]
        last = {"unroll": ("none", "unroll"), "vectorize": ("none", "vec"),
                "try_unroll_vec": ("none", "unroll", "vec")}[policy]
        head = ("none", "unroll") if policy != "vectorize" else ("none",)
        anns = [a + (b,) for a in itertools.product(head, repeat=n - 1) for b in last]
        fallback = ("none",) * (n - 1) + ("none" if policy == "unroll" else "vec",)
        return Knob(name, kind, d, tuple(map(AnnotateEntity, anns)), anns.index(fallback))
    values = [json.loads(c) for c in d[1]]
    return Knob(name, kind, d, tuple(map(OtherOptionEntity, values)), 0)
