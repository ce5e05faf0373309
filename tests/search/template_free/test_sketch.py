"""Sketch rules and realization: every sketch of every operator gives legal schedules that
compute the same numbers as the unscheduled program."""
import random

import numpy as np
import pytest

from tvmlite import te
from tvmlite.passes.pipeline import loop_nest
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError
from tvmlite.search.records.workload import Workload
from tvmlite.search.template_free import dag
from tvmlite.search.template_free.priors import max_innermost, unroll_steps
from tvmlite.search.template_free.realize import realize, register_block, sample_factors
from tvmlite.search.template_free.sketch import RULES, Rule, Tile, generate_sketches, symbolic_axes
from tvmlite.target.target import Target
from tvmlite.testing.check import check_schedule, evaluate_te, reduction_length, tolerance

TARGET = Target.host()

CASES = [
    ("matmul", (32, 48, 24), {}),
    ("batch_matmul", (2, 16, 16, 16), {}),
    ("dense", (4, 32, 24), {"bias": True, "relu": True}),
    ("conv1d", (1, 8, 20, 8, 3), {"padding": 1}),
    ("conv2d_nchw", (1, 4, 10, 10, 8, 3), {"padding": 1, "stride": 2}),
    ("conv2d_nhwc", (1, 10, 10, 4, 8, 3), {"padding": 1}),
    ("depthwise_conv2d_nhwc", (1, 10, 10, 8, 3), {"padding": 1}),
    ("depthwise_conv2d_nchw", (1, 8, 10, 10, 3), {"padding": 1}),
    ("max_pool2d", (1, 4, 10, 10, 3), {}),
    ("softmax", (8, 40), {}),
    ("norm2", (64, 40), {}),
    ("add", ((8, 36),), {}),
]


def _workload(name, args, kwargs):
    return Workload.from_op(name, *args, **kwargs)


def _check(wl, s):
    rtol, atol = tolerance(wl.tensors[-1].dtype, reduction_length(wl.tensors))
    tensors = list(wl.tensors)
    check_schedule(s, tensors, lambda *ins: evaluate_te(tensors, ins), rtol=rtol, atol=atol)


