"""The target-derived blocking of a packed tiling: what it decides on each target, that
its schedules are right at every size, and that only a BLAS-shaped sketch gets one."""
import math
import random
from dataclasses import replace

import numpy as np
import pytest

from tvmlite import build, te
from tvmlite.ir.dtypes import ITEMSIZE
from tvmlite.schedule.schedule import Schedule
from tvmlite.search.measure.inputs import MeasureResult
from tvmlite.search.model.cost_model import XGBModel
from tvmlite.search.options import TuningOptions
from tvmlite.search.records.workload import Workload
from tvmlite.search.template_free.blocking import (
    PANEL_SHARE,
    PARALLEL_SHARE,
    ROWS_SHARE,
    block_rows_axis,
    blocked_decisions,
    panels_outweigh_rows,
    register_block,
)
from tvmlite.search.template_free.evolution import Candidate
from tvmlite.search.template_free.policy import SketchPolicy
from tvmlite.search.template_free.priors import (
    fma_block_floor,
    max_innermost,
    register_block_rows,
)
from tvmlite.search.template_free.realize import realize
from tvmlite.search.template_free.sketch import generate_sketches, symbolic_axes
from tvmlite.target.intrinsics import best_intrinsic
from tvmlite.target.named import NAMED_TARGETS
from tvmlite.target.target import Target

NAMED = ("x86_64-sse4", "x86_64-avx2", "x86_64-avx512", "aarch64-neon")
PACKED = "add-cache-read(C); add-cache-write(C); multi-level-tiling-with-fusion(C_local)"


def described(name):
    """The named target's registers, lanes and caches -- all the blocking reads -- on this
    machine's compiler: no cross compiler is needed to decide a blocking."""
    spec = NAMED_TARGETS[name]
    return replace(Target.host(), arch=spec.arch, features=spec.features,
                   vector_bits=spec.vector_bits,
                   vector_register_count=spec.vector_registers, caches=spec.caches, name=name)


def _packed(bound):
    return next(sk for sk in generate_sketches(bound) if str(sk) == PACKED)


@pytest.mark.parametrize("name", NAMED)
@pytest.mark.parametrize("m", [117, 1024, None])
def test_blocked_matmul_fits_the_targets_registers_and_l2(name, m):
    """Register block: two vectors wide, rows filling the registers beside a row of the
    panel and a broadcast, at least the FMA floor (or, where few rows divide M, rows of
    one vector); the panel fits a quarter of L2, the rows it meets half; the reduction
    chunk is the longest innermost tile; the copy is made at the panel's loop and
    everything above it runs in parallel."""
    target = described(name)
    wl = Workload.from_op("matmul", te.var("M") if m is None else m, 1024, 1024)
    bound = wl.at({"M": 1024}).bound() if m is None else wl
    sk = _packed(bound)
    loose = symbolic_axes(wl, sk) if m is None else frozenset()
    d = blocked_decisions(bound, sk, target, loose=loose)
    assert d == blocked_decisions(bound, sk, target, loose=loose)
    lanes, regs = target.vector_lanes("float32"), target.vector_registers
    most = (regs - 1 - 2) // 2          # rows beside a panel row (2 vectors) and a broadcast
    ci, ri, mr = d["tile:C_local.i"]
    cj, rj, nr = d["tile:C_local.j"]
    assert ri == rj == 1
    if nr == lanes:      # 117 = 9 x 13 on 16 registers: 3 rows of 2 vectors (6 accumulators)
        assert m == 117 and most < 9 and mr == 9 >= fma_block_floor(target, regs) - 1
    else:
        assert nr == 2 * lanes and mr <= most
        assert mr == most if m is None else not [r for r in range(mr + 1, most + 1)
                                                 if m % r == 0]
        assert mr * 2 >= fma_block_floor(target, regs)
    l2 = target.cache_bytes("L2")
    assert 1024 * cj * nr * ITEMSIZE["float32"] <= l2 // PANEL_SHARE
    assert 1024 * ci * mr * ITEMSIZE["float32"] <= l2 // ROWS_SHARE
    assert d["tile:C_local.k"] == [max_innermost(lanes, regs)]
    s, _ = realize(bound, sk, d, random.Random(1), target, loose=loose)
    steps = [str(st) for st in s.steps]
    assert 's["B_local"].compute_at(s["C"], "j_outer")' in steps       # the panel's loop
    assert 's["C"].fuse("i_outer", "j_outer")' in steps                 # parallel above it
    c = s.state.stage("C")
    assert c.leaves[0].annotation == "parallel" and s.state.stage("B_local").attach == (
        "C", c.leaves[0].name)


