"""The operator library's templates: every config of every template's space builds and
matches the numpy reference (sampled on small shapes: the fallback plus up to 20 random
configs, the whole space when it is smaller), templates are registered under the
operator names with the operators' exact signatures, their workloads are the operators'
own, and their Steps replay without the template."""
from __future__ import annotations

import dataclasses
import inspect
import random
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import tvmlite
import tvmlite.schedules as schedules
from tvmlite import testing
from tvmlite.ops import OPS
from tvmlite.runtime.module import generate_c
from tvmlite.schedule.schedule import Schedule
from tvmlite.search import templated
from tvmlite.search.measure.inputs import MeasureResult
from tvmlite.search.records.record import make_record
from tvmlite.search.records.workload import Workload
from tvmlite.search.templated.space import SpaceError

SAMPLES = 12            # random configs per main case, besides the fallback
FEW = 5                 # per extra case (odd sizes, strides, groups, other dtypes)

TEMPLATE_NAMES = ["matmul", "batch_matmul", "dense", "conv1d", "conv2d_nchw", "conv2d_nhwc",
                  "depthwise_conv2d_nchw", "depthwise_conv2d_nhwc", "softmax", "norm2"]

# (operator, arguments by name, configs to sample). Shapes are small but have several
# factors, so the splits have choices; the extra cases bring odd extents (scalar
# tails), strides, dilation, groups, channel multipliers, other layouts and dtypes.
CASES = [
    ("matmul", dict(M=16, N=32, K=8), SAMPLES),
    ("matmul", dict(M=6, N=10, K=5), FEW),
    ("matmul", dict(M=4, N=16, K=6, dtype="int32"), FEW),
    ("batch_matmul", dict(B=2, M=8, N=16, K=6), SAMPLES),
    ("dense", dict(N=4, K=32, M=6, bias=True, relu=True), SAMPLES),
    ("dense", dict(N=3, K=12, M=8), FEW),
    ("dense", dict(N=2, K=16, M=5, bias=True, dtype="float64"), FEW),
    ("conv2d_nhwc", dict(N=1, H=6, W=8, CI=8, CO=32, kernel=3, padding=1), SAMPLES),
    ("conv2d_nhwc", dict(N=1, H=9, W=11, CI=4, CO=6, kernel=3, stride=2, padding=1,
                         dilation=2, groups=2), FEW),
    ("conv2d_nchw", dict(N=1, CI=8, H=6, W=16, CO=8, kernel=3, padding=1), SAMPLES),
    ("conv2d_nchw", dict(N=2, CI=4, H=9, W=11, CO=6, kernel=(3, 1), stride=2,
                         padding=(1, 0), groups=2), FEW),
    ("depthwise_conv2d_nhwc", dict(N=1, H=6, W=8, C=32, kernel=3, padding=1), SAMPLES),
    ("depthwise_conv2d_nhwc", dict(N=1, H=9, W=7, C=3, kernel=3, stride=2, padding=1,
                                   dilation=2, multiplier=2), FEW),
    ("depthwise_conv2d_nchw", dict(N=1, C=4, H=8, W=16, kernel=3, padding=1), SAMPLES),
    ("depthwise_conv2d_nchw", dict(N=1, C=3, H=9, W=9, kernel=(3, 2), stride=2, padding=1,
                                   multiplier=2), FEW),
    ("conv1d", dict(N=2, L=12, CI=8, CO=16, kernel=3, padding=1), SAMPLES),
    ("conv1d", dict(N=1, L=16, CI=4, CO=6, kernel=3, padding=1, layout="NCL"), SAMPLES),
    ("conv1d", dict(N=2, L=11, CI=3, CO=5, kernel=3, stride=2, padding=1, dilation=2), FEW),
    ("softmax", dict(N=3, M=32), SAMPLES),
    ("softmax", dict(N=2, M=7, dtype="float64"), FEW),
    ("norm2", dict(N=8, M=32), SAMPLES),
    ("norm2", dict(N=5, M=7), FEW),
]


def _id(case) -> str:
    name, args, _ = case
    return name + "-" + "-".join(f"{k}{v}" for k, v in args.items())


