"""A fused kernel as one multi-stage ``te`` compute, and its default schedule.

``kernel_compute`` chains the stages of a kernel's nodes (``compute.py``) over one
placeholder per run-time input or weight, so everything below the graph (schedules,
search, records, C) sees an ordinary compute. ``kernel_key`` is the content key of that
compute: identical kernels (same ops, shapes, attributes) share it, whatever their
weights' values, so they are one tuning task and one compiled function.

``default_schedule`` is the schedule a kernel gets without a record, derived from the
target. A kernel whose anchor is a low-precision dot product (an integer conv or matmul,
a bf16 one) gets the register block around the target's dot-product instruction
(``dot_kernel.dot_schedule``). A kernel whose anchor has a BLAS's structure (a conv or
matmul: a reduction whose output is vectorized along its last axis, the output channels
in NHWC) gets the blocking a BLAS would derive from the target's registers and caches --
the template-free search's own first candidate, ``blocking.blocked_decisions``: a
register block of accumulators, the operand read along the vector packed per panel (a
constant weight too), the epilogue fused into the output's tiles. Any other kernel:
injective stages inlined, the output's innermost axis vectorized by the target's lanes
(halved until they divide it), its outer axes fused and parallel, and the anchor
computed per output row inside that nest, its reduction loops outside its own vectorized
row -- when the nodes after the anchor are elementwise; after a reshape or transpose the
anchor is computed whole at the root instead (vectorized, parallel), since a row of the
output may need all of it. A stage the primitives refuse (``ScheduleError``) falls back
to the parallel nest without the vector split.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, replace
from typing import Any

from tvmlite import te
from tvmlite.graph.compute import Scalar, node_compute
from tvmlite.graph.dot_kernel import dot_schedule
from tvmlite.graph.ir import Graph, Kernel
from tvmlite.graph.ops import KIND
from tvmlite.ir.dtypes import BUFFER_DTYPES, STORAGE_FLOATS
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError
from tvmlite.search.records.workload import Workload
from tvmlite.search.template_free.blocking import (
    block_rows_axis,
    blocked_decisions,
    register_block,
)
from tvmlite.search.template_free.realize import realize
from tvmlite.search.template_free.sketch import generate_sketches
from tvmlite.target.target import Target
from tvmlite.te.bind import bind_sizes, free_sizes

__all__ = ["KernelCompute", "kernel_compute", "kernel_key", "default_schedule", "blocked_schedule"]


@dataclass(frozen=True)
class KernelCompute:
    """The te form of a kernel: ``tensors`` = placeholders then the output;
    ``arg_values`` names the graph value each placeholder is fed from."""
    tensors: tuple[Any, ...]
    arg_values: tuple[str, ...]
    elementwise_epilogue: bool = True   # every node after the anchor keeps its shape
    constants: tuple[str, ...] = ()     # the placeholders fed by the graph's constants
    blas: bool = False                  # the anchor is a conv or a matmul

    @property
    def output(self) -> Any:
        return self.tensors[-1]


def _ident(name: str) -> str:
    s = re.sub(r"\W", "_", name)
    return s if s and not s[0].isdigit() else f"v_{s}"


def kernel_compute(g: Graph, k: Kernel) -> KernelCompute:
    """The placeholders and stages of kernel ``k`` of graph ``g``."""
    env: dict[str, Any] = {}
    placeholders, arg_values = [], []
    # an anchor's or a re-indexing node's data operands (a conv's x and weight, a gather's
    # indices) are indexed, so even of one element they are buffers; elementwise nodes
    # and the integer anchors' zero points (their third and fourth inputs) read literals
    indexed = {i for n in k.nodes if KIND.get(n.op) != "elementwise" for i in n.inputs[:2]}
    for j, v in enumerate(k.inputs):
        c = g.constants.get(v)
        t = g.types[v]
        if c is not None and c.size == 1 and v not in indexed \
                and t.dtype.startswith(("float", "int", "bool")):
            env[v] = Scalar(c.reshape(-1)[0].item(), t.dtype, tuple(t.shape))
            continue
        dtype = "int32" if t.dtype == "bool" else t.dtype   # bool is stored as int32
        ph = te.placeholder(t.shape, dtype, name=f"in{j}_{_ident(v)[:24]}")
        env[v] = ph
        placeholders.append(ph)
        arg_values.append(v)
    for pos, n in enumerate(k.nodes):
        t = g.types[n.output]
        name = "out" if n is k.nodes[-1] else f"s{pos}_{n.op}"
        env[n.output] = node_compute(n, [env[i] for i in n.inputs if i], t.shape, t.dtype, name)
    out = env[k.output]
    at = next((i for i, n in enumerate(k.nodes) if KIND.get(n.op) == "anchor"), None)
    plain = at is None or all(
        KIND.get(n.op) == "elementwise" and g.types[n.output].shape ==
        g.types[k.nodes[at].output].shape for n in k.nodes[at + 1:])
    consts = tuple(ph.name for ph, v in zip(placeholders, arg_values) if v in g.constants)
    return KernelCompute(tuple(placeholders) + (out,), tuple(arg_values), plain, consts,
                         k.anchor in ("conv", "matmul"))


def kernel_key(g: Graph, k: Kernel) -> str:
    """A content key of the kernel's computation: ops, attributes, input and output
    types, and the values of the scalar constants it reads as literals."""
    inputs = []
    for v in k.inputs:
        c = g.constants.get(v)
        entry: dict[str, Any] = {"type": str(g.types[v]), "const": c is not None}
        if c is not None and c.size == 1:
            entry["value"] = c.reshape(-1)[0].item()
        inputs.append(entry)
    pos = {v: f"in{j}" for j, v in enumerate(k.inputs)}
    nodes = []
    for idx, n in enumerate(k.nodes):
        pos[n.output] = f"n{idx}"
        nodes.append({"op": n.op, "in": [pos.get(i, "") for i in n.inputs],
                      "attrs": [[a, repr(v)] for a, v in n.attrs],
                      "type": str(g.types[n.output])})
    text = json.dumps({"inputs": inputs, "nodes": nodes}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _vector_factor(extent: Any, lanes: int) -> int | None:
    if not isinstance(extent, int):
        return None
    f = lanes
    while f >= 4:
        if extent % f == 0:
            return f
        f //= 2
    return None


def default_schedule(kc: KernelCompute, target: Target,
                     sizes: dict[str, int] | None = None) -> Schedule:
    """The target-derived schedule of a kernel (see the module docstring). A kernel over
    a symbolic size gets the schedule derived for the compute at ``sizes`` (its graph's
    largest size: the one where the time goes), replayed on the symbolic compute, as
    the dynamic search deploys what it derives at one size; Steps that do not replay
    leave it the parallel nest without vector splits, which is correct for every size."""
    free = free_sizes(list(kc.tensors))
    if free:
        if not sizes or set(free) - set(sizes):
            raise ValueError(f"default_schedule: the kernel is over the symbolic size(s) "
                             f"{free}: give sizes={{name: size}} to derive its schedule at")
        bound = replace(kc, tensors=tuple(bind_sizes(list(kc.tensors), dict(sizes))))
        steps = default_schedule(bound, target).steps
        outputs = Workload.from_tensors(list(kc.tensors), name="graph_kernel").outputs
        try:
            return Schedule.from_steps(outputs, steps)
        except ScheduleError:
            return _schedule(kc, target, vectorize=False)
    dot = dot_schedule(kc, target)    # an int8 / bf16 dot anchor: the intrinsic's block
    if dot is not None:
        return dot
    if kc.blas:
        blocked = blocked_schedule(kc, target)
        if blocked is not None:
            return blocked
    try:
        return _schedule(kc, target, vectorize=True)
    except ScheduleError:
        return _schedule(kc, target, vectorize=False)


COMPUTED_IN_32_BITS = ("uint8", "int8", "int32", *STORAGE_FLOATS)
LOOSE_ROWS_BLOCKS = 4   # a remainder block only where the rows axis holds 4 full blocks


def blocked_schedule(kc: KernelCompute, target: Target) -> Schedule | None:
    """The first sketch's target-derived blocking (``blocked_decisions``), or None when
    no sketch of the kernel has a BLAS's structure. The register block's rows are also
    tried with a remainder block (their axis loose, as the search's first round measures
    both ways, ``block_rows_axis``); that blocking is taken where dividing rows give no
    block (a conv's w = 13, prime: it had the generic schedule), or where it holds more
    accumulators and its rows axis at least ``LOOSE_ROWS_BLOCKS`` full blocks. Measured on
    Zen 3, untuned ResNet-50: w = 56 and 28 with 6 rows and a remainder ran faster than
    4 dividing rows (k10, 56 x 56: 2.3 -> 1.5 ms), w = 14 and 7 slower than 7 rows of
    one vector (14 x 14 x 512 3x3: 1.6 -> 3.4 ms)."""
    wl = Workload.from_tensors(list(kc.tensors), name="graph_kernel")
    lanes = target.compute_lanes(kc.output.dtype) if kc.output.dtype in BUFFER_DTYPES else 1
    for sk in generate_sketches(wl):
        rows = block_rows_axis(wl, sk)
        found = []
        for loose in (frozenset(), frozenset({rows})) if rows else (frozenset(),):
            decisions = blocked_decisions(wl, sk, target, kc.constants, loose, prepack=True)
            if decisions is None:
                continue
            try:
                s, _ = realize(wl, sk, decisions, random.Random(0), target, kc.constants,
                               loose)
            except (ScheduleError, ValueError):
                continue
            found.append((register_block(wl, sk, decisions, lanes), s))
        if len(found) == 2:
            (strict, s), ((mr, width, extent), loose_s) = found
            if mr * width > strict[0] * strict[1] and extent >= LOOSE_ROWS_BLOCKS * mr:
                return loose_s
            return s
        if found:
            return found[0][1]
    return None


def _schedule(kc: KernelCompute, target: Target, vectorize: bool) -> Schedule:
    out = kc.output
    s = te.create_schedule(out.op)
    # a quantized kernel's bytes and int32 sums are computed in float32 and int32 (the
    # (de)quantize arithmetic), a bf16 / fp16 one in float32 (storage types): vectors of those
    lanes = target.vector_lanes(out.dtype) if out.dtype in ("float32", "float64") else \
        target.vector_lanes("float32") if out.dtype in COMPUTED_IN_32_BITS else 1
    reductions = []
    for st in s.stages:
        if st.name == out.op.name:
            continue
        if st.op.reduce_axis:
            reductions.append(st)
        else:
            st.compute_inline()
    o = s[out]
    axes = list(o.op.axis)
    if not axes:
        return s
    factor = _vector_factor(axes[-1].extent, lanes) if vectorize else None
    if kc.blas and factor is not None:
        _pack_weights(s, kc, reductions or [o], factor)
    outer = axes[:-1]
    extents = [a.extent for a in outer]
    if factor is not None:
        io, ii = o.split(axes[-1], factor=factor)
        o.vectorize(ii)
        outer = outer + [io]
        extents.append(axes[-1].extent // factor if isinstance(axes[-1].extent, int) else 2)
    ones = [isinstance(e, int) and e == 1 for e in extents]   # symbolic: never 1
    if any(ones[:-1]) and not all(ones):
        # loops of one iteration (a batch of 1, a 1x1 map) go inside, so the parallel
        # loop is one that has work (a classifier's output channels)
        order = sorted(range(len(outer)), key=lambda d: ones[d])
        outer, extents = [outer[d] for d in order], [extents[d] for d in order]
        o.reorder(*outer, *([ii] if factor is not None else []))
    if o.op.reduce_axis:
        # the output is the anchor itself: its reductions go outside the vector lanes
        if factor is not None:
            o.reorder(*outer, *o.op.reduce_axis, ii)
    elif len(reductions) == 1 and outer and kc.elementwise_epilogue:
        anchor = reductions[0]
        anchor.compute_at(o, outer[-1])
        sp = list(anchor.op.axis)
        af = _vector_factor(sp[-1].extent, lanes) if vectorize and sp else None
        if af is not None and factor is not None:
            aio, aii = anchor.split(sp[-1], factor=min(af, factor))
            anchor.reorder(*sp[:-1], aio, *anchor.op.reduce_axis, aii)
            anchor.vectorize(aii)
    else:
        for st in reductions:
            _root_reduction(st, lanes if vectorize else 1, target.cores)
    attached = len(reductions) == 1 and not o.op.reduce_axis and bool(outer) and \
        kc.elementwise_epilogue
    n_fuse = 2 if len(outer) >= 3 or (len(outer) == 2 and not attached) else 1
    first = extents[0] if outer else None
    if n_fuse == 2 and isinstance(first, int) and first >= target.cores:
        n_fuse = 1
    if outer:
        o.parallel(o.fuse(*outer[:2]) if n_fuse == 2 else outer[0])
    return s


def _pack_weights(s: Schedule, kc: KernelCompute, readers: list, lanes: int) -> None:
    """A conv or matmul without a register block (one row: a classifier's matrix-vector
    product) reads its constant weight along the vector, one vector per reduction step,
    a whole row apart: packed once at load time in panels of one vector, each panel's
    reads are contiguous."""
    for t in kc.tensors[:-1]:
        if t.name not in kc.constants or len(t.shape) < 2 or t.shape[-1] % lanes:
            continue
        users = [st for st in readers if any(x.name == t.name for x in st.op.input_tensors)]
        if users:
            s.prepack(s.cache_read(t, "local", [st.op.output(0) for st in users]), -1, lanes)


def _root_reduction(st: Any, lanes: int, cores: int) -> None:
    """A reduction stage computed at the root (several in a kernel, or one read through
    a reshape or transpose, where computing it per output row would recompute it): its
    innermost spatial axis vectorized inside the reduction loops, its outer axes
    parallel."""
    sp = list(st.op.axis)
    if not sp:
        return
    outer = sp[:-1]
    f = _vector_factor(sp[-1].extent, lanes) if lanes > 1 else None
    if f is not None:
        io, ii = st.split(sp[-1], factor=f)
        st.reorder(*outer, io, *st.op.reduce_axis, ii)
        st.vectorize(ii)
        outer = outer + [io]
    else:
        outer = sp
        st.reorder(*sp, *st.op.reduce_axis)
    first = getattr(outer[0], "extent", None)
    if len(outer) >= 2 and isinstance(first, int) and first < cores:
        st.parallel(st.fuse(outer[0], outer[1]))
    elif outer:
        st.parallel(outer[0])
