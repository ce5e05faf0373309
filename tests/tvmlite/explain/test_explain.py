"""tvmlite.explain against hand-made kernels with one known fault each: a forced gather,
a forced scalar select, a 40-accumulator register block on a 16-register target, a
memory-bound elementwise op, a compute_at that recomputes its producer 9 times. Every
kernel is also run and compared with numpy. A kernel measured at its bound (an injected
time) reads "at the peak" and has facts, not faults."""
import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

import tvmlite
from tvmlite import te
from tvmlite.explain import explain_schedule
from tvmlite.explain.roofline import Level, Roofline
from tvmlite.explain.traffic import Traffic
from tvmlite.passes.pipeline import loop_nest
from tvmlite.target.bandwidth import Bandwidth
from tvmlite.target.target import Target
from tvmlite.testing import check_module

# -- the hand-made kernels, one known fault each ------------------------------------------


def forced_gather(n: int = 64):
    """B[i, j] = A[j, i] with j vectorized: A's lanes are n elements apart."""
    A = te.placeholder((n, n), name="A")
    B = te.compute((n, n), lambda i, j: A[j, i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(s[B].op.axis[1])
    return s, [A, B]


def forced_scalar_select(n: int = 64):
    """C[i] = A[i] if A[i] > 0 else B[i], vectorized: the select's branches load, and
    its condition is on loaded data (on the lane alone, a chunk would be versioned)."""
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: te.if_then_else(A[i] > 0.0, A[i], B[i]), name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].op.axis[0])
    return s, [A, B, C]


def avx2_like(host: Target) -> Target:
    """This machine as a 256-bit, 16-vector-register target (AVX2 + FMA code)."""
    feats = tuple(f for f in host.features if not f.startswith(("avx512", "amx")))
    flags = tuple(f for f in host.cflags if not f.startswith("-mprefer-vector-width"))
    if host.arch == "x86_64":
        flags = tuple(f for f in flags if f != "-march=native") + ("-mavx2", "-mfma")
    return dataclasses.replace(host, features=feats, vector_bits=256, cflags=flags)


def big_register_block(lanes: int, rows: int = 5, vectors: int = 8, k: int = 64):
    """A matmul whose register block is rows x vectors accumulators (5 x 8 = 40)."""
    M, N = rows * 2, vectors * lanes * 2
    A = te.placeholder((M, k), name="A")
    B = te.placeholder((k, N), name="B")
    r = te.reduce_axis((0, k), name="r")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, rows, vectors * lanes)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    s[CL].reorder(s[CL].op.reduce_axis[0], ci, cj)
    s[CL].unroll(ci)
    s[CL].vectorize(cj)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    return s, [A, B, C]


def elementwise_add(n: int = 1 << 20):
    """C = A + B over n floats: two loads and a store per flop."""
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(s[C].op.axis[0], factor=64)
    s[C].vectorize(ii)
    s[C].parallel(io)
    return s, [A, B, C]


def recompute_9x(n: int = 256, rows: int = 9):
    """P = 2 A computed at C's row loop: each of C's 9 rows recomputes all of P."""
    A = te.placeholder((n,), name="A")
    B = te.placeholder((rows, n), name="B")
    P = te.compute((n,), lambda k: A[k] * 2.0, name="P")
    C = te.compute((rows, n), lambda i, k: P[k] + B[i, k], name="C")
    s = te.create_schedule(C.op)
    s[P].compute_at(s[C], s[C].op.axis[0])
    return s, [A, B, C]


faulty = SimpleNamespace(forced_gather=forced_gather, forced_scalar_select=forced_scalar_select,
                         avx2_like=avx2_like, big_register_block=big_register_block,
                         elementwise_add=elementwise_add, recompute_9x=recompute_9x)

# given numbers, so no test measures the machine; the roofline's arithmetic is checked
BW = Bandwidth((("L1d", 1, 600.0), ("L2", 1, 250.0), ("L3", 1, 40.0), ("memory", 1, 20.0)),
               2, 0.0)
PEAK = 400.0


def explain(s, args, target=None, seconds=1e-3, **kw):
    return explain_schedule(s, args, target or Target.host(), seconds, peak=PEAK,
                            bandwidth=BW, **kw)


def kinds(e, kind):
    return [f for f in e.findings if f.kind == kind and f.fault]


def test_forced_gather_is_reported_with_its_loop_and_stride(capsys):
    s, args = faulty.forced_gather(64)
    mod = tvmlite.build(s, args, explain=True)
    check_module(mod, args, lambda a: a.T * 2)
    assert "gather: loads A with lanes 64 elements apart" in capsys.readouterr().err
    e = explain(s, args)
    (f,) = kinds(e, "vector")
    assert f.where.startswith("loop j of B") and "stride not 1" in f.what
    assert "reorder" in f.try_ and "cache_read A" in f.try_


def test_forced_scalar_select_says_its_branches_load():
    s, args = faulty.forced_scalar_select(64)
    check_module(tvmlite.build(s, args), args, lambda a, b: np.where(a > 0, a, b))
    (f,) = kinds(explain(s, args), "vector")
    assert "stays scalar (64 iterations)" in f.what
    assert "select whose branches load memory (A, B)" in f.what
    assert "compute_root" in f.try_


