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
    whole, last = tvmlite.lower(s, [A, B]).vector_decisions   # the last tile peeled
    assert not whole.guarded and last.guarded and last.lanes > 1

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


def test_a_window_clamped_at_the_border_is_a_vector_inside_it():
    """LRN's square sum over a channel window: a select whose branch loads at an index
    clamped to the tensor. The chunks every lane of which is inside the border are
    vectors without the select or the clamp; the rest run lane by lane."""
    L, size = lanes(), 5
    C = 4 * L
    A = te.placeholder((3, C), name="A")
    r = te.reduce_axis((0, size), name="r")

    def window(n, c):
        cc = c + r - size // 2
        v = A[n, te.max(te.min(cc, C - 1), 0)]
        return te.sum(te.if_then_else(te.all(cc >= 0, cc < C), v * v, 0.0), axis=r)
    B = te.compute((3, C), window, name="B")
    s = te.create_schedule(B.op)
    co, ci = s[B].split(s[B].op.axis[1], factor=L)
    s[B].reorder(s[B].op.axis[0], co, r, ci)
    s[B].vectorize(ci)

    def ref(a):
        p = np.pad(a * a, ((0, 0), (size // 2, size // 2)))
        return sum(p[:, k:k + C] for k in range(size))
    check_module(tvmlite.build(s, [A, B]), [A, B], ref, rtol=1e-5)
    func = tvmlite.lower(s, [A, B])
    init, update = func.vector_decisions      # the sum's zeroing, its window
    assert init.lanes == L and not init.fell_back
    assert update.lanes == L and not update.reason and not update.gathers
    assert not update.guarded and len(update.selects) == 1 and update.fell_back
    vector_window = [line for line in generate(func, ["B"]).splitlines()
                     if "tvmlite_f32x" in line and "(A + " in line]
    assert vector_window and not any("tvmlite_min_i32" in line for line in vector_window)


def test_a_concat_s_parts_are_vectors_where_a_chunk_lies_in_one():
    """A concat along the vector axis selects between loads of its parts; a chunk wholly
    in one part loads that part as a vector (the select's condition held, or failed, at
    both ends of the chunk), one that straddles a border runs lane by lane."""
    L = lanes()
    n1, n2, n3 = 2 * L, L + 3, L
    X, Y, Z = (te.placeholder((2, n), name=name) for n, name in ((n1, "X"), (n2, "Y"), (n3, "Z")))
    total = n1 + n2 + n3
    B = te.compute((2, total), lambda i, j: te.if_then_else(
        j < n1, X[i, te.min(j, n1 - 1)], te.if_then_else(
            j < n1 + n2, Y[i, te.max(te.min(j - n1, n2 - 1), 0)],
            Z[i, te.max(j - n1 - n2, 0)])), name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(s[B].op.axis[1])
    check_module(tvmlite.build(s, [X, Y, Z, B]), [X, Y, Z, B],
                 lambda x, y, z: np.concatenate([x, y, z], axis=1))
    (d,) = tvmlite.lower(s, [X, Y, Z, B]).vector_decisions
    assert d.lanes == L and not d.reason and d.selects
