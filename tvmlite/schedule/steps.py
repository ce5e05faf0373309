"""Schedule Steps: the serializable history that *is* a schedule.

Each Step is a frozen dataclass that (1) applies itself to a loop State,
``apply(state) -> (state, result)``, (2) round-trips through JSON with named keys,
(3) prints as the Python call that made it. Adding a step means adding those three
and a test. Every name read from JSON is checked against a strict identifier pattern
and every number against a range, so a hostile log cannot smuggle text into C.

Map: validation helpers · loop steps (split, fuse, reorder, annotate, pragma; tensorize is
``schedule.tensorize``, pre-packing ``schedule.prepack``) ·
placement steps (compute_at/inline/root) · stage-creating steps (cache_write,
cache_read, rfactor) · JSON registry.
"""
from __future__ import annotations

import hashlib
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from tvmlite.checks import check_int
from tvmlite.ir.dtypes import INT_DTYPES, value_range
from tvmlite.ir.expr import BinOp, Cast, Cmp, Const, Reduce, TensorRead, Var, rebuild, substitute
from tvmlite.ir.symbolic import as_extent_expr, ceil_div, ext_mul, ext_prod, is_static, same_extent
from tvmlite.schedule.state import (
    ANNOTATIONS,
    Fuse,
    Iter,
    ScheduleError,
    Split,
    Stage,
    State,
    fresh_stage,
)
from tvmlite.te.tensor import IDENT, ComputeOp, IterVar, Tensor

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


MAX_LOOP_NAME = 48  # generated loop names stay well inside IDENT's 64 characters


def unique_name(name: str, taken: set) -> str:
    """``name``, made unique among ``taken``; a generated name that grew too long (deep
    splits, many fused loops) keeps its head and a digest of the rest, deterministically."""
    if len(name) > MAX_LOOP_NAME:
        digest = hashlib.sha1(name.encode()).hexdigest()[:8]
        name = f"{name[:MAX_LOOP_NAME - 9]}_{digest}"
    out, n = name, 0
    while out in taken:
        n += 1
        out = f"{name}_{n}"
    return out


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
