"""Hypothesis draws random legal schedules of library operators; every one must compute
the same numbers as numpy. Odd shapes, imperfect splits, fusion, random loop orders,
compute_at at random loops, inlining, cache_write and rfactor are all in the mix."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tvmlite
from tvmlite import ops, te
from tvmlite.ir.symbolic import is_static
from tvmlite.runtime.module import generate_c
from tvmlite.schedule.state import ScheduleError
from tvmlite.te.bind import bind_sizes
from tvmlite.testing.check import assert_allclose, random_inputs, reduction_length, reference

CASES = {
    "matmul": dict(M=7, N=19, K=13),
    "batch_matmul": dict(B=2, M=5, N=9, K=6),
    "dense": dict(N=3, K=11, M=10, bias=True, relu=True),
    "conv2d_nchw": dict(N=1, CI=3, H=9, W=7, CO=5, kernel=3, stride=2, padding=1),
    "conv2d_nhwc": dict(N=1, H=7, W=6, CI=4, CO=6, kernel=3, stride=1, padding=1, dilation=2),
    "depthwise_conv2d_nhwc": dict(N=1, H=9, W=9, C=6, kernel=3, stride=2, padding=1),
    "conv1d": dict(N=1, L=13, CI=3, CO=5, kernel=3, stride=1, padding=2),
    "max_pool2d": dict(N=1, C=3, H=9, W=8, kernel=3, stride=2, padding=1),
    "softmax": dict(N=5, M=13),
    "norm2": dict(N=9, M=7),
}


def _factor(data, extent) -> int:
    """A split factor: up to two past a constant extent, up to 24 for a symbolic one."""
    return data.draw(st.integers(1, extent + 2 if is_static(extent) else 24), label="factor")


def _constant(it, most: int = 1 << 30) -> bool:
    return is_static(it.extent) and it.extent <= most


def _schedule_stage(data, s, name: str, at_root: bool) -> None:
    """Random splits, maybe a fuse, a random order and annotations, all legal."""
    h = s[name]
    stage = s.state.stage(name)
    for it in list(stage.leaves):
        if (not is_static(it.extent) or it.extent > 1) and \
                data.draw(st.booleans(), label=f"split {it.name}"):
            h.split(it.name, factor=_factor(data, it.extent))
    leaves = s.state.stage(name).leaves
    if len(leaves) >= 2 and leaves[0].kind == leaves[1].kind == "spatial" and \
            data.draw(st.booleans(), label="fuse"):
        h.fuse(leaves[0].name, leaves[1].name)
    names = [it.name for it in s.state.stage(name).leaves]
    order = data.draw(st.permutations(names), label="order")
    h.reorder(*order)
    leaves = s.state.stage(name).leaves
    spatial = [it for it in leaves if it.kind == "spatial"]
    if spatial and spatial[-1] is leaves[-1] and _constant(leaves[-1]) and \
            data.draw(st.booleans(), label="vectorize"):
        h.vectorize(leaves[-1].name)
    leaves = s.state.stage(name).leaves
    if at_root and leaves[0].kind == "spatial" and leaves[0].annotation == "none" and \
            data.draw(st.booleans(), label="parallel"):
        h.parallel(leaves[0].name)
    leaves = s.state.stage(name).leaves
    small = [it for it in leaves if it.annotation == "none" and _constant(it, 8)]
    if small and data.draw(st.booleans(), label="unroll"):
        h.unroll(data.draw(st.sampled_from(small), label="unroll which").name)
    if data.draw(st.booleans(), label="pragma"):
        h.pragma(leaves[0].name, "auto_unroll_max_step", data.draw(st.sampled_from([16, 64])))


MAX_SOURCE = 64 << 10
"""C larger than this is not built: a draw of nested versioned blocks over a symbolic size
reached 120 KB, and gcc took 10 s on it, with no path the smaller draws lack."""


def build_drawn(s, tensors: list):
    """``s`` built, or the draw rejected when its C is over ``MAX_SOURCE``; a legal
    schedule the build refuses fails the test."""
    try:
        assume(len(generate_c(s, tensors)[1]) <= MAX_SOURCE)
        return tvmlite.build(s, tensors)
    except ScheduleError as err:  # a generated schedule must be legal
        raise AssertionError(f"legal schedule rejected: {err}\n{s}") from err


def random_schedule(data, tensors: list):
    s = te.create_schedule(tensors[-1].op)
    out = tensors[-1].op.name
    op = s.state.stage(out).op
    if op.reduce_axis and data.draw(st.booleans(), label="rfactor"):
        k = op.reduce_axis[0]
        if not is_static(k.extent) or k.extent > 1:
            h = s[out]
            ko, ki = h.split(k.name, factor=_factor(data, k.extent))
            s.rfactor(out, data.draw(st.sampled_from([ko, ki]), label="rf axis"))
    elif op.reduce_axis and data.draw(st.booleans(), label="cache_write"):
        s.cache_write(out, "local")
    placement: dict = {}
    for stage in reversed(s.state.stages):      # consumers first
        name = stage.name
        if name == out:
            continue
        readers = s.state.consumers(name)
        reader_ok = len(readers) == 1 and placement.get(readers[0]) == "root"
        choice = data.draw(st.sampled_from(["root", "inline", "at"]), label=f"place {name}")
        if choice == "inline" and not stage.op.reduce_axis:
            s[name].compute_inline()
            placement[name] = "inline"
        elif choice == "at" and reader_ok:
            loops = [it.name for it in s.state.stage(readers[0]).leaves]
            s[name].compute_at(s[readers[0]], data.draw(st.sampled_from(loops), label="at"))
            placement[name] = "at"
        else:
            placement[name] = "root"
    for stage in s.state.stages:
        if placement.get(stage.name) != "inline":
            _schedule_stage(data, s, stage.name, at_root=placement.get(stage.name) != "at")
    return s


@pytest.mark.parametrize("op_name", sorted(CASES))
@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_random_schedules_match_numpy(op_name, data):
    args = CASES[op_name]
    tensors = ops.OPS[op_name](**args)
    s = random_schedule(data, tensors)
    mod = build_drawn(s, tensors)
    inputs = random_inputs(tensors, seed=1)
    out = np.zeros(tensors[-1].shape, tensors[-1].dtype)
    mod(*inputs, out)
    expected = reference(op_name, inputs, **args)
    try:
        assert_allclose(out, expected, tensors[-1].dtype, reduction_length(tensors))
    except AssertionError as err:
        raise AssertionError(f"{err}\nschedule:\n{s}\n{tvmlite.lower(s, tensors)}") from None


# a size of each operator made symbolic (the rest as in CASES), and the values it is run at:
# 1, around the factors drawn (up to 24), a prime, and more than a tile of 24
SYMBOLIC = [("matmul", "M"), ("matmul", "N"), ("matmul", "K"), ("dense", "N"),
            ("conv2d_nhwc", "N"), ("softmax", "N")]
SIZES = (1, 2, 3, 8, 9, 17, 31)


@pytest.mark.parametrize("op_name,size", SYMBOLIC)
@settings(max_examples=5, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_random_schedules_over_a_symbolic_size_match_numpy(op_name, size, data):
    """One kernel over the symbolic size, random splits (guards, tail tiles, versioned
    blocks and their edge copies), unrolls and cache placements, against numpy at sizes
    on both sides of every factor."""
    args = dict(CASES[op_name], **{size: te.var(size)})
    tensors = ops.OPS[op_name](**args)
    s = random_schedule(data, tensors)
    mod = build_drawn(s, tensors)
    for m in SIZES:
        bound = bind_sizes(tensors, {size: m})
        inputs = random_inputs(bound, seed=m)
        out = np.zeros(bound[-1].shape, bound[-1].dtype)
        mod(*inputs, out)
        expected = reference(op_name, inputs, **dict(args, **{size: m}))
        try:
            assert_allclose(out, expected, bound[-1].dtype, reduction_length(bound))
        except AssertionError as err:
            raise AssertionError(f"{size}={m}: {err}\nschedule:\n{s}") from None
