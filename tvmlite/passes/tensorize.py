"""Tensorized loop nests become dot-product intrinsics, after the match is checked.

``TensorizeStep`` (``tvmlite.schedule.steps``) marks a stage's two innermost loops
``tensorize`` (an x loop of the intrinsic's lanes, then a reduce loop r of its group);
lowering builds them as loops of that kind, which no other pass unrolls or vectorizes.
Here, on flat indices (after ``flatten``), each such nest must be exactly the update

    out[o + x] = out[o + x] + acc(a[ai + r]) * acc(b[bi + x * group + r])

(the two products in either order): one store, no guard, the out index moving with x
only, the broadcast operand ``a`` with r only, and ``b`` read as ``lanes`` consecutive
groups -- the [N/lanes][K/group][lanes][group] layout a packing stage gives the weights
(``prepack(..., group_dim=, group=)``). A nest that is not is a ScheduleError saying
which condition fails; one that is becomes a ``TensorIntrinsic`` at ``(o, ai, bi)``.
Whether the target has the instruction is ``check_target``'s question, at code generation.

A tile intrinsic (AMX, ``Intrinsic.is_tile``) is matched on its four loops (rows i, lanes
x, k groups g, group r; the rows loop is a plain loop, so the accumulators' zeroing
stays rows of vectors): the same update with out strides (ldc, 1, 0, 0), a (lda, 0,
group, 1) and b (0, group, lanes * group, 1) along (i, x, g, r), the rows and lanes whole
tiles (16 or 32), g a multiple of the tile step, every stride a constant. A tile whose
sum starts right there -- the statement before it in its sequence stores 0 to exactly
its block of out (rows x lanes at its origin and ldc) and nothing else, as a reduction's
init does when the whole reduction is one tile nest -- takes that zeroing in: the
intrinsic is marked fresh (``tilezero``, out not read) and the zeroing is dropped. A sum
that goes on from an earlier one (a conv's window around the tile, K split) keeps
loading out.

Map: ``tensorize`` (the pass) · ``check_target`` · the match (``_match``, ``_match_tile``,
``_strides``) · the fresh tiles (``_fresh_tiles``, ``_zeroes``).
"""
from __future__ import annotations

import dataclasses
import math

from tvmlite.ir.expr import BinOp, Cast, Const, Expr, Load, Var, free_vars, same
from tvmlite.ir.simplify import from_linear, linear
from tvmlite.ir.stmt import For, Seq, Stmt, Store, TensorIntrinsic, map_stmt, walk_stmts
from tvmlite.schedule.state import ScheduleError
from tvmlite.target.intrinsics import available, get_intrinsic, missing_features

__all__ = ["tensorize", "check_target"]


def tensorize(s: Stmt, marked: dict, vector: str = "") -> Stmt:
    """``s`` with every tensorize nest replaced by its intrinsic. ``marked``: {the outer
    loop's variable name: (stage, intrinsic name)}, as lowering built them; ``vector``:
    the vectorized loop ``s`` is inside, if any (an intrinsic cannot be). Nothing marked
    (almost every program a search lowers): ``s`` as it is, not walked."""
    if not marked:
        return s
    if isinstance(s, For) and s.kind == "vectorize":
        vector = s.var.name
    s = map_stmt(s, lambda c: tensorize(c, marked, vector))
    if isinstance(s, Seq):
        return _fresh_tiles(s)
    if isinstance(s, For) and s.var.name in marked:
        stage, name = marked[s.var.name]
        tile = get_intrinsic(name).is_tile
        if s.kind != "tensorize" and not tile:
            return s
        if tile and isinstance(s.body, For) and s.body.kind == "vectorize":
            return s   # the accumulators' zeroing: the same rows loop, vectors of lanes
        if vector:
            raise ScheduleError(f"stage {stage}: tensorize {s.var.name} with {name}: it is "
                                f"inside the vectorized loop {vector}; an intrinsic is "
                                f"already a vector instruction (vectorize no loop around it)")
        return _match_tile(s, stage, name) if tile else _match(s, stage, name)
    return s