def test_blocked_decisions_on_avx512_and_avx2():
    """The numbers, on two reference CPUs: 14 x 32 on 32 registers, 6 x 16 on 16; L2
    (1 MiB and 256 KiB) sets the panel and the rows."""
    wl = Workload.from_op("matmul", te.var("M"), 1024, 1024)
    bound = wl.at({"M": 1024}).bound()
    sk = _packed(bound)
    got = {name: blocked_decisions(bound, sk, described(name), loose=symbolic_axes(wl, sk))
           for name in ("x86_64-avx512", "x86_64-avx2")}
    assert [got["x86_64-avx512"][f"tile:C_local.{a}"] for a in "ijk"] == \
        [[8, 1, 14], [2, 1, 32], [64]]
    assert [got["x86_64-avx2"][f"tile:C_local.{a}"] for a in "ijk"] == [[4, 1, 6], [1, 1, 16], [16]]


def test_only_sketches_whose_tiles_fuse_into_an_output_are_blocked():
    """With or without the packed operand (a depthwise conv has none to pack); never a
    sketch that tiles without fusing (no register block), nor a softmax."""
    blocked = []
    for wl in (Workload.from_op("matmul", 64, 64, 64), Workload.from_op("softmax", 8, 40)):
        for sk in generate_sketches(wl):
            d = blocked_decisions(wl, sk, Target.host())
            assert (d is not None) == ("multi-level-tiling-with-fusion" in str(sk)), str(sk)
            blocked += [str(sk)] if d is not None else []
    assert blocked == [   # B packed, neither, then A and B, A (``pack-a-panels``)
        PACKED, "add-cache-write(C); multi-level-tiling-with-fusion(C_local)",
        "pack-a-panels(C); " + PACKED,
        "pack-a-panels(C); add-cache-write(C); multi-level-tiling-with-fusion(C_local)"]


def test_a_small_output_is_still_shared_by_every_core():
    """A 7x7 conv's whole output fits the L2 blocks: the blocks shrink until the loops
    outside them (the parallel loop) have PARALLEL_SHARE iterations per core."""
    target = Target.from_name("x86_64-avx512")
    wl = Workload.from_op("conv2d_nhwc", 1, 7, 7, 64, 64, 3, padding=1)
    sk = next(sk for sk in generate_sketches(wl) if str(sk).startswith("add-cache-read"))
    d = blocked_decisions(wl, sk, target)
    outer = [e // math.prod(d[f"tile:conv2d_nhwc_local.{a}"]) for a, e in
             (("h", 7), ("w", 7), ("f", 64))]
    assert math.prod(outer) >= target.cores * PARALLEL_SHARE


def test_a_vector_axis_without_whole_vectors_is_blocked_in_shorter_ones():
    """24 output channels on AVX-512 (16 lanes): blocks of 8, so no scalar tail."""
    wl = Workload.from_op("conv2d_nhwc", 1, 56, 56, 32, 24, 1)
    sk = next(sk for sk in generate_sketches(wl) if str(sk).startswith("add-cache-read"))
    d = blocked_decisions(wl, sk, Target.from_name("x86_64-avx512"))
    assert d["tile:conv2d_nhwc_local.f"][-1] == 8


def run_padded_conv(mod, wl, seed):
    """``mod`` (a conv of ``wl``: NHWC input, HWIO weight, padding 1) on seeded uniform
    inputs: (its output, the input padded in float64, the weight)."""
    rng = np.random.default_rng(seed)
    x_t, w_t, out_t = wl.tensors
    x = rng.uniform(-1, 1, tuple(x_t.shape)).astype("float32")
    w = rng.uniform(-1, 1, tuple(w_t.shape)).astype("float32")
    out = np.full(tuple(out_t.shape), np.nan, "float32")
    mod(x, w, out)
    return out, np.pad(x.astype("float64"), ((0, 0), (1, 1), (1, 1), (0, 0))), w


