"""Bound inference: loop extents and, for ``compute_at``, the region each stage computes.

Stages are visited consumers first. A stage attached at loop L of stage T computes,
for each output dimension, the interval its readers touch while every loop outside
(and including) L is fixed and every loop inside L runs its whole range. Intervals are
exact for affine indices; anything the simplifier cannot prove a constant width falls
back to the whole axis (always correct, just more work).

The result, one ``StageInfo`` per stage, says for every root axis its value in terms
of the loop variables (``root``), which guards imperfect splits need, and the region
(``base``, ``extent``) the stage's buffer holds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from tvmlite.ir.expr import BinOp, Cmp, Const, Expr, TensorRead, Var, rebuild, substitute, walk
from tvmlite.ir.names import RESERVED
from tvmlite.ir.simplify import INF, Ranges, bound, from_linear, linear, simplify
from tvmlite.ir.symbolic import (
    Extent,
    as_extent_expr,
    ceil_div,
    ext_mul,
    hi_of,
    is_static,
    same_extent,
    size_vars,
)
from tvmlite.schedule.state import ScheduleError, Split, Stage, State


@dataclass
class StageInfo:
    stage: Stage
    loop_vars: list = field(default_factory=list)       # Var per leaf, loop order
    extents: list = field(default_factory=list)         # int per leaf
    root: dict = field(default_factory=dict)            # root name -> local value Expr
    guards: list = field(default_factory=list)          # (kind, cond) in local coords
    base: tuple = ()                                    # region start per output dim
    region: tuple = ()                                  # region extent per output dim
    scope_vars: dict = field(default_factory=dict)      # var name -> extent, leaves
    env: dict = field(default_factory=dict)             # axis name -> whole-tensor value


def inline_reads(e: Expr, state: State) -> Expr:
    """Expand reads of inlined stages so bounds see the tensors actually loaded."""
    def go(x: Expr) -> Expr:
        if isinstance(x, TensorRead):
            idx = tuple(go(i) for i in x.indices)
            st = state.stage(x.tensor.name) if state.has_stage(x.tensor.name) else None
            if st is not None and st.attach == "inline":
                body = substitute(st.op.body, {iv.name: i for iv, i in zip(st.op.axis, idx)})
                return go(body)
            return TensorRead(x.tensor, idx)
        return rebuild(x, go)
    return go(e)


def infer(state: State, reserved: set) -> dict:
    """StageInfo for every non-inlined stage, keyed by stage name."""
    infos: dict = {}
    used_names = set(reserved) | set(RESERVED)
    for st in reversed(state.stages):
        if st.attach == "inline":
            continue
        if isinstance(st.attach, tuple):
            _check_attach(state, st, infos)
            base, region = _region(state, st, infos)
        else:
            base = tuple(Const(0) for _ in st.op.axis)
            region = tuple(iv.extent for iv in st.op.axis)
        info = StageInfo(st, base=base, region=region)
        _loops(info, used_names)
        infos[st.name] = info
    return infos


def _check_attach(state: State, st: Stage, infos: dict) -> None:
    target, loop = st.attach
    tst = state.stage(target)
    if tst.attach == "inline":
        raise ScheduleError(f"stage {st.name} is computed at {target}.{loop}, but {target} "
                            f"is inlined")
    if target not in infos:
        raise ScheduleError(f"stage {st.name} is computed at {target}.{loop}, but {target} "
                            f"does not use it (directly or through stages inside it)")


def _chain(state: State, name: str) -> list:
    """(stage, loop position) pairs from ``name`` up through its attach targets."""
    out = []
    st = state.stage(name)
    while isinstance(st.attach, tuple):
        tgt = state.stage(st.attach[0])
        out.append((tgt.name, tgt.leaf_index(st.attach[1])))
        st = tgt
    return out


def _region(state: State, st: Stage, infos: dict) -> tuple:
    target, loop = st.attach
    tinfo = infos[target]
    pos = state.stage(target).leaf_index(loop)
    free: dict = {}
    readers = _readers(state, st.name)
    for r in readers:
        chain = [(r, None)] + _chain(state, r)
        covered = r == target or any(t == target and p >= pos for t, p in chain[1:])
        if not covered:
            raise ScheduleError(
                f"stage {st.name}: compute_at {target}.{loop} does not cover its reader {r} "
                f"(the reader runs outside that loop); attach it where every reader is inside")
        for name, _ in chain:
            if name == target:
                break
            free.update(infos[name].scope_vars)
    for v, ext in zip(tinfo.loop_vars[pos + 1:], tinfo.extents[pos + 1:]):
        free[v.name] = ext
    ranges: Ranges = {k: (0, hi_of(e)) for k, e in free.items()}
    sym_hi = {k: e for k, e in free.items() if not is_static(e)}
    reads: list = [[] for _ in st.op.axis]
    for r in readers:
        env = infos[r].env
        for node in walk(inline_reads(infos[r].stage.op.body, state)):
            if isinstance(node, TensorRead) and node.tensor.name == st.name:
                for d, idx in enumerate(node.indices):
                    reads[d].append(_sym_interval(simplify(substitute(idx, env)), ranges, sym_hi))
    base, region = [], []
    for iv, intervals in zip(st.op.axis, reads):
        span = _cover(intervals)
        if not is_static(iv.extent):  # symbolic axis: a constant-width span, else all of it
            base.append(Const(0) if span is None else span[0])
            region.append(iv.extent if span is None else span[1])
        elif span is None or span[1] >= iv.extent:  # unknown or no smaller: the whole axis
            base.append(Const(0))
            region.append(iv.extent)
        else:
            base.append(span[0])
            region.append(span[1])
    return tuple(base), tuple(region)


def _readers(state: State, name: str) -> list:
    """Non-inlined stages that read ``name``, directly or through inlined stages."""
    out: list = []
    for c in state.consumers(name):
        cst = state.stage(c)
        if cst.attach == "inline":
            out.extend(x for x in _readers(state, c) if x not in out)
        elif c not in out:
            out.append(c)
    return out


def _const(e: Expr) -> int | None:
    s = simplify(e)
    return int(s.value) if isinstance(s, Const) else None


def _cover(intervals: list) -> tuple | None:
    """(start, extent) of the smallest range holding every (lo, hi) interval, when their
    ends differ by constants; None when some interval, or its placement, is unknown."""
    if not intervals or any(iv is None for iv in intervals):
        return None
    origin = intervals[0][0]
    offsets = [(_const(BinOp("-", lo, origin)), _const(BinOp("-", hi, origin)))
               for lo, hi in intervals]
    known = [(a, b) for a, b in offsets if a is not None and b is not None]
    if len(known) < len(offsets):
        return None
    first = min(a for a, _ in known)
    last = max(b for _, b in known)
    return simplify(BinOp("+", origin, Const(first))), last - first + 1


def _sym_interval(e: Expr, ranges: dict, sym_hi: dict | None = None) -> tuple | None:
    """(lo, hi) of ``e`` with ``ranges`` vars free and every other var held fixed;
    None when a non-affine part has no finite bound. ``sym_hi`` gives the symbolic
    extent of free vars whose range is only known as an expression (``0 .. M-1``)."""
    terms, c = linear(e)
    lo_terms: dict = {}
    hi_terms: dict = {}
    lo_c = hi_c = c
    sym_hi = sym_hi or {}
    for atom, k in terms.items():
        if isinstance(atom, Var) and atom.name in sym_hi:
            ext_terms, ext_c = linear(as_extent_expr(sym_hi[atom.name]))
            side_terms = hi_terms if k > 0 else lo_terms
            for a, kk in ext_terms.items():
                side_terms[a] = side_terms.get(a, 0) + k * kk
            if k > 0:
                hi_c += k * (ext_c - 1)
            else:
                lo_c += k * (ext_c - 1)
        elif isinstance(atom, Var) and atom.name in ranges:
            a, b = ranges[atom.name]
            lo_c += k * (a if k > 0 else b)
            hi_c += k * (b if k > 0 else a)
        elif not any(isinstance(x, Var) and x.name in ranges for x in walk(atom)):
            lo_terms[atom] = lo_terms.get(atom, 0) + k
            hi_terms[atom] = hi_terms.get(atom, 0) + k
        elif isinstance(atom, BinOp) and atom.op == "//" and isinstance(atom.b, Const) and k > 0:
            inner = _sym_interval(atom.a, ranges, sym_hi)
            if inner is None:
                return None
            alo, ahi = inner
            lo_terms[BinOp("//", alo, atom.b)] = k
            hi_terms[BinOp("//", ahi, atom.b)] = k
        else:
            blo, bhi = bound(atom, ranges)
            if blo == -INF or bhi == INF:
                return None
            lo_c += k * (blo if k > 0 else bhi)
            hi_c += k * (bhi if k > 0 else blo)
    return simplify(from_linear(lo_terms, int(lo_c))), simplify(from_linear(hi_terms, int(hi_c)))


def _loops(info: StageInfo, used: set) -> None:
    """Leaf extents for this region, loop variable names, root values and guards."""
    st = info.stage
    ext: dict = {}
    for d, iv in enumerate(st.op.axis):
        ext[iv.name] = info.region[d]
    for iv in st.op.reduce_axis:
        ext[iv.name] = iv.extent
    inner_of: dict = {}
    inner: Extent
    outer: Extent
    for rel in st.relations:
        if isinstance(rel, Split) and not is_static(ext[rel.parent]):
            p = ext[rel.parent]  # symbolic: the constant side as given, a guard for the rest
            if rel.factor is not None:
                inner, outer = rel.factor, ceil_div(p, rel.factor)
            else:   # a Split has a factor or nparts
                outer = cast(int, rel.nparts)
                inner = ceil_div(p, outer)
            ext[rel.outer], ext[rel.inner] = outer, inner
            inner_of[rel.parent] = inner
        elif isinstance(rel, Split):
            p = ext[rel.parent]
            if rel.factor is not None:
                inner = min(rel.factor, p)
                outer = -(-p // inner)
            else:
                outer = min(rel.nparts, p)
                inner = -(-p // outer)
            ext[rel.outer], ext[rel.inner] = outer, inner
            inner_of[rel.parent] = inner
        else:
            n: Extent = 1
            for q in rel.parents:
                n = ext_mul(n, ext[q])
            ext[rel.fused] = n
    for it in st.leaves:
        if it.annotation in ("vectorize", "unroll") and not is_static(ext[it.name]):
            raise ScheduleError(f"stage {st.name}: cannot {it.annotation} {it.name}: its "
                                f"extent {ext[it.name]} is symbolic; split it by a constant "
                                f"factor and {it.annotation} the inner loop")
    value: dict = {}
    for it in st.leaves:
        name = it.name if it.name not in used else f"{st.name}_{it.name}"
        n = 1
        while name in used:
            name = f"{st.name}_{it.name}_{n}"
            n += 1
        used.add(name)
        var = Var(name)
        info.loop_vars.append(var)
        info.extents.append(ext[it.name])
        info.scope_vars[name] = ext[it.name]
        value[it.name] = var
    kind = {it.name: it.kind for it in st.roots}
    for rel in st.relations:
        for made in ((rel.outer, rel.inner) if isinstance(rel, Split) else (rel.fused,)):
            kind[made] = kind[rel.parent if isinstance(rel, Split) else rel.parents[0]]
    for rel in reversed(st.relations):
        if isinstance(rel, Split):
            f = ext[rel.inner]
            v = BinOp("+", BinOp("*", value[rel.outer], as_extent_expr(f)), value[rel.inner])
            value[rel.parent] = v
            if not all(is_static(ext[n]) for n in (rel.outer, rel.inner, rel.parent)):
                if not same_extent(ext_mul(ext[rel.outer], f), ext[rel.parent]):
                    info.guards.append((kind[rel.parent],
                                        Cmp("<", v, as_extent_expr(ext[rel.parent]))))
            elif ext[rel.outer] * f > ext[rel.parent]:
                info.guards.append((kind[rel.parent], Cmp("<", v, Const(ext[rel.parent]))))
        else:
            v = value[rel.fused]
            stride: Extent = 1
            for q in reversed(rel.parents):
                big = not is_static(stride) or stride > 1
                part = BinOp("//", v, as_extent_expr(stride)) if big else v
                if q != rel.parents[0]:
                    part = BinOp("%", part, as_extent_expr(ext[q]))
                value[q] = part
                stride = ext_mul(stride, ext[q])
    ranges: Ranges = {v.name: (0, hi_of(e)) for v, e in zip(info.loop_vars, info.extents)}
    for e in info.extents:
        ranges.update({sv.name: (1, INF) for sv in size_vars(e)})
    info.root = {it.name: simplify(value[it.name], ranges) for it in st.roots}
    info.guards = [(k, simplify(c, ranges)) for k, c in info.guards]
    info.guards = [(k, c) for k, c in info.guards if not (isinstance(c, Const) and c.value)]
    for d, iv in enumerate(st.op.axis):
        info.env[iv.name] = simplify(BinOp("+", info.base[d], info.root[iv.name]))
    for iv in st.op.reduce_axis:
        info.env[iv.name] = simplify(BinOp("+", info.root[iv.name], Const(iv.min)))

