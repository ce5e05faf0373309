"""Loop versioning for symbolic sizes: full tiles run without their guards.

A split of a symbolic extent ``M`` by a constant guards every store of the tile with
``i_outer * 8 + i_inner < M``; inside a reduction that guard sits in the innermost body,
where it costs a branch per element and keeps accumulators out of registers. All tiles
but the last are whole, so for the outermost loop ``L`` whose body has only constant
loops, this pass hoists the guards: with every inner loop variable at its largest value
the guard becomes a condition on ``L``'s and outer variables alone, and the body becomes

    if (all hoisted conditions hold) { body without those guards } else { body }

When that body has unrolled blocks (loops auto-unroll or an ``unroll`` step marked: the
pass runs after auto-unroll marking), copying the whole body would double the C of every
unrolled block -- and gcc's time, which is most of the cost of compiling a dynamic
candidate -- and leave the last tile unrolled but guarded. Instead each outermost
unrolled block that holds guards is versioned by itself:

    if (hoisted conditions at the block's largest values) { block, unrolled, unguarded }
    else { block, its loops the guards read rolled back into serial loops, guarded }

so the C holds one unrolled copy, plus a smaller one unrolled only along the axes no
guard reads (a partial tile of rows still keeps each row's vectors in registers). When the
guards are one row count over one unrolled loop, the remainder is unrolled too: if every
store of the block goes to a local tile, as BLIS's edge case, copies of 1, 2, 4, 8 rows
(``EDGE_STEPS``; the whole block for counts above the last) compute rows past the size
into the tile from a copy of the last valid row (``_clamped``; the copy-out stays
guarded); else, as BLAS's edge kernels, one exact copy per count (``_edges``). A GMM
block of 9 rows then costs less than twice its C, not four times (a dynamic GMM tuning's
gcc time sits between none and a copy per count: docs/dynamic-shapes.md), and runs its
partial tiles as fast as with a copy per count.
The versioning sits at the outermost loop around the block that no guard reads (a
reduction loop around a block of rows is versioned whole, so the branch is not paid per
reduction step). A full tile pays one predictable branch per block; a partial tile runs
all its full blocks unrolled too, and its last, partial block as an edge copy (rolled
when it has none). Guards outside unrolled blocks (in rolled loops: a cache's
initialisation and write-back, O(tile) work) stay.

Only guards of the form ``e < E`` with ``E`` depending on a symbolic size and ``e``
affine in the inner loop variables are hoisted; others stay in both versions.

A kernel without symbolic sizes has its last tiles peeled instead (``peel_tiles``, TVM's
loop partition): where the guards of a serial loop ``L``'s body, at the inner variables'
largest values, are ``k*L + c < E`` with constants alone, the first ``ceil((E - c) / k)``
iterations run the body without them and the rest run after, as a loop of their own
whose guards the later simplification resolves (unrolled, each row's guard is a
constant). A loose register block (14 rows of 128: ``graph.kernel.blocked_schedule``)
otherwise kept a branch per row in its reduction: BERT's FFN matmul with 14 x 32 blocks
ran at 137 GFLOP/s on Zen 5.
"""
from __future__ import annotations

from tvmlite.ir.expr import (
    BinOp,
    Cmp,
    Const,
    Expr,
    Load,
    Var,
    binop,
    cmp,
    rebuild,
    substitute,
    walk,
)
from tvmlite.ir.simplify import from_linear, linear, simplify
from tvmlite.ir.stmt import (
    Allocate,
    For,
    IfThenElse,
    Seq,
    Stmt,
    Store,
    map_exprs,
    map_stmt,
    stmt_children,
    walk_stmts,
)
from tvmlite.ir.symbolic import SizeVar, is_static

__all__ = ["peel_tiles", "version_guards"]

# a guarded unrolled loop up to this long gets one remainder copy per count ... A partial
# register block runs much faster as an unrolled, unguarded copy than as the rolled,
# guarded remainder (see docs/dynamic-shapes.md)
EDGE_MAX = 16
# ... when those copies hold at most this many expression nodes once unrolled (stores and
# the nodes of their values and indices): gcc's time grows with the unrolled C. A GMM
# kernel's copies stay well under it; a conv2d's with a 7-image block held several times
# as many (672 stores, padding selects in each), and its C took gcc several times longer
# to compile than without them
EDGE_BUDGET = 6000
# the heights of the clamped edge copies of a block whose stores all go to a local tile
# (``_clamped``): a count of valid rows runs the first at or above it
EDGE_STEPS = (1, 2, 4, 8)


def version_guards(s: Stmt) -> Stmt:
    if isinstance(s, For) and _static_inside(s.body):
        if any(_is_block(x) and _guards(x) for x in walk_stmts(s.body)):
            return map_stmt(s, _version_blocks)
        return _version(s)
    return map_stmt(s, version_guards)