def check_target(body: Stmt, arch: str, features: tuple, target_name: str) -> None:
    """ScheduleError naming the missing feature if ``body`` uses an intrinsic the target
    (``arch``, ``features``) lacks: its code would be an illegal instruction there."""
    for st in walk_stmts(body):
        if isinstance(st, TensorIntrinsic):
            missing = missing_features(get_intrinsic(st.name), arch, features)
            if missing:
                raise ScheduleError(
                    f"tensorize: intrinsic {st.name} needs {', '.join(missing)}, which "
                    f"target {target_name or arch} lacks (it has "
                    f"{', '.join(available(arch, features)) or 'no intrinsics'}); "
                    f"tensorize with one of those (Target.intrinsics)")


def _match(loop: For, stage: str, name: str) -> Stmt:
    intr = get_intrinsic(name)
    where = f"stage {stage}: tensorize {loop.var.name} with {name}"
    inner = loop.body
    if not (isinstance(inner, For) and inner.kind == "tensorize"):
        raise ScheduleError(f"{where}: the loop must hold only the reduce loop of the group "
                            f"(a guard of an imperfect split or another stage's loops are "
                            f"in the way): {_first_line(inner)}")
    store = inner.body
    if not isinstance(store, Store):
        raise ScheduleError(f"{where}: the reduce loop {inner.var.name} must hold exactly the "
                            f"update (no guard: split by factors that divide the extents): "
                            f"{_first_line(store)}")
    if loop.extent != intr.lanes or inner.extent != intr.group:
        raise ScheduleError(f"{where}: the loops must be {intr.lanes} x {intr.group} "
                            f"(lanes x group), got {loop.extent} x {inner.extent}")
    x, r = loop.var.name, inner.var.name
    read, operands = _update(store, where)
    acc = store.buffer.dtype
    out_idx = _strides(store.indices[0], x, r, where, store.buffer.name)
    if _strides(read.indices[0], x, r, where, store.buffer.name) != out_idx:
        raise ScheduleError(f"{where}: the update reads another element than it writes")
    if out_idx[1:] != (1, 0):
        raise ScheduleError(f"{where}: the output {store.buffer.name} must be {intr.lanes} "
                            f"consecutive elements along {x} (stride 1) and not move with "
                            f"{r}; its strides are {out_idx[1:]}")
    strides = [_strides(ld.indices[0], x, r, where, ld.buffer.name) for ld in operands]
    order = sorted(range(2), key=lambda i: strides[i][1:] != (0, 1))
    (a, sa), (b, sb) = [(operands[i], strides[i]) for i in order]
    if sa[1:] != (0, 1):
        raise ScheduleError(f"{where}: one operand must be a group of {intr.group} "
                            f"consecutive elements along {r} shared by every lane (strides "
                            f"0 along {x}, 1 along {r}); the strides are "
                            f"{[st[1:] for st in strides]}")
    if sb[1:] != (intr.group, 1):
        raise ScheduleError(f"{where}: {b.buffer.name} must hold each lane's group of "
                            f"{intr.group} next to the next lane's (strides {intr.group} "
                            f"along {x}, 1 along {r}: pack it as [N/{intr.lanes}][K/"
                            f"{intr.group}][{intr.lanes}][{intr.group}], prepack with "
                            f"group={intr.group}); its strides are {sb[1:]}")
    if not intr.reads(a.dtype, b.dtype, acc):
        raise ScheduleError(f"{where}: it computes {_dtypes(intr.dtypes)}{intr.storage()}, "
                            f"not {a.dtype} x {b.dtype} -> {acc} ({a.buffer.name} x "
                            f"{b.buffer.name})")
    return TensorIntrinsic(name, store.buffer, out_idx[0], a.buffer, sa[0], b.buffer, sb[0])


