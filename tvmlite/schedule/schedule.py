"""The TVM-style schedule API: ``s[C].split(i, 32)`` appends a Step and replays it.

A schedule *is* its list of Steps (``steps.py``); the loop ``State`` (``state.py``) is
what replaying them gives, so ``Schedule.from_steps(outputs, s.steps)`` rebuilds the same
schedule.

Map: create_schedule · Schedule · StageHandle (the per-stage primitives) · LoopAxis.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from tvmlite.schedule.prepack import ConstantStep, PrepackStep
from tvmlite.schedule.stage_steps import CacheReadStep, CacheWriteStep, RfactorStep
from tvmlite.schedule.state import ScheduleError, State, initial_state
from tvmlite.schedule.step_json import step_from_json
from tvmlite.schedule.steps import (
    AnnotateStep,
    ComputeAtStep,
    ComputeInlineStep,
    ComputeRootStep,
    FuseStep,
    PragmaStep,
    ReorderStep,
    SplitStep,
    Step,
)
from tvmlite.schedule.tensorize import TensorizeStep
from tvmlite.te.tensor import ComputeOp, IterVar, PlaceholderOp, Tensor


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


def create_schedule(ops: Any) -> "Schedule":
    """A default schedule (every stage at root, no transformation) of the given outputs."""
    return Schedule.create(ops)


class Schedule:
    """A list of Steps and the loop state they produce. ``s[T]`` gives a stage."""

    def __init__(self, outputs: tuple, state: State):
        self.outputs = outputs
        self.state = state
        self.steps: list = []
        # which stage each of the computes' own IterVars came from (by identity), so a
        # loop of another stage is refused even after cache_write gave the stage new ones
        self.axis_origin: dict = {id(iv): (iv, st.name) for st in state.stages
                                  for iv in (*st.op.axis, *st.op.reduce_axis)}

    @classmethod
    def create(cls, ops: Any) -> "Schedule":
        outputs = _as_outputs(ops)
        return cls(outputs, initial_state(outputs))

    @classmethod
    def from_steps(cls, outputs: Any, steps: Iterable) -> "Schedule":
        """Replay Steps (objects or their JSON dicts); a bad Step raises ScheduleError."""
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
        s.axis_origin = self.axis_origin
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
        return self.apply(CacheWriteStep(_name(tensor), scope))

    def cache_read(self, tensor: Any, scope: str, readers: Sequence[Any],
                   dtype: str = "") -> Tensor:
        """A copy of ``tensor`` that ``readers`` read, stored widened to the integer
        ``dtype`` if given (``CacheReadStep``)."""
        return self.apply(CacheReadStep(_name(tensor), scope, tuple(_name(r) for r in readers),
                                        dtype))

    def rfactor(self, tensor: Any, axis: Any, factor_axis: int = 0) -> Tensor:
        stage = _name(tensor)
        return self.apply(RfactorStep(stage, _loop(self, stage, axis, "rfactor"), factor_axis))

    def prepack(self, tensor: Any, dim: int = -1, factor: int | None = None,
                group_dim: int = 0, group: int = 1, dtype: str = "") -> Tensor:
        """Compute the copy ``tensor`` (of one constant input, e.g. what cache_read made)
        once, outside the kernel, split along ``dim`` (default: the last) into panels of
        ``factor`` (default: the whole dimension), and with ``group`` > 1 dimension
        ``group_dim`` into groups of ``group`` stored last (a dot-product intrinsic's
        layout), stored widened to the integer ``dtype`` if given; returns the packed
        tensor (``tvmlite.schedule.prepack``)."""
        stage = _name(tensor)
        ndim = len(self.state.stage(stage).op.axis)
        if isinstance(dim, int) and not isinstance(dim, bool) and -ndim <= dim < 0:
            dim += ndim
        if factor is None and isinstance(dim, int) and 0 <= dim < ndim:
            factor = self.state.stage(stage).op.axis[dim].extent
        # factor stays None only for a dim out of range, which PrepackStep.apply rejects first
        return self.apply(PrepackStep(stage, dim, factor, group_dim,  # type: ignore[arg-type]
                                      group, dtype))

    def constant(self, tensor: Any) -> Tensor:
        """Input ``tensor`` is constant: the kernel reads it through a pack function, a
        plain copy unless a prepack already gave it a panel layout; returns the packed
        tensor (``ConstantStep``, ``tvmlite.schedule.prepack``)."""
        return self.apply(ConstantStep(_name(tensor)))

    def tensor(self, name: str) -> Tensor:
        return self.state.op_by_name(name).output(0)

    def steps_json(self) -> str:
        return json.dumps([st.to_json() for st in self.steps])

    def __str__(self) -> str:
        return "\n".join(str(st) for st in self.steps) or "# no steps"


def _loop(sched: Schedule, stage: str, axis: Any, what: str) -> str:
    """The name of ``axis`` as a loop of ``stage``. Loops are addressed by name, so a
    loop of another stage (``s[C].split(s[D].op.axis[0])``) would silently name C's own
    loop of that name: it is refused, naming both stages. An IterVar belongs to a stage
    when it is one of the axes of the stage's op now, or of the compute the stage was
    made from (``i, j = s[C].op.axis`` taken before ``s.cache_write(C)`` still names C's
    loops, as templates rely on)."""
    owner = None
    if isinstance(axis, LoopAxis) and axis.stage != stage:
        owner = axis.stage
    elif isinstance(axis, IterVar):
        def has(st) -> bool:
            return any(iv is axis for iv in (*st.op.axis, *st.op.reduce_axis))
        origin = sched.axis_origin.get(id(axis), (None, None))[1]
        state = sched.state
        if origin != stage and not (state.has_stage(stage) and has(state.stage(stage))):
            others = [st.name for st in state.stages if st.name != stage and has(st)]
            owner = origin or (others[0] if others else None)
    if owner is not None:
        raise ScheduleError(f"stage {stage}: {what} was given loop {axis.name!r} of stage "
                            f"{owner}, not of {stage}; use a loop of s[{stage}] "
                            f"(s[{stage}].op.axis, s[{stage}].op.reduce_axis, "
                            f"s[{stage}].leaf_iter_vars, or what its split/fuse returned)")
    return _name(axis)


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
        return self._axes(self.sched.apply(SplitStep(self.name, self._loop(axis, "split"),
                                                     factor, nparts)))

    def tile(self, x: Any, y: Any, x_factor: int, y_factor: int):
        xo, xi = self.split(x, x_factor)
        yo, yi = self.split(y, y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def fuse(self, *axes: Any):
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        return self._axes(self.sched.apply(FuseStep(self.name, tuple(self._loop(a, "fuse")
                                                                     for a in axes))))

    def reorder(self, *axes: Any) -> None:
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        self.sched.apply(ReorderStep(self.name, tuple(self._loop(a, "reorder") for a in axes)))

    def _annotate(self, axis: Any, kind: str) -> None:
        self.sched.apply(AnnotateStep(self.name, self._loop(axis, kind), kind))

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
        self.sched.apply(PragmaStep(self.name, self._loop(axis, "pragma"), key, value))

    def tensorize(self, axis: Any, intrinsic: str) -> None:
        """Compute loop ``axis`` and the reduce loop inside it with the dot-product
        instruction ``intrinsic`` (a name of ``Target.intrinsics``; ``TensorizeStep``)."""
        self.sched.apply(TensorizeStep(self.name, self._loop(axis, "tensorize"), intrinsic))

    def compute_at(self, parent: Any, axis: Any) -> None:
        target = _name(parent)
        self.sched.apply(ComputeAtStep(self.name, target,
                                       _loop(self.sched, target, axis, f"compute_at({target})")))

    def compute_inline(self) -> None:
        self.sched.apply(ComputeInlineStep(self.name))

    def compute_root(self) -> None:
        self.sched.apply(ComputeRootStep(self.name))

    def _loop(self, axis: Any, what: str) -> str:
        return _loop(self.sched, self.name, axis, what)

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
