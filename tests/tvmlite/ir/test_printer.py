"""tvmlite/ir/printer.py: expressions print with the fewest parentheses that keep their
meaning (precedence and left-associativity), and loop nests print as readable indented
Python-like text (kinds, pragmas, guards, allocations)."""
from __future__ import annotations

import numpy as np

import tvmlite
from tvmlite import te
from tvmlite.ir.expr import BinOp, Broadcast, Call, Cast, Cmp, Const, Not, Ramp, Select, Var
from tvmlite.ir.printer import expr_str, stmt_str
from tvmlite.ir.stmt import Allocate, Buffer, For, IfThenElse, Seq, Store

a, b, c = Var("a"), Var("b"), Var("c")


def test_precedence_parenthesizes_only_where_needed():
    assert expr_str(BinOp("+", BinOp("*", a, b), c)) == "a * b + c"
    assert expr_str(BinOp("*", BinOp("+", a, b), c)) == "(a + b) * c"
    assert expr_str(BinOp("*", a, BinOp("+", b, c))) == "a * (b + c)"


def test_left_associative_operators_keep_the_right_operand_grouped():
    assert expr_str(BinOp("-", BinOp("-", a, b), c)) == "a - b - c"
    assert expr_str(BinOp("-", a, BinOp("-", b, c))) == "a - (b - c)"
    assert expr_str(BinOp("//", a, BinOp("*", b, c))) == "a // (b * c)"
    assert expr_str(BinOp("%", BinOp("//", a, b), c)) == "a // b % c"


def test_the_printed_text_evaluates_like_the_tree():
    """Python has the same precedence for these operators: evaluating the printed text
    must give the tree's value for every grouping of three operands."""
    env = {"a": 7, "b": 3, "c": 2}
    ops = ["+", "-", "*", "//", "%"]
    py = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "//": int.__floordiv__,
          "%": int.__mod__}
    for o1 in ops:
        for o2 in ops:
            for tree, value in ((BinOp(o1, BinOp(o2, a, b), c), py[o1](py[o2](7, 3), 2)),
                                (BinOp(o1, a, BinOp(o2, b, c)), py[o1](7, py[o2](3, 2)))):
                assert eval(expr_str(tree), {}, env) == value, expr_str(tree)


def test_logic_comparison_and_calls():
    lt, ge = Cmp("<", a, b), Cmp(">=", b, c)
    assert expr_str(BinOp("and", lt, ge)) == "a < b and b >= c"
    assert expr_str(BinOp("and", BinOp("or", lt, ge), lt)) == "(a < b or b >= c) and a < b"
    assert expr_str(Not(lt)) == "!(a < b)"
    assert expr_str(Cmp("<", BinOp("+", a, b), c)) == "a + b < c"
    assert expr_str(BinOp("max", BinOp("+", a, b), c)) == "max(a + b, c)"
    assert expr_str(Select(lt, a, Const(0))) == "select(a < b, a, 0)"
    x = Var("x", "float32")
    assert expr_str(Call("exp", BinOp("*", x, Const(2.0, "float32")))) == "exp(x * 2.0f)"
    assert expr_str(Cast("float64", a)) == "float64(a)"
    assert expr_str(Const(1.5, "float64")) == "1.5"


def test_vector_nodes_name_their_lanes():
    assert expr_str(Ramp(BinOp("*", a, Const(16)), 1, 8)) == "ramp(a * 16, 1, 8)"
    assert expr_str(Broadcast(Var("x", "float32"), 4)) == "x4(x)"


def test_a_nest_prints_loops_kinds_pragmas_guards_and_allocations():
    buf = Buffer("C", (4, 8), "float32")
    tmp = Buffer("T", (8,), "float32", "local")
    i, j = Var("i"), Var("j")
    store = Store(buf, (i, j), Const(0.0, "float32"))
    nest = For(i, 4, "parallel", Allocate(tmp, Seq((
        For(j, 8, "vectorize", IfThenElse(Cmp("<", j, Const(6)), store, store)),
        For(j, 8, "serial", store, unroll_limit=16)))))
    assert stmt_str(nest).splitlines() == [
        "parallel for i in range(4):",
        "  allocate T[float32 * 8]",
        "  vectorize for j in range(8):",
        "    if j < 6:",
        "      C[i, j] = 0.0f",
        "    else:",
        "      C[i, j] = 0.0f",
        "  for j in range(8):  # auto_unroll_max_step=16",
        "    C[i, j] = 0.0f",
    ]


def test_lowered_schedule_prints_the_loop_names_of_the_schedule():
    A = te.placeholder((16, 16), name="A")
    B = te.compute((16, 16), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    io, ii = s[B].split(s[B].op.axis[0], factor=4)
    s[B].parallel(io)
    text = str(tvmlite.lower(s, [A, B], vector_bytes=32))
    assert "parallel for i_outer in range(4):" in text
    assert "for i_inner in range(4):" in text
    assert "A[" in text and "2.0f + 1.0f" in text
    # the printed nest is the program that runs
    mod = tvmlite.build(s, [A, B])
    x = tvmlite.asaligned(np.random.default_rng(0).standard_normal((16, 16)), "float32")
    out = tvmlite.empty((16, 16), "float32")
    mod(x, out)
    np.testing.assert_allclose(out, x * 2 + 1, rtol=1e-6)
