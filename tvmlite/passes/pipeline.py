"""``lower()``: schedule -> loop IR, as one list of passes in order.

Set ``debug=True`` (or ``tvmlite.lower(..., debug=True)``) to print the IR after each
pass. Every pass is a pure function in ``tvmlite/passes/``. Before any loop is built,
``check_reads`` refuses a read outside its tensor that no guard excludes and a divisor
that is always zero. Vector loops are cut into the target's native vectors:
``vector_bytes`` (default: this machine's, ``Target.host().vector_bytes``; pass
``target.vector_bytes`` to lower for another).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any, Sequence

from tvmlite.checks import check_int
from tvmlite.ir.stmt import Buffer, Stmt
from tvmlite.ir.symbolic import size_vars
from tvmlite.passes import bounds, nest
from tvmlite.passes.check_reads import check_reads
from tvmlite.passes.flatten import flatten
from tvmlite.passes.simplify_stmt import simplify_stmt
from tvmlite.passes.tensorize import tensorize
from tvmlite.passes.unroll import mark_auto_unroll, unroll
from tvmlite.passes.vectorize import vectorize
from tvmlite.passes.version import peel_tiles, version_guards
from tvmlite.schedule.prepack import kernel_view, pack_view
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError
from tvmlite.target.target import Target
from tvmlite.te.tensor import IDENT, Tensor


@dataclass(frozen=True, eq=False)
class LoweredFunc:
    """A kernel in loop IR: its arguments, whole-size intermediates and body, and what
    the vectorize pass decided for each vectorize loop (``passes.vectorize.VectorDecision``)."""
    name: str
    args: tuple
    allocs: tuple
    body: Stmt
    sizes: tuple = ()   # SizeVar names, the kernel's leading int64_t arguments
    vector_decisions: tuple = ()
    packs: tuple = ()   # PackFunc per pre-packed input (tvmlite.schedule.prepack)

    def __str__(self) -> str:
        params = [f"{n}: int64" for n in self.sizes] + \
            [f"{b.name}: {b.dtype}{list(b.shape)}" for b in self.args]
        head = f"def {self.name}({', '.join(params)}):"
        lines = [head]
        for b in self.allocs:
            lines.append(f"  allocate {b.name}[{b.dtype} * {'x'.join(map(str, b.shape)) or '1'}]")
        body = str(self.body)
        lines.extend("  " + line for line in body.splitlines())
        return "\n".join(lines)


@dataclass(frozen=True, eq=False)
class PackFunc:
    """The function that packs constant input ``input`` into ``packed`` (an argument of
    the kernel in its place), run once at load time: ``func.args == (input, packed)``."""
    input: str
    packed: str
    func: LoweredFunc


def check_args(s: Schedule, args: Sequence[Any]) -> list:
    """The kernel arguments must be distinct tensors covering every input and output."""
    if not isinstance(args, (list, tuple)) or not args:
        raise TypeError("args must be a non-empty list of tensors, e.g. [A, B, C]")
    out = []
    for i, a in enumerate(args):
        if not isinstance(a, Tensor):
            raise TypeError(f"args[{i}] must be a te tensor, got {type(a).__name__}")
        out.append(a)
    names = [a.name for a in out]
    if len(set(names)) != len(names):
        raise ValueError(f"args name a tensor twice: {names}")
    state = s.state
    for p in state.placeholders:
        if p.name not in names:
            raise ValueError(f"the computation reads input {p.name!r}, which is not in args "
                             f"{names}")
    for o in state.outputs:
        if o not in names:
            raise ValueError(f"output {o!r} is not in args {names}")
    for a in out:
        if state.has_stage(a.name) and state.stage(a.name).attach is not None:
            raise ScheduleError(f"stage {a.name} is a kernel argument, so it must be computed "
                                f"at root (not inlined or compute_at)")
    return out


def lower(s: Schedule, args: Sequence[Any], name: str = "default_function",
          vector_bytes: int | None = None, debug: bool = False,
          simple_mode: bool = False) -> LoweredFunc:
    """The loop IR of schedule ``s`` as a kernel taking ``args``, its vector loops cut into
    ``vector_bytes``-wide vectors (None: this machine's). ``simple_mode`` is accepted for
    code written for TVM (``tvm.lower(s, args, simple_mode=True)`` asks for print-friendly
    output): ``str()`` of the result is already the plain loop nest, in either mode."""
    if not isinstance(simple_mode, bool):
        raise TypeError(f"lower(simple_mode=...) must be True or False, got {simple_mode!r}")
    ks, kargs, packs = _kernel_parts(s, args)
    func = _lower(ks, kargs, name, vector_bytes, debug, until="vectorize")
    if not packs:
        return func
    return replace(func, packs=tuple(
        PackFunc(inp, ps.state.outputs[0],
                 _lower(ps, pargs, f"{name}_pack_{inp}", vector_bytes, debug, "vectorize"))
        for inp, ps, pargs in packs))


def _kernel_parts(s: Schedule, args: Sequence[Any]) -> tuple:
    """A schedule with pack stages (prepack) as (kernel schedule, its args, [(input,
    pack schedule, pack args)]): the kernel reads each packed buffer as an argument in
    place of the input it packs, and each pack stage is a schedule of its own."""
    if not isinstance(s, Schedule):
        return s, args, []
    state, replaced = kernel_view(s.state)
    if not replaced:
        return s, args, []
    tensors = check_args(s, args)
    kargs = [replaced[t.name].output(0) if t.name in replaced else t for t in tensors]
    packs = []
    for inp, ph in replaced.items():
        pstate, src, packed = pack_view(s.state, ph.name)
        packs.append((inp, Schedule((packed,), pstate), [src, packed]))
    return Schedule(s.outputs, state), kargs, packs


def loop_nest(s: Schedule, args: Sequence[Any], name: str = "default_function",
              vector_bytes: int | None = None) -> LoweredFunc:
    """The loop IR before unrolling, flattening and vectorizing: every loop still a ``For``
    with its kind and auto-unroll limit, every access still multi-dimensional. This is what
    the cost model's features read: several times cheaper than ``lower`` (no unrolled
    copies), and it keeps the loop structure the features describe. ``vector_bytes`` (the
    features' target's, None: this machine's) decides which nests auto-unroll marks."""
    ks, kargs, _ = _kernel_parts(s, args)   # the kernel only: packing runs once, outside
    return _lower(ks, kargs, name, vector_bytes, False, until="version")


def _lower(s: Schedule, args: Sequence[Any], name: str, vector_bytes: int | None, debug: bool,
           until: str) -> LoweredFunc:
    if vector_bytes is None:
        vector_bytes = Target.host().vector_bytes
    check_int(vector_bytes, "lower: vector_bytes (bytes in one native vector)", 1)
    if not isinstance(s, Schedule):
        raise TypeError(f"lower: expected a Schedule (te.create_schedule), got {type(s).__name__}")
    if not isinstance(name, str) or not IDENT.match(name):
        raise ValueError(f"kernel name must be an identifier, got {name!r}")
    tensors = check_args(s, args)
    arg_buffers = {t.name: Buffer(t.name, tuple(t.shape), t.dtype, "arg") for t in tensors}
    state = s.state
    check_reads(state)
    sizes = kernel_sizes(state, tensors)
    reserved = set(arg_buffers) | {st.name for st in state.stages} | {name} | set(sizes)
    infos = bounds.infer(state, reserved)
    builder = nest.NestBuilder(state, infos, arg_buffers)
    stmt = builder.build()
    nest.check_parallel_nesting(stmt)
    decisions: list = []
    passes = [
        ("simplify", simplify_stmt),
        ("auto_unroll", lambda x: mark_auto_unroll(x, 0, vector_bytes)),
        ("version", version_guards),   # after auto_unroll: it versions unrolled blocks
        # a static kernel's last tiles; after "version", where loop_nest stops: the
        # cost model's features read the nest as scheduled, not its peeled copies
        ("peel", lambda x: x if sizes else peel_tiles(x)),
        ("unroll", lambda x: unroll(x, vector_bytes)),
        ("simplify", simplify_stmt),
        ("flatten", flatten),
        ("tensorize", lambda x: tensorize(x, builder.tensorized)),
        ("vectorize", lambda x: vectorize(x, vector_bytes, decisions)),
    ]
    for pass_name, fn in passes:
        stmt = fn(stmt)
        if debug:
            print(f"# after {pass_name}\n{stmt}\n", file=sys.stderr)
        if pass_name == until:
            break
    return LoweredFunc(name, tuple(arg_buffers[t.name] for t in tensors),
                       tuple(builder.root_allocs), stmt, sizes, tuple(decisions))


def kernel_sizes(state, tensors: list) -> tuple:
    """The symbolic sizes (``te.var``) of a kernel, in the order they first appear in its
    arguments' shapes. Each must be a whole dimension of some argument, so a call from
    Python can read it from an array's shape."""
    found: list = []
    for t in tensors:
        for d in t.shape:
            found.extend(v.name for v in size_vars(d) if v.name not in found)
    used: list = []
    for st in state.stages:
        for iv in tuple(st.op.axis) + tuple(st.op.reduce_axis):
            used.extend(v.name for v in size_vars(iv.extent) if v.name not in used)
        used.extend(v.name for v in size_vars(st.op.body) if v.name not in used)
    for n in used:
        if n not in found:
            raise ValueError(f"symbolic size {n!r} is used by the computation but is no "
                             f"dimension of any argument; add a tensor of that shape to args")
    for n in found:
        if not any(getattr(d, "name", None) == n for t in tensors for d in t.shape):
            raise ValueError(f"symbolic size {n!r} appears in the argument shapes only inside "
                             f"expressions; make it a whole dimension of some argument so "
                             f"the kernel can read it from the array shapes")
    return tuple(found)
