"""The pack-a-panels sketch rule: A's rows copied inside the kernel (beside B's panel), only
for GEMM-like stages, and every schedule drawn from its sketches equal to numpy."""
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tvmlite import build
from tvmlite.schedule.state import ScheduleError
from tvmlite.search.records.workload import Workload
from tvmlite.search.template_free.blocking import blocked_decisions
from tvmlite.search.template_free.realize import realize
from tvmlite.search.template_free.sketch import CacheRead, generate_sketches, row_operand
from tvmlite.target.target import Target
from tvmlite.testing.check import check_schedule, evaluate_te, reduction_length, tolerance

TARGET = Target.host()
GEMMS = [("matmul", (32, 48, 24), {}, "A"),
         ("batch_matmul", (2, 16, 16, 16), {}, "A"),
         ("dense", (4, 32, 24), {"bias": True, "relu": True}, "data")]
OTHERS = [("conv1d", (1, 8, 20, 8, 3), {"padding": 1}),
          ("conv2d_nchw", (1, 4, 10, 10, 8, 3), {"padding": 1}),
          ("conv2d_nhwc", (1, 10, 10, 4, 8, 3), {"padding": 1}),
          ("depthwise_conv2d_nhwc", (1, 10, 10, 8, 3), {"padding": 1}),
          ("max_pool2d", (1, 4, 10, 10, 3), {}),
          ("softmax", (8, 40), {}),
          ("add", ((8, 36),), {})]


def _panel_sketches(wl):
    return [sk for sk in generate_sketches(wl) if "pack-a-panels" in str(sk)]


@pytest.mark.parametrize("name,args,kwargs,a", GEMMS, ids=[g[0] for g in GEMMS])
def test_gemm_like_stages_get_a_panel_sketch_of_their_a(name, args, kwargs, a):
    wl = Workload.from_op(name, *args, **kwargs)
    sketches = _panel_sketches(wl)
    assert sketches
    for sk in sketches:
        reads = [x.tensor for x in sk.actions if isinstance(x, CacheRead)]
        assert reads[0] == a and len(set(reads)) == len(reads)   # A first, never twice
    descs = [str(sk) for sk in generate_sketches(wl)]
    assert len(descs) == len(set(descs))


@pytest.mark.parametrize("name,args,kwargs", OTHERS, ids=[o[0] for o in OTHERS])
def test_no_panel_of_a_where_there_is_no_gemm(name, args, kwargs):
    """A convolution reads its input through a window (h + kh): not a GEMM's A[i, k]."""
    wl = Workload.from_op(name, *args, **kwargs)
    assert not _panel_sketches(wl)
    state = wl.schedule().state
    assert all(row_operand(state, st.name) is None for st in state.stages)


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=st.sampled_from(GEMMS), which=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_random_schedules_of_panel_sketches_equal_numpy(case, which, seed):
    name, args, kwargs, _ = case
    wl = Workload.from_op(name, *args, **kwargs)
    sketches = _panel_sketches(wl)
    sk = sketches[which % len(sketches)]
    rng = random.Random(seed)
    for _ in range(20):
        try:
            s, _ = realize(wl, sk, {}, rng, TARGET)
            break
        except ScheduleError:
            continue
    else:
        pytest.fail(f"{sk} never realized legally")
    tensors = list(wl.tensors)
    rtol, atol = tolerance(tensors[-1].dtype, reduction_length(tensors))
    check_schedule(s, tensors, lambda *ins: evaluate_te(tensors, ins), rtol=rtol, atol=atol)


def test_blocked_candidate_packs_a_and_b_at_the_panels_loop():
    """blocking.py's BLAS candidate of the A + B sketch: both copies at the column
    panel's loop, inside the parallel loop (each task packs its own), equal to numpy."""
    wl = Workload.from_op("matmul", 64, 64, 64)
    sk = next(sk for sk in _panel_sketches(wl) if str(sk).startswith(
        "pack-a-panels(C); add-cache-read(C); add-cache-write(C)"))
    d = blocked_decisions(wl, sk, TARGET)
    assert d is not None
    s, _ = realize(wl, sk, d, random.Random(0), TARGET)
    c = s.state.stage("C")
    for copy in ("A_local", "B_local"):
        assert s.state.stage(copy).attach == ("C", c.leaves[0].name)
    assert c.leaves[0].annotation == "parallel"
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 64)).astype("float32") for _ in range(2))
    f = build(s, list(wl.tensors), target=TARGET)
    out = np.zeros((64, 64), "float32")
    f(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