def _is_block(s: Stmt) -> bool:
    return isinstance(s, For) and s.kind == "unroll"


def _guards(s: Stmt) -> bool:
    return any(isinstance(x, IfThenElse) for x in walk_stmts(s))


def _version_blocks(s: Stmt) -> Stmt:
    """The guarded unrolled blocks under ``s`` versioned, each at the outermost loop
    around it that no guard depends on (module doc)."""
    if not (isinstance(s, For) and any(_is_block(x) and _guards(x) for x in walk_stmts(s))):
        return map_stmt(s, _version_blocks)
    if not _is_block(s):
        used = {n.name for x in walk_stmts(s) if isinstance(x, IfThenElse)
                for n in walk(x.cond) if isinstance(n, Var)}
        if any(loop.var.name in used for loop in _loops_outside_blocks(s)):
            return map_stmt(s, _version_blocks)
    inner = _inner_ranges(s)   # its own variable too: a block's is unrolled away
    hoisted = _hoisted(s, inner)
    if not hoisted:
        return s
    guard_vars = {n.name for c in hoisted for n in walk(c) if isinstance(n, Var)}
    some = _any_store_runs(s, inner)
    form = _edge_form(s, hoisted, inner)
    rest = None
    if form is not None:   # the clamped copy reads row count - 1: needs count >= 1
        rest = (_clamped(s, hoisted, form) if some is not None else None) or \
            _edges(s, hoisted, form)
    rest = rest or _rolled(s, guard_vars)
    if some is not None:   # a block past M (a whole empty sub-tile) is skipped
        rest = IfThenElse(some, rest)
    return IfThenElse(_all(list(dict.fromkeys(hoisted.values()))), _drop(s, set(hoisted)),
                      rest)


def _edge_form(s: Stmt, hoisted: dict, inner: dict) -> tuple | None:
    """(the loop ``v``, the count of its valid iterations) when every guard of block ``s``
    is the same ``k*v + e < E`` over one unrolled loop ``v`` of 2..``EDGE_MAX``
    iterations: the ``n`` valid ones are ``v < ceil((E - e) / k)``. Else None."""
    forms: dict = {}     # printed form -> (loop name, k, e, E): one form, or no edges
    for conj in hoisted:
        terms, c = linear(conj.a)
        mine = [a for a in terms if isinstance(a, Var) and a.name in inner]
        if len(mine) != 1 or terms[mine[0]] <= 0:
            return None
        v = mine[0]
        rest = {a: k for a, k in terms.items() if a is not v}
        if any(isinstance(n, Var) and n.name in inner for a in rest for n in walk(a)):
            return None
        e = from_linear(rest, c)
        forms.setdefault((v.name, terms[v], str(simplify(e)), str(conj.b)),
                         (v.name, terms[v], e, conj.b))
    if len(forms) != 1:
        return None
    (name, k, e, bound_), = forms.values()
    loops = [x for x in walk_stmts(s) if isinstance(x, For) and x.var.name == name]
    if len(loops) != 1 or loops[0].kind != "unroll" or not 2 <= loops[0].extent <= EDGE_MAX:
        return None
    room = binop("-", bound_, e)
    return loops[0], simplify(room if k == 1 else binop("//", binop("+", room, k - 1), k))


def _clamped(s: Stmt, hoisted: dict, form: tuple) -> Stmt | None:
    """The remainder of block ``s`` as BLIS computes a micro-kernel's edge: unrolled and
    unguarded, rows past the size computed too, from a copy of the last valid row (every
    read of a buffer the block does not write has ``v`` replaced by ``min(v, count - 1)``)
    into rows of a local tile that the guarded copy-out never reads. A copy per step of
    ``EDGE_STEPS`` below the block's height, each serving the counts up to it (at most
    twice the rows computed), and the whole block for the counts above (none when the
    last step is the height less one, as 8 for 9 rows): at most about twice the
    C of the block, where a copy per count holds ``extent / 2`` times it (the whole block
    alone when even that exceeds ``EDGE_BUDGET``). Only when every store of the block
    writes a local buffer of constant shape (a tile: its rows past the size are in
    bounds) at a place of its own per row (``v`` a spatial axis of every store: rows of a
    reduction over the size would add the copied row again); else None."""
    loop, count = form
    stores = [x for x in walk_stmts(s) if isinstance(x, Store)]
    others = {x.var.name for x in walk_stmts(s) if isinstance(x, For)} - {loop.var.name}
    if not stores or any(x.buffer.scope != "local" or not all(map(is_static, x.buffer.shape))
                         or not _own_row(x, loop.var.name, others) for x in stores):
        return None
    written = {x.buffer.name for x in stores}
    last = {loop.var.name: simplify(binop("min", loop.var, binop("-", count, 1)))}

    def clamp(e: Expr) -> Expr:
        if isinstance(e, Load) and e.buffer.name not in written:
            return Load(e.buffer, tuple(substitute(i, last) for i in e.indices))
        return rebuild(e, clamp)

    def rows(n: int) -> Stmt:
        return map_exprs(_drop(_with_extent(s, loop.var.name, n), set(hoisted)), clamp)
    steps = [n for n in EDGE_STEPS if n < loop.extent]
    if steps and steps[-1] == loop.extent - 1:   # it serves every count: no whole copy
        out = rows(steps.pop())
    else:
        out = rows(loop.extent)
    for n in reversed(steps):
        out = IfThenElse(cmp("<=", count, n), rows(n), out)
    return out if _unrolled_nodes(out) <= EDGE_BUDGET else rows(loop.extent)