def _match_tile(loop: For, stage: str, name: str) -> Stmt:
    intr = get_intrinsic(name)
    where = f"stage {stage}: tensorize {loop.var.name} with {name}"
    loops = [loop]
    while len(loops) < 4:
        inner = loops[-1].body
        if not (isinstance(inner, For) and inner.kind == "tensorize"):
            raise ScheduleError(f"{where}: a tile is four perfectly nested loops (rows, "
                                f"lanes, k groups, group) around the update; found "
                                f"{_first_line(inner)}")
        loops.append(inner)
    store = loops[-1].body
    if not isinstance(store, Store):
        raise ScheduleError(f"{where}: the group loop must hold exactly the update (no "
                            f"guard: split by factors that divide the extents): "
                            f"{_first_line(store)}")
    rows, lanes, groups, group = (lp.extent for lp in loops)
    step = intr.kgroups
    if not (all(isinstance(e, int) for e in (rows, lanes, groups, group))
            and rows in (intr.tile_rows, 2 * intr.tile_rows)
            and lanes in (intr.lanes, 2 * intr.lanes) and group == intr.group
            and groups % step == 0 and groups > 0):
        raise ScheduleError(f"{where}: the loops must be rows x lanes x k groups x group = "
                            f"{intr.tile_rows} or {2 * intr.tile_rows} x {intr.lanes} or "
                            f"{2 * intr.lanes} x a multiple of {step} x {intr.group} (whole "
                            f"tiles), got {rows} x {lanes} x {groups} x {group}")
    names = [lp.var.name for lp in loops]
    read, operands = _update(store, where)
    acc = store.buffer.dtype
    out_idx = _tile_strides(store.indices[0], names, where, store.buffer.name)
    if _tile_strides(read.indices[0], names, where, store.buffer.name) != out_idx:
        raise ScheduleError(f"{where}: the update reads another element than it writes")
    ldc = out_idx[1]
    if out_idx[2:] != (1, 0, 0) or not isinstance(ldc, int) or ldc < lanes:
        raise ScheduleError(f"{where}: the output {store.buffer.name} must be rows of "
                            f"{lanes} consecutive elements (strides (ldc >= {lanes}, 1, 0, 0) "
                            f"along (rows, lanes, k groups, group)); its strides are "
                            f"{out_idx[1:]}")
    strides = [_tile_strides(ld.indices[0], names, where, ld.buffer.name) for ld in operands]
    order = sorted(range(2), key=lambda n: strides[n][2:] != (0, group, 1))
    (a, sa), (b, sb) = [(operands[n], strides[n]) for n in order]
    if sa[2:] != (0, group, 1) or not isinstance(sa[1], int) or sa[1] < groups * group:
        raise ScheduleError(f"{where}: A must be read in place, rows with a constant "
                            f"stride of at least the reduction (strides (lda, 0, {group}, 1)"
                            f" along (rows, lanes, k groups, group)); the strides are "
                            f"{[st[1:] for st in strides]}")
    if sb[1:] != (0, group, lanes * group, 1):
        raise ScheduleError(f"{where}: {b.buffer.name} must be packed in panels as wide as "
                            f"the block, [N/{lanes}][K/{group}][{lanes}][{group}] (strides "
                            f"(0, {group}, {lanes * group}, 1)), each k group's row the B "
                            f"tile's; its strides are {sb[1:]}")
    if not intr.reads(a.dtype, b.dtype, acc):
        raise ScheduleError(f"{where}: it computes {_dtypes(intr.dtypes)}, not "
                            f"{a.dtype} x {b.dtype} -> {acc} ({a.buffer.name} x "
                            f"{b.buffer.name})")
    return TensorIntrinsic(name, store.buffer, out_idx[0], a.buffer, sa[0], b.buffer, sb[0],
                           (rows, lanes, groups, ldc, sa[1], lanes * group, 0))


def _fresh_tiles(s: Seq) -> Stmt:
    """``s`` with each tile intrinsic that a zeroing of its block precedes (``_zeroes``)
    marked fresh, that zeroing dropped (module doc)."""
    out: list[Stmt] = []
    for st in s.stmts:
        if isinstance(st, TensorIntrinsic) and st.tile and not st.tile[6] and out \
                and _zeroes(out[-1], st):
            out[-1] = dataclasses.replace(st, tile=st.tile[:6] + (1,))
        else:
            out.append(st)
    return s if len(out) == len(s.stmts) else (out[0] if len(out) == 1 else Seq(tuple(out)))


