"""Illegal schedules: each raises ScheduleError naming the stage and the axis, and a
failed step leaves the schedule unchanged."""
from __future__ import annotations

import re

import pytest

import tvmlite
from tvmlite import ScheduleError, ops, te
from tvmlite.testing.check import check_schedule as check
from tvmlite.testing.workloads import ODD_MNK, matmul_reference, two_stage

M, N, K = ODD_MNK


def matmul(m=M, n=N, k=K, dtype="float32"):
    return ops.matmul(m, n, k, dtype)


# -- illegal schedules ---------------------------------------------------------------------

def _raises(fn, *words):
    """fn() raises ScheduleError whose message names every word (as a whole word)."""
    with pytest.raises(ScheduleError) as info:
        fn()
    msg = str(info.value)
    for w in words:
        assert re.search(rf"(?<![A-Za-z0-9_]){re.escape(w)}(?![A-Za-z0-9_])", msg), \
            f"{w!r} not named in: {msg}"
    return msg


def test_error_split_factor_zero_and_negative():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    _raises(lambda: s[C].split(i, factor=0), "C", "i")
    _raises(lambda: s[C].split(j, nparts=-2), "C", "j")
    _raises(lambda: s[C].split(i, factor=True), "C", "i")
    _raises(lambda: s[C].split(i, factor=4, nparts=2), "C", "i")
    _raises(lambda: s[C].split(i), "C", "i")
    assert s.steps == []                          # a failed step leaves no trace
    check(s, [A, B, C], matmul_reference)


def test_error_unknown_axis_and_stage():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    _raises(lambda: s[C].split("zz", factor=4), "C", "zz")
    _raises(lambda: s[C].vectorize("zz"), "C", "zz")
    _raises(lambda: s[C].reorder("k", "zz"), "C", "zz")
    i, j = s[C].op.axis
    s[C].split(i, factor=4)
    _raises(lambda: s[C].split(i, factor=2), "C", "i")   # i was replaced by its halves
    with pytest.raises(ScheduleError, match="nope"):
        s["nope"]


def test_error_repeated_axis_in_reorder():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    _raises(lambda: s[C].reorder(i, j, i), "C", "i")


def test_error_vectorize_or_parallel_reduce_axis():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    (k,) = s[C].op.reduce_axis
    _raises(lambda: s[C].vectorize(k), "C", "k")
    _raises(lambda: s[C].parallel(k), "C", "k")
    ko, ki = s[C].split(k, factor=4)
    _raises(lambda: s[C].vectorize(ki), "C", "k_inner")
    _raises(lambda: s[C].parallel(ko), "C", "k_outer")
    s[C].unroll(ki)                               # unrolling a reduce loop is fine
    check(s, [A, B, C], matmul_reference)


def test_error_annotate_twice_and_split_annotated():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].parallel(i)
    _raises(lambda: s[C].vectorize(i), "C", "i")
    _raises(lambda: s[C].split(i, factor=2), "C", "i")
    s[C].parallel(i)                              # the same annotation again is harmless
    check(s, [A, B, C], matmul_reference)


def test_error_nested_parallel():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].parallel(i)
    s[C].parallel(j)
    _raises(lambda: tvmlite.lower(s, [A, B, C]), "j")


