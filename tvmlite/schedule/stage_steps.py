"""The schedule Steps that create stages: ``cache_write`` (a local accumulator block),
``cache_read`` (a copy of an input, optionally widened to a wider integer dtype) and
``rfactor`` (a reduction split into a partial stage and its final sum). Like every Step
(``steps``), each applies itself to a State, round-trips through JSON (``step_json``)
and prints as the call that made it; they live apart from the loop and placement steps
because they rewrite compute ops, not loops. ``read_copy``, ``check_widening``,
``check_untouched`` and ``taken_names`` are shared with ``prepack``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from tvmlite.ir.dtypes import INT_DTYPES, value_range
from tvmlite.ir.expr import BinOp, Cast, Cmp, Const, Reduce, TensorRead, Var, rebuild, substitute
from tvmlite.ir.names import unique_name
from tvmlite.ir.symbolic import as_extent_expr, ext_mul, same_extent
from tvmlite.schedule.state import (
    ScheduleError,
    Split,
    Stage,
    State,
    fresh_stage,
)
from tvmlite.schedule.steps import Step, check_step_int
from tvmlite.te.tensor import ComputeOp, IterVar, Tensor

# -- stage-creating steps ------------------------------------------------------------

def _insert_before(state: State, name: str, new: Stage) -> State:
    stages = []
    for st in state.stages:
        if st.name == name:
            stages.append(new)
        stages.append(st)
    return replace(state, stages=tuple(stages))


def taken_names(state: State) -> set:
    """The tensor names in use in ``state`` (stages and placeholders): what a step that
    adds a tensor (cache_write, cache_read, prepack) must not name it."""
    return {st.name for st in state.stages} | {p.name for p in state.placeholders}


def int_dtype_holds(wide: str, narrow: str) -> bool:
    """Every value of integer dtype ``narrow`` is one of ``wide``'s."""
    (lo, hi), (wlo, whi) = value_range(narrow), value_range(wide)
    return wlo <= lo and hi <= whi


def check_widening(stage: str, what: str, dtype: str, src_dtype: str) -> None:
    """A ScheduleError unless a copy of ``src_dtype`` values may be stored as ``dtype``
    ("" or the same: no widening): both integer dtypes, every value kept."""
    if not dtype or dtype == src_dtype:
        return
    if not isinstance(dtype, str) or dtype not in INT_DTYPES or src_dtype not in INT_DTYPES:
        raise ScheduleError(f"stage {stage}: {what} dtype={str(dtype)[:20]!r}: a copy can "
                            f"only be widened from an integer dtype to one of "
                            f"{list(INT_DTYPES)}; the stage is {src_dtype}")
    if not int_dtype_holds(dtype, src_dtype):
        raise ScheduleError(f"stage {stage}: {what} dtype={dtype} cannot hold every "
                            f"{src_dtype} value {value_range(src_dtype)}: the copy would "
                            f"change the values")


def read_copy(op: ComputeOp, old: str, new: Tensor, old_dtype: str,
              indices: Callable[[tuple], tuple]) -> ComputeOp:
    """``op`` with every ``old[i..]`` read as ``new[indices(i..)]``. A ``new`` widened from
    ``old_dtype`` is read as it is under a cast to a dtype that holds it (what a widening
    copy is for: the reader's own widening is done), else cast back to ``old_dtype``
    (the same values)."""
    widened = new.dtype != old_dtype

    def go(e):
        if widened and isinstance(e, Cast) and isinstance(e.value, TensorRead) \
                and e.value.tensor.name == old and e.dtype in INT_DTYPES \
                and int_dtype_holds(e.dtype, new.dtype):
            return Cast(e.dtype, new_read(e.value))
        if isinstance(e, TensorRead) and e.tensor.name == old:
            read = new_read(e)
            return Cast(old_dtype, read) if widened else read
        return rebuild(e, go)

    def new_read(e):
        return TensorRead(new, indices(tuple(go(i) for i in e.indices)))
    body = go(op.body)
    if body is op.body:
        return op
    return ComputeOp(op.name, op.axis, body, op.tag, op.attrs)


