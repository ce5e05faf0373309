"""The register-blocked GEMM around a dot-product intrinsic, as Steps on a schedule.

What the qmatmul template (``tvmlite.schedules.dot``) and the template-free sketch rule
"tensorize-dot" (``search/template_free/sketch.py``) both build, so it lives below both
searches: for ``C[i, j] = sum_k acc(A[i, k]) * acc(B[k, j])``

* B is pre-packed once (a constant) as [N/w][K/group][w][group], w = vectors * lanes
  the block's width (``prepack`` with a group): each of the block's vectors is the
  layout the intrinsic reads (``tvmlite.target.intrinsics``), and the block's B is one
  contiguous stream (a panel per vector, 16-32 KiB apart, measured slower on Sapphire
  Rapids), widened to the intrinsic's ``b_storage`` when it has one; A is copied (in
  parallel, at the root) widened to its ``a_storage`` when it has one;
* a ``rows x vectors*lanes`` block of C accumulates in registers (cache_write +
  compute_at): for each k group, ``rows`` broadcasts of A's group and ``vectors`` loads
  of B feed ``rows * vectors`` intrinsics, rows and vectors unrolled;
* the column and row blocks are fused into one parallel loop; C is copied out in
  vectors of the intrinsic's lanes (so the accumulators stay registers).

With a tile intrinsic (AMX, ``Intrinsic.is_tile``) the block is ``rows x vectors`` *tiles*
(each 1 or 2: ``tile_block``; 2 x 2 is 4 C tiles fed by 2 A and 2 B tile loads a step)
computed straight into C: tile registers hold the block over the whole reduction, zeroed
by ``tilezero`` (the tensorize pass takes the reduction's zeroing in) and stored once
into C, with no local block to zero, load and copy out; A is read in place, and the rows
loop, the block's columns and k (in groups) are the intrinsic's nest
(``passes.tensorize``). The row blocks are the outer loop (a task walks the panels of B
along one row block of A, which stays in L1): C is then written along its rows, measured
1.5x the column-panel order's GOP/s on Sapphire Rapids at 1024^3, whose each task
wrote 32 rows of C 4 KiB apart from the last task's.

Without an intrinsic the same block is plain vector code over B packed in panels (or
read in place when it is not constant). M, N and K must be multiples of the block.

Map: ``dot_operands`` · ``block_sizes`` · ``tile_block`` · ``widen_in_parallel`` ·
``schedule_dot`` (on a schedule) · ``gemm_dot`` (a new schedule of [A, B, C]).
"""
from __future__ import annotations

from typing import Any

from tvmlite import te
from tvmlite.ir.expr import BinOp, Cast, Reduce, TensorRead, Var, walk
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError, State
from tvmlite.target.intrinsics import Intrinsic, get_intrinsic

__all__ = ["dot_operands", "block_sizes", "tile_block", "output_block", "schedule_dot",
           "gemm_dot", "widen_in_parallel"]


def dot_operands(state: State, stage: str) -> tuple[str, str] | None:
    """(A, B) when ``stage`` is ``C[i, j] = sum_k acc(A[i, k]) * acc(B[k, j])`` of two
    inputs (in either order in the product), else None."""
    op = state.stage(stage).op
    body = op.body
    if len(op.axis) != 2 or len(op.reduce_axis) != 1 or getattr(body, "combiner", "") \
            != "sum" or body.where is not None:  # type: ignore[attr-defined]
        return None
    src = body.source  # type: ignore[attr-defined]
    if not (isinstance(src, BinOp) and src.op == "*"):
        return None
    reads = [f.value if isinstance(f, Cast) and f.dtype == op.dtype else f
             for f in (src.a, src.b)]
    reads = [r for r in reads if isinstance(r, TensorRead)]
    if len(reads) != 2:
        return None
    i, j, k = (iv.name for iv in (*op.axis, *op.reduce_axis))
    names = [tuple(x.name if isinstance(x, Var) else None for x in r.indices)
             for r in reads if isinstance(r, TensorRead)]
    tensors = [r.tensor.name for r in reads if isinstance(r, TensorRead)]
    inputs = {p.name for p in state.placeholders}
    for a, b in ((0, 1), (1, 0)):
        if names[a] == (i, k) and names[b] == (k, j):
            pair = (tensors[a], tensors[b])
            return pair if set(pair) <= inputs and pair[0] != pair[1] else None
    return None


