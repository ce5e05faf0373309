"""``lower()``: schedule -> loop IR, as one list of passes in order.

Set ``debug=True`` (or ``tvmlite.lower(..., debug=True)``) to print the IR after each
pass. Every pass is a pure function in ``tvmlite/passes/``.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Sequence

from tvmlite.passes import bounds, nest
from tvmlite.passes.flatten import flatten
from tvmlite.passes.simplify_stmt import simplify_stmt
from tvmlite.passes.unroll import mark_auto_unroll, unroll
from tvmlite.passes.vectorize import vectorize
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError
from tvmlite.ir.stmt import Buffer, Stmt
from tvmlite.te.tensor import IDENT, Tensor

DEFAULT_VECTOR_BYTES = 64


@dataclass(frozen=True, eq=False)
class LoweredFunc:
    """A kernel in loop IR: its arguments, whole-size intermediates and body, and what
    the vectorize pass decided for each vectorize loop (``passes.vectorize.VectorDecision``)."""
    name: str
    args: tuple
    allocs: tuple
    body: Stmt
    vector_decisions: tuple = ()

    def __str__(self) -> str:
        head = f"def {self.name}({', '.join(f'{b.name}: {b.dtype}{list(b.shape)}' for b in self.args)}):"
        lines = [head]
        for b in self.allocs:
            lines.append(f"  allocate {b.name}[{b.dtype} * {'x'.join(map(str, b.shape)) or '1'}]")
        body = str(self.body)
        lines.extend("  " + line for line in body.splitlines())
        return "\n".join(lines)


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
          vector_bytes: int = DEFAULT_VECTOR_BYTES, debug: bool = False) -> LoweredFunc:
    """The loop IR of schedule ``s`` as a kernel taking ``args``."""
    return _lower(s, args, name, vector_bytes, debug, until="vectorize")


def loop_nest(s: Schedule, args: Sequence[Any], name: str = "default_function") -> LoweredFunc:
    """The loop IR before unrolling, flattening and vectorizing: every loop still a ``For``
    with its kind and auto-unroll limit, every access still multi-dimensional. This is what
    the cost model's features read: several times cheaper than ``lower`` (no unrolled
    copies), and it keeps the loop structure the features describe."""
    return _lower(s, args, name, DEFAULT_VECTOR_BYTES, False, until="auto_unroll")


def _lower(s: Schedule, args: Sequence[Any], name: str, vector_bytes: int, debug: bool,
           until: str) -> LoweredFunc:
    if not isinstance(s, Schedule):
        raise TypeError(f"lower: expected a Schedule (te.create_schedule), got {type(s).__name__}")
    if not isinstance(name, str) or not IDENT.match(name):
        raise ValueError(f"kernel name must be an identifier, got {name!r}")
    tensors = check_args(s, args)
    arg_buffers = {t.name: Buffer(t.name, tuple(t.shape), t.dtype, "arg") for t in tensors}
    state = s.state
    reserved = set(arg_buffers) | {st.name for st in state.stages} | {name}
    infos = bounds.infer(state, reserved)
    builder = nest.NestBuilder(state, infos, arg_buffers)
    stmt = builder.build()
    nest.check_parallel_nesting(stmt)
    decisions: list = []
    passes = [
        ("simplify", simplify_stmt),
        ("auto_unroll", lambda x: mark_auto_unroll(x, 0, vector_bytes)),
        ("unroll", lambda x: unroll(x, vector_bytes)),
        ("simplify", simplify_stmt),
        ("flatten", flatten),
        ("vectorize", lambda x: vectorize(x, vector_bytes, decisions)),
    ]
    for pass_name, fn in passes:
        stmt = fn(stmt)
        if debug:
            print(f"# after {pass_name}\n{stmt}\n", file=sys.stderr)
        if pass_name == until:
            break
    return LoweredFunc(name, tuple(arg_buffers[t.name] for t in tensors),
                       tuple(builder.root_allocs), stmt, tuple(decisions))
