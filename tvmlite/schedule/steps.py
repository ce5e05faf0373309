"""Schedule Steps: the serializable history that *is* a schedule.

Each Step is a frozen dataclass that (1) applies itself to a loop State,
``apply(state) -> (state, result)``, (2) round-trips through JSON with named keys,
(3) prints as the Python call that made it. Adding a step means adding those three
and a test. Every name read from JSON is checked against a strict identifier pattern
and every number against a range, so a hostile log cannot smuggle text into C.

Map: validation helpers · loop steps (split, fuse, reorder, annotate, pragma; tensorize is
``schedule.tensorize``, pre-packing ``schedule.prepack``) · placement steps
(compute_at/inline/root). The stage-creating steps (cache_write, cache_read, rfactor)
are ``schedule.stage_steps``; the JSON registry is ``schedule.step_json``.
"""
from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from tvmlite.checks import check_int
from tvmlite.ir.names import unique_name
from tvmlite.ir.symbolic import ceil_div, ext_prod, is_static
from tvmlite.schedule.state import (
    ANNOTATIONS,
    Fuse,
    Iter,
    ScheduleError,
    Split,
    Stage,
    State,
)
from tvmlite.te.tensor import IDENT

MAX_FACTOR = 1 << 30
PRAGMAS = ("auto_unroll_max_step",)


def check_ident(value: Any, what: str) -> str:
    """``value`` if it is an identifier (a Step's names, from code or a log), else a
    ScheduleError naming ``what``."""
    if not isinstance(value, str) or not IDENT.match(value):
        raise ScheduleError(f"{what} must be an identifier, got {value!r}")
    return value


def check_step_int(value: Any, what: str, lo: int = 1, hi: int = MAX_FACTOR) -> int:
    """``value`` if it is an int in ``[lo, hi]`` (a Step's factors and indices), else a
    ScheduleError naming ``what``."""
    return check_int(value, what, lo, hi, error=ScheduleError)


class Step:
    kind: ClassVar[str]

    @abstractmethod
    def apply(self, state: State) -> tuple[State, Any]:
        """The state after this step, and what the step made (the new loops' names, the
        new stage's name, or None): every concrete step defines it."""

    def to_json(self) -> dict:
        d: dict = {"kind": self.kind}
        for f in fields(self):  # type: ignore[arg-type]  # every concrete Step is a dataclass
            v = getattr(self, f.name)
            d[f.name] = list(v) if isinstance(v, tuple) else v
        return d

    def _call(self, method: str, *args: str) -> str:
        return f's["{self.stage}"].{method}({", ".join(args)})'  # type: ignore[attr-defined]


def _retarget(state: State, stage: str, old: tuple, new: str) -> State:
    """Stages computed at a loop that was split or fused follow it to ``new`` (the inner
    half of a split, the fused loop), as in Ansor: the region there is never larger."""
    for st in state.stages:
        if isinstance(st.attach, tuple) and st.attach[0] == stage and st.attach[1] in old:
            state = state.with_stage(replace(st, attach=(stage, new)))
    return state


def _loop_names(stage: Stage, names: tuple, what: str) -> None:
    for n in names:
        stage.leaf(n)
    if len(set(names)) != len(names):
        raise ScheduleError(f"stage {stage.name}: {what} names a loop twice: {list(names)}")


# -- loop steps ----------------------------------------------------------------------

@dataclass(frozen=True)
class SplitStep(Step):
    """``iter == outer * factor + inner``; an imperfect split gets a guard when lowered."""
    kind: ClassVar[str] = "split"
    stage: str
    iter: str
    factor: int | None = None
    nparts: int | None = None

    def apply(self, state: State):
        st = state.stage(self.stage)
        it = st.leaf(self.iter)
        if (self.factor is None) == (self.nparts is None):
            raise ScheduleError(f"stage {self.stage}: split of {self.iter} needs exactly one "
                                f"of factor= or nparts=")
        value = self.factor if self.factor is not None else self.nparts
        check_int(value, f"stage {self.stage}: split of {self.iter}: factor/nparts", 1,
                  error=ScheduleError)
        if it.annotation != "none":
            raise ScheduleError(f"stage {self.stage}: cannot split {self.iter}, it is already "
                                f"annotated {it.annotation}; split first, then annotate")
        if self.factor is not None:
            inner_ext, outer_ext = self.factor, ceil_div(it.extent, self.factor)
        else:
            outer_ext, inner_ext = self.nparts, ceil_div(it.extent, self.nparts)  # type: ignore
        taken = st.all_iter_names()
        outer = unique_name(f"{self.iter}_outer", taken)
        inner = unique_name(f"{self.iter}_inner", taken | {outer})
        i = st.leaf_index(self.iter)
        leaves = st.leaves[:i] + (Iter(outer, outer_ext, it.kind),
                                  Iter(inner, inner_ext, it.kind)) + st.leaves[i + 1:]
        rel = Split(self.iter, outer, inner, self.factor, self.nparts)
        state = state.with_stage(replace(st, leaves=leaves, relations=st.relations + (rel,)))
        return _retarget(state, self.stage, (self.iter,), inner), (outer, inner)

    def __str__(self) -> str:
        arg = f"factor={self.factor}" if self.factor is not None else f"nparts={self.nparts}"
        return self._call("split", f'"{self.iter}"', arg)


