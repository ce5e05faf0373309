"""Pre-packing a constant input: a stage computed once, outside the kernel, in a panel layout.

In deployment the weights of a matmul or conv are constants, so a copy of them in the
layout the kernel wants (``cache_read``'s packing, done inside every call) can be made
once at load time instead, as oneDNN's weight reorder and Ansor's layout rewrite do.
``PrepackStep(stage, dim, factor)`` turns ``stage`` -- a copy of one input, usually the
stage ``cache_read`` made -- into a *pack* stage in the panel layout

    packed[o, x0, .., x_dim_inner, ..]  ==  stage[x0, .., o * factor + x_dim_inner, ..]

(dimension ``dim`` split by ``factor``, the panel index ``o`` first: B[K, N] with dim=1,
factor=16 becomes B_packed[N/16, K, 16], each 16-wide panel contiguous). Its readers read
``packed[i_dim // factor, .., i_dim % factor, ..]``. With ``dtype`` the packed copy is
stored widened to that integer dtype (int8 weights as int16, what ``vpmaddwd`` reads
without widening them in the loop): exact, since every value of the input's dtype is one
of ``dtype``'s, and a reader that casts the element to a dtype as wide reads the widened
element directly (others read it cast back, the value unchanged). Lowering (``kernel_view``,
``pack_view``) makes the kernel take the packed buffer as its argument in place of the
input, and the pack stage its own function ``<kernel>_pack_<input>``; steps on the pack
stage after this one (split, parallel, vectorize) schedule that function.

A constant input's exported API does not depend on the schedule a search picked:
``ConstantStep(tensor)`` (``s.constant(tensor)``; what ``declare_constants`` appends for
every input declared constant that no prepack packs) adds a pack stage that copies the input
as it is, so the kernel still takes ``<input>_packed`` and ``<kernel>_pack_<input>`` still
exists (a plain copy) whether or not the best schedule chose a panel layout.

Map: PrepackStep · ConstantStep, declare_constants, packed_inputs · kernel_view (the
kernel's state) · pack_view (one pack function's).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar, Sequence

from tvmlite.checks import check_int
from tvmlite.ir.expr import BinOp, Cast, Const, Reduce, TensorRead, Var, rebuild, substitute, walk
from tvmlite.schedule.stage_steps import check_untouched, check_widening, read_copy, taken_names
from tvmlite.schedule.state import ScheduleError, Stage, State, fresh_stage
from tvmlite.schedule.steps import (
    Step,
    unique_name,
)
from tvmlite.te.tensor import ComputeOp, IterVar, PlaceholderOp, Tensor

PACK_SCOPE = "pack"


def pack_source(state: State, st: Stage) -> PlaceholderOp:
    """The one input a packable stage reads; ScheduleError saying why otherwise."""
    if isinstance(st.op.body, Reduce):
        raise ScheduleError(f"stage {st.name}: prepack needs a copy of an input (a stage "
                            f"made by cache_read), not a reduction")
    reads = {n.tensor.name for n in walk(st.op.body) if isinstance(n, TensorRead)}
    inputs = {p.name for p in state.placeholders}
    stages = sorted(reads - inputs)
    if stages or len(reads) != 1:
        raise ScheduleError(f"stage {st.name}: prepack needs a stage that reads exactly one "
                            f"input placeholder and no other stage (it reads "
                            f"{sorted(reads)}); cache_read the constant input and prepack "
                            f"that copy")
    (name,) = reads
    return next(p for p in state.placeholders if p.name == name)


@dataclass(frozen=True)
class PrepackStep(Step):
    """Compute ``stage`` once, outside the kernel, in a panel layout split along ``dim``
    by ``factor`` (``x_dim == o * factor + x_dim_inner``; module doc). With ``group`` > 1
    dimension ``group_dim`` is split too, ``x_g == x_g_outer * group + g``, and ``g``
    goes last: B[K, N] with dim=1, factor=16, group_dim=0, group=4 becomes
    B_packed[N/16, K/4, 16, 4], the layout a dot-product intrinsic reads (four
    consecutive k of each of 16 columns; ``tvmlite.target.intrinsics``). ``dtype``
    (an integer dtype holding every value of the stage's, "" for its own) stores the
    packed copy widened (module doc)."""
    kind: ClassVar[str] = "prepack"
    stage: str
    dim: int
    factor: int
    group_dim: int = 0
    group: int = 1
    dtype: str = ""

    def to_json(self) -> dict:
        d = super().to_json()
        if self.group == 1:   # the records of a plain panel layout stay as they were
            del d["group_dim"], d["group"]
        if not self.dtype:
            del d["dtype"]
        return d

    def apply(self, state: State):
        st = state.stage(self.stage)
        if self.stage in state.outputs:
            raise ScheduleError(f"stage {self.stage} is an output; prepack a copy of an input")
        if st.scope == PACK_SCOPE:
            raise ScheduleError(f"stage {self.stage} is already a pack stage")
        check_untouched(st, "prepack")
        if st.attach is not None:
            raise ScheduleError(f"stage {self.stage}: prepack must come before compute_at or "
                                f"compute_inline of the stage (a pack stage runs outside)")
        src = pack_source(state, st)
        others = [c for c in state.consumers(src.name) if c != self.stage]
        if others:
            raise ScheduleError(f"stage {self.stage}: input {src.name} is also read by "
                                f"{others}; prepack needs the copy to be its only reader "
                                f"(cache_read it for all readers)")
        op = st.op
        check_int(self.dim, f"stage {self.stage}: prepack dim", 0, len(op.axis) - 1,
                  error=ScheduleError)
        ext = op.axis[self.dim].extent
        if not isinstance(ext, int):
            raise ScheduleError(f"stage {self.stage}: prepack of a symbolic dimension "
                                f"({ext}) is not supported; pack a constant-size input")
        check_int(self.factor, f"stage {self.stage}: prepack factor", 1, ext,
                  error=ScheduleError)
        if ext % self.factor:
            divisors = [d for d in range(1, ext + 1) if ext % d == 0]
            raise ScheduleError(f"stage {self.stage}: prepack factor {self.factor} does not "
                                f"divide dimension {self.dim} (extent {ext}); use one of "
                                f"{divisors[:12]}")
        self._check_group(op)
        check_widening(self.stage, "prepack", self.dtype, op.dtype)
        taken = {iv.name for iv in op.axis}
        panel = unique_name(f"{op.axis[self.dim].name}_panel", taken)
        d_iv = op.axis[self.dim]
        value = BinOp("+", BinOp("*", Var(panel), Const(self.factor)), d_iv.var)
        values = {d_iv.name: value}
        axis = (IterVar(Var(panel), ext // self.factor, "spatial"),) + tuple(
            IterVar(iv.var, self.factor if d == self.dim else iv.extent // self.group
                    if self.group > 1 and d == self.group_dim else iv.extent, "spatial")
            for d, iv in enumerate(op.axis))
        if self.group > 1:
            g_iv = op.axis[self.group_dim]
            g = unique_name(f"{g_iv.name}_group", taken | {panel})
            axis += (IterVar(Var(g), self.group, "spatial"),)
            values[g_iv.name] = BinOp("+", BinOp("*", g_iv.var, Const(self.group)), Var(g))
        name = unique_name(f"{src.name}_packed", taken_names(state))
        body = substitute(op.body, values)
        if self.dtype and self.dtype != op.dtype:
            body = Cast(self.dtype, body)
        new_op = ComputeOp(name, axis, body, op.tag, op.attrs)
        new = new_op.output(0)
        stages = []
        for s2 in state.stages:
            if s2.name == self.stage:
                stages.append(fresh_stage(new_op, PACK_SCOPE))
            elif isinstance(s2.attach, tuple) and s2.attach[0] == self.stage:
                raise ScheduleError(f"stage {s2.name} is computed at {self.stage}, which "
                                    f"prepack moves out of the kernel")
            else:
                stages.append(replace(s2, op=_read_packed(s2.op, self.stage, new, self.dim,
                                                          self.factor, self.group_dim,
                                                          self.group, op.dtype)))
        return replace(state, stages=tuple(stages)), new

    def _check_group(self, op: ComputeOp) -> None:
        check_int(self.group, f"stage {self.stage}: prepack group", 1, 64, error=ScheduleError)
        if self.group == 1:
            return
        check_int(self.group_dim, f"stage {self.stage}: prepack group_dim", 0,
                  len(op.axis) - 1, error=ScheduleError)
        if self.group_dim == self.dim:
            raise ScheduleError(f"stage {self.stage}: prepack group_dim must be another "
                                f"dimension than dim ({self.dim})")
        ext = op.axis[self.group_dim].extent
        if not isinstance(ext, int) or ext % self.group:
            raise ScheduleError(f"stage {self.stage}: prepack group {self.group} does not "
                                f"divide dimension {self.group_dim} (extent {ext})")

    def __str__(self) -> str:
        group = f", group_dim={self.group_dim}, group={self.group}" if self.group > 1 else ""
        dtype = f', dtype="{self.dtype}"' if self.dtype else ""
        return (f's.prepack("{self.stage}", dim={self.dim}, factor={self.factor}'
                f'{group}{dtype})')


@dataclass(frozen=True)
class ConstantStep(Step):
    """Input ``tensor`` is constant: the kernel reads it through a pack stage. Already
    pre-packed (a PrepackStep): nothing changes. Otherwise a pack stage
    ``<tensor>_packed[x..] == tensor[x..]`` (the same layout, a plain copy) takes its place
    in every reader, so the kernel's arguments and pack functions are those of a
    pre-packed schedule."""
    kind: ClassVar[str] = "constant"
    tensor: str

    def apply(self, state: State):
        ph = next((p for p in state.placeholders if p.name == self.tensor), None)
        if ph is None:
            raise ScheduleError(f"constant {self.tensor!r}: not an input of the computation "
                                f"(inputs: {[p.name for p in state.placeholders]})")
        packed = packed_inputs(state)
        if self.tensor in packed:
            return state, packed[self.tensor]
        if not all(isinstance(d, int) for d in ph.shape):
            raise ScheduleError(f"constant {self.tensor}: a symbolic shape {ph.shape} cannot "
                                f"be packed once at load time; declare a constant-size input")
        name = unique_name(f"{self.tensor}_packed", taken_names(state))
        axis = tuple(IterVar(Var(f"ax{d}"), n, "spatial") for d, n in enumerate(ph.shape))
        src = ph.output(0)
        op = ComputeOp(name, axis, TensorRead(src, tuple(iv.var for iv in axis)))
        new = op.output(0)
        stages = (fresh_stage(op, PACK_SCOPE),) + tuple(
            replace(st, op=_rename(st.op, self.tensor, new)) for st in state.stages)
        return replace(state, stages=stages), new

    def __str__(self) -> str:
        return f's.constant("{self.tensor}")'


def packed_inputs(state: State) -> dict:
    """{input name: its packed tensor} for every input a pack stage reads."""
    return {pack_source(state, st).name: st.op.output(0) for st in pack_stages(state)}


def declare_constants(s: Any, constants: Sequence[str]) -> Any:
    """Schedule ``s`` (a copy of it) with each input of ``constants`` read through a pack
    stage: a ConstantStep for each that no prepack packs yet (module doc). The kernel then
    takes ``<input>_packed`` and ``<kernel>_pack_<input>`` exists for every constant input,
    whatever the schedule. ScheduleError if a name is not an input."""
    out = s.copy()
    for name in dict.fromkeys(constants):
        if not isinstance(name, str):
            raise TypeError(f"declare_constants: input names must be strings, got {name!r}")
        if name not in packed_inputs(out.state):
            out.apply(ConstantStep(name))
    return out


def _read_packed(op: ComputeOp, old: str, new: Tensor, dim: int, factor: int,
                 group_dim: int = 0, group: int = 1, old_dtype: str = "") -> ComputeOp:
    """``op`` with every ``old[i..]`` read as ``new[i_dim // factor, .., i_dim % factor, ..]``
    (and, with a ``group``, ``i_g`` as ``i_g // group`` in place and ``i_g % group`` last);
    a widened ``new`` is read as ``read_copy`` reads one."""
    def packed(indices: tuple) -> tuple:
        idx = list(indices)
        f = Const(factor, idx[dim].dtype)
        last: tuple = ()
        if group > 1:
            g = Const(group, idx[group_dim].dtype)
            last = (BinOp("%", idx[group_dim], g),)
            idx[group_dim] = BinOp("//", idx[group_dim], g)
        return (BinOp("//", idx[dim], f),) + tuple(idx[:dim]) + \
            (BinOp("%", idx[dim], f),) + tuple(idx[dim + 1:]) + last
    return read_copy(op, old, new, old_dtype or new.dtype, packed)


def pack_stages(state: State) -> tuple:
    return tuple(st for st in state.stages if st.scope == PACK_SCOPE)


def kernel_view(state: State) -> tuple[State, dict]:
    """The kernel's state: every pack stage is an input placeholder of its packed shape,
    and the input it packs is gone. Returns (state, {input name: packed placeholder})."""
    packs = pack_stages(state)
    if not packs:
        return state, {}
    replaced: dict = {}
    by_stage: dict = {}
    for st in packs:
        ph = PlaceholderOp(st.name, st.op.shape, st.op.dtype)
        replaced[pack_source(state, st).name] = ph
        by_stage[st.name] = ph
    stages = []
    for st in state.stages:
        if st.name in by_stage:
            continue
        op = st.op
        for old, ph in by_stage.items():
            op = _rename(op, old, ph.output(0))
        stages.append(replace(st, op=op))
    placeholders = tuple(p for p in state.placeholders if p.name not in replaced) + \
        tuple(by_stage.values())
    return replace(state, stages=tuple(stages), placeholders=placeholders), replaced


def _rename(op: ComputeOp, old: str, new: Tensor) -> ComputeOp:
    def go(e):
        if isinstance(e, TensorRead) and e.tensor.name == old:
            return TensorRead(new, tuple(go(i) for i in e.indices))
        return rebuild(e, go)
    body = go(op.body)
    return op if body is op.body else ComputeOp(op.name, op.axis, body, op.tag, op.attrs)


def pack_view(state: State, stage: str) -> tuple[State, Tensor, Tensor]:
    """The state of one pack function: just the pack stage, at root, with its own loops.
    Returns (state, the input tensor, the packed tensor)."""
    st = state.stage(stage)
    src = pack_source(state, st)
    root = replace(st, attach=None, scope="global")
    return State((root,), (src,), (st.name,)), src.output(0), st.op.output(0)
