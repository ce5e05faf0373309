"""The vectorize and flatten passes share the work of one nest (a memo per pass run): the
rows of an unrolled block load and store the same indices row after row. What is shared
must stay exactly what each loop would get alone."""
from tvmlite.ir.expr import BinOp, Const, Load, Var
from tvmlite.ir.stmt import Buffer, For, Seq, Store
from tvmlite.passes.flatten import flatten
from tvmlite.passes.vectorize import vectorize

A = Buffer("A", (4, 64), "float32", "arg")
B = Buffer("B", (4, 64), "float32", "arg")
C = Buffer("C", (64,), "float32", "arg")


def _row(r: int, v: Var, offset: int = 0) -> For:
    """B[r, v + offset] = A[r, v + offset] + C[v + offset]: what differs between rows is r,
    between loops the lane variable and the offset; C[v] is the same in every row."""
    j = BinOp("+", v, Const(offset)) if offset else v
    value = BinOp("+", Load(A, (Const(r), j)), Load(C, (j,)))
    return For(v, 16, "vectorize", Store(B, (Const(r), j), value))


def _alone(loops: list, native_bytes: int = 64) -> str:
    return "\n".join(str(vectorize(flatten(x), native_bytes)) for x in loops)


def test_rows_and_lanes_vectorized_together_equal_each_alone():
    v, w = Var("v"), Var("w")
    loops = [_row(0, v), _row(1, v), _row(2, v, 16), _row(3, w), _row(3, w, 32)]
    together = vectorize(flatten(Seq(tuple(loops))), 64)
    assert "\n".join(str(x) for x in together.stmts) == _alone(loops)


def test_a_shared_expression_keeps_its_lanes_per_vector_width():
    v = Var("v")
    loops = [_row(0, v), _row(1, v)]
    for native in (16, 32, 64):
        together = vectorize(flatten(Seq(tuple(loops))), native)
        assert "\n".join(str(x) for x in together.stmts) == _alone(loops, native)
