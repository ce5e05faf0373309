"""Build the loop nests of every stage from the schedule state and its bounds.

Each non-inlined stage becomes loops over its leaf iterators. A reduction's init store
goes right before its outermost reduce loop, in a nest of its own over the spatial
loops that sit inside that reduce loop. A stage attached with compute_at is built at
the top of its target loop's body, inside an Allocate of its region buffer. Reads of
inlined stages are replaced by their (substituted) expressions.
"""
from __future__ import annotations

from tvmlite.ir.dtypes import value_range
from tvmlite.ir.expr import (
    BinOp,
    Cast,
    Cmp,
    Const,
    Expr,
    Load,
    Reduce,
    TensorRead,
    Var,
    is_float,
    rebuild,
)
from tvmlite.ir.simplify import Ranges, bound, simplify
from tvmlite.ir.stmt import Allocate, Buffer, For, IfThenElse, Stmt, Store, seq, stmt_children
from tvmlite.ir.symbolic import (
    as_extent_expr,
    hi_of,
    is_static,
    same_extent,
    size_ranges,
    size_vars,
)
from tvmlite.passes.bounds import StageInfo
from tvmlite.schedule.state import ScheduleError, State

IDENTITY = {"sum": lambda dt: Const(0, dt),
            "max": lambda dt: Const(float("-inf") if is_float(dt) else value_range(dt)[0], dt),
            "min": lambda dt: Const(float("inf") if is_float(dt) else value_range(dt)[1], dt)}