def test_a_gemv_gets_none_and_a_conv_with_few_dividing_rows_gets_rows_of_one_vector():
    """A matrix-vector product's single row is not a micro-kernel. w = 14 on AVX2 allows
    2 rows of 2 vectors (4 accumulators); 7 rows of one vector hold 7, one short of the
    floor of 8, and the kernel built from them is right."""
    gemv = Workload.from_op("matmul", 1, 256, 256)
    assert all(blocked_decisions(gemv, sk, Target.host()) is None
               for sk in generate_sketches(gemv))
    wl = Workload.from_op("conv2d_nhwc", 4, 14, 14, 32, 64, 3, padding=1)
    sk = next(sk for sk in generate_sketches(wl) if "cache-read" in str(sk)
              and "cache-write" in str(sk))
    avx2 = Target.from_name("x86_64-avx2")
    d = blocked_decisions(wl, sk, avx2)
    assert d["tile:conv2d_nhwc_local.w"][-1] == 7 and d["tile:conv2d_nhwc_local.f"][-1] == 8
    assert fma_block_floor(avx2, 16) - 1 == 7
    d = blocked_decisions(wl, sk, Target.from_name("x86_64-avx512"))
    assert d["tile:conv2d_nhwc_local.w"][-1] == 14 and d["at:pad"] == 0
    host = Target.host()
    d = blocked_decisions(wl, sk, host)
    s, _ = realize(wl, sk, d, random.Random(0), host)
    out, xp, w = run_padded_conv(build(s, list(wl.tensors)), wl, 3)
    want = sum(np.einsum("nhwc,cf->nhwf", xp[:, i:i + 14, j:j + 14], w[i, j])
               for i in range(3) for j in range(3))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_a_blocked_depthwise_conv_reads_its_padding_in_place():
    """A depthwise conv's padding is inlined (``dag.copy_pays``: too few multiply-adds per
    element for a copy of its own); a dense conv's keeps its copy. The depthwise kernel
    as numpy's, borders included."""
    host = Target.host()
    dense = Workload.from_op("conv2d_nhwc", 1, 14, 14, 32, 64, 3, padding=1)
    sk = next(sk for sk in generate_sketches(dense) if "fusion" in str(sk))
    assert blocked_decisions(dense, sk, host)["at:pad"] == 0
    wl = Workload.from_op("depthwise_conv2d_nhwc", 1, 10, 10, 32, 3, padding=1)
    found = [(sk, d) for sk in generate_sketches(wl)
             if (d := blocked_decisions(wl, sk, host)) is not None]
    assert found and all(d["at:pad"] == 1 for _, d in found)
    sk, d = found[0]
    s, _ = realize(wl, sk, d, random.Random(0), host)
    assert s.state.stage("pad").attach == "inline"
    out, xp, w = run_padded_conv(build(s, list(wl.tensors)), wl, 4)
    want = sum(xp[:, i:i + 10, j:j + 10] * w[i, j, :, 0] for i in range(3) for j in range(3))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_blocked_kernels_over_symbolic_sizes_are_right_at_every_size():
    """The blocked matmul and conv2d of the host, built over a symbolic M (N), run at
    sizes below, at, between and beyond their tiles, against numpy."""
    target = Target.host()
    wl = Workload.from_op("matmul", te.var("M"), 192, 256)
    bound = wl.at({"M": 200}).bound()
    sk = _packed(bound)
    d = blocked_decisions(bound, sk, target, loose=symbolic_axes(wl, sk))
    s, _ = realize(bound, sk, d, random.Random(0), target, loose=symbolic_axes(wl, sk))
    mod = build(Schedule.from_steps(wl.outputs, s.steps), list(wl.tensors))
    rng = np.random.default_rng(0)
    b = rng.uniform(-1, 1, (256, 192)).astype("float32")
    block = math.prod(d["tile:C_local.i"])
    for m in sorted({1, 2, d["tile:C_local.i"][-1] + 1, block - 1, block, block + 1, 300}):
        a = rng.uniform(-1, 1, (m, 256)).astype("float32")
        c = np.full((m, 192), np.nan, "float32")
        mod(a, b, c)
        np.testing.assert_allclose(c, a.astype("float64") @ b, rtol=1e-4, atol=1e-4,
                                   err_msg=f"M={m} {d}")
    cw = Workload.from_op("conv2d_nhwc", te.var("N"), 12, 12, 16, 32, 3, padding=1)
    cb = cw.at({"N": 4}).bound()
    sk = next(sk for sk in generate_sketches(cb) if "cache-read" in str(sk)
              and "cache-write" in str(sk))
    loose = symbolic_axes(cw, sk)
    d = blocked_decisions(cb, sk, target, loose=loose)
    assert d is not None
    s, _ = realize(cb, sk, d, random.Random(0), target, loose=loose)
    mod = build(Schedule.from_steps(cw.outputs, s.steps), list(cw.tensors))
    w = rng.uniform(-1, 1, (3, 3, 16, 32)).astype("float32")
    for n in (1, 2, 5):
        x = rng.uniform(-1, 1, (n, 12, 12, 16)).astype("float32")
        out = np.full((n, 12, 12, 32), np.nan, "float32")
        mod(x, w, out)
        xp = np.pad(x.astype("float64"), ((0, 0), (1, 1), (1, 1), (0, 0)))
        want = sum(np.einsum("nhwc,cf->nhwf", xp[:, i:i + 12, j:j + 12], w[i, j])
                   for i in range(3) for j in range(3))
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=f"N={n} {d}")


