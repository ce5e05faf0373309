"""Config spaces and configs: the knobs of a schedule template, and one point among them.

A template is ``fn(cfg, *args) -> (s, tensors)``. Run once with a ``ConfigSpace`` as
``cfg``, its ``define_*`` calls collect the knobs, and ``cfg[name]`` gives the *fallback*
entity so the template runs to its end unchanged. Run with a ``Config``, the same calls
only check that the knob exists and is defined the same way (a template whose knobs
depend on other knobs' values is caught here), and ``cfg[name]`` is that config's choice.
Every entity applies itself by emitting Steps, so a tuned config is replayed from the
Steps in its record, never from the template.

Knobs must be defined unconditionally: a knob defined only on some branch is missing
from the space collected with the fallback config.

Map: SpaceError · entities (Split/Reorder/Annotate/OtherOption) · Knob · enumeration and
fallback rules per policy · _Definer (the define_* API shared by both) · ConfigSpace ·
Config.
"""
from __future__ import annotations

import abc
import itertools
import json
import math
import random
from dataclasses import dataclass, field
from typing import Any, Sequence

from tvmlite.schedule import LoopAxis, Schedule
from tvmlite.te import IterVar

__all__ = ["SpaceError", "SplitEntity", "ReorderEntity", "AnnotateEntity",
           "OtherOptionEntity", "Knob", "ConfigSpace", "Config"]

MAX_ENTITIES = 100_000          # per knob; more means the policy or max_factor is too loose
MAX_REORDER = 720               # 6! ; longer axis lists get a fixed sample of permutations
MAX_SPLIT_OUTPUTS = 8
MAX_ANNOTATE_AXES = 8
VECTOR_FRIENDLY = (16, 8, 4, 2, 1)   # preferred innermost factors of the fallback split
ANNOTATE_POLICIES = ("unroll", "vectorize", "try_unroll_vec")
_ANN_STEP = {"unroll": "unroll", "vec": "vectorize"}
_ANN_CODE = {"none": 0.0, "unroll": 1.0, "vec": 2.0}


