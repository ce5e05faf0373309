"""Loop versioning for symbolic sizes: full tiles run without their guards.

A split of a symbolic extent ``M`` by a constant guards every store of the tile with
``i_outer * 8 + i_inner < M``; inside a reduction that guard sits in the innermost body,
where it costs a branch per element and keeps accumulators out of registers. All tiles
but the last are whole, so for the outermost loop ``L`` whose body has only constant
loops, this pass hoists the guards: with every inner loop variable at its largest value
the guard becomes a condition on ``L``'s and outer variables alone, and the body becomes

    if (all hoisted conditions hold) { body without those guards } else { body }

Only guards of the form ``e < E`` with ``E`` depending on a symbolic size and ``e``
affine in the inner loop variables are hoisted; others stay in both versions. Kernels
without symbolic sizes are untouched.
"""
from __future__ import annotations

from tvmlite.ir.expr import BinOp, Cmp, Expr, Var, walk
from tvmlite.ir.simplify import from_linear, linear, simplify
from tvmlite.ir.stmt import Allocate, For, IfThenElse, Seq, Stmt, map_stmt, walk_stmts
from tvmlite.ir.symbolic import SizeVar, is_static

__all__ = ["version_guards"]


def version_guards(s: Stmt) -> Stmt:
    if isinstance(s, For) and _static_inside(s.body):
        return _version(s)
    return map_stmt(s, version_guards)


def _static_inside(s: Stmt) -> bool:
    return all(is_static(x.extent) for x in walk_stmts(s) if isinstance(x, For))


def _has_size(e: Expr) -> bool:
    return any(isinstance(n, SizeVar) for n in walk(e))


def _conjuncts(e: Expr) -> list:
    if isinstance(e, BinOp) and e.op == "and":
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


def _inner_ranges(s: Stmt) -> dict:
    return {x.var.name: x.extent - 1 for x in walk_stmts(s) if isinstance(x, For)}


def _hoist(cond: Expr, inner: dict) -> Expr | None:
    """``cond`` at the largest values of the inner loop variables, if it is ``e < E``
    with a symbolic ``E`` free of inner variables and ``e`` affine in them."""
    if not (isinstance(cond, Cmp) and cond.op == "<" and _has_size(cond.b)):
        return None
    if any(isinstance(n, Var) and n.name in inner for n in walk(cond.b)):
        return None
    terms, c = linear(cond.a)
    keep: dict = {}
    for atom, k in terms.items():
        if isinstance(atom, Var) and atom.name in inner:
            c += k * inner[atom.name] if k > 0 else 0
        elif any(isinstance(n, Var) and n.name in inner for n in walk(atom)):
            return None
        else:
            keep[atom] = k
    return Cmp("<", simplify(from_linear(keep, c)), cond.b)


def _version(loop: For) -> Stmt:
    inner = _inner_ranges(loop.body)   # the loop's own variable stays free
    hoisted: dict = {}   # guard conjunct -> its hoisted condition
    for x in walk_stmts(loop.body):
        if isinstance(x, IfThenElse):
            for c in _conjuncts(x.cond):
                h = _hoist(c, inner)
                if h is not None:
                    hoisted[c] = h
    if not hoisted:
        return loop
    fast = _drop(loop.body, set(hoisted))
    conds = list(dict.fromkeys(hoisted.values()))
    cond = conds[0]
    for c in conds[1:]:
        cond = BinOp("and", cond, c)
    return For(loop.var, loop.extent, loop.kind, IfThenElse(cond, fast, loop.body),
               loop.unroll_limit)


def _drop(s: Stmt, true_conds: set) -> Stmt:
    """``s`` with the conjuncts in ``true_conds`` taken as true."""
    if isinstance(s, IfThenElse):
        rest = [c for c in _conjuncts(s.cond) if c not in true_conds]
        then = _drop(s.then, true_conds)
        other = None if s.other is None else _drop(s.other, true_conds)
        if not rest:
            return then
        cond = rest[0]
        for c in rest[1:]:
            cond = BinOp("and", cond, c)
        return IfThenElse(cond, then, other)
    if isinstance(s, (For, Seq, Allocate)):
        return map_stmt(s, lambda c: _drop(c, true_conds))
    return s

