"""Low-precision GEMM with the CPU's dot-product instructions: a recipe and a template.

A u8 x s8 -> s32 (or bf16 x bf16 -> f32) matmul runs fastest as one dot-product
instruction per vector of outputs and group of the reduction (``tvmlite.target.
intrinsics``: vpdpbusd, vdpbf16ps, sdot, and exact fallbacks where a CPU lacks them).
The schedule is BLAS's register block with the intrinsic inside:

* B (constant) is pre-packed once as [N/lanes][K/group][lanes][group] (``prepack`` with
  a group), the layout the instruction reads: each lane's ``group`` values of k side by
  side, the lanes one after the other;
* a ``rows x vectors*lanes`` block of C accumulates in registers (cache_write +
  compute_at): for each k group, ``rows`` broadcasts of A's group and ``vectors`` loads
  of B feed ``rows * vectors`` intrinsics (the rows and vectors unrolled);
* the column and row blocks are fused into one parallel loop.

``gemm_dot`` schedules given tensors (any ``C[i, j] = sum_k acc(A[i, k]) * acc(B[k, j])``
with M, N, K multiples of the block; a ScheduleError says which is not). The template
``qmatmul`` (ONNX MatMulInteger, ``tvmlite.ops.qmatmul``) has a knob ``tensorize``: the
target's best intrinsic for the dtypes, or "none" (the same block vectorized without
it), so the search decides; the intrinsic needs zero points of 0 (the product of
centered values is not a dot of the stored bytes) and B constant (pre-packed).

Map: ``lowp_matmul`` (bf16 x bf16 -> f32 compute) · ``block_sizes`` · ``gemm_dot`` ·
the ``qmatmul`` template.
"""
from __future__ import annotations

from typing import Any

from tvmlite import ops, te
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError
from tvmlite.search.templated.task import template
from tvmlite.target.intrinsics import best_intrinsic, get_intrinsic
from tvmlite.target.target import Target

__all__ = ["lowp_matmul", "block_sizes", "gemm_dot", "qmatmul"]


def lowp_matmul(M: int, N: int, K: int, dtype: str = "bfloat16",
                acc: str = "float32") -> list[te.Tensor]:
    """``C[i, j] = sum_k acc(A[i, k]) * acc(B[k, j])``, A (M, K) and B (K, N) stored as
    ``dtype``, C of ``acc`` (a bf16 GEMM with float32 sums); returns [A, B, C]."""
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(te.cast(A[i, k], acc) * te.cast(B[k, j], acc),
                                               axis=k), name="C")
    return [A, B, C]


def block_sizes(M: int, N: int, lanes: int, registers: int) -> tuple[int, int]:
    """(rows, vectors) of the register block: the most accumulators, at most 3/4 of the
    vector registers (the rest hold B's vectors and A's broadcasts), rows (at most 8)
    and columns (at most 4 vectors, so one block's panel of B stays near L1) dividing M
    and N; more rows first, as a row costs one broadcast and a vector one load. (1, 1)
    when nothing larger divides."""
    best = (1, 1)
    for rows in range(1, 9):
        for vecs in range(1, 5):
            if M % rows or N % (vecs * lanes) or rows * vecs > registers * 3 // 4:
                continue
            if rows * vecs > best[0] * best[1] or (rows * vecs == best[0] * best[1]
                                                   and rows > best[0]):
                best = (rows, vecs)
    return best


def gemm_dot(tensors: list, intrinsic: str | None, rows: int, vectors: int,
             lanes: int | None = None, prepack: bool = True) -> Schedule:
    """The schedule of ``tensors`` = [A, B, C] (module doc): a ``rows x vectors`` block of
    ``intrinsic`` calls; ``intrinsic`` None: the same block as plain vector code of
    ``lanes`` lanes (B packed in panels without groups). ``prepack``: B packed once at
    load time (a constant); else B is copied per call as it is, which only the plain
    block can read (the intrinsic's grouped layout is a pre-packing's)."""
    A, B, C = tensors
    if intrinsic is not None:
        intr = get_intrinsic(intrinsic)
        lanes, group = intr.lanes, intr.group
    elif lanes is None:
        raise ValueError("gemm_dot: give an intrinsic or the vector lanes")
    else:
        group = 1
    (M, _), N = A.shape, B.shape[1]
    K = A.shape[1]
    if M % rows or N % (vectors * lanes) or K % group:
        raise ScheduleError(f"gemm_dot: M={M}, N={N}, K={K} must be multiples of the block "
                            f"{rows} x {vectors * lanes} and of the group {group}")
    if intrinsic is not None and not prepack:
        raise ScheduleError(f"gemm_dot: {intrinsic} reads B in groups of {group} along k, "
                            f"a layout only a pre-packed (constant) B has here")
    s = te.create_schedule(C.op)
    BB = s.cache_read(B, "global", [C])
    BP = s.prepack(BB, dim=1, factor=lanes, group_dim=0, group=group) if prepack else BB
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=rows)
    jo, ji = s[C].split(j, factor=vectors * lanes)
    jv, jl = s[C].split(ji, factor=lanes)   # copied out in the intrinsic's vectors
    s[C].reorder(jo, io, ii, jv, jl)
    par = s[C].fuse(jo, io)
    s[C].parallel(par)
    s[C].unroll(ii)
    s[C].unroll(jv)
    s[C].vectorize(jl)
    s[CL].compute_at(s[C], par)
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
    return s


@template("qmatmul")
def qmatmul(cfg: Any, M: int, N: int, K: int, dtype: str = "uint8",
            weight_dtype: str = "int8", data_zp: int = 0,
            weight_zp: int = 0) -> tuple[Schedule, list]:
    """MatMulInteger (``tvmlite.ops.qmatmul``): the register block of ``gemm_dot``, with
    knob ``tensorize`` (the target's best dot-product intrinsic for the dtypes, or
    "none"), and the block's rows and vectors as knobs among the sizes that divide."""
    tensors = ops.qmatmul(M, N, K, dtype, weight_dtype, data_zp, weight_zp)
    target: Target = cfg.target
    intr = best_intrinsic(target.arch, target.features, dtype, weight_dtype, "int32")
    choices = ["none"]
    if intr is not None and data_zp == 0 and weight_zp == 0 and K % intr.group == 0 \
            and "B" in cfg.constants:
        choices.insert(0, intr.name)
    cfg.define_knob("tensorize", choices)
    lanes = target.vector_lanes("int32")
    cfg.define_knob("rows", [r for r in (1, 2, 4, 6, 8) if M % r == 0])
    cfg.define_knob("vectors", [v for v in (1, 2, 3, 4) if N % (v * lanes) == 0] or [1])
    name = cfg["tensorize"].val
    if name != "none":
        lanes = get_intrinsic(name).lanes
    rows, vectors = cfg["rows"].val, cfg["vectors"].val
    if N % (vectors * lanes):
        vectors = 1
    if N % lanes:
        raise ScheduleError(f"qmatmul: N={N} must be a multiple of {lanes} (the vector lanes)")
    s = gemm_dot(tensors, None if name == "none" else name, rows, vectors, lanes,
                 prepack="B" in cfg.constants)
    return s, tensors