class SpaceError(ValueError):
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
        self._index.update({_canon(e.value()): i for i, e in enumerate(self.entities)})

    def __len__(self) -> int:
        return len(self.entities)

    def index_of(self, value: Any) -> int:
        """Which entity a JSON value (as ``to_json`` wrote it) names; SpaceError if none."""
        try:
            return self._index[_canon(value)]
        except (KeyError, TypeError, ValueError):
            raise SpaceError(f"knob {self.name!r}: {_short(value)} is not one of its "
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


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _int_arg(v: Any, what: str, lo: int, hi: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        bound = f"an int >= {lo}" if hi is None else f"an int in [{lo}, {hi}]"
        raise SpaceError(f"{what} must be {bound}, got {_short(v)}")
    return v


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


def _split_fallback(sizes: list[tuple]) -> int:
    """The innermost factor is the first of VECTOR_FRIENDLY (16, 8, 4, 2, 1: 16 float32
    lanes fill one AVX-512 or two AVX2 vectors) that some choice has; among those, the
    outer factors are as equal as possible (least spread of their logarithms); ties go to
    larger outer factors (more parallel and cache-block work outside)."""
    def key(i: int) -> tuple:
        z = sizes[i]
        rank = VECTOR_FRIENDLY.index(z[-1]) if z[-1] in VECTOR_FRIENDLY else len(VECTOR_FRIENDLY)
        logs = [math.log(f) for f in z[:-1]]
        mean = sum(logs) / len(logs)
        spread = round(sum((x - mean) ** 2 for x in logs), 9)
        return (rank, spread, tuple(-f for f in z), i)
    return min(range(len(sizes)), key=key)


def _check_candidate_sizes(cands: Any, extent: int, parts: int, name: str) -> tuple:
    if not isinstance(cands, (list, tuple)) or not cands:
        raise SpaceError(f"define_split({name!r}, policy='candidates') needs candidates=, a "
                         f"non-empty list of factor lists, e.g. [[-1, 4], [-1, 8]]")
    out = []
    for c in cands:
        if not isinstance(c, (list, tuple)) or len(c) != parts:
            raise SpaceError(f"define_split({name!r}): candidate {_short(c)} must be a list of "
                             f"{parts} factors (num_outputs), outermost first")
        inner = [_int_arg(f, f"define_split({name!r}): factor in {_short(c)}", 1) for f in c[1:]]
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

def _extent(axis: Any, schedule: Schedule | None, name: str) -> int:
    if isinstance(axis, int) and not isinstance(axis, bool):
        return _int_arg(axis, f"define_split({name!r}): axis extent", 1)
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
                     f"name or an int extent, got {_short(axis)}")


def _axes_count(axes: Any, what: str, hi: int) -> int:
    if not isinstance(axes, (list, tuple)) or not 1 <= len(axes) <= hi:
        raise SpaceError(f"{what}: axes must be a list of 1 to {hi} loops, got {_short(axes)}")
    return len(axes)


class _Definer(abc.ABC):
    """The ``define_*`` calls of a template. Each turns its arguments into a definition
    tuple; ``_define`` (space: add the knob; config: check it) does the rest."""

    @abc.abstractmethod
    def _define(self, name: str, kind: str, definition: tuple) -> None:
        """Add the knob (a space) or check it is the same (a config)."""

    def define_split(self, name: str, axis: Any, num_outputs: int = 2, policy: str = "factors",
                     candidates: Any = None, max_factor: int | None = None, *,
                     schedule: Schedule | None = None) -> None:
        """Split factors of ``axis`` (an IterVar, LoopAxis or loop name with ``schedule``,
        or an int extent) into ``num_outputs`` parts. Policies: "factors" (exact
        factorizations), "power2" (power-of-two inner factors, remainder outermost),
        "candidates" (explicit factor lists, ``-1`` outermost = the remainder).
        ``max_factor`` bounds the innermost factor."""
        _check_name(name)
        extent = _extent(axis, schedule, name)
        parts = _int_arg(num_outputs, f"define_split({name!r}): num_outputs", 2,
                         MAX_SPLIT_OUTPUTS)
        if policy not in ("factors", "power2", "candidates"):
            raise SpaceError(f"define_split({name!r}): policy must be 'factors', 'power2' or "
                             f"'candidates', got {_short(policy)}")
        if (policy == "candidates") != (candidates is not None):
            raise SpaceError(f"define_split({name!r}): pass candidates= exactly when "
                             "policy='candidates'")
        cands = _check_candidate_sizes(candidates, extent, parts, name) \
            if policy == "candidates" else None
        if max_factor is not None:
            _int_arg(max_factor, f"define_split({name!r}): max_factor", 1)
        self._define(name, "split", ("split", extent, parts, policy, cands, max_factor))

    def define_reorder(self, name: str, axes: Sequence[Any], policy: str = "all",
                       candidates: Any = None) -> None:
        """Orders of ``axes``: "all" permutations (at most 720: beyond 6 axes a fixed
        sample, identity first) or "candidates" (lists of indices into ``axes``)."""
        _check_name(name)
        n = _axes_count(axes, f"define_reorder({name!r})", 64)
        if policy == "all" and candidates is None:
            cands = None
        elif policy == "candidates" and isinstance(candidates, (list, tuple)) and candidates:
            cands = []
            for c in candidates:
                if not isinstance(c, (list, tuple)) or sorted(c) != list(range(n)):
                    raise SpaceError(f"define_reorder({name!r}): candidate {_short(c)} must "
                                     f"be a permutation of 0..{n - 1} (indices into axes)")
                cands.append(tuple(c))
            if len(set(cands)) != len(cands):
                raise SpaceError(f"define_reorder({name!r}): candidates repeat a permutation")
            cands = tuple(cands)
        else:
            raise SpaceError(f"define_reorder({name!r}): use policy='all', or "
                             "policy='candidates' with candidates= a non-empty list of "
                             "permutations")
        self._define(name, "reorder", ("reorder", n, policy, cands))

    def define_annotate(self, name: str, axes: Sequence[Any], policy: str) -> None:
        """Per-axis annotations: "unroll" (none|unroll each), "vectorize" (none|vec on the
        innermost axis), "try_unroll_vec" (none|unroll each, and vec on the innermost)."""
        _check_name(name)
        n = _axes_count(axes, f"define_annotate({name!r})", MAX_ANNOTATE_AXES)
        if policy not in ANNOTATE_POLICIES:
            raise SpaceError(f"define_annotate({name!r}): policy must be one of "
                             f"{ANNOTATE_POLICIES}, got {_short(policy)}")
        self._define(name, "annotate", ("annotate", n, policy))

    def define_knob(self, name: str, values: Sequence[Any]) -> None:
        """A list of JSON-able values; the template reads ``cfg[name].val``. The first is
        the fallback."""
        _check_name(name)
        if not isinstance(values, (list, tuple)) or not values:
            raise SpaceError(f"define_knob({name!r}): values must be a non-empty list, got "
                             f"{_short(values)}")
        try:
            canon = [_canon(v) for v in values]
        except (TypeError, ValueError):
            raise SpaceError(f"define_knob({name!r}): values must be plain JSON (numbers, "
                             f"strings, bools, None, lists), got {_short(values)}") from None
        if len(set(canon)) != len(canon):
            raise SpaceError(f"define_knob({name!r}): values repeat: {_short(values)}")
        self._define(name, "other", ("other", tuple(canon)))


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not name or len(name) > 64:
        raise SpaceError(f"a knob name must be a non-empty string of at most 64 characters, "
                         f"got {_short(name)}")


def _make_knob(name: str, kind: str, d: tuple) -> Knob:
    """Enumerate a definition's entities and pick its fallback."""
    if kind == "split":
        sizes = _split_entities(d, name)
        return Knob(name, kind, d, tuple(map(SplitEntity, sizes)), _split_fallback(sizes))
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


# -- the space and its points ---------------------------------------------------------

class ConfigSpace(_Definer):
    """Knob definitions, collected by running a template once with this object as
    ``cfg``. Knob order is definition order; in a config's index the first knob varies
    fastest."""

    def __init__(self) -> None:
        self._knobs: dict[str, Knob] = {}
        self._sizes: tuple = ()          # entities per knob, in knob order

    def _define(self, name: str, kind: str, definition: tuple) -> None:
        old = self._knobs.get(name)
        if old is None:
            self._knobs[name] = _make_knob(name, kind, definition)
            self._sizes += (len(self._knobs[name]),)
        elif old.definition != definition:
            raise SpaceError(f"knob {name!r} is defined twice, differently: {old.definition} "
                             f"then {definition}; give each knob its own name")

    @property
    def knobs(self) -> dict[str, Knob]:
        return dict(self._knobs)

    def __len__(self) -> int:
        return math.prod(self._sizes)

    def __getitem__(self, name: str) -> Any:
        """The fallback entity, so a template runs unchanged while its space is collected."""
        knob = self._knob(name)
        return knob.entities[knob.fallback]

    def _knob(self, name: str) -> Knob:
        try:
            return self._knobs[name]
        except (KeyError, TypeError):
            raise SpaceError(f"no knob named {_short(name)}: define it (cfg.define_...) before "
                             f"reading it; knobs are {list(self._knobs)}") from None

    def get(self, index: int) -> "Config":
        """The config at ``index`` in ``range(len(self))``."""
        _int_arg(index, "ConfigSpace.get: index", 0, len(self) - 1)
        choices = []
        for n in self._sizes:
            index, c = divmod(index, n)
            choices.append(c)
        return Config(self, tuple(choices))

    def from_choices(self, choices: Sequence[int]) -> "Config":
        """The config choosing entity ``choices[k]`` of the k-th knob."""
        sizes = self._sizes
        if (not isinstance(choices, (list, tuple)) or len(choices) != len(sizes) or not all(
                isinstance(c, int) and not isinstance(c, bool) and 0 <= c < n
                for c, n in zip(choices, sizes))):
            raise SpaceError(f"choices must be one entity index per knob, within "
                             f"{list(sizes)}, got {_short(choices)}")
        return Config(self, tuple(choices))

    def random_config(self, rng: Any) -> "Config":
        """A uniformly random config; ``rng`` is a random.Random or a numpy Generator."""
        if hasattr(rng, "randrange"):
            pick = rng.randrange
        elif hasattr(rng, "integers"):
            def pick(n: int) -> int:
                return int(rng.integers(n))
        else:
            raise SpaceError(f"random_config(rng=...) needs a random.Random or a numpy "
                             f"Generator, got {type(rng).__name__}")
        return Config(self, tuple(pick(n) for n in self._sizes))

    def fallback(self) -> "Config":
        """Every knob at its fallback: balanced vector-friendly splits (see
        ``_split_fallback``), identity reorders, vectorized innermost axes (no unroll)
        for annotate policies that allow it, and the first value of ``define_knob``."""
        return Config(self, tuple(k.fallback for k in self._knobs.values()), is_fallback=True)

    def __repr__(self) -> str:
        knobs = ", ".join(f"{k.name}: {len(k)}" for k in self._knobs.values())
        return f"ConfigSpace({len(self)} configs; {knobs})"


@dataclass(frozen=True, eq=False)
class Config(_Definer):
    """One point of a space: an entity per knob. Passed to a template as ``cfg``, its
    ``define_*`` calls only check that the knob is in the space, defined the same way."""
    space: ConfigSpace
    choices: tuple
    is_fallback: bool = False
    index: int = field(init=False)

    def __post_init__(self) -> None:
        index, stride = 0, 1
        for c, n in zip(self.choices, self.space._sizes):
            index += c * stride
            stride *= n
        object.__setattr__(self, "index", index)

    def _define(self, name: str, kind: str, definition: tuple) -> None:
        knob = self.space._knob(name)
        if knob.definition != definition:
            raise SpaceError(f"knob {name!r} is defined as {definition}, but the space has "
                             f"{knob.definition}: a template must define the same knobs for "
                             "every config (knob definitions may not depend on knob values)")

    def __getitem__(self, name: str) -> Any:
        knob = self.space._knob(name)
        return knob.entities[self.choices[list(self.space._knobs).index(name)]]

    def to_json(self) -> dict:
        """``{"index": i, "knobs": {name: value}}``: stored in records as decisions["config"]."""
        return {"index": self.index,
                "knobs": {k.name: k.entities[c].value()
                          for c, k in zip(self.choices, self.space._knobs.values())}}

    @classmethod
    def from_json(cls, space: ConfigSpace, d: Any) -> "Config":
        """Validate ``to_json`` output against ``space``; SpaceError says what differs."""
        if not isinstance(d, dict) or set(d) != {"index", "knobs"} or \
                not isinstance(d["knobs"], dict):
            raise SpaceError(f"a config must be {{'index': int, 'knobs': {{name: value}}}}, "
                             f"got {_short(d)}")
        names = list(space._knobs)
        if set(d["knobs"]) != set(names):
            raise SpaceError(f"config knobs {sorted(map(str, d['knobs']))[:8]} differ from the "
                             f"space's {names[:8]} (another version of the template?)")
        cfg = cls(space, tuple(space._knobs[n].index_of(d["knobs"][n]) for n in names))
        if d["index"] != cfg.index:
            raise SpaceError(f"config index {_short(d['index'])} does not match its knob values "
                             f"(index {cfg.index} in this space): the space has changed")
        return cfg

    def to_vector(self) -> list[float]:
        """The numeric knob values, for tuners' features."""
        out: list[float] = []
        for c, knob in zip(self.choices, self.space._knobs.values()):
            out.extend(knob.vector(c))
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and other.space is self.space and \
            other.choices == self.choices

    def __hash__(self) -> int:
        return hash((id(self.space), self.choices))

    def __repr__(self) -> str:
        knobs = ", ".join(f"{k}={_short(v)}" for k, v in self.to_json()["knobs"].items())
        tag = ", fallback" if self.is_fallback else ""
        return f"Config(#{self.index}{tag}: {knobs})"
