"""The vectorize pass records why a lane fell back (VectorDecision), and codegen records
where it wrote a vector lane by lane (LaneFallback); the kernels still compute right."""
import numpy as np

import tvmlite
from tvmlite import te
from tvmlite.codegen_c.codegen import generate
from tvmlite.testing import check_module


def lanes():
    return tvmlite.Target.host().vector_lanes("float32")


def test_a_scalar_tail_and_a_clean_loop_are_recorded():
    L = lanes()
    A = te.placeholder((L + 3,), name="A")
    B = te.compute((L + 3,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(s[B].op.axis[0])
    check_module(tvmlite.build(s, [A, B]), [A, B], lambda a: a + 1)
    (d,) = tvmlite.lower(s, [A, B]).vector_decisions
    assert (d.loop, d.stages, d.lanes, d.chunks, d.scalar_tail) == ("i", ("B",), L, 1, 3)
    assert d.fell_back and not d.reason and not d.gathers


def test_an_imperfect_split_is_guarded_and_a_non_affine_index_stays_scalar():
    A = te.placeholder((30,), name="A")
    B = te.compute((30,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    io, ii = s[B].split(s[B].op.axis[0], factor=16)
    s[B].vectorize(ii)
    check_module(tvmlite.build(s, [A, B]), [A, B], lambda a: a * 2)
    (d,) = tvmlite.lower(s, [A, B]).vector_decisions
    assert d.guarded and d.lanes > 1

    n = 16
    X = te.placeholder((n * n,), name="X")
    Y = te.compute((n,), lambda i: X[i * i], name="Y")
    s = te.create_schedule(Y.op)
    s[Y].vectorize(s[Y].op.axis[0])
    check_module(tvmlite.build(s, [X, Y]), [X, Y], lambda x: x[np.arange(n) ** 2])
    (d,) = tvmlite.lower(s, [X, Y]).vector_decisions
    assert d.lanes == 0 and "not affine in the lane" in d.reason


def test_codegen_records_gathers_and_scalar_calls_at_their_c_lines():
    n = 32
    A = te.placeholder((n, n), name="A")
    B = te.compute((n, n), lambda i, j: te.tanh(A[j, i]), name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(s[B].op.axis[1])
    check_module(tvmlite.build(s, [A, B]), [A, B], lambda a: np.tanh(a.T), rtol=1e-5)
    func = tvmlite.lower(s, [A, B])
    (d,) = func.vector_decisions
    assert d.gathers == (("A", n),) and d.calls == ("tanh",)
    found: list = []
    src = generate(func, ["B"], fallbacks=found).splitlines()
    assert {f.kind for f in found} == {"gather", "call"}
    for f in found:
        line = src[f.line - 1]
        assert ("A[tvmlite_b" in line) if f.kind == "gather" else ("tanh" in line)