HOST = Target.host()


def max_block_rows(target: Target) -> int:
    """Rows of a 2-vector register block."""
    return register_block_rows(target.vector_registers, 2)


def test_policy_offers_its_blocked_candidate_until_it_is_measured():
    wl = Workload.from_op("matmul", 64, 64, 64)
    policy = SketchPolicy(wl, Target.host(), XGBModel(seed=0), TuningOptions(population=16))
    first = policy.blocked()
    # each of the 4 BLAS-shaped sketches with its rows as perfect tiles, and again with a
    # remainder block where the registers hold rows that do not divide 64 (6 on AVX2)
    # (4 alone where the remainder block is the same tiling: on AVX2 6 rows, so 8)
    assert len(first) in (4, 8) and (len(first) == 8 or 64 % max_block_rows(HOST) == 0)
    assert first[0].decisions["sketch_desc"] == PACKED
    assert [inp.key for inp in policy.blocked()] == [inp.key for inp in first]
    policy.update(first[:1], [MeasureResult(costs=(1e-3,))], train=False)
    assert [inp.key for inp in policy.blocked()] == [inp.key for inp in first[1:]]
    policy.update(first[1:], [MeasureResult(costs=(1e-3,))] * (len(first) - 1), train=False)
    assert policy.blocked() == []


def test_the_dot_sketch_is_blocked_around_the_targets_intrinsic():
    """A constant B: the first round measures the intrinsic's register block (what the
    search then starts from); B per call: the same block in plain vectors."""
    host = Target.host()
    wl = Workload.from_op("qmatmul", 16, 64, 32)
    sketch = generate_sketches(wl)[0]
    intr = best_intrinsic(host.arch, host.features, "uint8", "int8", "int32")
    assert intr is not None
    d = blocked_decisions(wl, sketch, host, ("B",))
    assert d is not None and d["tensorize:C"] == 1
    s, _ = realize(wl, sketch, d, random.Random(0), host, ("B",))
    assert any(st.kind == "tensorize" and st.intrinsic == intr.name for st in s.steps)
    assert blocked_decisions(wl, sketch, host, ())["tensorize:C"] == 0


