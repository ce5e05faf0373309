"""Per-store features of a loop nest, the input of the XGBoost cost model.

The template-free search scores thousands of candidates per round, so features come from
``tvmlite.lower.loop_nest`` (the loop IR before unrolling, flattening and vectorizing) by
affine index analysis only: no loop is ever simulated. One row per ``Store`` statement;
every count is multiplied by how often the store executes (the product of the extents of
its enclosing loops) and every value goes through ``log2(1 + x)`` at the end, so a one-hot
stays 0/1 and large counts compress as in Ansor.

How the columns map to Ansor's per-store features (auto_scheduler/feature.cc):

- compute: ``float_addsub, float_mul, float_div, float_minmax, float_cmp, math_func,
  int_addsub, int_mul, int_divmod, int_cmp (+ int min/max), bool_op, select_op`` — Ansor's
  group 1 without the always-zero MAD and "other call" counters. Integer counts include the
  index math of the store and of every load, and the conditions of enclosing guards
  (counted as if evaluated once per store execution).
- annotations, for vec / unroll / parallel: innermost annotated loop length, product of
  lengths, number of loops, and a position one-hot (none, inner, middle, outer). Ansor
  always writes "mixed" there; we place the innermost annotated loop ourselves: *inner*
  when no loop inside it indexes the stored buffer, *outer* when it is the outermost
  loop, *middle* otherwise. ``auto_unroll_max_step`` is the largest pragma in force.
  Two target-relative columns are ours: ``vec_hw_vectors`` (vector length over the
  target's lanes for the stored dtype) and ``parallel_per_core`` (parallel product over
  the target's cores).
- buffers (up to ``MAX_BUFFERS``: the written one and the reads, ordered by bytes, then
  lines, then unique bytes; zero-padded): access one-hot (read, write, read-write),
  bytes (executions x element size x distinct accesses), unique bytes (footprint over all
  enclosing loops), lines (one line per iteration of the innermost loop that moves the
  address, shared by ``line / (stride * itemsize)`` iterations, divided by the extents of
  inner loops that do not move it), unique lines (footprint split into contiguous runs),
  reuse one-hot (loop multiple read, serial multiple read-write, none), reuse distance in
  iterations and bytes, reuse count, and the stride (elements) of the innermost loop that
  moves the address. Ansor's four ``*_d_reuse_ct`` ratios are left out. Reuse distances
  are ours to define: iterations of the store between two uses (all inner loops, not only
  the ones that index the buffer) and the bytes this store touches in that time; serial
  reuse counts the *earlier stores* inside the loop that touched the buffer.
- ``ai_curve_0..9``: compute ops / footprint bytes at each enclosing loop level, sampled
  at 10 evenly spaced compute counts by linear interpolation, as in Ansor. Compute ops
  are all value arithmetic outside index expressions, of any dtype (Ansor: floats only),
  so integer kernels get a curve too.
- allocation: the stored buffer's allocation size and how many times it is allocated
  (Ansor's alloc_size / alloc_outer_prod), the number and total bytes of ``Allocate``
  nodes enclosing the store, and whether the buffer is local.
- outer scope: number of loops, product of their extents, reduction init / update flags
  and the number of enclosing guards (ours; imperfect splits leave guards).

Simplified against Ansor: footprints are per-dimension boxes (union of accesses by
min/max, holes counted when a dimension is strided); a non-affine index term (``//``,
``%``, ``min``) is a box of its interval bounds, varying with its innermost variable;
reuse and arithmetic intensity see only the accesses of the store itself, not of other
stores in the same loops; cache lines are the target's ``cache_line_bytes`` and alignment
is ignored.

Map: column names · ``extract`` / ``schedule_features`` · op counting (``_count``) ·
affine index analysis (``footprint.py``: ``dim_terms``, ``footprint``,
``unique_lines``, ``address_stride``) · the walk (``_Walk``: loops and stores, then per store the
annotation, buffer + reuse, intensity-curve and allocation columns).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tvmlite.ir.expr import (
    ITEMSIZE,
    BinOp,
    Broadcast,
    Call,
    Cast,
    Cmp,
    Const,
    Expr,
    Load,
    Not,
    Ramp,
    Select,
    Var,
    children,
    free_vars,
)
from tvmlite.ir.stmt import Allocate, For, IfThenElse, Seq, Store
from tvmlite.passes.pipeline import LoweredFunc, loop_nest
from tvmlite.search.model.footprint import address_stride, dim_terms, footprint, unique_lines
from tvmlite.target.target import Target

__all__ = ["FEATURE_NAMES", "N_FEATURES", "MAX_BUFFERS", "extract", "schedule_features",
           "program_scale"]

MAX_BUFFERS = 5
CURVE_POINTS = 10

_COMPUTE = ("float_addsub", "float_mul", "float_div", "float_minmax", "float_cmp",
            "math_func", "int_addsub", "int_mul", "int_divmod", "int_cmp", "bool_op",
            "select_op")
_POSITIONS = ("none", "inner", "middle", "outer")
_ANNOTATIONS = (("vec", "vectorize"), ("unroll", "unroll"), ("parallel", "parallel"))
_BUFFER = ("read", "write", "readwrite", "bytes", "unique_bytes", "lines", "unique_lines",
           "reuse_loop", "reuse_serial", "reuse_none", "reuse_dis_iter", "reuse_dis_bytes",
           "reuse_ct", "stride")
_TAIL = ("alloc_bytes", "alloc_outer_prod", "enclosing_allocs", "enclosing_alloc_bytes",
         "is_local", "num_loops", "outer_prod", "is_init", "is_update", "num_guards")


def _feature_names() -> tuple[str, ...]:
    names = list(_COMPUTE)
    for short, _ in _ANNOTATIONS:
        names += [f"{short}_len", f"{short}_prod", f"{short}_num"]
        names += [f"{short}_pos_{p}" for p in _POSITIONS]
    names += ["auto_unroll_max_step", "vec_hw_vectors", "parallel_per_core"]
    for b in range(MAX_BUFFERS):
        names += [f"buf{b}_{x}" for x in _BUFFER]
    names += [f"ai_curve_{i}" for i in range(CURVE_POINTS)]
    return tuple(names + list(_TAIL))


FEATURE_NAMES: tuple[str, ...] = _feature_names()
N_FEATURES: int = len(FEATURE_NAMES)
_COL = {name: i for i, name in enumerate(FEATURE_NAMES)}
_BUF0 = _COL["buf0_read"]
_AI0 = _COL["ai_curve_0"]

# op -> slot of _COMPUTE; slot 12 (one past the end) counts value ops outside indices.
_FLOAT_SLOT = {"+": 0, "-": 0, "*": 1, "/": 2, "//": 2, "%": 2, "min": 3, "max": 3}
_INT_SLOT = {"+": 6, "-": 6, "*": 7, "/": 8, "//": 8, "%": 8, "min": 9, "max": 9}
_VALUE_OPS = len(_COMPUTE)
_FLOATS = ("float32", "float64")


def extract(func: LoweredFunc, target: Target) -> np.ndarray:
    """float32 array ``(n_stores, N_FEATURES)``, one row per Store in program order.

    ``func`` must come from ``tvmlite.lower.loop_nest`` (multi-dimensional accesses, loops
    not yet unrolled): after ``lower`` the loop structure the features describe is gone.
    """
    if not isinstance(func, LoweredFunc):
        raise TypeError(f"extract(func=...): expected the LoweredFunc of "
                        f"tvmlite.lower.loop_nest(s, args), got {type(func).__name__}")
    if not isinstance(target, Target):
        raise TypeError(f"extract(target=...): expected a tvmlite.target.Target (e.g. "
                        f"Target.host()), got {type(target).__name__}")
    walk = _Walk(func, target)
    walk.visit(func.body)
    rows = np.zeros((len(walk.rows), N_FEATURES), dtype=np.float64)
    updated = {name for name, is_update, _ in walk.meta if is_update}
    for r, (row, (name, is_update, no_loads)) in enumerate(zip(walk.rows, walk.meta)):
        rows[r] = row
        # A reduction init stores a constant into a buffer that some update accumulates.
        rows[r, _COL["is_init"]] = float(no_loads and not is_update and name in updated)
    return np.log2(1.0 + rows).astype(np.float32)


def schedule_features(s: Any, args: Any, target: Target) -> np.ndarray:
    """``extract(loop_nest(s, args), target)``; a ScheduleError of lowering propagates."""
    return extract(loop_nest(s, args, vector_bytes=target.vector_bytes), target)


def program_scale(rows: np.ndarray) -> np.ndarray:
    """One column for every row of a program: ``log2(1 + its float ops)``, summed over all
    its stores (undoing each row's ``log2(1 + x)``). A dynamic task's model is shared by
    sizes (the issue's "features must make sizes comparable"), and a store that does not
    depend on the size -- packing B for a GMM over M -- has the same row at M = 5 and at
    M = 219, though its share of the time is 40x apart: without the program's scale in
    its row, no tree can tell the two apart."""
    flops = float(np.sum(np.exp2(rows[:, :_COL["int_addsub"]].astype(np.float64)) - 1.0))
    return np.full(len(rows), np.log2(1.0 + flops), dtype=np.float32)


# -- arithmetic counting ---------------------------------------------------------------

def _count(e: Expr, c: list, loads: list, in_index: bool) -> None:
    """Add the ops of ``e`` to ``c``; collect its loads. Ops inside load indices are index
    math: counted by dtype like any op, but not as compute ops of the value."""
    t = type(e)  # exact types, not isinstance: this runs for every node of every candidate
    if t is Const or t is Var:
        return
    slot = -1
    if type(e) is Load:  # type(e), not t: mypy narrows e only on this form
        loads.append(e)
        for i in e.indices:
            _count(i, c, loads, True)
        return
    if type(e) is BinOp:
        if e.op in ("and", "or"):
            slot = 10
        else:
            slot = (_FLOAT_SLOT if e.a.dtype in _FLOATS else _INT_SLOT)[e.op]
    elif type(e) is Cmp:
        slot = 4 if e.a.dtype in _FLOATS else 9
    elif t is Not:
        slot = 10
    elif t is Select:
        slot = 11
    elif t is Call:
        slot = 5
    elif t is Ramp or t is Broadcast:
        raise ValueError("extract(func=...): found vector nodes, so func comes from lower(); "
                         "pass tvmlite.lower.loop_nest(s, args) instead")
    if slot >= 0:
        c[slot] += 1
        if not in_index:
            c[_VALUE_OPS] += 1
    for x in ((e.a, e.b) if type(e) is BinOp or type(e) is Cmp else
              (e.value,) if type(e) is Cast else children(e)):
        _count(x, c, loads, in_index)


# -- the walk -----------------------------------------------------------------------------

class _Walk:
    """State of one pass over the loop IR: the stacks of enclosing loops, allocations and
    guards, and, per enclosing loop, how many earlier stores touched each buffer (the
    serial read-write reuse). Private to ``extract``."""

    def __init__(self, func: LoweredFunc, target: Target):
        self.target = target
        self.root_allocs = {b.name for b in func.allocs}
        self.loops: list = []
        self.level: dict = {}
        self.prods: list = [1]
        self.allocs: list = []
        self.guards: list = []
        self.touched: list = []
        self.rows: list = []
        self.meta: list = []

    def visit(self, s: Any) -> None:
        t = type(s)
        if t is Store:
            self.store(s)
        elif t is For:
            name = s.var.name
            prev = self.level.get(name)
            self.level[name] = len(self.loops)
            self.loops.append(s)
            self.prods.append(self.prods[-1] * s.extent)
            self.touched.append({})
            self.visit(s.body)
            self.touched.pop()
            self.prods.pop()
            self.loops.pop()
            if prev is None:
                del self.level[name]
            else:
                self.level[name] = prev
        elif t is Seq:
            for x in s.stmts:
                self.visit(x)
        elif t is IfThenElse:
            self.guards.append(s.cond)
            self.visit(s.then)
            if s.other is not None:
                self.visit(s.other)
            self.guards.pop()
        elif t is Allocate:
            self.allocs.append((s.buffer, self.prods[-1]))
            self.visit(s.body)
            self.allocs.pop()
        else:
            raise TypeError(f"extract(func=...): unexpected statement {type(s).__name__}")

    def store(self, s: Store) -> None:
        buf = s.buffer
        if len(s.indices) != len(buf.shape):
            raise ValueError(f"extract(func=...): store to {buf.name} has {len(s.indices)} "
                             f"indices for a {len(buf.shape)}-d buffer, so func was "
                             "flattened by lower(); pass tvmlite.lower.loop_nest(s, args)")
        c = [0] * (_VALUE_OPS + 1)
        scratch: list = []
        for i in s.indices:
            _count(i, c, scratch, True)
        for g in self.guards:
            _count(g, c, scratch, True)
        loads: list = []
        _count(s.value, c, loads, False)
        # name -> [buffer, {index tuple: None}, read, write]; the written buffer first
        acc: dict = {buf.name: [buf, {tuple(s.indices): None}, False, True]}
        for ld in loads:
            entry = acc.setdefault(ld.buffer.name, [ld.buffer, {}, False, False])
            entry[1][tuple(ld.indices)] = None
            entry[2] = True
        is_update = acc[buf.name][2]
        row = np.zeros(N_FEATURES)
        n = len(self.loops)
        outer = self.prods[-1]
        row[:len(_COMPUTE)] = np.array(c[:len(_COMPUTE)], dtype=np.float64) * outer
        self.annotations(row, s)
        self.buffers(row, acc, c[_VALUE_OPS])
        self.allocation(row, buf)
        row[_COL["num_loops"]] = n
        row[_COL["outer_prod"]] = outer
        row[_COL["is_update"]] = float(is_update)
        row[_COL["num_guards"]] = len(self.guards)
        for frame in self.touched:
            for name in acc:
                frame[name] = frame.get(name, 0) + 1
        self.rows.append(row)
        self.meta.append((buf.name, is_update, not loads))

    def annotations(self, row: np.ndarray, s: Store) -> None:
        loops = self.loops
        spatial = [lv for i in s.indices for lv in map(self.level.get, free_vars(i))
                   if lv is not None]
        inner_spatial = max(spatial, default=len(loops) - 1)
        max_step = 0
        for short, kind in _ANNOTATIONS:
            lvs = [lv for lv, f in enumerate(loops) if f.kind == kind]
            prod = 1
            for lv in lvs:
                prod *= loops[lv].extent
            pos = "none"
            if lvs:
                last = lvs[-1]
                pos = "inner" if last >= inner_spatial else "outer" if last == 0 else "middle"
                row[_COL[f"{short}_len"]] = loops[last].extent
                row[_COL[f"{short}_prod"]] = prod
                row[_COL[f"{short}_num"]] = len(lvs)
            row[_COL[f"{short}_pos_{pos}"]] = 1.0
            if short == "vec" and lvs:
                lanes = self.target.vector_lanes(s.buffer.dtype)
                row[_COL["vec_hw_vectors"]] = loops[lvs[-1]].extent / lanes
            if short == "parallel" and lvs:
                row[_COL["parallel_per_core"]] = prod / self.target.cores
        for f in loops:
            max_step = max(max_step, f.unroll_limit)
        row[_COL["auto_unroll_max_step"]] = max_step

    def buffers(self, row: np.ndarray, acc: dict, value_ops: int) -> None:
        loops, level, n, outer = self.loops, self.level, len(self.loops), self.prods[-1]
        exts = [f.extent for f in loops]
        infos = []
        for order, (name, (b, idx, read, write)) in enumerate(acc.items()):
            accesses = [[dim_terms(e, level, loops) for e in tup] for tup in idx]
            item = ITEMSIZE[b.dtype]
            fp = [footprint(accesses, b.shape, lv) for lv in range(n + 1)]
            infos.append((order, name, b, accesses, item, fp, read, write, len(idx)))
        # bytes touched by one run of the loop at each level (level n: one execution)
        mem = [sum(info[5][lv][0] * info[4] for info in infos) for lv in range(n + 1)]
        feats = []
        for order, name, b, accesses, item, fp, read, write, n_acc in infos:
            shape = b.shape
            rowstride = [1] * len(shape)
            for d in range(len(shape) - 2, -1, -1):
                rowstride[d] = rowstride[d + 1] * shape[d + 1]
            f = dict.fromkeys(_BUFFER, 0.0)
            f["readwrite" if read and write else "write" if write else "read"] = 1.0
            f["bytes"] = outer * item * (n_acc + (1 if read and write else 0))
            elems, counts, spans = fp[0]
            f["unique_bytes"] = elems * item
            line = self.target.cache_line_bytes
            f["unique_lines"] = unique_lines(counts, spans, shape, item, line)
            stride, still = 0, 1
            for lv in range(n - 1, -1, -1):
                stride = address_stride(accesses, rowstride, lv)
                if stride:
                    break
                still *= exts[lv]
            f["stride"] = stride
            f["lines"] = max(1.0, outer / still * min(1.0, stride * item / line))
            self.reuse(f, name, accesses, exts, mem)
            feats.append((-f["bytes"], -f["lines"], -f["unique_bytes"], order, f))
        feats.sort(key=lambda x: x[:4])
        for slot, (*_, f) in enumerate(feats[:MAX_BUFFERS]):
            base = _BUF0 + slot * len(_BUFFER)
            row[base:base + len(_BUFFER)] = [f[x] for x in _BUFFER]
        self.curve(row, value_ops, exts, mem)

    def reuse(self, f: dict, name: str, accesses: list, exts: list, mem: list) -> None:
        """Walk out from the innermost loop: a loop absent from every index re-reads the
        same elements (loop multiple read); a loop inside which earlier stores touched the
        buffer reuses it serially; else no reuse."""
        used = {tl for acc in accesses for _, terms in acc for tl, _, _ in terms}
        inner = 1
        for lv in range(len(exts) - 1, -1, -1):
            if lv not in used:
                f["reuse_loop"], f["reuse_ct"] = 1.0, exts[lv]
                f["reuse_dis_iter"], f["reuse_dis_bytes"] = inner, mem[lv + 1]
                return
            earlier = self.touched[lv].get(name, 0)
            if earlier:
                f["reuse_serial"], f["reuse_ct"] = 1.0, earlier
                f["reuse_dis_iter"], f["reuse_dis_bytes"] = inner, mem[lv + 1]
                return
            inner *= exts[lv]
        f["reuse_none"] = 1.0

    def curve(self, row: np.ndarray, value_ops: int, exts: list, mem: list) -> None:
        """Arithmetic intensity (ops / footprint bytes) against ops, innermost level first,
        sampled at CURVE_POINTS evenly spaced op counts."""
        if value_ops <= 0 or not exts:
            return
        ops, ai = [], []
        work = float(value_ops)
        for lv in range(len(exts) - 1, -1, -1):
            work *= exts[lv]
            ops.append(work)
            ai.append(work / max(mem[lv], 1))
        xs = np.arange(1, CURVE_POINTS + 1) * (ops[-1] / CURVE_POINTS)
        row[_AI0:_AI0 + CURVE_POINTS] = np.interp(xs, ops, ai)

    def allocation(self, row: np.ndarray, buf: Any) -> None:
        size = buf.size * ITEMSIZE[buf.dtype]
        own = [prod for b, prod in self.allocs if b.name == buf.name]
        if own:
            row[_COL["alloc_bytes"]], row[_COL["alloc_outer_prod"]] = size, own[-1]
        elif buf.name in self.root_allocs:
            row[_COL["alloc_bytes"]], row[_COL["alloc_outer_prod"]] = size, 1
        row[_COL["enclosing_allocs"]] = len(self.allocs)
        row[_COL["enclosing_alloc_bytes"]] = sum(b.size * ITEMSIZE[b.dtype]
                                                 for b, _ in self.allocs)
        row[_COL["is_local"]] = float(buf.scope == "local")
