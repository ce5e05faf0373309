"""Task families: which tasks of one tuning look alike enough to share one cost model.

A model's tuning has tens of tasks and a few dozen measurements each; a cost model that
learns from one task alone ranks that task's candidates at random until it has measured
``MIN_TRAINING_PROGRAMS`` of them, and learns little after. Tasks whose loop nests have
the same structure make the same mistakes and reward the same tiles (a register block,
a packed panel, a vectorized output channel), so the task scheduler gives each family
one model trained on all of its tasks' measurements -- each program labelled by its
throughput over the best of its *own* task (``cost_model.normalized_throughputs``), so
a 7x7 conv's programs and a 56x56 conv's train one model without the big one's
slower seconds meaning "worse".

The family of a workload is read off its compute (so it holds for any SearchTask, not
only a model's): ``kind/dtype/size``.

- kind: the anchor is the compute stage with a reduction doing the most work (none: an
  ``elementwise`` kernel, every stage injective or elementwise). A sum of products of
  two or more tensors is a contraction: ``matmul`` when no index mixes a reduce axis
  with a spatial one (dense, batch matmul, a 1x1 convolution: a matmul over pixels;
  axes of extent 1 do not count),
  ``conv`` when a window does and some reduce axis (the input channels) indexes every
  operand on its own, ``depthwise`` when a window does and none does (each output
  channel reads its own input channel: no channel reduction, no panel to pack). Any
  other reduction is a ``pool`` when windowed, else a ``reduce`` (softmax, norms, a
  mean). The sketches, the blocked candidate and the features' meaning differ between
  these kinds far more than between two shapes of one kind.
- dtype: the anchor's; int8 and float32 kernels have different vector lanes and
  instructions, so the same tiles mean different code.
- size: ``L2`` when everything the anchor reads and writes fits in the target's L2,
  else ``mem``. That is the one shape boundary the blocked candidate itself draws
  (``blocking``: panels and rows sized by L2): on one side the cache blocking is free,
  on the other it decides the speed, and a model that learnt one side misleads the
  other. Within a side, shapes differ in extents the features carry.

Tasks of one family also share a target (features describe the CPU). The rule is not
measured against another; ``TaskScheduler(share_models=False)`` gives every task its own
model, as before.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from tvmlite import te
from tvmlite.ir.dtypes import ITEMSIZE
from tvmlite.ir.expr import BinOp, Reduce, TensorRead, Var, walk
from tvmlite.search.records.workload import Workload
from tvmlite.target.target import Target

__all__ = ["KINDS", "anchor_kind", "family_of", "group_families"]

KINDS = ("matmul", "conv", "depthwise", "pool", "reduce", "elementwise")
DEFAULT_L2 = 1 << 20     # bytes, for a target that does not say


def _anchor(workload: Workload) -> Any:
    """The reduction stage doing the most work (the first of equals), or None."""
    reductions = [op for op in te.collect_ops(workload.outputs)
                  if isinstance(op, te.ComputeOp) and isinstance(op.body, Reduce)]
    return max(reductions, default=None,
               key=lambda op: math.prod(op.shape) * math.prod(iv.extent for iv in op.reduce_axis))


def _index_vars(index: Any) -> set[str]:
    return {v.name for v in walk(index) if isinstance(v, Var)}


def anchor_kind(workload: Workload) -> str:
    """The kind of ``workload``'s anchor, one of ``KINDS`` (module doc)."""
    op = _anchor(workload)
    if op is None:
        return "elementwise"
    # axes of one iteration are no loop: a 1x1 convolution's window is no window
    reduce = {iv.name for iv in op.reduce_axis if iv.extent != 1}
    spatial = {iv.name for iv in op.axis if iv.extent != 1}
    reads = [n for n in walk(op.body.source) if isinstance(n, TensorRead)]
    windowed = any(_index_vars(i) & reduce and _index_vars(i) & spatial
                   for r in reads for i in r.indices)
    product = op.body.combiner == "sum" and len({id(r.tensor) for r in reads}) >= 2 and \
        any(isinstance(n, BinOp) and n.op == "*" for n in walk(op.body.source))
    if not product:
        return "pool" if windowed else "reduce"
    if not windowed:
        return "matmul"
    # a reduce axis that is a whole index of every operand: the channels being reduced
    alone = [{next(iter(_index_vars(i))) for i in r.indices
              if len(_index_vars(i)) == 1 and _index_vars(i) <= reduce} for r in reads]
    return "conv" if set.intersection(*alone) else "depthwise"


def family_of(workload: Workload, target: Target) -> str:
    """``kind/dtype/size@target`` of ``workload`` (module doc): tasks with equal families
    share one cost model."""
    op = _anchor(workload)
    kind = anchor_kind(workload)
    stage = op if op is not None else workload.outputs[-1].op
    tensors = [*stage.input_tensors, stage.output(0)]
    touched = sum(math.prod(t.shape) * ITEMSIZE.get(t.dtype, 4) for t in tensors)
    l2 = target.cache_bytes("L2") or DEFAULT_L2
    return f"{kind}/{stage.dtype}/{'L2' if touched <= l2 else 'mem'}@{target.name}"


def group_families(workloads: Sequence[Workload], targets: Sequence[Target]) -> list[int]:
    """For each workload, the index of the first one of its family (itself if first)."""
    first: dict[str, int] = {}
    return [first.setdefault(family_of(w, t), i)
            for i, (w, t) in enumerate(zip(workloads, targets, strict=True))]
