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

Map: _Definer (the define_* API shared by both) · ConfigSpace · Config. The entities,
knobs and enumeration rules are in ``knobs.py``.
"""
from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from tvmlite.checks import is_int
from tvmlite.schedule.schedule import Schedule
from tvmlite.search.templated.knobs import (
    ANNOTATE_POLICIES,
    MAX_ANNOTATE_AXES,
    MAX_SPLIT_OUTPUTS,
    AnnotateEntity,
    Knob,
    OtherOptionEntity,
    ReorderEntity,
    SpaceError,
    SplitEntity,
    axis_extent,
    canonical_json,
    check_axes_count,
    check_candidate_sizes,
    check_knob_name,
    check_space_int,
    make_knob,
    short_repr,
    vector_friendly,
)
from tvmlite.target.target import Target

__all__ = ["SpaceError", "SplitEntity", "ReorderEntity", "AnnotateEntity",
           "OtherOptionEntity", "Knob", "ConfigSpace", "Config"]

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
        check_knob_name(name)
        extent = axis_extent(axis, schedule, name)
        parts = check_space_int(num_outputs, f"define_split({name!r}): num_outputs", 2,
                                MAX_SPLIT_OUTPUTS)
        if policy not in ("factors", "power2", "candidates"):
            raise SpaceError(f"define_split({name!r}): policy must be 'factors', 'power2' or "
                             f"'candidates', got {short_repr(policy)}")
        if (policy == "candidates") != (candidates is not None):
            raise SpaceError(f"define_split({name!r}): pass candidates= exactly when "
                             "policy='candidates'")
        cands = check_candidate_sizes(candidates, extent, parts, name) \
            if policy == "candidates" else None
        if max_factor is not None:
            check_space_int(max_factor, f"define_split({name!r}): max_factor", 1)
        self._define(name, "split", ("split", extent, parts, policy, cands, max_factor))

    def define_reorder(self, name: str, axes: Sequence[Any], policy: str = "all",
                       candidates: Any = None) -> None:
        """Orders of ``axes``: "all" permutations (at most 720: beyond 6 axes a fixed
        sample, identity first) or "candidates" (lists of indices into ``axes``)."""
        check_knob_name(name)
        n = check_axes_count(axes, f"define_reorder({name!r})", 64)
        cands: tuple[tuple[int, ...], ...] | None
        if policy == "all" and candidates is None:
            cands = None
        elif policy == "candidates" and isinstance(candidates, (list, tuple)) and candidates:
            perms: list[tuple[int, ...]] = []
            for c in candidates:
                if not isinstance(c, (list, tuple)) or sorted(c) != list(range(n)):
                    raise SpaceError(f"define_reorder({name!r}): candidate {short_repr(c)} must "
                                     f"be a permutation of 0..{n - 1} (indices into axes)")
                perms.append(tuple(c))
            if len(set(perms)) != len(perms):
                raise SpaceError(f"define_reorder({name!r}): candidates repeat a permutation")
            cands = tuple(perms)
        else:
            raise SpaceError(f"define_reorder({name!r}): use policy='all', or "
                             "policy='candidates' with candidates= a non-empty list of "
                             "permutations")
        self._define(name, "reorder", ("reorder", n, policy, cands))

    def define_annotate(self, name: str, axes: Sequence[Any], policy: str) -> None:
        """Per-axis annotations: "unroll" (none|unroll each), "vectorize" (none|vec on the
        innermost axis), "try_unroll_vec" (none|unroll each, and vec on the innermost)."""
        check_knob_name(name)
        n = check_axes_count(axes, f"define_annotate({name!r})", MAX_ANNOTATE_AXES)
        if policy not in ANNOTATE_POLICIES:
            raise SpaceError(f"define_annotate({name!r}): policy must be one of "
                             f"{ANNOTATE_POLICIES}, got {short_repr(policy)}")
        self._define(name, "annotate", ("annotate", n, policy))

    def define_knob(self, name: str, values: Sequence[Any]) -> None:
        """A list of JSON-able values; the template reads ``cfg[name].val``. The first is
        the fallback."""
        check_knob_name(name)
        if not isinstance(values, (list, tuple)) or not values:
            raise SpaceError(f"define_knob({name!r}): values must be a non-empty list, got "
                             f"{short_repr(values)}")
        try:
            canon = [canonical_json(v) for v in values]
        except (TypeError, ValueError):
            raise SpaceError(f"define_knob({name!r}): values must be plain JSON (numbers, "
                             f"strings, bools, None, lists), got {short_repr(values)}") from None
        if len(set(canon)) != len(canon):
            raise SpaceError(f"define_knob({name!r}): values repeat: {short_repr(values)}")
        self._define(name, "other", ("other", tuple(canon)))


# -- the space and its points ---------------------------------------------------------

class ConfigSpace(_Definer):
    """Knob definitions, collected by running a template once with this object as
    ``cfg``. Knob order is definition order; in a config's index the first knob varies
    fastest. ``target`` (default: this machine) is what the space is for: templates size
    their register blocks from ``cfg.target``, so a space is the same on machines of the
    same vector width and register count, and differs between others."""

    def __init__(self, target: Target | None = None, constants: tuple = ()) -> None:
        if target is not None and not isinstance(target, Target):
            raise SpaceError(f"ConfigSpace(target=...) must be a tvmlite.target.Target, got "
                             f"{type(target).__name__}")
        self.target = target if target is not None else Target.host()
        # inputs the task declares constant: a template may pre-pack them (s.prepack)
        self.constants = tuple(constants)
        self._friendly = vector_friendly(self.target)
        self._knobs: dict[str, Knob] = {}
        self._sizes: tuple = ()          # entities per knob, in knob order

    def _define(self, name: str, kind: str, definition: tuple) -> None:
        old = self._knobs.get(name)
        if old is None:
            self._knobs[name] = make_knob(name, kind, definition, self._friendly)
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
            raise SpaceError(f"no knob named {short_repr(name)}: define it (cfg.define_...) before "
                             f"reading it; knobs are {list(self._knobs)}") from None

    def get(self, index: int) -> "Config":
        """The config at ``index`` in ``range(len(self))``."""
        check_space_int(index, "ConfigSpace.get: index", 0, len(self) - 1)
        choices = []
        for n in self._sizes:
            index, c = divmod(index, n)
            choices.append(c)
        return Config(self, tuple(choices))

    def from_choices(self, choices: Sequence[int]) -> "Config":
        """The config choosing entity ``choices[k]`` of the k-th knob."""
        sizes = self._sizes
        if (not isinstance(choices, (list, tuple)) or len(choices) != len(sizes) or not all(
                is_int(c, 0, n - 1) for c, n in zip(choices, sizes))):
            raise SpaceError(f"choices must be one entity index per knob, within "
                             f"{list(sizes)}, got {short_repr(choices)}")
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

    @property
    def target(self) -> Target:
        """The target of the space: what a template sizes its blocks for."""
        return self.space.target

    @property
    def constants(self) -> tuple:
        """Inputs the task declares constant (``templated.create(..., constants=)``)."""
        return self.space.constants

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
                             f"got {short_repr(d)}")
        names = list(space._knobs)
        if set(d["knobs"]) != set(names):
            raise SpaceError(f"config knobs {sorted(map(str, d['knobs']))[:8]} differ from the "
                             f"space's {names[:8]} (another version of the template?)")
        cfg = cls(space, tuple(space._knobs[n].index_of(d["knobs"][n]) for n in names))
        if d["index"] != cfg.index:
            raise SpaceError(f"config index {short_repr(d['index'])} does not match its knob "
                             f"values (index {cfg.index} in this space): the space has changed")
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
        knobs = ", ".join(f"{k}={short_repr(v)}" for k, v in self.to_json()["knobs"].items())
        tag = ", fallback" if self.is_fallback else ""
        return f"Config(#{self.index}{tag}: {knobs})"