def _own_row(store: Store, name: str, others: set) -> bool:
    """Some index of ``store`` grows with loop ``name`` and none of the loops ``others``
    (the block's): each iteration writes a place of its own, past the others' as it grows."""
    for index in store.indices:
        terms, _ = linear(index)
        mine = [k for a, k in terms.items() if isinstance(a, Var) and a.name == name]
        if mine and mine[0] > 0 and not any(isinstance(n, Var) and n.name in others
                                            for a in terms for n in walk(a)):
            return True
    return False


def _edges(s: Stmt, hoisted: dict, form: tuple) -> Stmt | None:
    """The remainder of block ``s`` as one unrolled, unguarded copy per count of valid
    rows (1 <= n < extent, here), as a BLAS library's edge kernels: the copy for ``n``
    runs exactly those, its accumulators still in registers, where the rolled remainder
    keeps them in memory and branches per row. For a block that stores to memory
    other than a local tile (where ``_clamped`` cannot compute the rows past the size).
    None when the copies would exceed ``EDGE_BUDGET`` expression nodes."""
    loop, count = form
    drop = set(hoisted)
    out = _drop(_with_extent(s, loop.var.name, loop.extent - 1), drop)
    for n in range(loop.extent - 2, 0, -1):
        out = IfThenElse(cmp("==", count, n), _drop(_with_extent(s, loop.var.name, n), drop),
                         out)
    return out if _unrolled_nodes(out) <= EDGE_BUDGET else None


def _unrolled_nodes(s: Stmt) -> int:
    """Expression nodes of the stores of ``s`` (with the stores) once its unrolled loops are
    unrolled (a rolled loop counts once): about the C it becomes."""
    if isinstance(s, Store):
        return 1 + sum(1 for e in (s.value, *s.indices) for _ in walk(e))
    n = sum(_unrolled_nodes(c) for c in stmt_children(s))
    return n * s.extent if isinstance(s, For) and s.kind == "unroll" and is_static(s.extent) else n


def _with_extent(s: Stmt, name: str, extent: int) -> Stmt:
    s = map_stmt(s, lambda c: _with_extent(c, name, extent))
    if isinstance(s, For) and s.var.name == name:
        return For(s.var, extent, s.kind, s.body, s.unroll_limit)
    return s


def _loops_outside_blocks(s: Stmt) -> list:
    if _is_block(s):
        return []
    own = [s] if isinstance(s, For) else []
    return own + [x for c in stmt_children(s) for x in _loops_outside_blocks(c)]


def _any_store_runs(s: Stmt, inner: dict) -> Expr | None:
    """A condition false only when no store of ``s`` runs: the disjunction of its guards
    at their smallest values, if every store is under a hoistable guard; else None."""
    found: list = []

    def go(x: Stmt, guards: tuple) -> bool:
        if isinstance(x, IfThenElse):
            mine = tuple(h for h in (_hoist(c, inner, largest=False)
                                     for c in _conjuncts(x.cond)) if h is not None)
            return go(x.then, guards + mine) and (x.other is None or go(x.other, guards))
        if isinstance(x, Store):
            if not guards:
                return False
            found.append(guards[-1])
            return True
        return all(go(c, guards) for c in stmt_children(x))

    if not go(s, ()) or not found:
        return None
    conds = list(dict.fromkeys(found))
    out = conds[0]
    for c in conds[1:]:
        out = BinOp("or", out, c)
    return out


def _rolled(s: Stmt, guard_vars: set) -> Stmt:
    """``s`` with the loops its guards read serial again (the rows of a partial tile),
    the others still unrolled (a row's vectors stay in registers), and no pragma."""
    s = map_stmt(s, lambda c: _rolled(c, guard_vars))
    if isinstance(s, For) and (s.kind == "unroll" or s.unroll_limit):
        kind = "serial" if s.kind == "unroll" and s.var.name in guard_vars else s.kind
        return For(s.var, s.extent, kind, s.body)
    return s


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


