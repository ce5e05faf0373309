"""What the template-free search needs to know about a compute DAG, read off a loop State.

Ansor decides which sketch rules apply from a handful of facts per stage; these are
computed on the *current* state of a sketch (after earlier rules inlined or added stages),
so a stage whose only consumer was inlined sees through it to the consumer's consumer.

- inlinable: elementwise (no reduction), not an output, not a cache stage;
- strictly inlinable: inlinable, without a branch (``if_then_else``: padding), and either
  cheap (no math call) or read by a single consumer, so inlining never multiplies
  expensive work. As in Ansor (and MetaSchedule's disallow_if_then_else), a stage with a
  branch is not inlined by rule: where padding goes (inlined into the convolution's
  innermost loop as a bounds check per load, or computed as a padded copy at the root or
  per tile) is a compute-location decision of the search;
- data reuse: a reduction doing many more multiply-adds than it has distinct input and
  output elements (matmul, convolutions, pooling windows), or reading an input that does
  not vary along an output axis (a depthwise filter): it needs multi-level tiling;
- fusible consumer: the one consumer (through inlined stages, whose branches may meet
  again) is elementwise and reads this stage at exactly its own coordinates, so the
  consumer's tile can host the producer;
- needs rfactor: a reduction with almost no spatial parallelism and a long reduction.
"""
from __future__ import annotations

import math

from tvmlite.ir.expr import Call, Reduce, Select, TensorRead, Var, walk
from tvmlite.schedule.state import State
from tvmlite.te.tensor import PlaceholderOp

REUSE_RATIO = 2          # multiply-adds per element touched above which tiling pays
# multiply-adds per element of a padded copy below which the padding is read in place
# (``copy_pays``): a depthwise conv does 9 per element (2.25 at stride 2), a dense conv
# 9 x its output channels. The copy is a pass over the image in a parallel loop of its
# own: MobileNet-V2's 17 depthwise kernels ran 541 us with it, 328 us without (Zen 5)
PAD_COPY_MIN_MACS = 32
RFACTOR_MAX_SPATIAL = 16
RFACTOR_MIN_REDUCE = 256


def is_reduction(state: State, name: str) -> bool:
    return isinstance(state.stage(name).op.body, Reduce)


def consumers(state: State, name: str) -> list[str]:
    """Stages that read ``name``, looking through inlined stages to whoever reads them."""
    out: list[str] = []
    for c in state.consumers(name):
        if state.stage(c).attach == "inline":
            out.extend(x for x in consumers(state, c) if x not in out)
        elif c not in out:
            out.append(c)
    return out


def inlinable(state: State, name: str) -> bool:
    st = state.stage(name)
    return not (name in state.outputs or is_reduction(state, name) or st.attach is not None
                or st.scope == "local")


def copy_pays(state: State, name: str) -> bool:
    """Whether inlinable stage ``name`` (a padding) feeds enough multiply-adds per element
    to be computed into a buffer of its own rather than inlined into its readers
    (``PAD_COPY_MIN_MACS``): False only when every reader is a reduction doing fewer."""
    size = math.prod(state.stage(name).op.shape)
    readers = [state.stage(c).op for c in consumers(state, name)]
    if not readers or not all(isinstance(op.body, Reduce) for op in readers):
        return True
    work = max(math.prod(op.shape) * math.prod(iv.extent for iv in op.reduce_axis)
               for op in readers)
    return work >= PAD_COPY_MIN_MACS * size


def strictly_inlinable(state: State, name: str) -> bool:
    if not inlinable(state, name):
        return False
    nodes = list(walk(state.stage(name).op.body))
    if any(isinstance(n, Select) for n in nodes):
        return False
    expensive = any(isinstance(n, Call) for n in nodes)
    return not expensive or len(state.consumers(name)) == 1


def has_data_reuse(state: State, name: str) -> bool:
    """Many more multiply-adds than elements touched, or an input (a depthwise filter)
    that does not vary along some output axis, so one load serves many outputs."""
    op = state.stage(name).op
    if not isinstance(op.body, Reduce):
        return False
    work = math.prod(op.shape) * math.prod(iv.extent for iv in op.reduce_axis)
    touched = math.prod(op.shape) + sum(math.prod(t.shape) for t in op.input_tensors)
    if work >= REUSE_RATIO * touched:
        return True
    spatial = {iv.name for iv in op.axis if iv.extent > 1}
    for read in (n for n in walk(op.body) if isinstance(n, TensorRead)):
        used = {v.name for i in read.indices for v in walk(i) if isinstance(v, Var)}
        if spatial - used and work >= touched:
            return True
    return False


def _reads_identity(consumer_op, producer: str) -> bool:
    """Every read of ``producer`` in the consumer's body is ``producer[axis0, axis1, ...]``."""
    reads = [n for n in walk(consumer_op.body)
             if isinstance(n, TensorRead) and n.tensor.name == producer]
    axes = [iv.name for iv in consumer_op.axis]
    return bool(reads) and all(
        len(r.indices) == len(axes)
        and all(isinstance(i, Var) and i.name == a for i, a in zip(r.indices, axes))
        for r in reads)


def fusible_consumer(state: State, name: str) -> str | None:
    """The elementwise consumer whose tiles can host ``name`` (see module doc), if any:
    every path from ``name`` through inlined stages (a GELU's branches meeting again)
    reads at the same coordinates and ends in the same one stage."""
    direct = state.consumers(name)
    finals = set()
    for cname in direct:
        c = state.stage(cname)
        if isinstance(c.op.body, Reduce) or c.op.shape != state.stage(name).op.shape:
            return None
        if not _reads_identity(c.op, name):
            return None
        if c.attach == "inline":
            final = fusible_consumer(state, c.name)
            if final is None:
                return None
            finals.add(final)
        elif c.attach is not None or c.leaves != c.roots:
            return None  # already placed or transformed by another rule
        else:
            finals.add(c.name)
    return finals.pop() if len(finals) == 1 else None


def needs_rfactor(state: State, name: str) -> bool:
    op = state.stage(name).op
    if not isinstance(op.body, Reduce):
        return False
    return (math.prod(op.shape) <= RFACTOR_MAX_SPATIAL
            and math.prod(iv.extent for iv in op.reduce_axis) >= RFACTOR_MIN_REDUCE)


def packable_inputs(state: State, name: str) -> list[str]:
    """Inputs of a data-reuse stage worth copying into a tile-local buffer (a "pack"):
    read with the stage's innermost spatial axis in their last index, and missing another
    spatial axis (so one copy serves many iterations). B of a matmul is one; a local copy
    at a j tile turns B's 4 KiB row stride into the tile's width, as BLAS packing does."""
    if not has_data_reuse(state, name):
        return []
    op = state.stage(name).op
    spatial = [iv.name for iv in op.axis if iv.extent > 1]
    if not spatial:
        return []
    inner = spatial[-1]
    out = []
    for t in op.input_tensors:
        if not isinstance(t.op, PlaceholderOp):
            continue
        reads = [n for n in walk(op.body) if isinstance(n, TensorRead) and n.tensor is t]
        used = {v.name for r in reads for i in r.indices for v in walk(i) if isinstance(v, Var)}
        last = {v.name for r in reads for v in walk(r.indices[-1]) if isinstance(v, Var)}
        if inner in last and any(a not in used for a in spatial):
            out.append(t.name)
    return out