def _input_read_as(state: State, stage: str, operand: str) -> str:
    """The input ``stage`` (a 2-D sum over k) reads as A[i, k] (``operand`` "A") or as
    B[k, j] ("B": the one the block packs). Any such sum (a zero point subtracted, say)
    takes the plain block; the intrinsic's own check (``TensorizeStep``) refuses what is
    not a dot."""
    op = state.stage(stage).op
    inputs = {p.name for p in state.placeholders}
    if len(op.axis) == 2 and len(op.reduce_axis) == 1 and isinstance(op.body, Reduce):
        i, j, k = (iv.name for iv in (*op.axis, *op.reduce_axis))
        want = (i, k) if operand == "A" else (k, j)
        found = {r.tensor.name for r in walk(op.body.source) if isinstance(r, TensorRead)
                 and r.tensor.name in inputs
                 and tuple(getattr(x, "name", None) for x in r.indices) == want}
        if len(found) == 1:
            return found.pop()
    raise ScheduleError(f"stage {stage}: the dot block needs C[i, j] = sum_k f(A[i, k], "
                        f"B[k, j]) with one input read as {operand}"
                        f"{'[i, k]' if operand == 'A' else '[k, j]'}")


def block_sizes(M: int, N: int, lanes: int, registers: int,
                rows_first: bool = True, max_rows: int = 8) -> tuple[int, int]:
    """(rows, vectors) of the register block: the most accumulators, at most 3/4 of the
    vector registers (the rest hold B's vectors and A's broadcasts), rows (at most
    ``max_rows``)
    and columns (at most 4 vectors, so one block's panel of B stays near L1) dividing M
    and N. Among blocks of as many accumulators, more rows first (``rows_first``: a row
    costs one broadcast load and a vector one load), or fewer rows first for an
    intrinsic whose broadcast of A is built in registers
    (``Intrinsic.broadcast_in_registers``: a row costs several instructions, a vector
    none, its load folded into the multiply). (1, 1) when nothing larger divides."""
    best = (1, 1)
    for rows in range(1, max_rows + 1):
        for vecs in range(1, 5):
            if M % rows or N % (vecs * lanes) or rows * vecs > registers * 3 // 4:
                continue
            more_rows = rows > best[0] if rows_first else rows < best[0]
            if rows * vecs > best[0] * best[1] or (rows * vecs == best[0] * best[1]
                                                   and more_rows):
                best = (rows, vecs)
    return best


def tile_block(M: int, N: int, intr: Intrinsic) -> tuple[int, int]:
    """(row tiles, column tiles) of a tile intrinsic's block: 2 x 2 where M and N allow
    (each tile load feeds two products), else the largest that divides."""
    rows = 2 if M % (2 * intr.tile_rows) == 0 else 1
    cols = 2 if N % (2 * intr.lanes) == 0 else 1
    return rows, cols


def output_block(s: Schedule, out: Any, local: Any, rows: int, width: int, lanes: int,
                 unroll_rows: bool = True) -> Any:
    """Tile ``out`` (``[..., rows axis, columns axis]``) in blocks of ``rows x width``,
    copied out of the ``local`` block in vectors of ``lanes`` (the intrinsic's): the
    column panels outermost, then the other axes, then the row blocks, fused into one
    parallel loop (each task walks one panel of B over its rows), the local block computed
    there. Every dot block with a local block (a GEMM's vectors, a model kernel's vectors
    or AMX tiles, whose output may be a fused epilogue) shares this outer structure; the
    returned parallel loop is where ``local`` is computed. A GEMM's tile block has no
    local block (``_schedule_tile``)."""
    o = s[out]
    *others, r_ax, f_ax = o.op.axis
    fo, fi = o.split(f_ax, factor=width)
    fv, fl = o.split(fi, factor=lanes)
    ro, ri = o.split(r_ax, factor=rows)
    o.reorder(fo, *others, ro, ri, fv, fl)
    par = o.fuse(fo, *others, ro)
    o.parallel(par)
    if unroll_rows:
        o.unroll(ri)
    o.unroll(fv)
    o.vectorize(fl)
    s[local].compute_at(o, par)
    return par


def _schedule_tile(s: Schedule, stage: str, intr: Intrinsic, rows: int, vectors: int,
                   b_name: str) -> tuple[str, ...]:
    """The tile block (module doc): ``rows`` x ``vectors`` tiles of C, computed in C."""
    op = s.state.stage(stage).op
    (M, N), K = op.shape, op.reduce_axis[0].extent
    R, W = rows * intr.tile_rows, vectors * intr.lanes
    step = intr.kgroups * intr.group
    if rows not in (1, 2) or vectors not in (1, 2):
        raise ScheduleError(f"stage {stage}: {intr.name} blocks 1 or 2 tiles each way, got "
                            f"{rows} x {vectors}")
    if M % R or N % W or K % step:
        raise ScheduleError(f"stage {stage}: M={M}, N={N}, K={K} must be multiples of the "
                            f"tile block {R} x {W} and of the tile step {step} of k "
                            f"({intr.name})")
    C = s.tensor(stage)
    BB = s.cache_read(s.tensor(b_name), "global", [C])
    BP = s.prepack(BB, dim=1, factor=W, group_dim=0, group=intr.group)
    o = s[C]
    i, j = o.op.axis
    (k,) = o.op.reduce_axis
    jo, ji = o.split(j, factor=W)
    io, ii = o.split(i, factor=R)
    ko, kin = o.split(k, factor=K)   # one reduce loop outside: the zeroing before it
    kg, ki = o.split(kin, factor=intr.group)
    o.reorder(io, jo, ko, ii, ji, kg, ki)   # row blocks outermost: C written along its rows
    par = o.fuse(io, jo)
    o.parallel(par)
    o.tensorize(ii, intr.name)
    s[BP].parallel(s[BP].op.axis[0])
    return C.name, C.name, BP.name