def _zeroes(s: Stmt, tile: TensorIntrinsic) -> bool:
    """Whether ``s`` is a rows loop around a vectorized lanes loop storing +0 to exactly
    ``tile``'s block of its output (its origin, row stride and extents), nothing else."""
    rows, lanes, _, ldc = tile.tile[:4]
    if not (isinstance(s, For) and s.extent == rows and isinstance(s.body, For)
            and s.body.kind == "vectorize" and s.body.extent == lanes
            and isinstance(s.body.body, Store)):
        return False
    store = s.body.body
    v = store.value
    if store.buffer.name != tile.out.name or not (isinstance(v, Const) and v.value == 0
                                                 and math.copysign(1.0, v.value) > 0):
        return False
    try:
        idx = _tile_strides(store.indices[0], [s.var.name, s.body.var.name], "", "")
    except ScheduleError:
        return False
    return idx[1:] == (ldc, 1) and same(idx[0], tile.out_index)


def _tile_strides(idx: Expr, names: list, where: str, buf: str) -> tuple:
    """(the index at the nest's origin, its strides along each of ``names``)."""
    terms, c = linear(idx)
    steps = dict.fromkeys(names, 0)
    rest = {}
    for atom, k in terms.items():
        if isinstance(atom, Var) and atom.name in steps:
            steps[atom.name] = k
        elif set(names) & free_vars(atom):
            raise ScheduleError(f"{where}: the index of {buf} is not affine in the "
                                f"tensorized loops ({idx}): the data layout is not what "
                                f"the intrinsic reads")
        else:
            rest[atom] = k
    return (from_linear(rest, c, idx.dtype), *steps.values())


def _update(store: Store, where: str) -> tuple[Load, list[Load]]:
    """Of the store's value ``out + a * b``: the load of ``out`` and its two factors'
    loads (each maybe cast to the accumulator's dtype); a ScheduleError when the store is
    not that update."""
    value = store.value
    if not (isinstance(value, BinOp) and value.op == "+" and isinstance(value.a, Load)
            and value.a.buffer is store.buffer and isinstance(value.b, BinOp)
            and value.b.op == "*"):
        raise ScheduleError(f"{where}: the update must be a sum of products, "
                            f"out += a * b; got {value}")
    acc = store.buffer.dtype
    return value.a, [_operand(t, acc, where) for t in (value.b.a, value.b.b)]


def _operand(e: Expr, acc: str, where: str) -> Load:
    """The load under ``acc(...)`` (a cast to the accumulator's dtype, or none)."""
    if isinstance(e, Cast) and e.dtype == acc and isinstance(e.value, Load):
        return e.value
    if isinstance(e, Load) and e.dtype == acc:
        return e
    raise ScheduleError(f"{where}: each factor must be a tensor element cast to {acc}, "
                        f"got {e}")


def _strides(idx: Expr, x: str, r: str, where: str, buf: str) -> tuple:
    """(the index at x = r = 0, its stride along x, along r); refused when the index is
    not affine in x and r (a division or modulo of them: the layout does not match)."""
    terms, c = linear(idx)
    sx = sr = 0
    rest = {}
    for atom, k in terms.items():
        if isinstance(atom, Var) and atom.name == x:
            sx = k
        elif isinstance(atom, Var) and atom.name == r:
            sr = k
        elif {x, r} & free_vars(atom):
            raise ScheduleError(f"{where}: the index of {buf} is not affine in the "
                                f"tensorized loops ({idx}): the data layout is not what "
                                f"the intrinsic reads")
        else:
            rest[atom] = k
    return from_linear(rest, c, idx.dtype), sx, sr


def _dtypes(dtypes: tuple) -> str:
    return " or ".join(f"{a} x {b} -> {acc}" for a, b, acc in dtypes)


def _first_line(s: Stmt) -> str:
    return str(s).splitlines()[0] if str(s) else type(s).__name__
