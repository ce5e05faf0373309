"""``TensorizeStep``: a dot-product instruction of the target in place of a stage's two
innermost loops (TVM's ``tensorize``).

The step checks what it can from the schedule (the loops, their extents, the stage's
compute: a sum of products of the intrinsic's dtypes); ``passes.tensorize`` checks the
strides of every access when lowered, and the codegen that the target has the
instruction (``tvmlite.target.intrinsics``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from tvmlite.ir.expr import BinOp, Cast, Reduce, TensorRead
from tvmlite.schedule.state import ScheduleError, State
from tvmlite.schedule.steps import Step
from tvmlite.target.intrinsics import get_intrinsic
from tvmlite.te.tensor import ComputeOp

__all__ = ["TensorizeStep", "check_dot"]


@dataclass(frozen=True)
class TensorizeStep(Step):
    """Compute the two innermost loops, ``iter`` (spatial: the intrinsic's lanes) and the
    reduce loop after it (its group), with one dot-product instruction of the target
    (``tvmlite.target.intrinsics``); for a tile intrinsic (AMX) the four innermost,
    ``iter`` the rows loop. Checked here: the loops, their extents and the
    stage's compute (a sum of products of the intrinsic's dtypes); when lowered
    (after bound inference: the lanes' extent);
    (``passes.tensorize``): the strides of every access, i.e. the data layout; when the
    code is generated: that the target has the instruction."""
    kind: ClassVar[str] = "tensorize"
    stage: str
    iter: str
    intrinsic: str

    def apply(self, state: State):
        st = state.stage(self.stage)
        it = st.leaf(self.iter)
        where = f"stage {self.stage}: tensorize {self.iter} with {self.intrinsic}"
        try:
            intr = get_intrinsic(self.intrinsic)
        except ValueError as e:
            raise ScheduleError(f"stage {self.stage}: tensorize: {e}") from None
        pos = st.leaf_index(self.iter)
        if intr.is_tile:
            return _apply_tile(state, st, pos, intr, where), None
        if pos != len(st.leaves) - 2:
            raise ScheduleError(f"{where}: it must be the second innermost loop, the reduce "
                                f"loop of the group innermost; the loops are "
                                f"{[i.name for i in st.leaves]}")
        red = st.leaves[-1]
        if it.kind != "spatial" or red.kind != "reduce":
            raise ScheduleError(f"{where}: it needs a spatial loop (the lanes) then a "
                                f"reduce loop (the group); {self.iter} is {it.kind} and "
                                f"{red.name} {red.kind}")
        if red.extent != intr.group:
            raise ScheduleError(f"{where}: the reduce loop {red.name} must be the group, "
                                f"{intr.group} (split by {intr.group}), got {red.extent}")
        # the lanes are checked when lowered: a stage computed at a tile of its consumer
        # has the tile's extent there, not the extent its loop has in the schedule
        if it.annotation != "none" or red.annotation != "none":
            raise ScheduleError(f"{where}: {self.iter} and {red.name} must not be annotated "
                                f"(they are {it.annotation}, {red.annotation})")
        check_dot(st.op, intr, where)
        leaves = st.leaves[:-2] + (replace(it, annotation="tensorize", intrinsic=intr.name),
                                   replace(red, annotation="tensorize"))
        return state.with_stage(replace(st, leaves=leaves)), None

    def __str__(self) -> str:
        return self._call("tensorize", f'"{self.iter}"', f'"{self.intrinsic}"')


def _apply_tile(state: State, st: Any, pos: int, intr: Any, where: str) -> State:
    """A tile intrinsic's four loops (rows, lanes, k groups, group: ``passes.tensorize``):
    the rows loop carries the intrinsic and stays a plain loop (the accumulators' zeroing
    before the reduction is then rows of vectors), the other three are tensorize loops."""
    if pos != len(st.leaves) - 4:
        raise ScheduleError(f"{where}: a tile intrinsic tensorizes the four innermost loops "
                            f"(rows, lanes, k groups, group) from the rows loop; the loops "
                            f"are {[i.name for i in st.leaves]}")
    nest = st.leaves[pos:]
    kinds = tuple(it.kind for it in nest)
    if kinds != ("spatial", "spatial", "reduce", "reduce"):
        raise ScheduleError(f"{where}: the loops must be spatial, spatial, reduce, reduce "
                            f"(rows, lanes, k groups, group); they are {kinds}")
    if nest[-1].extent != intr.group:
        raise ScheduleError(f"{where}: the reduce loop {nest[-1].name} must be the group, "
                            f"{intr.group} (split by {intr.group}), got {nest[-1].extent}")
    if any(it.annotation != "none" for it in nest):
        raise ScheduleError(f"{where}: {', '.join(it.name for it in nest)} must not be "
                            f"annotated")
    check_dot(st.op, intr, where)
    leaves = st.leaves[:pos] + (replace(nest[0], intrinsic=intr.name),) + tuple(
        replace(it, annotation="tensorize") for it in nest[1:])
    return state.with_stage(replace(st, leaves=leaves))


def check_dot(op: ComputeOp, intr: Any, where: str) -> None:
    """``op`` is a sum over one reduce axis, without a condition, of two tensor elements
    cast to the accumulator dtype, of dtypes the intrinsic reads (in either order; B as
    its ``b_storage`` and A as its ``a_storage`` when it has them, ``Intrinsic.reads``)."""
    body = op.body
    if not (isinstance(body, Reduce) and body.combiner == "sum" and body.where is None):
        raise ScheduleError(f"{where}: the stage must be a sum (te.sum without where=), "
                            f"got {body}")
    acc = op.dtype
    src = body.source
    if not (isinstance(src, BinOp) and src.op == "*"):
        raise ScheduleError(f"{where}: the sum must be of a product of two elements, got {src}")
    dts = []
    for f in (src.a, src.b):
        inner = f.value if isinstance(f, Cast) and f.dtype == acc else f
        if not isinstance(inner, TensorRead):
            raise ScheduleError(f"{where}: each factor must be a tensor element (cast to "
                                f"{acc}), got {f}")
        dts.append(inner.dtype)
    if not (intr.reads(dts[0], dts[1], acc) or intr.reads(dts[1], dts[0], acc)):
        ok = " or ".join(f"{a} x {b} -> {c}" for a, b, c in intr.dtypes)
        raise ScheduleError(f"{where}: it computes {ok}{intr.storage()}, the stage reads "
                            f"{dts[0]} x {dts[1]} -> {acc}")