def test_a_remainder_row_block_stays_loose_in_its_children_and_in_a_resumed_log():
    """A seed whose rows do not divide their axis (6 of 64 on AVX2) is realized with the
    axis loose; evolution mutates it as a loose axis (a divisor-only move has nothing to
    move there), its children keep it, and a log's record of it seeds evolution again."""
    wl = Workload.from_op("matmul", 64, 64, 64)
    target = Target.from_name("x86_64-avx2")
    policy = SketchPolicy(wl, target, XGBModel(seed=0), TuningOptions(population=16))
    loose = [c for c in policy.blocked_candidates() if c.loose]
    assert loose and all(c.decisions[f"tile:{st}.{ax}"][-1] == 6
                         for c in loose for st, ax in c.loose)
    rng = random.Random(0)
    for parent in loose:
        children = [policy.search.realize(Candidate(parent.sketch, new, loose=parent.loose))
                    for new in (policy.search.mutated_decisions(parent, rng) for _ in range(30))
                    if new is not None]
        # (a child whose rows happen to divide may be a schedule realized before: cached)
        assert any(c is not None and c.loose == parent.loose for c in children)
    resumed = SketchPolicy(wl, target, XGBModel(seed=0), TuningOptions(population=16))
    inp = policy.blocked()[[c.key for c in policy.blocked_candidates()].index(loose[0].key)]
    resumed.update([inp], [MeasureResult(costs=(1e-3,))], train=False)
    assert [(c.key, c.loose) for c in resumed.best_seeds] == [(loose[0].key, loose[0].loose)]


def test_register_block_reads_rows_vectors_and_the_rows_extent():
    wl = Workload.from_op("conv2d_nhwc", 1, 56, 56, 64, 64, 3, padding=1)
    sk = next(sk for sk in generate_sketches(wl) if "cache-read" in str(sk)
              and "cache-write" in str(sk))
    avx2 = Target.from_name("x86_64-avx2")
    strict = blocked_decisions(wl, sk, avx2)
    assert register_block(wl, sk, strict, 8) == (4, 2, 56)      # 56 = 4 x 14: 4 rows
    rows = block_rows_axis(wl, sk)
    loose = blocked_decisions(wl, sk, avx2, loose=frozenset({rows}))
    assert register_block(wl, sk, loose, 8) == (6, 2, 56)       # 6 rows and a remainder
    gemv = Workload.from_op("matmul", 1, 256, 256)
    assert register_block(gemv, generate_sketches(gemv)[0], {}, 8)[0] in (0, 1)


@pytest.mark.parametrize("size,panels", [(7, 1), (28, 0)])
def test_panels_go_outside_the_rows_where_the_weights_outweigh_the_input(size, panels):
    """Packed once at load time, a deep layer's weights (7 x 7 x 64 -> 64, 3x3: 36864
    against an input of 3136) are walked panel by panel, each panel over every row, so
    a task keeps one panel in L2 instead of sweeping all of them again per row tile; a
    shallow layer (28 x 28) keeps the rows outside; a panel packed inside the kernel
    stays at its own loop. The kernel is right either way."""
    wl = Workload.from_op("conv2d_nhwc", 1, size, size, 64, 64, 3, padding=1)
    sk = next(sk for sk in generate_sketches(wl) if "cache-read" in str(sk)
              and "cache-write" in str(sk))
    assert panels_outweigh_rows(wl.schedule().state.stage("conv2d_nhwc"), "f") == bool(panels)
    assert blocked_decisions(wl, sk, HOST, ["weight"])["panels:conv2d_nhwc_local"] == 0
    d = blocked_decisions(wl, sk, HOST, ["weight"], prepack=True)
    assert d["panels:conv2d_nhwc_local"] == panels
    s, _ = realize(wl, sk, d, random.Random(0), HOST, ["weight"])
    parallel = s.state.stage("conv2d_nhwc").leaves[0].name     # every outer loop, fused
    assert parallel == ("f_outer_n_h_outer_w_outer_fused" if panels else
                        "n_h_outer_w_outer_f_outer_fused")
    mod = build(s, list(wl.tensors))
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (1, size, size, 64)).astype("float32")
    w = rng.uniform(-1, 1, (3, 3, 64, 64)).astype("float32")
    out = np.full((1, size, size, 64), np.nan, "float32")
    mod(x, w, out)
    xp = np.pad(x.astype("float64"), ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = sum(np.einsum("nhwc,cf->nhwf", xp[:, i:i + size, j:j + size], w[i, j])
               for i in range(3) for j in range(3))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