@dataclass(frozen=True)
class FuseStep(Step):
    """Fuse consecutive loops into one: ``fused == (a * extent_b + b)``."""
    kind: ClassVar[str] = "fuse"
    stage: str
    iters: tuple

    def apply(self, state: State):
        st = state.stage(self.stage)
        _loop_names(st, self.iters, "fuse")
        if len(self.iters) < 2:
            raise ScheduleError(f"stage {self.stage}: fuse needs at least two loops")
        pos = [st.leaf_index(n) for n in self.iters]
        if pos != list(range(pos[0], pos[0] + len(pos))):
            raise ScheduleError(f"stage {self.stage}: fuse needs consecutive loops in loop order, "
                                f"got {list(self.iters)} in {[i.name for i in st.leaves]}")
        its = [st.leaves[p] for p in pos]
        if len({it.kind for it in its}) != 1:
            raise ScheduleError(f"stage {self.stage}: cannot fuse spatial and reduce loops "
                                f"{list(self.iters)}")
        if any(it.annotation != "none" for it in its):
            raise ScheduleError(f"stage {self.stage}: annotate after fusing, not before")
        name = unique_name("_".join(self.iters) + "_fused", st.all_iter_names())
        fused = Iter(name, ext_prod(it.extent for it in its), its[0].kind)
        leaves = st.leaves[:pos[0]] + (fused,) + st.leaves[pos[-1] + 1:]
        rel = Fuse(tuple(self.iters), name)
        state = state.with_stage(replace(st, leaves=leaves, relations=st.relations + (rel,)))
        return _retarget(state, self.stage, tuple(self.iters), name), name

    def __str__(self) -> str:
        return self._call("fuse", *(f'"{n}"' for n in self.iters))


@dataclass(frozen=True)
class ReorderStep(Step):
    """Put the named loops in this order, in the positions they occupy now."""
    kind: ClassVar[str] = "reorder"
    stage: str
    order: tuple

    def apply(self, state: State):
        st = state.stage(self.stage)
        _loop_names(st, self.order, "reorder")
        slots = sorted(st.leaf_index(n) for n in self.order)
        leaves = list(st.leaves)
        for slot, n in zip(slots, self.order):
            leaves[slot] = st.leaf(n)
        return state.with_stage(replace(st, leaves=tuple(leaves))), None

    def __str__(self) -> str:
        return self._call("reorder", *(f'"{n}"' for n in self.order))


@dataclass(frozen=True)
class AnnotateStep(Step):
    """Mark a loop parallel (OpenMP), vectorize (explicit SIMD) or unroll (in the IR)."""
    kind: ClassVar[str] = "annotate"
    stage: str
    iter: str
    annotation: str

    def apply(self, state: State):
        st = state.stage(self.stage)
        it = st.leaf(self.iter)
        if self.annotation not in ANNOTATIONS:
            raise ScheduleError(f"stage {self.stage}: unknown annotation {self.annotation!r} "
                                f"for {self.iter}; use one of {ANNOTATIONS}")
        if it.kind == "reduce" and self.annotation in ("vectorize", "parallel"):
            raise ScheduleError(f"stage {self.stage}: cannot {self.annotation} the reduce axis "
                                f"{self.iter}: its iterations accumulate into the same element "
                                f"(use rfactor to parallelize a reduction)")
        if self.annotation in ("vectorize", "unroll") and not is_static(it.extent) \
                and self.stage in state.outputs:  # other stages: checked when lowered,
            # as compute_at may still give them a constant region
            raise ScheduleError(f"stage {self.stage}: cannot {self.annotation} {self.iter}: its "
                                f"extent {it.extent} is symbolic; split it by a constant "
                                f"factor and {self.annotation} the inner loop")
        if it.annotation not in ("none", self.annotation) and self.annotation != "none":
            raise ScheduleError(f"stage {self.stage}: {self.iter} is already annotated "
                                f"{it.annotation}")
        leaves = tuple(replace(x, annotation=self.annotation) if x.name == self.iter else x
                       for x in st.leaves)
        return state.with_stage(replace(st, leaves=leaves)), None

    def __str__(self) -> str:
        if self.annotation == "none":
            return f's["{self.stage}"].annotate("{self.iter}", "none")'
        return self._call(self.annotation, f'"{self.iter}"')


