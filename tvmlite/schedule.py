"""Schedules: a frozen loop state, and the TVM-style API that records Steps on it.

A schedule *is* its list of Steps (see ``steps.py``); the loop ``State`` is what
replaying them gives. ``s[C].split(i, 32)`` appends a Split step and replays it on the
current state, so ``Schedule.from_steps(outputs, s.steps)`` rebuilds the same schedule.

Map: ScheduleError · Iter, Split/Fuse relations, Stage, State (frozen) · Schedule and
StageHandle (the user API).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Iterable, Sequence

from .te import ComputeOp, PlaceholderOp, Tensor, collect_ops

ANNOTATIONS = ("none", "parallel", "vectorize", "unroll")


class ScheduleError(ValueError):
    """An illegal schedule: names the stage, the axis, and why."""


@dataclass(frozen=True)
class Iter:
    """A loop of a stage: its name, trip count, kind (spatial/reduce) and annotation."""
    name: str
    extent: int
    kind: str
    annotation: str = "none"
    unroll_limit: int = 0  # the auto_unroll_max_step pragma, 0 = none


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
    _uniquify_names(ops)
    stages = tuple(fresh_stage(op) for op in ops if isinstance(op, ComputeOp))
    placeholders = tuple(op for op in ops if isinstance(op, PlaceholderOp))
    return State(stages, placeholders, tuple(t.op.name for t in outputs))


def _uniquify_names(ops: list) -> None:
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


def _as_outputs(ops: Any) -> tuple:
    items = ops if isinstance(ops, (list, tuple)) else [ops]
    outs = []
    for x in items:
        if isinstance(x, Tensor):
            outs.append(x)
        elif isinstance(x, (ComputeOp, PlaceholderOp)):
            outs.append(x.output(0))
        else:
            raise TypeError(f"create_schedule: expected ops or tensors, got {x!r}")
    if not outs:
        raise ValueError("create_schedule: no output given")
    return tuple(outs)


class Schedule:
    """A list of Steps and the loop state they produce. ``s[T]`` gives a stage."""

    def __init__(self, outputs: tuple, state: State):
        self.outputs = outputs
        self.state = state
        self.steps: list = []

    @classmethod
    def create(cls, ops: Any) -> "Schedule":
        outputs = _as_outputs(ops)
        return cls(outputs, initial_state(outputs))

    @classmethod
    def from_steps(cls, outputs: Any, steps: Iterable) -> "Schedule":
        """Replay Steps (objects or their JSON dicts); a bad Step raises ScheduleError."""
        from .steps import Step, step_from_json
        s = cls.create(outputs)
        for st in steps:
            s.apply(st if isinstance(st, Step) else step_from_json(st))
        return s

    def apply(self, step) -> Any:
        """Apply one Step, record it, and return what it returns (new names)."""
        self.state, result = step.apply(self.state)
        self.steps.append(step)
        return result

    def copy(self) -> "Schedule":
        s = Schedule(self.outputs, self.state)
        s.steps = list(self.steps)
        return s

    def __getitem__(self, key: Any) -> "StageHandle":
        name = key if isinstance(key, str) else getattr(key, "name", None)
        if isinstance(key, (Tensor, ComputeOp, PlaceholderOp)):
            name = key.name
        if name is None:
            raise TypeError(f"schedule[...] takes a tensor, an op or a stage name, got {key!r}")
        self.state.stage(name)
        return StageHandle(self, name)

    @property
    def stages(self) -> list:
        return [StageHandle(self, st.name) for st in self.state.stages]

    # -- stage-creating primitives (return the new tensor, like TVM) ---------------
    def cache_write(self, tensor: Any, scope: str = "local") -> Tensor:
        from .steps import CacheWriteStep
        return self.apply(CacheWriteStep(_name(tensor), scope))

    def cache_read(self, tensor: Any, scope: str, readers: Sequence[Any]) -> Tensor:
        from .steps import CacheReadStep
        return self.apply(CacheReadStep(_name(tensor), scope, tuple(_name(r) for r in readers)))

    def rfactor(self, tensor: Any, axis: Any, factor_axis: int = 0) -> Tensor:
        from .steps import RfactorStep
        return self.apply(RfactorStep(_name(tensor), _name(axis), factor_axis))

    def tensor(self, name: str) -> Tensor:
        return self.state.op_by_name(name).output(0)

    def steps_json(self) -> str:
        return json.dumps([st.to_json() for st in self.steps])

    def __str__(self) -> str:
        return "\n".join(str(st) for st in self.steps) or "# no steps"


def _name(x: Any) -> str:
    if isinstance(x, str):
        return x
    if isinstance(x, StageHandle):
        return x.name
    name = getattr(x, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"expected a tensor, stage or axis, got {x!r}")
    return name


@dataclass
class StageHandle:
    """``s[C]``: the TVM-style methods; each appends one Step to the schedule."""
    sched: Schedule
    name: str

    @property
    def op(self) -> ComputeOp:
        return self.sched.state.stage(self.name).op

    @property
    def leaf_iter_vars(self) -> list:
        return [LoopAxis(self.name, it.name) for it in self.sched.state.stage(self.name).leaves]

    def split(self, axis: Any, factor: int | None = None, nparts: int | None = None):
        from .steps import SplitStep
        return self._axes(self.sched.apply(SplitStep(self.name, _name(axis), factor, nparts)))

    def tile(self, x: Any, y: Any, x_factor: int, y_factor: int):
        xo, xi = self.split(x, x_factor)
        yo, yi = self.split(y, y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def fuse(self, *axes: Any):
        from .steps import FuseStep
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        return self._axes(self.sched.apply(FuseStep(self.name, tuple(_name(a) for a in axes))))

    def reorder(self, *axes: Any) -> None:
        from .steps import ReorderStep
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        self.sched.apply(ReorderStep(self.name, tuple(_name(a) for a in axes)))

    def _annotate(self, axis: Any, kind: str) -> None:
        from .steps import AnnotateStep
        self.sched.apply(AnnotateStep(self.name, _name(axis), kind))

    def annotate(self, axis: Any, kind: str) -> None:
        """Set a loop's annotation: "none", "parallel", "vectorize" or "unroll"."""
        self._annotate(axis, kind)

    def vectorize(self, axis: Any) -> None:
        self._annotate(axis, "vectorize")

    def parallel(self, axis: Any) -> None:
        self._annotate(axis, "parallel")

    def unroll(self, axis: Any) -> None:
        self._annotate(axis, "unroll")

    def pragma(self, axis: Any, key: str, value: int) -> None:
        from .steps import PragmaStep
        self.sched.apply(PragmaStep(self.name, _name(axis), key, value))

    def compute_at(self, parent: Any, axis: Any) -> None:
        from .steps import ComputeAtStep
        self.sched.apply(ComputeAtStep(self.name, _name(parent), _name(axis)))

    def compute_inline(self) -> None:
        from .steps import ComputeInlineStep
        self.sched.apply(ComputeInlineStep(self.name))

    def compute_root(self) -> None:
        from .steps import ComputeRootStep
        self.sched.apply(ComputeRootStep(self.name))

    def _axes(self, names):
        if isinstance(names, str):
            return LoopAxis(self.name, names)
        return tuple(LoopAxis(self.name, n) for n in names)


@dataclass(frozen=True)
class LoopAxis:
    """A handle to one loop of a stage, as returned by split/fuse."""
    stage: str
    name: str

    def __repr__(self) -> str:
        return f"{self.stage}.{self.name}"