def test_error_compute_at_stage_that_does_not_read_it():
    A = te.placeholder((M, N), name="A")
    B = te.compute((M, N), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((M, N), lambda i, j: B[i, j] + 1, name="C")
    D = te.compute((M, N), lambda i, j: A[i, j] - 1, name="D")
    s = te.create_schedule([C.op, D.op])
    # B is read by C only; D's loop i does not run any reader of B
    s[B].compute_at(s[D], s[D].op.axis[0])
    _raises(lambda: tvmlite.lower(s, [A, C, D]), "B", "D", "i")


def test_error_compute_at_reader_outside_the_loop():
    A = te.placeholder((M, N), name="A")
    B = te.compute((M, N), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((M, N), lambda i, j: B[i, j] + 1, name="C")
    D = te.compute((M, N), lambda i, j: C[i, j] + B[i, j], name="D")
    s = te.create_schedule(D.op)
    # D reads B too, but D runs after C's loop: B inside C's loop cannot serve it
    s[B].compute_at(s[C], s[C].op.axis[0])
    _raises(lambda: tvmlite.lower(s, [A, D]), "B", "C", "i", "D")


def test_error_compute_at_inside_the_reader_but_outside_its_inner_reader():
    A, B, C = two_stage()
    D = te.compute((M, N), lambda i, j: C[i, j] + B[i, j], name="D")
    s = te.create_schedule(D.op)
    di, dj = s[D].op.axis
    s[C].compute_at(s[D], dj)
    s[B].compute_at(s[D], di)                     # covers C (inside dj) and D itself: legal
    check(s, [A, D], lambda a: a * 2 + 1 + a * 2)
    s[C].compute_root()
    s[C].split(s[C].op.axis[0], factor=4)
    s[B].compute_at(s[C], "i_inner")              # D now reads B outside C
    _raises(lambda: tvmlite.lower(s, [A, D]), "B", "C", "i_inner")


def test_error_compute_at_producer_that_does_not_read_it():
    A = te.placeholder((M, N), name="A")
    B = te.compute((M, N), lambda i, j: A[i, j] * 2, name="B")
    X = te.compute((M, N), lambda i, j: A[i, j] - 1, name="X")
    C = te.compute((M, N), lambda i, j: B[i, j] + X[i, j], name="C")
    s = te.create_schedule(C.op)
    s[X].compute_at(s[B], s[B].op.axis[1])       # B runs before X's reader C
    _raises(lambda: tvmlite.lower(s, [A, C]), "X", "B", "j")
    s[B].compute_inline()                        # and now the target has no loops at all
    _raises(lambda: tvmlite.lower(s, [A, C]), "X", "B", "j")
    s[X].compute_root()
    check(s, [A, C], lambda a: a * 2 + a - 1)


def test_error_compute_at_cycle():
    A, B, C = two_stage()
    D = te.compute((M, N), lambda i, j: C[i, j] + 1, name="D")
    s = te.create_schedule(D.op)
    s[B].compute_at(s[C], s[C].op.axis[0])
    _raises(lambda: s[C].compute_at(s[B], s[B].op.axis[1]), "C", "B", "j")
    _raises(lambda: s[B].compute_at(s[B], s[B].op.axis[1]), "B")
    _raises(lambda: s[D].compute_at(s[C], s[C].op.axis[0]), "D")   # D is the output


def test_error_compute_at_unknown_loop():
    A, B, C = two_stage()
    s = te.create_schedule(C.op)
    _raises(lambda: s[B].compute_at(s[C], "zz"), "C", "zz")


def test_error_fuse_non_consecutive_and_mixed():
    A = te.placeholder((3, 5, 7), name="A")
    k = te.reduce_axis((0, 7), name="k")
    C = te.compute((3, 5), lambda i, j: te.sum(A[i, j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    _raises(lambda: s[C].fuse(i, k), "C", "i", "k")          # j sits between
    _raises(lambda: s[C].fuse(j, i), "C", "j", "i")          # wrong order
    _raises(lambda: s[C].fuse(j, k), "C", "j", "k")          # spatial with reduce
    _raises(lambda: s[C].fuse(j), "C")
    _raises(lambda: s[C].fuse(i, i), "C", "i")
    check(s, [A, C], lambda a: a.sum(axis=2))


def test_error_inline_output_or_reduction():
    A, B, C = matmul()
    D = te.compute((M, N), lambda i, j: C[i, j] + 1, name="D")
    s = te.create_schedule(D.op)
    _raises(lambda: s[D].compute_inline(), "D")
    _raises(lambda: s[C].compute_inline(), "C")


def test_error_cache_write_after_split_or_annotation():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].split(i, factor=4)
    _raises(lambda: s.cache_write(C, "local"), "C")
    s2 = te.create_schedule(C.op)
    s2[C].parallel(s2[C].op.axis[0])
    _raises(lambda: s2.cache_write(C, "local"), "C")
    _raises(lambda: s2.cache_write(C, "shared"), "C")


def test_error_cache_read_bad_reader():
    A, B, C = two_stage()
    s = te.create_schedule(C.op)
    _raises(lambda: s.cache_read(A, "local", [C]), "A", "C")
    _raises(lambda: s.cache_read(A, "local", []), "A")
    _raises(lambda: s.cache_read("Q", "local", [B]), "Q")


def test_error_rfactor():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    _raises(lambda: s.rfactor(C, k), "C", "k")                 # not split
    io, ii = s[C].split(i, factor=4)
    _raises(lambda: s.rfactor(C, ii), "C", "i_inner")           # a spatial split
    A2 = te.placeholder((M, N), name="A")
    C2 = te.compute((M, N), lambda i, j: A2[i, j] * 2, name="C")
    s2 = te.create_schedule(C2.op)
    _raises(lambda: s2.rfactor(C2, s2[C2].op.axis[0]), "C")     # not a reduction


def test_error_intermediate_kernel_argument_not_at_root():
    A, B, C = two_stage()
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], s[C].op.axis[0])
    _raises(lambda: tvmlite.lower(s, [A, B, C]), "B")


@pytest.mark.parametrize("primitive", ["split", "fuse", "reorder", "vectorize", "unroll",
                                       "parallel", "pragma", "split-loopaxis"])
def test_error_a_loop_of_another_stage(primitive):
    """B and C both have loops named i and j: s[C].split(s[B].op.axis[0]) used to split
    C's own i. It names both stages now, and the schedule is unchanged."""
    A, B, C = two_stage()
    s = te.create_schedule(C.op)
    bi, bj = s[B].op.axis
    calls = {"split": lambda: s[C].split(bi, factor=4),
             "fuse": lambda: s[C].fuse(bi, bj),
             "reorder": lambda: s[C].reorder(bj, bi),
             "vectorize": lambda: s[C].vectorize(bj),
             "unroll": lambda: s[C].unroll(bj),
             "parallel": lambda: s[C].parallel(bi),
             "pragma": lambda: s[C].pragma(bi, "auto_unroll_max_step", 4),
             "split-loopaxis": lambda: s[C].split(s[B].split(bi, factor=2)[0], factor=2)}
    before = list(s.steps) if primitive != "split-loopaxis" else None
    with pytest.raises(ScheduleError, match=r"stage C: .* loop '(i|j|i\.outer|i_outer)' of "
                                            r"stage B, not of C"):
        calls[primitive]()
    if before is not None:
        assert s.steps == before


def test_a_loop_of_another_stage_is_refused_in_compute_at_and_rfactor():
    A, B, C = two_stage()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match=r"compute_at\(C\) was given loop 'i' of stage B"):
        s[B].compute_at(s[C], s[B].op.axis[0])
    X = te.placeholder((8, 16), name="X")
    k = te.reduce_axis((0, 16), name="k")
    S = te.compute((8,), lambda i: te.sum(X[i, k], axis=k), name="S")
    T = te.compute((8,), lambda i: S[i] * 2, name="T")
    s = te.create_schedule(T.op)
    with pytest.raises(ScheduleError, match=r"stage S: rfactor was given loop 'i' of stage T"):
        s.rfactor(S, s[T].op.axis[0])


def test_own_loops_still_work_after_cache_write_and_rfactor():
    """Axes taken before cache_write (the templates do) still name the stage's loops."""
    A, B, C = matmul(16, 16, 16)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    CL = s.cache_write(C, "local")
    io, ii = s[C].split(i, factor=4)
    s[C].vectorize(s[C].split(j, factor=8)[1])
    s[CL].compute_at(s[C], io)
    check(s, [A, B, C], matmul_reference)
