"""Affine index analysis for the cost model's features: what the accesses of one store
cover over its enclosing loops, without simulating any loop.

An index becomes ``(const, [(loop level, coeff, extent), ...])`` (``dim_terms``); a
buffer's accesses at a loop level give a per-dimension box (``footprint``), its
contiguous runs in cache lines (``unique_lines``), and the stride of the innermost loop
that moves the address (``address_stride``). A non-affine term (``//``, ``%``, ``min``)
is a box of its interval bounds at its innermost variable's level. ``features.py`` calls
these once per buffer and store: keep them lean.
"""
from __future__ import annotations

import numpy as np

from tvmlite.ir.expr import Expr, Var, free_vars
from tvmlite.ir.simplify import bound, linear

__all__ = ["dim_terms", "footprint", "unique_lines", "address_stride"]


def dim_terms(e: Expr, level: dict, loops: list) -> tuple[int, list]:
    """An index as ``(const, [(loop level, coeff, extent), ...])``. A non-affine atom
    becomes one term at its innermost variable's level spanning its interval bounds."""
    terms, c = linear(e)
    out = []
    for atom, k in terms.items():
        if type(atom) is Var:
            lv = level.get(atom.name)
            if lv is not None:
                out.append((lv, k, loops[lv].extent))
            continue
        lvs = [level[v] for v in free_vars(atom) if v in level]
        if not lvs:
            continue
        lo, hi = bound(atom, {loops[lv].var.name: (0, loops[lv].extent - 1) for lv in lvs})
        if lo == -np.inf or hi == np.inf:
            continue
        c += int(lo) * k
        out.append((max(lvs), k, int(hi - lo) + 1))
    return c, out


def footprint(accesses: list, shape: tuple, lv: int) -> tuple[int, list, list]:
    """Distinct elements touched when loops ``lv..`` run and outer loops stay fixed, as a
    per-dimension box: (elements, counts per dim, spans per dim)."""
    counts, spans = [], []
    total = 1
    for d, size in enumerate(shape):
        lows: list[int] = []
        highs: list[int] = []
        n = 0
        for acc in accesses:
            lo, terms = acc[d]
            hi = lo
            cnt = 1
            for tl, k, ext in terms:
                if tl >= lv:
                    w = k * (ext - 1)
                    if w > 0:
                        hi += w
                    else:
                        lo += w
                    cnt *= ext
            n += min(cnt, hi - lo + 1)
            lows.append(lo)
            highs.append(hi)
        span = min(max(highs) - min(lows) + 1, size)
        cnt = min(n, span)
        counts.append(cnt)
        spans.append(span)
        total *= cnt
    return total, counts, spans


def unique_lines(counts: list, spans: list, shape: tuple, itemsize: int, line: int) -> float:
    """Lines of a footprint box: a contiguous run (inner dims that are dense and whole, plus
    the first dense partial one) covers ceil(run bytes / ``line``) lines, and every other dim
    repeats it. A strided dim right outside whole inner dims (a stride-2 convolution
    window) shares lines between neighbours: at most its address span in lines."""
    run, d = 1, len(shape) - 1
    whole = True
    while d >= 0 and counts[d] == spans[d]:
        run *= counts[d]
        whole = counts[d] == shape[d]
        d -= 1
        if not whole:
            break
    lines = -(-run * itemsize // line)
    if d >= 0 and whole:  # dim d is strided; inner dims are whole, so run is its row size
        lines = min(counts[d] * lines, -(-spans[d] * run * itemsize // line))
        d -= 1
    for dd in range(d + 1):
        lines *= counts[dd]
    return max(1.0, float(lines))


def address_stride(accesses: list, rowstride: list, lv: int) -> int:
    """Smallest nonzero |address step| (elements) of the loop at ``lv`` over accesses."""
    best = 0
    for acc in accesses:
        step = 0
        for d, (_, terms) in enumerate(acc):
            for tl, k, _ in terms:
                if tl == lv:
                    step += k * rowstride[d]
        step = abs(step)
        if step and (best == 0 or step < best):
            best = step
    return best
