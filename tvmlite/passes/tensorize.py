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

Map: ``tensorize`` (the pass) · ``check_target`` · the match (``_match``, ``_strides``).
"""
from __future__ import annotations

from tvmlite.ir.expr import BinOp, Cast, Expr, Load, Var, free_vars
from tvmlite.ir.simplify import from_linear, linear
from tvmlite.ir.stmt import For, Stmt, Store, TensorIntrinsic, map_stmt, walk_stmts
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
    if isinstance(s, For) and s.kind == "tensorize" and s.var.name in marked:
        stage, name = marked[s.var.name]
        if vector:
            raise ScheduleError(f"stage {stage}: tensorize {s.var.name} with {name}: it is "
                                f"inside the vectorized loop {vector}; an intrinsic is "
                                f"already a vector instruction (vectorize no loop around it)")
        return _match(s, stage, name)
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
    value = store.value
    if not (isinstance(value, BinOp) and value.op == "+" and isinstance(value.a, Load)
            and value.a.buffer is store.buffer and isinstance(value.b, BinOp)
            and value.b.op == "*"):
        raise ScheduleError(f"{where}: the update must be a sum of products, "
                            f"out += a * b; got {value}")
    acc = store.buffer.dtype
    operands = [_operand(t, acc, where) for t in (value.b.a, value.b.b)]
    out_idx = _strides(store.indices[0], x, r, where, store.buffer.name)
    if _strides(value.a.indices[0], x, r, where, store.buffer.name) != out_idx:
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
        stored = f" with B stored as {intr.b_storage}" if intr.b_storage else ""
        raise ScheduleError(f"{where}: it computes {_dtypes(intr.dtypes)}{stored}, not "
                            f"{a.dtype} x {b.dtype} -> {acc} ({a.buffer.name} x "
                            f"{b.buffer.name})")
    return TensorIntrinsic(name, store.buffer, out_idx[0], a.buffer, sa[0], b.buffer, sb[0])


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
