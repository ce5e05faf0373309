"""Flops and bytes moved between the levels of the memory hierarchy, from the loop nest.

How the bytes are counted (a reuse-distance model, per cache size C):

- The *footprint* of a statement for buffer b is, per dimension, the points its indices
  take inside it (the loops inside the statement ranging over their extents, the loops
  outside held fixed): the interval of the index, but at most the product of the
  extents of the loops it uses, so two disjoint pieces do not count as their bounding
  box. Its bytes count whole cache lines along the last dimension (``LINE_BYTES``), so
  a strided column read costs a line per element.
- Reuse of b across two consecutive iterations of a loop L is kept in a cache of size C
  when the data one iteration touches (the reuse distance: the footprint of L's body,
  all buffers together) fits in C. Then b crosses the boundary once per execution of L
  (its footprint over the whole loop); otherwise every iteration of L moves its own
  share again, and the bytes are L's extent times those of its body.
- Statements in sequence add up (no reuse across them is assumed).

The bytes L1 itself serves are the bytes of every load the vectorized code executes
(stores have their own port) (a vector access counts its lanes, a broadcast one element; a load
repeated in straight-line code counts once, as the compiler keeps it in a register); buffers codegen
keeps in vector registers (``promotion.promotable``) cost nothing anywhere. A kernel
whose whole working set fits in a cache moves nothing across that cache's boundary: it
is timed run after run, so its data stay there (warm). The bytes of
the L1/L2 boundary use C = L1d, L2/L3 C = L2, L3/memory C = L3 (the target's caches).
Parallel loops are counted as serial ones: L1 and L2 are per core, and each core's share
of the traffic is its share of the iterations.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tvmlite.codegen_c.promotion import promotable
from tvmlite.ir.expr import ITEMSIZE, BinOp, Call, Load, Ramp, Select, free_vars, walk
from tvmlite.ir.printer import expr_str
from tvmlite.ir.simplify import Ranges, bound
from tvmlite.ir.stmt import Allocate, Buffer, For, IfThenElse, Stmt, Store, stmt_children

LINE_BYTES = 64   # the cache line of every x86-64 and AArch64 core we compile for
FLOAT_OPS = ("+", "-", "*", "/", "min", "max")


@dataclass(frozen=True)
class Access:
    buffer: Buffer
    indices: tuple
    loops: tuple            # enclosing For nodes, outermost first


def accesses(s: Stmt, loops: tuple = ()) -> list[Access]:
    """Every load and store of the loop nest with the loops around it."""
    out: list[Access] = []
    if isinstance(s, Store):
        out.append(Access(s.buffer, s.indices, loops))
        for e in (s.value, *s.indices):
            out += [Access(x.buffer, x.indices, loops) for x in walk(e) if isinstance(x, Load)]
        return out
    if isinstance(s, IfThenElse):
        out += [Access(x.buffer, x.indices, loops) for x in walk(s.cond) if isinstance(x, Load)]
    inner = loops + (s,) if isinstance(s, For) else loops
    for c in stmt_children(s):
        out += accesses(c, inner)
    return out


def _box(acc: Access, varying: set) -> tuple:
    """The accessed region per dimension, (lo, hi, points): loops in ``varying`` range,
    the others are held fixed; ``points`` is at most the product of the extents of the
    ranging loops the index uses (two disjoint pieces are not their bounding box)."""
    ranges: Ranges = {f.var.name: ((0, f.extent - 1) if id(f) in varying else (0, 0))
                      for f in acc.loops}
    extents = {f.var.name: f.extent for f in acc.loops if id(f) in varying}
    box = []
    for e, dim in zip(acc.indices, acc.buffer.shape):
        names = free_vars(e)
        for name in names - ranges.keys():
            ranges[name] = (0, 0)      # a loop outside the statement: held fixed
        lo, hi = bound(e, ranges)
        lo, hi = max(0, lo), min(dim - 1, hi)
        box.append((lo, hi, min(hi - lo + 1, math.prod(extents.get(n, 1) for n in names))))
    return tuple(box)


def _union(boxes: list) -> tuple:
    """Distinct accesses of one buffer: the bounding box, each dimension's points summed
    (capped by the box's width)."""
    out = []
    for dims in zip(*boxes):
        lo, hi = min(d[0] for d in dims), max(d[1] for d in dims)
        out.append((lo, hi, min(hi - lo + 1, sum(d[2] for d in dims))))
    return tuple(out)


def _bytes(box: tuple, itemsize: int) -> int:
    if not box:
        return itemsize
    widths = [max(0, n) for _, _, n in box]
    return math.prod(widths[:-1]) * math.ceil(widths[-1] * itemsize / LINE_BYTES) * LINE_BYTES


class Traffic:
    """Footprints and boundary bytes of one loop nest (``passes.pipeline.loop_nest``)."""

    def __init__(self, body: Stmt, in_registers: set):
        self.body = body
        self.skip = in_registers
        self._fp: dict = {}

    def footprint(self, s: Stmt) -> dict:
        """buffer name -> bytes of its footprint in one execution of ``s``."""
        if id(s) not in self._fp:
            loops = {id(x) for x in _loops_in(s)}
            found: dict = {}
            for a in accesses(s):
                if a.buffer.name in self.skip:
                    continue
                key = (tuple(map(expr_str, a.indices)), tuple(id(f) for f in a.loops))
                found.setdefault(a.buffer.name, (a.buffer, {}))[1].setdefault(key, a)
            self._fp[id(s)] = {
                n: _bytes(_union([_box(a, loops) for a in accs.values()]),
                          ITEMSIZE.get(buf.dtype, 4))
                for n, (buf, accs) in found.items()}
        return self._fp[id(s)]

    def moved(self, capacity: int, s: Stmt | None = None) -> dict:
        """buffer name -> bytes crossing the boundary of a cache of ``capacity`` bytes."""
        s = self.body if s is None else s
        if isinstance(s, For):
            whole = self.footprint(s)
            if sum(whole.values()) <= capacity or sum(self.footprint(s.body).values()) <= capacity:
                return dict(whole)
            return {b: s.extent * n for b, n in self.moved(capacity, s.body).items()}
        if isinstance(s, Store):
            return dict(self.footprint(s))
        out: dict = {}
        for c in stmt_children(s):
            for b, n in self.moved(capacity, c).items():
                out[b] = out.get(b, 0) + n
        return out


def _loops_in(s: Stmt) -> list:
    out, stack = [], [s]
    while stack:
        x = stack.pop()
        if isinstance(x, For):
            out.append(x)
        stack.extend(stmt_children(x))
    return out


def registers_buffers(final_body: Stmt) -> set:
    """Local buffers codegen keeps in vector variables (they never touch memory)."""
    return {x.buffer.name for x in _walk(final_body)
            if isinstance(x, Allocate) and promotable(x)}


def _walk(s: Stmt):
    stack = [s]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(stmt_children(x))


def executed_flops(s: Stmt, times: int = 1) -> int:
    """Floating-point operations the nest executes (a vectorized loop counts its lanes):
    per store, the float arithmetic of its value times the iterations around it."""
    if isinstance(s, For):
        return executed_flops(s.body, times * s.extent)
    if isinstance(s, Store):
        ops = 0
        for x in walk(s.value):
            if x.dtype in ("float32", "float64") and (
                    (isinstance(x, BinOp) and x.op in FLOAT_OPS) or isinstance(x, (Call, Select))):
                ops += 1
        return ops * times
    return sum(executed_flops(c, times) for c in stmt_children(s))


def l1_bytes(s: Stmt, in_registers: set, times: int = 1) -> int:
    """Bytes of the loads the final (vectorized) code executes (stores go through their
    own port, and the bandwidth probe measures loads). In straight-line
    code (consecutive stores) a load repeated at the same index is counted once: the
    compiler keeps it in a register (the arguments are ``restrict``), until a store to
    that buffer."""
    if isinstance(s, For):
        return l1_bytes(s.body, in_registers, times * s.extent)
    if isinstance(s, Store):
        return _block_bytes([s], in_registers) * times
    total, block = 0, []
    for c in stmt_children(s):
        if isinstance(c, Store):
            block.append(c)
            continue
        total += _block_bytes(block, in_registers) * times
        block = []
        total += l1_bytes(c, in_registers, times)
    return total + _block_bytes(block, in_registers) * times


def _block_bytes(stores: list, in_registers: set) -> int:
    total, seen = 0, set()

    def size(x: Any) -> int:
        idx = x.indices[0]
        return (idx.lanes if isinstance(idx, Ramp) else 1) * ITEMSIZE.get(x.buffer.dtype, 4)
    for st in stores:
        for x in walk(st.value):
            if isinstance(x, Load) and x.buffer.name not in in_registers:
                key = (x.buffer.name, expr_str(x.indices[0]))
                if key not in seen:
                    seen.add(key)
                    total += size(x)
        seen = {k for k in seen if k[0] != st.buffer.name}
    return total