def schedule_dot(s: Schedule, stage: str, intrinsic: str | None, rows: int, vectors: int,
                 lanes: int | None = None, prepack: bool = True) -> tuple[str, ...]:
    """Apply the block (module doc) to ``stage`` of ``s`` (at root, untouched, a
    ``dot_operands`` stage) with ``intrinsic``, or as plain vectors of ``lanes`` when it
    is None; ``prepack``: B constant, packed at load time. For a tile intrinsic ``rows`` and
    ``vectors`` count tiles (``tile_block``). Returns the stages it placed
    (C, its accumulator stage -- C itself for a tile block --, B's copy, and A's widened
    copy when the intrinsic reads one)."""
    b_name = _input_read_as(s.state, stage, "B")
    if intrinsic is not None and get_intrinsic(intrinsic).is_tile:
        if not prepack:
            raise ScheduleError(f"stage {stage}: {intrinsic} reads B packed as its tiles' "
                                f"rows, a layout only a pre-packed (constant) B has here")
        return _schedule_tile(s, stage, get_intrinsic(intrinsic), rows, vectors, b_name)
    if intrinsic is not None:
        intr = get_intrinsic(intrinsic)
        lanes, group = intr.lanes, intr.group
        if not prepack:
            raise ScheduleError(f"stage {stage}: {intrinsic} reads B in groups of {group} "
                                f"along k, a layout only a pre-packed (constant) B has here")
    elif lanes is None:
        raise ValueError("schedule_dot: give an intrinsic or the vector lanes")
    else:
        group = 1
    op = s.state.stage(stage).op
    (M, N), K = op.shape, op.reduce_axis[0].extent
    if M % rows or N % (vectors * lanes) or K % group:
        raise ScheduleError(f"stage {stage}: M={M}, N={N}, K={K} must be multiples of the "
                            f"block {rows} x {vectors * lanes} and of the group {group}")
    C = s.tensor(stage)
    BB = s.cache_read(s.tensor(b_name), "global", [C])
    widen = get_intrinsic(intrinsic).b_storage if intrinsic is not None else ""
    BP = s.prepack(BB, dim=1, factor=vectors * lanes, group_dim=0, group=group,
                   dtype=widen) \
        if prepack else BB
    placed: tuple[str, ...] = ()
    if intrinsic is not None and get_intrinsic(intrinsic).a_storage:
        AW = s.cache_read(s.tensor(_input_read_as(s.state, stage, "A")), "global", [C],
                          dtype=get_intrinsic(intrinsic).a_storage)
        widen_in_parallel(s, AW, 2 * lanes)
        placed = (AW.name,)
    CL = s.cache_write(C, "local")
    output_block(s, C, CL, rows, vectors * lanes, lanes)
    ci, cj = s[CL].op.axis
    (k,) = s[CL].op.reduce_axis
    cjo, cji = s[CL].split(cj, factor=lanes)
    ko, ki = s[CL].split(k, factor=group)
    s[CL].reorder(ko, ci, cjo, cji, ki)
    s[CL].unroll(ci)
    s[CL].unroll(cjo)
    if intrinsic is not None:
        s[CL].tensorize(cji, intrinsic)
    else:
        s[CL].vectorize(cji)
    s[BP].parallel(s[BP].op.axis[0])
    return (C.name, CL.name, BP.name) + placed


def widen_in_parallel(s: Schedule, copy: Any, lanes: int) -> None:
    """Schedule a widening copy (``cache_read(..., dtype=)``) at the root: its outer axes
    (two fused, when it has more) in parallel, its last axis in vectors of ``lanes`` where
    they divide it (GCC's loop vectorizer is off: a scalar copy of a 1024^2 A took a
    tenth of the GEMM's time)."""
    st = s[copy]
    axes = list(st.op.axis)
    last = axes[-1]
    if len(axes) > 1 and isinstance(last.extent, int) and last.extent % lanes == 0:
        _, inner = st.split(last, factor=lanes)
        st.vectorize(inner)
    st.parallel(st.fuse(*axes[:2]) if len(axes) > 2 else axes[0])


def gemm_dot(tensors: list, intrinsic: str | None, rows: int, vectors: int,
             lanes: int | None = None, prepack: bool = True) -> Schedule:
    """A new schedule of ``tensors`` = [A, B, C] with ``schedule_dot`` applied to C."""
    C = tensors[2]
    s = te.create_schedule(C.op)
    schedule_dot(s, C.op.name, intrinsic, rows, vectors, lanes, prepack)
    return s
