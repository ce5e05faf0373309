"""The loop state a schedule's Steps act on: frozen stages, their loops and relations.

Replaying a Step list from ``initial_state`` gives a ``State``; lowering reads it. Every
Step is a pure function State -> State (``steps.py``), so this module knows no Step.

Map: ScheduleError · Iter, Split/Fuse relations, Stage, State (frozen) · initial_state.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from tvmlite.errors import TvmliteError
from tvmlite.ir.symbolic import Extent
from tvmlite.te.tensor import ComputeOp, PlaceholderOp, Tensor, collect_ops

ANNOTATIONS = ("none", "parallel", "vectorize", "unroll")


class ScheduleError(TvmliteError, ValueError):
    """An illegal schedule: names the stage, the axis, and why."""


@dataclass(frozen=True)
class Iter:
    """A loop of a stage: its name, trip count, kind (spatial/reduce) and annotation."""
    name: str
    extent: Extent    # an int, or an expression of symbolic sizes
    kind: str
    annotation: str = "none"
    unroll_limit: int = 0  # the auto_unroll_max_step pragma, 0 = none
    intrinsic: str = ""    # annotation "tensorize": the intrinsic (on its outer loop)


@dataclass(frozen=True)
class Split:
    """``parent == outer * factor + inner`` (``nparts`` fixes the outer extent instead)."""
    parent: str
    outer: str
    inner: str
    factor: int | None
    nparts: int | None


@dataclass(frozen=True)
class Fuse:
    """``fused == ((p0 * e1 + p1) * e2 + p2) ...`` over the consecutive ``parents``."""
    parents: tuple
    fused: str


@dataclass(frozen=True)
class Stage:
    """One compute op and how its loops are transformed and where they are placed.

    ``attach`` is None (root), "inline", or (target stage name, target iter name)."""
    name: str
    op: ComputeOp
    roots: tuple            # Iter per op axis then per reduce axis, in op order
    leaves: tuple           # Iter, in loop order (outermost first)
    relations: tuple = ()   # Split / Fuse, in the order applied
    attach: Any = None
    scope: str = "global"   # "local" for cache stages: never an argument

    def leaf(self, name: str) -> Iter:
        for it in self.leaves:
            if it.name == name:
                return it
        raise ScheduleError(
            f"stage {self.name}: no loop named {name!r}; its loops are "
            f"{[it.name for it in self.leaves]}")

    def leaf_index(self, name: str) -> int:
        self.leaf(name)
        return [it.name for it in self.leaves].index(name)

    def all_iter_names(self) -> set:
        names = {it.name for it in self.roots} | {it.name for it in self.leaves}
        for r in self.relations:
            names |= {r.outer, r.inner} if isinstance(r, Split) else {r.fused}
        return names


def fresh_stage(op: ComputeOp, scope: str = "global") -> Stage:
    roots = tuple(Iter(iv.name, iv.extent, "spatial") for iv in op.axis) + \
        tuple(Iter(iv.name, iv.extent, "reduce") for iv in op.reduce_axis)
    return Stage(op.name, op, roots, roots, (), None, scope)


@dataclass(frozen=True)
class State:
    """The whole loop state: stages in topological order plus the graph's inputs."""
    stages: tuple
    placeholders: tuple     # PlaceholderOp
    outputs: tuple          # names of the output stages

    def stage(self, name: str) -> Stage:
        for st in self.stages:
            if st.name == name:
                return st
        raise ScheduleError(f"no stage named {name!r}; stages are "
                            f"{[st.name for st in self.stages]}")

    def has_stage(self, name: str) -> bool:
        return any(st.name == name for st in self.stages)

    def with_stage(self, new: Stage) -> "State":
        return replace(self, stages=tuple(new if st.name == new.name else st
                                          for st in self.stages))

    def op_by_name(self, name: str):
        for st in self.stages:
            if st.name == name:
                return st.op
        for p in self.placeholders:
            if p.name == name:
                return p
        raise ScheduleError(f"no tensor named {name!r}")

    def consumers(self, name: str) -> list:
        return [st.name for st in self.stages
                if any(t.name == name for t in st.op.input_tensors)]


def initial_state(outputs: Sequence[Tensor]) -> State:
    ops = collect_ops(outputs)
    uniquify_names(ops)
    stages = tuple(fresh_stage(op) for op in ops if isinstance(op, ComputeOp))
    placeholders = tuple(op for op in ops if isinstance(op, PlaceholderOp))
    return State(stages, placeholders, tuple(t.op.name for t in outputs))


def uniquify_names(ops: list) -> None:
    """Stages are addressed by name; rename repeats deterministically (x, x_1, x_2)."""
    seen: set = set()
    for op in ops:
        name, n = op.name, 0
        while name in seen:
            n += 1
            name = f"{op.name}_{n}"
        if name != op.name:
            op.name = name
        seen.add(name)