def _hoist(cond: Expr, inner: dict, largest: bool = True,
           static: bool = False) -> Cmp | None:
    """``cond`` at the largest (else the smallest) value of ``e`` over the inner loop
    variables, if it is ``e < E`` with a symbolic ``E`` (or, ``static``, a constant one:
    ``peel_tiles``) free of inner variables and ``e`` affine in them: at the largest it
    holds for every iteration, at the smallest for at least one if for any."""
    if not (isinstance(cond, Cmp) and cond.op == "<"):
        return None
    if not (_has_size(cond.b) or (static and isinstance(cond.b, Const))):
        return None
    if any(isinstance(n, Var) and n.name in inner for n in walk(cond.b)):
        return None
    terms, c = linear(cond.a)
    keep: dict = {}
    for atom, k in terms.items():
        if isinstance(atom, Var) and atom.name in inner:
            c += k * inner[atom.name] if (k > 0) == largest else 0
        elif any(isinstance(n, Var) and n.name in inner for n in walk(atom)):
            return None
        else:
            keep[atom] = k
    return Cmp("<", simplify(from_linear(keep, c)), cond.b)


def _hoisted(s: Stmt, inner: dict) -> dict:
    """guard conjunct -> its hoisted condition, for every hoistable guard in ``s``."""
    hoisted: dict = {}
    for x in walk_stmts(s):
        if isinstance(x, IfThenElse):
            for c in _conjuncts(x.cond):
                h = _hoist(c, inner)
                if h is not None:
                    hoisted[c] = h
    return hoisted


def _all(conds: list) -> Expr:
    cond = conds[0]
    for c in conds[1:]:
        cond = BinOp("and", cond, c)
    return cond


def _version(loop: For) -> Stmt:
    inner = _inner_ranges(loop.body)   # the loop's own variable stays free
    hoisted = _hoisted(loop.body, inner)
    if not hoisted:
        return loop
    fast = _drop(loop.body, set(hoisted))
    return For(loop.var, loop.extent, loop.kind,
               IfThenElse(_all(list(dict.fromkeys(hoisted.values()))), fast, loop.body),
               loop.unroll_limit)


def _drop(s: Stmt, true_conds: set) -> Stmt:
    """``s`` with the conjuncts in ``true_conds`` taken as true."""
    if isinstance(s, IfThenElse):
        rest = [c for c in _conjuncts(s.cond) if c not in true_conds]
        then = _drop(s.then, true_conds)
        other = None if s.other is None else _drop(s.other, true_conds)
        if not rest:
            return then
        return IfThenElse(_all(rest), then, other)
    if isinstance(s, (For, Seq, Allocate)):
        return map_stmt(s, lambda c: _drop(c, true_conds))
    return s


def peel_tiles(s: Stmt) -> Stmt:
    """Serial loops of static extent whose guards hold for their first iterations split
    into those, unguarded, and the rest (module doc); outermost loops first, then the
    loops inside both parts. A nest without a guard is returned as it is (lowering runs
    for every candidate of a search)."""
    if not _guards(s):
        return s
    if isinstance(s, For) and s.kind == "serial" and isinstance(s.extent, int):
        full, conds = _full_iterations(s)
        if conds and full == s.extent:
            return map_stmt(For(s.var, s.extent, s.kind, _drop(s.body, conds), s.unroll_limit),
                            peel_tiles)
        if conds and 0 < full < s.extent:
            head = For(s.var, full, s.kind, _drop(s.body, conds), s.unroll_limit)
            rest = map_exprs(s.body, lambda e: substitute(e, {s.var.name: binop(
                "+", s.var, full)}))
            tail = For(s.var, s.extent - full, s.kind, rest, s.unroll_limit)
            return Seq((map_stmt(head, peel_tiles), map_stmt(tail, peel_tiles)))
    return map_stmt(s, peel_tiles)


def _full_iterations(loop: For) -> tuple[int, set]:
    """(how many first iterations of ``loop`` every conjunct in ``conds`` holds for,
    ``conds``): the conjuncts of its body's guards that hoist (``_hoist``, static) to
    ``k * loop + c < E``, ``k`` positive, nothing else left in them."""
    inner = _inner_ranges(loop.body)
    full, conds = loop.extent, set()
    for x in walk_stmts(loop.body):
        if not isinstance(x, IfThenElse):
            continue
        for c in _conjuncts(x.cond):
            h = _hoist(c, inner, static=True)
            if h is None or not isinstance(h.b, Const):
                continue
            terms, const = linear(h.a)
            k = terms.pop(loop.var, 0)
            if k <= 0 or terms:
                continue
            full = min(full, max(0, (int(h.b.value) - const - 1) // k + 1))
            conds.add(c)
    return full, conds