def _configs(space, n: int, seed: int = 0) -> list:
    """The fallback and ``n`` distinct random configs (the whole space if smaller)."""
    if len(space) <= n + 1:
        return [space.fallback()] + [space.get(i) for i in range(len(space))
                                     if i != space.fallback().index]
    rng = random.Random(seed)
    picked = {space.fallback().index: space.fallback()}
    while len(picked) < n + 1:
        c = space.random_config(rng)
        picked.setdefault(c.index, c)
    return list(picked.values())


def _avx512_like(host: tvmlite.Target) -> tvmlite.Target:
    """The host with AVX-512's shape: 512-bit vectors, 32 vector registers."""
    return dataclasses.replace(host, features=(*host.features, "avx512f"), vector_bits=512)


def _avx2_like(host: tvmlite.Target) -> tvmlite.Target:
    """The host with AVX2's shape: 256-bit vectors, 16 vector registers."""
    features = tuple(f for f in host.features if not f.startswith(("avx512", "amx")))
    return dataclasses.replace(host, features=features, vector_bits=256)


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_every_sampled_config_builds_and_matches_numpy(case):
    name, args, n = case
    task = templated.create(name, args)
    configs = _configs(task.space, n)
    built = [task.instantiate(c) for c in configs]
    with ThreadPoolExecutor(2) as pool:      # the compiler runs outside the GIL
        mods = list(pool.map(lambda st: tvmlite.build(*st), built))
    tensors = built[0][1]
    rtol, atol = testing.tolerance(tensors[-1].dtype, testing.reduction_length(tensors))
    inputs = testing.random_inputs(tensors)
    want = testing.reference(name, inputs, **args)
    for config, mod in zip(configs, mods):
        got = np.full(want.shape, np.nan if want.dtype.kind == "f" else -7, want.dtype)
        mod(*inputs, got)
        try:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        except AssertionError as err:
            raise AssertionError(f"{name}{args} at {config}: {err}") from None


def test_templates_are_registered_under_the_operator_names_with_their_signatures():
    for name in TEMPLATE_NAMES:
        tmpl = templated.TEMPLATES[name]
        assert getattr(schedules, name) is tmpl
        assert tmpl.signature == inspect.signature(OPS[name]).replace(
            return_annotation=tmpl.signature.return_annotation), name


@pytest.mark.parametrize("case", [c for c in CASES if c[2] == SAMPLES], ids=_id)
def test_workload_is_the_operators_so_both_searches_share_records(case):
    name, args, _ = case
    assert templated.create(name, args).workload.key == Workload.from_op(name, **args).key


@pytest.mark.parametrize("case", [c for c in CASES if c[2] == SAMPLES], ids=_id)
def test_steps_replay_without_the_template(case):
    name, args, _ = case
    task = templated.create(name, args)
    config = task.space.random_config(random.Random(1))
    s, tensors = task.instantiate(config)
    steps = [st.to_json() for st in s.steps]
    replayed = Schedule.from_steps(task.workload.outputs, steps)
    assert generate_c(replayed, list(task.workload.tensors))[1] == generate_c(s, tensors)[1]


def test_calling_a_template_outside_tuning_uses_the_fallback_with_a_warning():
    with pytest.warns(templated.FallbackConfigWarning, match="matmul"):
        s, tensors = schedules.matmul(16, 32, 8)
    task = templated.create("matmul", (16, 32, 8))
    assert s.steps == task.instantiate(task.space.fallback())[0].steps
    testing.check_schedule(s, tensors, lambda a, b: a @ b, rtol=1e-4, atol=1e-4)