def _legal_samples(wl, sketch, n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(20 * n):
        try:
            s, used = realize(wl, sketch, {}, rng, TARGET)
            loop_nest(s, list(wl.tensors))
        except ScheduleError:
            continue
        out.append((s, used))
        if len(out) == n:
            break
    return out


@pytest.mark.parametrize("name,args,kwargs", CASES, ids=[c[0] for c in CASES])
def test_every_sketch_realizes_to_correct_schedules(name, args, kwargs):
    wl = _workload(name, args, kwargs)
    sketches = generate_sketches(wl)
    assert sketches
    for i, sk in enumerate(sketches):      # one draw per sketch: test_fuzz draws many more
        samples = _legal_samples(wl, sk, 1, seed=i)
        assert samples, f"sketch {sk} never realized legally"
        for s, _ in samples:
            _check(wl, s)


def test_matmul_sketches_are_ansors():
    wl = _workload("matmul", (64, 64, 64), {})
    descs = [str(s) for s in generate_sketches(wl)]
    assert descs == [
        "add-cache-read(C); add-cache-write(C); multi-level-tiling-with-fusion(C_local)",
        "add-cache-read(C); multi-level-tiling(C)",
        "add-cache-write(C); multi-level-tiling-with-fusion(C_local)",
        "multi-level-tiling(C)",
        # then A's copy (``pack-a-panels``, a later rule) before each of Ansor's four
        "pack-a-panels(C); add-cache-read(C); add-cache-write(C); "
        "multi-level-tiling-with-fusion(C_local)",
        "pack-a-panels(C); add-cache-read(C); multi-level-tiling(C)",
        "pack-a-panels(C); add-cache-write(C); multi-level-tiling-with-fusion(C_local)",
        "pack-a-panels(C); multi-level-tiling(C)"]
    assert dag.packable_inputs(wl.schedule().state, "C") == ["B"]


def test_conv_tiles_and_leaves_padding_to_a_location_decision():
    wl = _workload("conv2d_nhwc", (1, 14, 14, 8, 8, 3), {"padding": 1})
    sketches = generate_sketches(wl)
    for sk in sketches:
        assert "pad" not in str(sk)           # no rule inlines a stage with a branch
        assert any(isinstance(a, Tile) for a in sk.actions)
    rng = random.Random(0)
    where = set()
    for _ in range(60):
        s, used = realize(wl, sketches[0], {}, rng, TARGET)
        pad = s.state.stage("pad")
        where.add("inline" if pad.attach == "inline" else "root" if pad.attach is None
                  else "tile")
        assert "at:pad" in used
    assert where == {"inline", "root", "tile"}
    d = dict(used, **{"at:pad": 1})           # index 1: inline (0 is the root)
    assert realize(wl, sketches[0], d, rng, TARGET)[0].state.stage("pad").attach == "inline"


def test_dense_bias_relu_fuses_through_the_inlined_bias():
    wl = _workload("dense", (4, 32, 24), {"bias": True, "relu": True})
    assert [str(sk) for sk in generate_sketches(wl)] == [
        "always-inline(bias_add); multi-level-tiling-with-fusion(dense)",
        "always-inline(bias_add); pack-a-panels(dense); multi-level-tiling-with-fusion(dense)"]


def test_norm_gets_an_rfactor_sketch():
    wl = _workload("norm2", (64, 64), {})
    descs = [str(s) for s in generate_sketches(wl)]
    assert "add-rfactor(sumsq)" in descs and "skip" in descs


@pytest.mark.parametrize("serial", [1, 2, 4])
def test_rfactor_chunks_per_thread_run_inside_the_reduction(serial):
    wl = _workload("norm2", (24, 256), {})
    sk = next(sk for sk in generate_sketches(wl) if str(sk) == "add-rfactor(sumsq)")
    # the vector split at most this target's innermost limit (16 on AVX2, 64 on AVX-512)
    vec = min(32, max_innermost(TARGET.vector_lanes("float32"), TARGET.vector_registers))
    d = {"rfactor:sumsq": 256, "rfvec:sumsq": vec, "rfser:sumsq": serial,
         "at:sumsq_rf": 0, "parallel:sumsq_rf": 1}
    s, used = realize(wl, sk, d, random.Random(0), TARGET)
    assert used["rfser:sumsq"] == serial and used["rfvec:sumsq"] == vec
    loops = [it for it in s.state.stage("sumsq_rf").leaves]
    kinds = [it.kind for it in loops]
    assert loops[0].annotation == "parallel" and loops[0].extent == 256 // vec // serial
    if serial > 1:       # the serial chunks come after both reduce loops, before the lanes
        assert kinds[-2:] == ["spatial", "spatial"] and loops[-2].extent == serial
        assert kinds.index("reduce") < len(kinds) - 2
    _check(wl, s)


def test_dag_facts():
    st = _workload("softmax", (8, 16), {}).schedule().state
    assert not dag.strictly_inlinable(st, "expv")          # exp, read twice
    assert not dag.has_data_reuse(st, "expsum")
    mm = _workload("matmul", (64, 64, 64), {}).schedule().state
    assert dag.has_data_reuse(mm, "C") and dag.fusible_consumer(mm, "C") is None
    assert dag.needs_rfactor(_workload("norm2", (64, 64), {}).schedule().state, "sumsq")


def test_realize_is_deterministic_and_replays_its_decisions():
    wl = _workload("matmul", (64, 64, 64), {})
    sk = generate_sketches(wl)[0]
    s1, d1 = realize(wl, sk, {}, random.Random(5), TARGET)
    s2, d2 = realize(wl, sk, {}, random.Random(5), TARGET)
    assert s1.steps_json() == s2.steps_json() and d1 == d2
    s3, d3 = realize(wl, sk, d1, random.Random(99), TARGET)   # decisions decide, not the rng
    assert s3.steps_json() == s1.steps_json() and d3 == d1


def test_invalid_decisions_are_resampled():
    wl = _workload("matmul", (64, 64, 64), {})
    sk = generate_sketches(wl)[1]
    bad = {"tile:C.i": [7, 1, 1], "unroll:C": 3, "parallel:C": "x"}
    s, used = realize(wl, sk, bad, random.Random(0), TARGET)
    assert 64 % np.prod(used["tile:C.i"]) == 0
    assert used["unroll:C"] in unroll_steps(TARGET.vector_registers)
    _check(wl, s)


@pytest.mark.parametrize("extent,parts", [(64, 4), (56, 4), (7, 2), (1, 3), (97, 4)])
def test_sample_factors_multiply_to_a_divisor(extent, parts):
    rng = random.Random(0)
    for _ in range(50):
        f = sample_factors(extent, parts, rng)
        assert len(f) == parts - 1 and extent % int(np.prod(f)) == 0 and f[-1] <= 64


def test_symbolic_axes_are_those_of_the_symbolic_size():
    wl = Workload.from_op("matmul", te.var("M"), 32, 32)
    bound = wl.at({"M": 21}).bound()
    for sk in generate_sketches(bound):
        axes = symbolic_axes(wl, sk)
        assert ("C", "i") in axes and all(
            ax == "i" or st == "A_local" for st, ax in axes)   # A's copy: its rows
        if "cache-write" in str(sk):
            assert ("C_local", "i") in axes
    assert not any(symbolic_axes(bound, sk) for sk in generate_sketches(bound))


def test_loose_tiles_build_kernels_correct_at_every_size():
    """Schedules drawn at M = 21 with loose tiles on M, built over symbolic M and run
    at sizes below, at and beyond 21, against numpy."""
    from tvmlite import build
    wl = Workload.from_op("matmul", te.var("M"), 32, 32)
    bound = wl.at({"M": 21}).bound()
    b = np.random.default_rng(1).uniform(-1, 1, (32, 32)).astype("float32")
    built = 0
    for i, sk in enumerate(generate_sketches(bound)):
        rng = random.Random(i)
        loose = symbolic_axes(wl, sk)
        for _ in range(20):
            try:
                s, used = realize(bound, sk, {}, rng, TARGET, loose=loose)
                mod = build(Schedule.from_steps(wl.outputs, s.steps), list(wl.tensors))
            except ScheduleError:
                continue
            for m in (1, 2, 20, 21, 22, 45):
                a = np.random.default_rng(m).uniform(-1, 1, (m, 32)).astype("float32")
                c = np.full((m, 32), np.nan, "float32")
                mod(a, b, c)
                np.testing.assert_allclose(c, a.astype("float64") @ b, rtol=2e-5, atol=2e-5,
                                           err_msg=f"{sk} {used} M={m}")
            built += 1
            break
    assert built >= 2


def test_bool_decisions_from_an_edited_log_are_resampled():
    # True == 1 in Python: a bool must not pass for a location index or a loop count
    wl = _workload("norm2", (64, 40), {})
    sk = next(sk for sk in generate_sketches(wl) if "rfactor" in str(sk))
    _, good = realize(wl, sk, {}, random.Random(0), TARGET)
    bad = {k: True for k in good if k.split(":")[0] in ("rfvec", "rfser", "at", "parallel")}
    assert bad
    _, used = realize(wl, sk, dict(good, **bad), random.Random(1), TARGET)
    assert not any(isinstance(used[k], bool) for k in bad)


def test_sample_factors_prefers_whole_vectors_when_the_extent_allows():
    rng = random.Random(0)
    assert all(sample_factors(96, 4, rng, multiple_of=16)[-1] in (16, 32, 48)
               for _ in range(50))
    assert {sample_factors(7, 4, rng, multiple_of=16)[-1] for _ in range(50)} == {1, 7}


def test_fresh_tiles_are_mostly_whole_vectors_and_decisions_still_rule():
    wl = _workload("matmul", (64, 96, 64), {})
    sk = next(sk for sk in generate_sketches(wl) if any(isinstance(a, Tile) for a in sk.actions))
    tile = next(a for a in sk.actions if isinstance(a, Tile)).stage
    lanes = TARGET.vector_lanes("float32")
    rng = random.Random(0)
    inner = [realize(wl, sk, {}, rng, TARGET)[1][f"tile:{tile}.j"][-1] for _ in range(200)]
    whole = sum(f % lanes == 0 for f in inner) / len(inner)
    assert 0.7 < whole < 0.98, whole                  # a prior, not a constraint
    d = realize(wl, sk, {}, random.Random(1), TARGET)[1]
    d[f"tile:{tile}.j"] = [1, 1, 3]
    assert realize(wl, sk, d, random.Random(2), TARGET)[1][f"tile:{tile}.j"] == [1, 1, 3]


def test_fresh_register_blocks_fit_the_register_file_and_decisions_still_rule():
    # a conv has four spatial axes: drawn independently, their innermost tiles multiply to
    # blocks of dozens of vectors, which never ran at more than half a case's best
    wl = _workload("conv2d_nhwc", (1, 16, 16, 32, 64, 3), {"padding": 1})
    sk = next(sk for sk in generate_sketches(wl) if any(isinstance(a, Tile) for a in sk.actions))
    tile = next(a for a in sk.actions if isinstance(a, Tile)).stage
    lanes = TARGET.vector_lanes("float32")
    rng = random.Random(0)
    for _ in range(100):
        s, used = realize(wl, sk, {}, rng, TARGET)
        assert register_block(s.state.stage(tile), used, lanes) <= TARGET.vector_registers
    big = dict(used, **{f"tile:{tile}.h": [1, 1, 8], f"tile:{tile}.w": [1, 1, 16]})
    s, used = realize(wl, sk, big, random.Random(1), TARGET)
    assert register_block(s.state.stage(tile), used, lanes) >= 128   # mutations reach it
    _check(wl, s)


def test_register_block_counts_vectors_of_the_last_axis():
    wl = _workload("matmul", (64, 96, 64), {})
    sk = next(sk for sk in generate_sketches(wl) if any(isinstance(a, Tile) for a in sk.actions))
    tile = next(a for a in sk.actions if isinstance(a, Tile)).stage
    # a 24-wide innermost tile is within AVX-512's limit (64), not AVX2's (16); the
    # schedule is only counted here, never compiled, so any CPU can realize it
    s, used = realize(wl, sk, {f"tile:{tile}.i": [1, 2, 4], f"tile:{tile}.j": [1, 1, 24]},
                      random.Random(0), Target.from_name("x86_64-avx512"))
    assert register_block(s.state.stage(tile), used, 16) == 4 * 2     # 24 lanes: 2 vectors
    assert register_block(s.state.stage(tile), used, 8) == 4 * 3


def test_user_rule_is_used():
    calls = []

    def cond(state, name):
        calls.append(name)
        return name == "C"

    rule = Rule("mine", cond, lambda s, n: [[Tile(n)]], exclusive=True)
    wl = _workload("matmul", (16, 16, 16), {})
    sketches = generate_sketches(wl, rules=(rule,) + RULES)
    assert [str(s) for s in sketches] == ["mine(C)"] and "C" in calls


@pytest.mark.parametrize("name", ["conv_bias_relu", "matmul_tn", "bmm_softmax"])
def test_user_computes_get_correct_sketches(user_computes, name):
    tensors = user_computes[name]
    wl = Workload.from_tensors(tensors, name=name)
    sketches = generate_sketches(wl)
    assert sketches
    for i, sk in enumerate(sketches):
        for s, _ in _legal_samples(wl, sk, 1, seed=10 + i):
            _check(wl, s)


def test_priors_read_the_target():
    """Innermost tiles, unroll steps and the register block's FMA floor scale with the
    target's vectors and registers, not with one CPU."""
    import random as _random

    from tvmlite.schedule.state import ScheduleError
    from tvmlite.search.records.workload import Workload
    from tvmlite.search.template_free.priors import fma_block_floor, max_innermost, unroll_steps
    from tvmlite.search.template_free.realize import realize
    from tvmlite.search.template_free.sketch import generate_sketches
    from tvmlite.target.target import Target
    assert max_innermost(16, 32) == 64 and max_innermost(8, 16) == 16
    assert max_innermost(4, 32) == 16
    assert unroll_steps(32) == (0, 16, 64, 512) and unroll_steps(16) == (0, 8, 32, 256)
    avx2 = Target.from_name("x86_64-avx2")
    assert fma_block_floor(avx2, avx2.vector_registers) == 8      # 5 x 2, capped at 16 / 2
    wl = Workload.from_op("matmul", 64, 64, 64, "float32")
    sketches = generate_sketches(wl)
    rng = _random.Random(0)
    seen = 0
    for i in range(40):
        try:
            s, used = realize(wl, sketches[i % len(sketches)], {}, rng, avx2)
        except ScheduleError:      # an illegal draw: the search samples another
            continue
        seen += 1
        for k, v in used.items():
            if k.startswith("tile:"):
                assert v[-1] <= 16
            if k.startswith("unroll:"):
                assert v in unroll_steps(16)
    assert seen


def test_a_low_precision_dot_gets_the_tensorize_sketch_and_float_does_not():
    wl = _workload("qmatmul", (8, 64, 16), {})
    descs = [str(s) for s in generate_sketches(wl)]
    assert descs[0] == "tensorize-dot(C)" and len(descs) == 9   # besides A, B, both, neither packed
    assert not any("tensorize" in str(s) for s in
                   generate_sketches(_workload("matmul", (64, 64, 64), {})))


@pytest.mark.parametrize("constant", [True, False], ids=["B-constant", "B-per-call"])
def test_the_tensorize_sketch_uses_the_intrinsic_for_a_constant_b(constant):
    """With B constant the block calls this CPU's best intrinsic (a fallback where it
    lacks VNNI/dotprod); without, the same block in plain vectors; both exact."""
    wl = _workload("qmatmul", (8, 64, 16), {})
    sketch = generate_sketches(wl)[0]
    constants = ("B",) if constant else ()
    s, used = realize(wl, sketch, {}, random.Random(0), TARGET, constants)
    assert used["tensorize:C"] == int(constant)
    assert any(st.kind == "tensorize" for st in s.steps) == constant
    again, _ = realize(wl, sketch, used, random.Random(1), TARGET, constants)
    assert again.steps == s.steps
    _check(wl, s)