def check_untouched(st: Stage, what: str) -> None:
    """A ScheduleError unless stage ``st`` is neither split, fused nor annotated: steps
    that rebuild a stage (cache_write, prepack) must come first."""
    if st.relations or any(it.annotation != "none" for it in st.leaves):
        raise ScheduleError(f"stage {st.name}: {what} must come before splitting, fusing or "
                            f"annotating the stage")


@dataclass(frozen=True)
class CacheWriteStep(Step):
    """Compute into ``<stage>_<scope>`` and copy out; the cache stage gets the body."""
    kind: ClassVar[str] = "cache_write"
    stage: str
    scope: str = "local"

    def apply(self, state: State):
        st = state.stage(self.stage)
        if self.scope not in ("local", "global"):
            raise ScheduleError(f"stage {self.stage}: cache_write scope must be 'local' or "
                                f"'global', got {self.scope!r}")
        check_untouched(st, "cache_write")
        op = st.op
        name = unique_name(f"{self.stage}_{self.scope}", taken_names(state))
        cache_op = ComputeOp(name, op.axis, op.body, op.tag, op.attrs)
        axis = tuple(IterVar(Var(iv.name), iv.extent, "spatial") for iv in op.axis)
        copy_op = ComputeOp(op.name, axis, cache_op.output(0)[tuple(iv.var for iv in axis)]
                            if axis else TensorRead(cache_op.output(0), ()), op.tag, op.attrs)
        state = state.with_stage(replace(fresh_stage(copy_op), attach=st.attach))
        state = _insert_before(state, self.stage, fresh_stage(cache_op, "local"))
        return state, cache_op.output(0)

    def __str__(self) -> str:
        return f's.cache_write("{self.stage}", "{self.scope}")'


@dataclass(frozen=True)
class CacheReadStep(Step):
    """Copy ``tensor`` into ``<tensor>_<scope>`` and make ``readers`` read the copy.
    Placed with compute_at, the copy holds just the region used there: a packed tile.
    ``dtype`` (an integer dtype holding every value of the tensor's; "" for its own)
    stores the copy widened, exactly: uint8 activations as int16 pairs, which an AVX2
    ``vpmaddwd`` then broadcasts with one load instead of widening them in the loop; a
    reader that casts to a dtype as wide reads the copy directly (``read_copy``)."""
    kind: ClassVar[str] = "cache_read"
    tensor: str
    scope: str
    readers: tuple
    dtype: str = ""

    def to_json(self) -> dict:
        d = super().to_json()
        if not self.dtype:    # the records of a plain copy stay as they were
            del d["dtype"]
        return d

    def apply(self, state: State):
        src = state.op_by_name(self.tensor)
        if self.scope not in ("local", "global"):
            raise ScheduleError(f"cache_read of {self.tensor}: scope must be 'local' or "
                                f"'global', got {self.scope!r}")
        if not self.readers:
            raise ScheduleError(f"cache_read of {self.tensor}: name at least one reader")
        for r in self.readers:
            if r not in state.consumers(self.tensor):
                raise ScheduleError(f"cache_read of {self.tensor}: stage {r} does not read it "
                                    f"(readers are {state.consumers(self.tensor)})")
        out = src.output(0)
        check_widening(self.tensor, "cache_read", self.dtype, out.dtype)
        name = unique_name(f"{self.tensor}_{self.scope}", taken_names(state))
        axis = tuple(IterVar(Var(f"ax{d}"), n, "spatial") for d, n in enumerate(src.shape))
        body: Any = out[tuple(iv.var for iv in axis)] if axis else TensorRead(out, ())
        if self.dtype and self.dtype != out.dtype:
            body = Cast(self.dtype, body)
        cache_op = ComputeOp(name, axis, body)
        new = cache_op.output(0)
        for r in self.readers:
            rst = state.stage(r)
            op = read_copy(rst.op, self.tensor, new, out.dtype, lambda idx: idx)
            state = state.with_stage(replace(rst, op=op))
        first = min(i for i, st in enumerate(state.stages) if st.name in self.readers)
        state = _insert_before(state, state.stages[first].name, fresh_stage(cache_op, "local"))
        return state, new

    def __str__(self) -> str:
        readers = ", ".join(f'"{r}"' for r in self.readers)
        dtype = f', dtype="{self.dtype}"' if self.dtype else ""
        return f's.cache_read("{self.tensor}", "{self.scope}", [{readers}]{dtype})'