def test_inside_apply_history_best_a_template_uses_the_fastest_record():
    task = templated.create("conv1d", dict(N=1, L=16, CI=4, CO=16, kernel=3, padding=1))
    slow, fast = task.space.get(1), task.space.get(2)
    records = [make_record(task.measure_input(c), MeasureResult(costs=(t,)), task.target)
               for c, t in ((slow, 2e-3), (fast, 1e-3))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # no fallback warning
        with templated.apply_history_best(records):
            s, tensors = schedules.conv1d(1, 16, 4, 16, 3, padding=1)
    assert s.steps == task.instantiate(fast)[0].steps != task.instantiate(slow)[0].steps


def test_vector_axes_are_split_into_whole_vectors_when_the_extent_allows():
    t = _avx512_like(tvmlite.Target.host())            # 16 float32 lanes, 32 registers
    space = templated.create("matmul", (16, 64, 8), target=t).space
    assert {e.size[-1] for e in space.knobs["tile_x"].entities} == {16, 32, 64}
    # No whole vector divides 56: shorter powers of two, which leave no scalar tail.
    narrow = templated.create("matmul", (16, 56, 8), target=t).space
    assert {e.size[-1] for e in narrow.knobs["tile_x"].entities} == {2, 4, 8}
    odd = templated.create("matmul", (16, 9, 8), target=t).space   # nothing vector-friendly
    assert {e.size[-1] for e in odd.knobs["tile_x"].entities} == {1, 3, 9}
    f64 = templated.create("matmul", (16, 24, 8, "float64"), target=t).space   # 8 lanes
    assert {e.size[-1] for e in f64.knobs["tile_x"].entities} == {8, 24}


def test_pad_knob_follows_the_arguments():
    """A pad knob exists exactly when the operator pads, and offers inlining only where
    the bounds check would not fall on the vectorized axis."""
    def pad_choices(name, **args):
        knob = templated.create(name, args).space.knobs.get("pad")
        return None if knob is None else [e.val for e in knob.entities]
    assert pad_choices("conv2d_nhwc", N=1, H=6, W=6, CI=4, CO=16, kernel=3) is None
    assert pad_choices("conv2d_nhwc", N=1, H=6, W=6, CI=4, CO=16, kernel=3,
                       padding=1) == ["outer", "inline"]
    assert pad_choices("conv2d_nchw", N=1, CI=4, H=6, W=16, CO=4, kernel=3,
                       padding=1) == ["outer"]
    assert pad_choices("conv2d_nchw", N=1, CI=4, H=6, W=16, CO=4, kernel=3,
                       padding=(1, 0)) == ["outer", "inline"]
    assert pad_choices("depthwise_conv2d_nhwc", N=1, H=6, W=6, C=16, kernel=3,
                       padding=1) == ["inline", "outer"]


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="M must be a positive int"):
        templated.create("matmul", (0, 8, 8))
    with pytest.raises(ValueError, match="layout"):
        templated.create("conv1d", dict(N=1, L=8, CI=2, CO=2, kernel=3, layout="LNC"))
    task = templated.create("softmax", (2, 16))
    other = templated.create("softmax", (2, 32))
    with pytest.raises(SpaceError):
        task.instantiate(other.space.fallback())


def test_no_fallback_warning_leaks_from_space_collection():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        task = templated.create("norm2", (4, 16))
    assert [str(w.message) for w in caught] == []
    assert len(task.space) > 1 and task.space.fallback().is_fallback


def test_register_blocks_are_sized_from_the_target():
    host = tvmlite.Target.host()
    wide = templated.create("matmul", (16, 128, 8), target=_avx512_like(host)).space
    narrow = templated.create("matmul", (16, 128, 8), target=_avx2_like(host)).space
    assert narrow.target.vector_registers == 16
    lanes = narrow.target.vector_lanes("float32")
    cols = {e.size[-1] for e in narrow.knobs["tile_x"].entities}
    rows = {e.size[-1] for e in narrow.knobs["tile_y"].entities}
    assert cols == {lanes, 2 * lanes}                 # whole vectors, 2 of 16 registers
    assert max(rows) == 8                             # half the registers hold the rows
    assert narrow.fallback()["tile_x"].size[-1] == lanes
    assert {e.size[-1] for e in wide.knobs["tile_x"].entities} == {16, 32, 64}
    assert max(e.size[-1] for e in wide.knobs["tile_y"].entities) == 16
    dense = templated.create("dense", (4, 32, 8), target=_avx2_like(host)).space
    assert max(e.size[-1] for e in dense.knobs["tile_y"].entities) == 2   # 2 x 2 of 16


def test_a_space_for_another_target_still_builds_correct_code():
    task = templated.create("matmul", (8, 32, 8), target=_avx2_like(tvmlite.Target.host()))
    for config in _configs(task.space, 4):
        s, tensors = task.instantiate(config)
        testing.check_schedule(s, tensors, lambda a, b: a @ b, rtol=1e-4, atol=1e-4)