class NestBuilder:
    """Holds the buffers of one lowering and builds statements stage by stage."""

    def __init__(self, state: State, infos: dict, arg_buffers: dict):
        self.state = state
        self.infos = infos
        self.buffers: dict = dict(arg_buffers)
        self.root_allocs: list = []
        self.loop_ranges: Ranges = {name: (0, hi_of(extent)) for info in infos.values()
                            for name, extent in info.scope_vars.items()}
        for info in infos.values():
            for extent in info.scope_vars.values():
                self.loop_ranges.update(size_ranges(v.name for v in size_vars(extent)))
        self.attached: dict = {}
        self.tensorized: dict = {}    # outer loop variable -> (stage, intrinsic)
        for st in state.stages:
            if isinstance(st.attach, tuple):
                self.attached.setdefault(st.attach, []).append(st.name)
        for st in state.stages:
            if st.attach == "inline" or st.name in self.buffers:
                continue
            info = infos[st.name]
            scope = "local" if isinstance(st.attach, tuple) else "global"
            buf = Buffer(st.name, tuple(info.region), st.op.dtype, scope)
            self.buffers[st.name] = buf
            if scope == "global":
                self.root_allocs.append(buf)

    def build(self) -> Stmt:
        body = [self.stage_nest(st.name) for st in self.state.stages if st.attach is None]
        return seq(*body)

    # -- expressions -------------------------------------------------------------
    def lower_expr(self, e: Expr, env: dict) -> Expr:
        """Substitute axis values and turn tensor reads into buffer loads."""
        def go(x: Expr) -> Expr:
            if isinstance(x, Var):
                return env.get(x.name, x)
            if isinstance(x, TensorRead):
                idx = tuple(go(i) for i in x.indices)
                return self.read(x.tensor.name, idx)
            return rebuild(x, go)
        return go(e)

    def read(self, name: str, idx: tuple) -> Expr:
        st = self.state.stage(name) if self.state.has_stage(name) else None
        if st is not None and st.attach == "inline":
            env = {iv.name: i for iv, i in zip(st.op.axis, idx)}
            return self.lower_expr(st.op.body, env)
        buf = self.buffers[name]
        if st is not None and st.name in self.infos:
            base = self.infos[name].base
            idx = tuple(simplify(BinOp("-", i, b)) if not _zero(b) else i
                        for i, b in zip(idx, base))
        return Load(buf, idx)

    # -- statements ----------------------------------------------------------------
    def stage_nest(self, name: str) -> Stmt:
        info: StageInfo = self.infos[name]
        st = info.stage
        op = st.op
        buf = self.buffers[name]
        env = info.env
        store_idx = tuple(info.root[iv.name] for iv in op.axis)
        spatial_guards = [c for k, c in info.guards if k == "spatial"] + self.domain_guards(info)
        reduce_guards = [c for k, c in info.guards if k == "reduce"]
        body = op.body
        if isinstance(body, Reduce):
            src = self.lower_expr(body.source, env)
            cur = Load(buf, store_idx)
            update: Stmt = Store(buf, store_idx, _combine(body.combiner, cur, src))
            if body.where is not None:
                update = IfThenElse(self.lower_expr(body.where, env), update)
            update = _guard(update, spatial_guards + reduce_guards)
            init = _guard(Store(buf, store_idx, IDENTITY[body.combiner](op.dtype)),
                          spatial_guards)
        else:
            value = self.lower_expr(body, env)
            if value.dtype != op.dtype:
                value = Cast(op.dtype, value)
            update = _guard(Store(buf, store_idx, value), spatial_guards)
            init = None
        leaves = st.leaves
        first_reduce = next((i for i, it in enumerate(leaves) if it.kind == "reduce"), None)
        stmt = update
        for pos in range(len(leaves) - 1, -1, -1):
            it = leaves[pos]
            stmt = self.with_attached(name, it.name, stmt)
            stmt = For(info.loop_vars[pos], info.extents[pos], _kind(it.annotation), stmt,
                       it.unroll_limit)
            if it.intrinsic:
                self.tensorized[info.loop_vars[pos].name] = (name, it.intrinsic)
            if pos == first_reduce and init is not None:   # a reduction always has one
                stmt = seq(self.init_nest(info, pos, init), stmt)
        if first_reduce is None and init is not None:  # reduction with no loops left
            stmt = seq(init, stmt)
        return stmt

    def init_nest(self, info: StageInfo, first_reduce: int, init: Stmt) -> Stmt:
        stmt = init
        for pos in range(len(info.stage.leaves) - 1, first_reduce, -1):
            it = info.stage.leaves[pos]
            if it.kind == "spatial":
                # the accumulators a tensorized loop updates start as one vector of zeros
                kind = "vectorize" if it.annotation == "tensorize" else _kind(it.annotation)
                stmt = For(info.loop_vars[pos], info.extents[pos], kind, stmt, it.unroll_limit)
        return stmt

    def with_attached(self, target: str, loop: str, inner: Stmt) -> Stmt:
        names = self.attached.get((target, loop), [])
        if not names:
            return inner
        for name in reversed(names):
            inner = Allocate(self.buffers[name], seq(self.stage_nest(name), inner))
        return inner

    def domain_guards(self, info: StageInfo) -> list:
        """For a region, keep its points inside the tensor: ``0 <= base + i < extent``."""
        if not isinstance(info.stage.attach, tuple):
            return []
        out = []
        for d, iv in enumerate(info.stage.op.axis):
            if not (is_static(iv.extent) and is_static(info.region[d])):
                out.extend(self.symbolic_domain_guards(info, d, iv))
                continue
            if _zero(info.base[d]) and info.region[d] <= iv.extent:
                continue
            g = info.env[iv.name]
            lo, hi = bound(g, self.loop_ranges)
            if lo < 0:
                out.append(Cmp(">=", g, Const(0)))
            if hi >= iv.extent:
                out.append(Cmp("<", g, Const(iv.extent)))
        return out


    def symbolic_domain_guards(self, info: StageInfo, d: int, iv) -> list:
        """``domain_guards`` for an axis or region of symbolic extent: the region start
        is checked against 0 by bounds, its end against the axis size as an expression."""
        if _zero(info.base[d]) and same_extent(info.region[d], iv.extent):
            return []
        g = info.env[iv.name]
        lo, _ = bound(g, self.loop_ranges)
        out = [Cmp(">=", g, Const(0))] if lo < 0 else []
        return out + [Cmp("<", g, as_extent_expr(iv.extent))]


def _zero(e: Expr) -> bool:
    return isinstance(e, Const) and e.value == 0


def _kind(annotation: str) -> str:
    return "serial" if annotation == "none" else annotation


def _combine(combiner: str, cur: Expr, src: Expr) -> Expr:
    if combiner == "sum":
        return BinOp("+", cur, src)
    return BinOp(combiner, cur, src)


def _guard(stmt: Stmt, conds: list) -> Stmt:
    if not conds:
        return stmt
    cond = conds[0]
    for c in conds[1:]:
        cond = BinOp("and", cond, c)
    return IfThenElse(cond, stmt)


def check_parallel_nesting(stmt: Stmt, inside: bool = False) -> None:
    """A parallel loop inside another parallel loop is an error (it would run serially)."""
    if isinstance(stmt, For) and stmt.kind == "parallel":
        if inside:
            raise ScheduleError(f"loop {stmt.var.name} is parallel inside another parallel loop; "
                                f"fuse the loops and parallelize once")
        inside = True
    for c in stmt_children(stmt):
        check_parallel_nesting(c, inside)