@dataclass(frozen=True)
class RfactorStep(Step):
    """Split a reduction in two stages: ``<stage>_rf`` keeps the factored loop as a
    spatial axis (so it can be parallelized or vectorized), then ``stage`` sums it."""
    kind: ClassVar[str] = "rfactor"
    stage: str
    iter: str
    factor_axis: int = 0

    def apply(self, state: State):
        st = state.stage(self.stage)
        op = st.op
        if not isinstance(op.body, Reduce):
            raise ScheduleError(f"stage {self.stage}: rfactor needs a reduction")
        split = [r for r in st.relations if isinstance(r, Split)
                 and self.iter in (r.outer, r.inner)]
        others = [r for r in st.relations if r not in split]
        if len(split) != 1 or others or any(it.annotation != "none" for it in st.leaves):
            raise ScheduleError(f"stage {self.stage}: rfactor needs {self.iter} to be one half of "
                                f"a single split of a reduce axis, before other transforms")
        rel = split[0]
        red = {iv.name: iv for iv in op.reduce_axis}
        if rel.parent not in red:
            raise ScheduleError(f"stage {self.stage}: {self.iter} does not come from a reduce axis")
        check_step_int(self.factor_axis, f"stage {self.stage}: rfactor factor_axis", 0,
                       len(op.axis))
        k = red[rel.parent]
        outer_ext = st.leaf(rel.outer).extent
        inner_ext = st.leaf(rel.inner).extent
        ko = Var(rel.outer)
        ki = Var(rel.inner)
        k_value = BinOp("+", BinOp("+", BinOp("*", ko, as_extent_expr(inner_ext)), ki),
                        Const(k.min))
        keep, fold = (rel.inner, rel.outer) if self.iter == rel.inner else (rel.outer, rel.inner)
        ext = {rel.outer: outer_ext, rel.inner: inner_ext}
        body: Reduce = op.body
        src = substitute(body.source, {k.name: k_value})
        where = None if body.where is None else substitute(body.where, {k.name: k_value})
        if not same_extent(ext_mul(outer_ext, inner_ext), k.extent):
            guard = Cmp("<", k_value, as_extent_expr(k.extent) if k.min == 0 else
                        BinOp("+", as_extent_expr(k.extent), Const(k.min)))
            # the bound first: && short-circuits, so the user's where (which may read a
            # tensor at k) is only evaluated inside the reduce axis
            where = guard if where is None else BinOp("and", guard, where)
        keep_iv = IterVar(Var(keep), ext[keep], "spatial")
        fold_iv = IterVar(Var(fold), ext[fold], "reduce")
        rest = tuple(iv for iv in body.axes if iv.name != k.name)
        axis = list(op.axis)
        axis.insert(self.factor_axis, keep_iv)
        taken = taken_names(state)
        rf_name = unique_name(f"{self.stage}_rf", taken)
        rf_op = ComputeOp(rf_name, tuple(axis),
                          Reduce(body.combiner, src, (fold_iv,) + rest, where))
        r_iv = IterVar(Var(keep), ext[keep], "reduce")
        idx = [iv.var for iv in op.axis]
        idx.insert(self.factor_axis, r_iv.var)
        new_op = ComputeOp(op.name, op.axis, Reduce(body.combiner, rf_op.output(0)[tuple(idx)],
                                                    (r_iv,)), op.tag, op.attrs)
        state = state.with_stage(replace(fresh_stage(new_op), attach=st.attach))
        state = _insert_before(state, self.stage, fresh_stage(rf_op))
        return state, rf_op.output(0)

    def __str__(self) -> str:
        return f's.rfactor("{self.stage}", "{self.iter}", factor_axis={self.factor_axis})'
