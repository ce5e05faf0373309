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

``gemm_dot`` (``tvmlite.schedule.dot_block``, re-exported here) schedules given tensors
(any ``C[i, j] = sum_k acc(A[i, k]) * acc(B[k, j])`` with M, N, K multiples of the block;
a ScheduleError says which is not). The template
``qmatmul`` (ONNX MatMulInteger, ``tvmlite.ops.qmatmul``) has a knob ``tensorize``: the
target's AMX tile intrinsic where M, N, K fit it, its best vector intrinsic for the dtypes,
or "none" (the same block vectorized without
it), so the search decides; the intrinsic needs zero points of 0 (the product of
centered values is not a dot of the stored bytes) and B constant (pre-packed).

Map: ``lowp_matmul`` (bf16 x bf16 -> f32 compute) · the ``qmatmul`` template.
"""
from __future__ import annotations

from typing import Any

from tvmlite import ops, te
from tvmlite.schedule.dot_block import block_sizes, gemm_dot, tile_block
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


@template("qmatmul")
def qmatmul(cfg: Any, M: int, N: int, K: int, dtype: str = "uint8",
            weight_dtype: str = "int8", data_zp: int = 0,
            weight_zp: int = 0) -> tuple[Schedule, list]:
    """MatMulInteger (``tvmlite.ops.qmatmul``): the register block of ``gemm_dot``, with
    knob ``tensorize`` (the target's AMX tile intrinsic where the shape fits, its best
    vector dot-product intrinsic for the dtypes, or "none"), and the block's rows and
    vectors as knobs among the sizes that divide (a tile block is ``tile_block``'s)."""
    tensors = ops.qmatmul(M, N, K, dtype, weight_dtype, data_zp, weight_zp)
    target: Target = cfg.target
    choices = ["none"]
    if data_zp == 0 and weight_zp == 0 and "B" in cfg.constants:
        for shape in ((M, N, K), None):   # a tile intrinsic (AMX) where it fits, a vector one
            intr = best_intrinsic(target.arch, target.features, dtype, weight_dtype, "int32",
                                  shape)
            if intr is not None and intr.fits(M, N, K) and intr.name not in choices:
                choices.insert(-1, intr.name)
    cfg.define_knob("tensorize", choices)
    lanes = target.vector_lanes("int32")
    cfg.define_knob("rows", [r for r in (1, 2, 4, 6, 8) if M % r == 0])
    cfg.define_knob("vectors", [v for v in (1, 2, 3, 4) if N % (v * lanes) == 0] or [1])
    name = cfg["tensorize"].val
    if name != "none" and get_intrinsic(name).is_tile:
        rt, ct = tile_block(M, N, get_intrinsic(name))
        return gemm_dot(tensors, name, rt, ct), tensors
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