@dataclass(frozen=True)
class PragmaStep(Step):
    """``auto_unroll_max_step``: unroll every loop nest inside with at most n steps."""
    kind: ClassVar[str] = "pragma"
    stage: str
    iter: str
    key: str
    value: int

    def apply(self, state: State):
        st = state.stage(self.stage)
        st.leaf(self.iter)
        if self.key not in PRAGMAS:
            raise ScheduleError(f"stage {self.stage}: unknown pragma {self.key!r}; "
                                f"supported: {PRAGMAS}")
        check_step_int(self.value, f"stage {self.stage}: pragma {self.key}", 0, 1 << 16)
        leaves = tuple(replace(x, unroll_limit=self.value) if x.name == self.iter else x
                       for x in st.leaves)
        return state.with_stage(replace(st, leaves=leaves)), None

    def __str__(self) -> str:
        return self._call("pragma", f'"{self.iter}"', f'"{self.key}"', str(self.value))


# -- placement steps -------------------------------------------------------------------

@dataclass(frozen=True)
class ComputeAtStep(Step):
    """Compute this stage inside ``target``'s loop ``iter``, only the region needed there."""
    kind: ClassVar[str] = "compute_at"
    stage: str
    target: str
    iter: str

    def apply(self, state: State):
        st = state.stage(self.stage)
        tgt = state.stage(self.target)
        tgt.leaf(self.iter)
        if self.stage == self.target:
            raise ScheduleError(f"stage {self.stage}: cannot compute_at itself")
        if "pack" in (st.scope, tgt.scope):
            raise ScheduleError(f"stage {self.stage}: compute_at {self.target}: a pack stage "
                                f"(prepack) runs once outside the kernel, at root")
        if self.stage in state.outputs:
            raise ScheduleError(f"stage {self.stage} is an output: it cannot be computed inside "
                                f"another stage")
        cur = tgt
        while isinstance(cur.attach, tuple):
            if cur.attach[0] == self.stage:
                raise ScheduleError(f"stage {self.stage}: compute_at {self.target}.{self.iter} "
                                    f"makes a cycle ({self.target} is inside {self.stage})")
            cur = state.stage(cur.attach[0])
        if not state.consumers(self.stage):
            raise ScheduleError(f"stage {self.stage}: nothing reads it, so it has no place "
                                f"inside {self.target}")
        return state.with_stage(replace(st, attach=(self.target, self.iter))), None

    def __str__(self) -> str:
        return self._call("compute_at", f's["{self.target}"]', f'"{self.iter}"')


@dataclass(frozen=True)
class ComputeInlineStep(Step):
    """Substitute this stage's expression into its readers; it gets no loops."""
    kind: ClassVar[str] = "compute_inline"
    stage: str

    def apply(self, state: State):
        st = state.stage(self.stage)
        if self.stage in state.outputs:
            raise ScheduleError(f"stage {self.stage} is an output and cannot be inlined")
        if st.op.reduce_axis:
            raise ScheduleError(f"stage {self.stage} is a reduction and cannot be inlined")
        if st.scope == "pack":
            raise ScheduleError(f"stage {self.stage} is a pack stage (prepack): it runs once "
                                f"outside the kernel and cannot be inlined")
        return state.with_stage(replace(st, attach="inline")), None

    def __str__(self) -> str:
        return self._call("compute_inline")


@dataclass(frozen=True)
class ComputeRootStep(Step):
    """Compute this stage whole, at the top level (the default)."""
    kind: ClassVar[str] = "compute_root"
    stage: str

    def apply(self, state: State):
        st = state.stage(self.stage)
        return state.with_stage(replace(st, attach=None)), None

    def __str__(self) -> str:
        return self._call("compute_root")
