"""Readable text of expressions and loop nests (what ``tvmlite.lower`` prints)."""
from __future__ import annotations

from tvmlite.ir.expr import (
    BinOp,
    Broadcast,
    Call,
    Cast,
    Cmp,
    Const,
    Expr,
    Load,
    Not,
    Ramp,
    Reduce,
    Select,
    TensorRead,
    Var,
)
from tvmlite.ir.stmt import Allocate, For, IfThenElse, Seq, Stmt, Store, TensorIntrinsic

_PREC = {"or": 1, "and": 2, "==": 3, "!=": 3, "<": 4, "<=": 4, ">": 4, ">=": 4,
         "+": 5, "-": 5, "*": 6, "/": 6, "//": 6, "%": 6}


def expr_str(e: Expr, parent: int = 0) -> str:
    if isinstance(e, Const):
        if e.dtype == "float32":
            return f"{e.value!r}f"
        return repr(e.value)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, (BinOp, Cmp)):
        if e.op in ("min", "max"):
            return f"{e.op}({expr_str(e.a)}, {expr_str(e.b)})"
        p = _PREC[e.op]
        text = f"{expr_str(e.a, p)} {e.op} {expr_str(e.b, p + 1)}"
        return f"({text})" if p < parent else text
    if isinstance(e, Not):
        return f"!{expr_str(e.a, 9)}"
    if isinstance(e, Select):
        return f"select({expr_str(e.cond)}, {expr_str(e.then)}, {expr_str(e.other)})"
    if isinstance(e, Call):
        return f"{e.func}({expr_str(e.arg)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({expr_str(e.value)})"
    if isinstance(e, TensorRead):
        return f"{e.tensor.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, Load):
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, Reduce):
        axes = ", ".join(a.name for a in e.axes)
        where = "" if e.where is None else f", where={expr_str(e.where)}"
        return f"{e.combiner}({expr_str(e.source)}, axis=[{axes}]{where})"
    if isinstance(e, Ramp):
        return f"ramp({expr_str(e.base)}, {e.stride}, {e.lanes})"
    if isinstance(e, Broadcast):
        return f"x{e.lanes}({expr_str(e.value)})"
    return repr(e)


def stmt_str(s: Stmt) -> str:
    lines: list[str] = []
    _emit(s, 0, lines)
    return "\n".join(lines)


def _emit(s: Stmt, depth: int, out: list[str]) -> None:
    pad = "  " * depth
    if isinstance(s, For):
        kind = "" if s.kind == "serial" else f"{s.kind} "
        pragma = f"  # auto_unroll_max_step={s.unroll_limit}" if s.unroll_limit else ""
        out.append(f"{pad}{kind}for {s.var.name} in range({s.extent}):{pragma}")
        _emit(s.body, depth + 1, out)
    elif isinstance(s, Seq):
        for x in s.stmts:
            _emit(x, depth, out)
    elif isinstance(s, IfThenElse):
        out.append(f"{pad}if {expr_str(s.cond)}:")
        _emit(s.then, depth + 1, out)
        if s.other is not None:
            out.append(f"{pad}else:")
            _emit(s.other, depth + 1, out)
    elif isinstance(s, Store):
        idx = ", ".join(expr_str(i) for i in s.indices)
        out.append(f"{pad}{s.buffer.name}[{idx}] = {expr_str(s.value)}")
    elif isinstance(s, Allocate):
        shape = "x".join(str(d) for d in s.buffer.shape) or "1"
        out.append(f"{pad}allocate {s.buffer.name}[{s.buffer.dtype} * {shape}]")
        _emit(s.body, depth, out)
    elif isinstance(s, TensorIntrinsic):
        op = "=" if s.tile and s.tile[-1] else "+="   # a fresh tile: its sum starts here
        out.append(f"{pad}{s.out.name}[{expr_str(s.out_index)}:] {op} {s.name}("
                   f"{s.a.name}[{expr_str(s.a_index)}:], {s.b.name}[{expr_str(s.b_index)}:])")
    else:
        out.append(f"{pad}{s!r}")