def test_a_select_versioned_per_vector_names_its_condition_and_the_border():
    """A concat along the vector axis (two loads chosen per lane): the vectors on either
    side of the border are vectors, the one across it lane by lane, and explain says so."""
    n = 4 * Target.host().vector_lanes("float32")
    A = te.placeholder((n // 2 + 3,), name="A")
    B = te.placeholder((n // 2 - 3,), name="B")
    C = te.compute((n,), lambda i: te.if_then_else(
        i < n // 2 + 3, A[te.min(i, n // 2 + 2)], B[te.max(i - n // 2 - 3, 0)]), name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].op.axis[0])
    check_module(tvmlite.build(s, [A, B, C]), [A, B, C], lambda a, b: np.concatenate([a, b]))
    (f,) = kinds(explain(s, [A, B, C]), "vector")
    assert "a select on the lane" in f.what and "across its border run lane by lane" in f.what
    assert "pad the tensor" in f.try_


def test_40_register_block_on_a_16_register_target_spills():
    host = Target.host()
    if host.arch != "x86_64" or "avx2" not in host.features:
        pytest.skip("the 16-register target is built as AVX2 code for this x86-64 host")
    target = faulty.avx2_like(host)
    assert target.vector_registers == 16 and target.vector_lanes("float32") == 8
    s, args = faulty.big_register_block(lanes=8)
    check_module(tvmlite.build(s, args, target), args, lambda a, b: a @ b, rtol=1e-4)
    e = explain(s, args, target)
    (regs,) = kinds(e, "registers")
    assert "40 accumulators" in regs.what and "for 16 vector registers" in regs.what
    assert "split factors" in regs.try_
    (spill,) = kinds(e, "spill")
    assert "objdump -d" in spill.what and "to the stack" in spill.what
    # the same block on this 32-register AVX-512 machine is within its register file
    if host.vector_registers == 32 and host.vector_bits == 512:
        s, args = faulty.big_register_block(lanes=16, rows=4, vectors=4)
        assert not kinds(explain(s, args, host), "registers")


def test_elementwise_add_is_memory_bound_at_12_bytes_per_flop():
    s, args = faulty.elementwise_add(1 << 20)
    check_module(tvmlite.build(s, args), args, lambda a, b: a + b)
    e = explain(s, args, seconds=1e-3)
    r = e.roofline
    assert r.flops == 1 << 20
    assert r.bound in ("L2", "L3", "memory")           # 12 MB: more than L1d and L2
    lv = r.level(r.bound)
    assert lv.bytes == 12 * (1 << 20)                  # two reads and a write per element
    assert r.attainable_gflops == pytest.approx(lv.gbps / 12)
    assert r.fraction == pytest.approx((1 << 20) / 1e-3 / 1e9 / r.attainable_gflops)
    assert e.one_line().startswith(f"{r.bound}-bound: 12 B/flop")
    (par,) = [f for f in e.findings if f.kind == "parallel"]
    assert not par.fault and "16384 iterations on" in par.what


def test_compute_at_that_recomputes_9x():
    s, args = faulty.recompute_9x(256, 9)
    check_module(tvmlite.build(s, args), args, lambda a, b: a * 2 + b)
    (f,) = kinds(explain(s, args), "recompute")
    assert f.where == "stage P" and "computed 9x its size" in f.what
    assert "compute_at P at an outer loop" in f.try_


def test_a_compute_bound_matmul_with_no_faults_says_so():
    M = N = K = 32
    A = tvmlite.te.placeholder((M, K), name="A")
    B = tvmlite.te.placeholder((K, N), name="B")
    k = tvmlite.te.reduce_axis((0, K), name="k")
    C = tvmlite.te.compute((M, N), lambda i, j: tvmlite.te.sum(A[i, k] * B[k, j], axis=k),
                           name="C")
    s = tvmlite.te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].reorder(i, k, j)
    s[C].vectorize(j)
    check_module(tvmlite.build(s, [A, B, C]), [A, B, C], lambda a, b: a @ b, rtol=1e-4)
    e = explain(s, [A, B, C], seconds=2 * M * N * K / 10e9)     # 10 GFLOP/s measured
    assert not kinds(e, "vector") and e.roofline.measured_gflops == pytest.approx(10.0)
    assert e.roofline.bound in ("compute", "L1")     # 12 KB fits in any L1d: nothing further
    assert e.roofline.level("L2").bytes == 0         # warm: the whole set stays in L1d
    text = str(e)
    assert "roofline:" in text and "=> " in text and "findings" in text


def test_traffic_model_counts_reuse_by_reuse_distance():
    """A row-times-matrix loop nest: with a cache holding one row of B but not B, B is
    re-read for every i; with a cache holding all of B, it is read once."""
    n = 64
    A = tvmlite.te.placeholder((n, n), name="A")
    B = tvmlite.te.placeholder((n, n), name="B")
    k = tvmlite.te.reduce_axis((0, n), name="k")
    C = tvmlite.te.compute((n, n), lambda i, j: tvmlite.te.sum(A[i, k] * B[k, j], axis=k),
                           name="C")
    s = tvmlite.te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].reorder(i, k, j)
    nest = loop_nest(s, [A, B, C])
    t = Traffic(nest.body, set())
    row, whole = n * 4, n * n * 4
    small = t.moved(4 * row)              # one i iteration (A row, B, C row) does not fit
    assert small["B"] == n * whole
    big = t.moved(4 * whole)
    assert big["B"] == whole and big["A"] == whole


def test_explain_rejects_a_non_schedule_and_a_bad_time():
    with pytest.raises(TypeError, match="expected a Schedule"):
        explain_schedule("not a schedule", [])
    s, args = faulty.elementwise_add(256)
    with pytest.raises(ValueError, match="seconds"):
        explain_schedule(s, args, seconds=-1.0, peak=PEAK, bandwidth=BW)


def test_module_explain_times_the_kernel_itself():
    s, args = faulty.recompute_9x(64, 9)
    mod = tvmlite.build(s, args)
    e = mod.explain(peak=PEAK, bandwidth=BW)
    assert e.roofline.seconds > 0 and e.source == "module"
    assert kinds(e, "recompute")


def test_a_recomputed_copy_is_a_fact_not_a_fault():
    n, rows = 64, 9
    A = te.placeholder((n,), name="A")
    B = te.placeholder((rows, n), name="B")
    P = te.compute((n,), lambda k: A[k], name="P")           # a copy, like padding
    C = te.compute((rows, n), lambda i, k: P[k] * B[i, k], name="C")
    s = te.create_schedule(C.op)
    s[P].compute_at(s[C], s[C].op.axis[0])
    check_module(tvmlite.build(s, [A, B, C]), [A, B, C], lambda a, b: a * b)
    (f,) = [f for f in explain(s, [A, B, C]).findings if f.kind == "recompute"]
    assert not f.fault and "a copy (no arithmetic)" in f.what and "9x" in f.what


def test_accumulating_into_memory_is_reported():
    """j vectorized over more vectors than are unrolled: the chunk loop stores C at an
    address that moves, so every FMA loads and stores C."""
    L = Target.host().vector_lanes("float32")
    M, N, K = 4, 16 * L, 8
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].reorder(i, k, j)
    s[C].vectorize(j)
    check_module(tvmlite.build(s, [A, B, C]), [A, B, C], lambda a, b: a @ b, rtol=1e-4)
    (f,) = [f for f in kinds(explain(s, [A, B, C]), "registers") if "accumulation" in f.what]
    assert "into C go through memory" in f.what and "cache_write C" in f.try_


# -- a kernel at its bound ------------------------------------------------------------------

def roof(gflops, peak=215.2, theoretical=700.0, levels=()):
    flops = 2 * 256 ** 3
    return Roofline(flops, levels, peak, "given", "given", flops / gflops / 1e9,
                    theoretical_gflops=theoretical)


def test_the_roofline_caps_at_the_peak_and_says_why_above_it():
    assert roof(150.0).one_line() == "compute-bound, 70% of attainable"
    at = roof(216.6)
    assert at.at_bound and at.one_line() == "compute-bound, at the peak (216.6 of 215.2 GFLOP/s)"
    assert not any("101%" in x for x in at.lines())
    low = roof(240.0)
    assert low.at_bound and "read low" in low.one_line()
    bad = roof(800.0)
    assert not bad.at_bound and "MEASUREMENT PROBLEM" in bad.one_line()
    assert "no clock" in roof(240.0, theoretical=None).one_line()
    # a bandwidth bound caps the same way: within the noise it is "at attainable"
    l2 = (Level("L2", 2 * 256 ** 3, 100.0),)       # 1 B/flop at 100 GB/s: 100 GFLOP/s
    assert roof(101.0, levels=l2).one_line() == \
        "L2-bound: 1 B/flop, at attainable (101.0 of 100.0 GFLOP/s)"
    assert "above the roofline" in roof(150.0, levels=l2).one_line()


def test_a_kernel_at_its_bound_has_facts_not_faults():
    """The recomputing kernel, measured at what its roofline allows: its recompute fault
    becomes a fact without advice, and the report says so before the roofline."""
    s, args = faulty.recompute_9x(256, 9)
    slow = explain(s, args, seconds=1e-3)
    assert kinds(slow, "recompute") and not slow.at_bound
    r = slow.roofline
    e = explain(s, args, seconds=r.flops / (r.attainable_gflops * 1.01) / 1e9)
    assert e.at_bound and not e.faults
    assert all(not f.fault and not f.try_ for f in e.findings)
    text = str(e)
    assert "try:" not in text and "\n! " not in text
    first = text.splitlines()[2]
    assert first.startswith("=> ") and "nothing in its schedule needs fixing" in first
    assert {f.kind for f in slow.findings if f.kind != "roofline"} <= \
        {f.kind for f in e.findings}
