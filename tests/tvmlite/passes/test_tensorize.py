"""tensorize: the TensorizeStep (API, JSON, text) and the pass that checks a loop nest
computes what the intrinsic computes -- every refusal says why -- and replaces it.
The intrinsics' C and their results are tests/codegen_c/test_intrinsics.py."""
from __future__ import annotations

import json

import pytest

import tvmlite
from tvmlite import ScheduleError, ops, te
from tvmlite.ir.stmt import TensorIntrinsic, walk_stmts
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.step_json import step_from_json
from tvmlite.schedule.tensorize import TensorizeStep
from tvmlite.schedules.dot import gemm_dot

NAME = "vpdpbusd_avx512"   # lowering and its checks do not depend on this CPU


def local_block(tensors: list, k_factor: int = 4, prepack: bool = True, group: int = 4):
    """A block of all rows x 16 columns of ``tensors`` (matmul-like) with its reduce loop split by
    ``k_factor``; B pre-packed with ``group`` (or not): (schedule, C_local, its loops)."""
    A, B, C = tensors
    s = te.create_schedule(C.op)
    BB = s.cache_read(B, "global", [C])
    if prepack:
        s.prepack(BB, dim=1, factor=16, group_dim=0, group=group)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=16)
    s[C].reorder(jo, i, ji)   # the block: every row of 16 columns
    s[C].vectorize(ji)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    (k,) = s[CL].op.reduce_axis
    ko, ki = s[CL].split(k, factor=k_factor)
    s[CL].reorder(ko, ci, cj, ki)
    return s, CL, (ko, ci, cj, ki)


def test_the_step_round_trips_and_prints_as_its_call():
    tensors = ops.qmatmul(4, 32, 8)
    s, CL, (_, _, cj, _) = local_block(tensors)
    s[CL].tensorize(cj, NAME)
    step = s.steps[-1]
    assert step == TensorizeStep("C_local", "j", NAME)
    assert str(step) == f's["C_local"].tensorize("j", "{NAME}")'
    again = Schedule.from_steps([tensors[2]], json.loads(s.steps_json()))
    assert again.steps == s.steps
    text = str(tvmlite.lower(again, tensors))
    assert f"+= {NAME}(A[" in text


def test_lowering_puts_one_intrinsic_per_lane_vector_and_group():
    tensors = ops.qmatmul(4, 32, 8)
    s = gemm_dot(tensors, NAME, 2, 2)
    body = tvmlite.lower(s, tensors, vector_bytes=64).body
    calls = [st for st in walk_stmts(body) if isinstance(st, TensorIntrinsic)]
    assert len(calls) == 4 and {c.name for c in calls} == {NAME}   # 2 rows x 2 vectors


@pytest.mark.parametrize("bad", [
    {"kind": "tensorize", "stage": "C_local", "iter": "j", "intrinsic": "x; system()"},
    {"kind": "tensorize", "stage": "C_local", "iter": "j"},
    {"kind": "tensorize", "stage": "C_local", "iter": "j", "intrinsic": NAME, "x": 1},
])
def test_hostile_step_json_is_a_schedule_error(bad):
    with pytest.raises(ScheduleError):
        step_from_json(bad)


def test_an_unknown_intrinsic_lists_the_known_ones():
    s, CL, (_, _, cj, _) = local_block(ops.qmatmul(4, 32, 8))
    with pytest.raises(ScheduleError, match="unknown intrinsic 'vnni'.*vpdpbusd_avx512"):
        s[CL].tensorize(cj, "vnni")


def test_refused_when_not_the_two_innermost_loops():
    s, CL, (ko, ci, cj, ki) = local_block(ops.qmatmul(4, 32, 8))
    with pytest.raises(ScheduleError, match="second innermost"):
        s[CL].tensorize(ci, NAME)
    s[CL].reorder(ko, ci, ki, cj)
    with pytest.raises(ScheduleError, match="spatial loop .* then a reduce loop"):
        s[CL].tensorize(ki, NAME)


def test_refused_for_a_reduction_split_by_another_group():
    s, CL, (_, _, cj, _) = local_block(ops.qmatmul(4, 32, 16), k_factor=8)
    with pytest.raises(ScheduleError, match="must be the group, 4.*got 8"):
        s[CL].tensorize(cj, NAME)


def test_refused_for_dtypes_the_intrinsic_does_not_take():
    s, CL, (_, _, cj, _) = local_block(ops.qmatmul(4, 32, 8, "int8", "int8"))
    with pytest.raises(ScheduleError, match="uint8 x int8 -> int32, the stage reads int8 x int8"):
        s[CL].tensorize(cj, NAME)
    s, CL, (_, _, cj, _) = local_block(ops.matmul(4, 32, 8))
    with pytest.raises(ScheduleError, match="computes uint8 x int8 -> int32"):
        s[CL].tensorize(cj, NAME)


def test_refused_when_the_output_is_not_the_lanes():
    tensors = ops.qmatmul(4, 64, 8)
    s, CL, (_, _, cj, _) = local_block(tensors)   # C_local's block is 16 columns...
    s2 = te.create_schedule(tensors[2].op)        # ...here it is all 64
    BB = s2.cache_read(tensors[1], "global", [tensors[2]])
    s2.prepack(BB, dim=1, factor=16, group_dim=0, group=4)
    CL2 = s2.cache_write(tensors[2], "local")
    ko, ki = s2[CL2].split(s2[CL2].op.reduce_axis[0], factor=4)
    ci, cj2 = s2[CL2].op.axis
    s2[CL2].reorder(ko, ci, cj2, ki)
    s2[CL2].tensorize(cj2, NAME)
    with pytest.raises(ScheduleError, match="must be 16 x 4 .* got 64 x 4"):
        tvmlite.lower(s2, tensors)


def test_refused_when_b_is_not_packed_in_groups():
    tensors = ops.qmatmul(4, 32, 8)
    for prepack, group in ((False, 4), (True, 1)):
        s, CL, (_, _, cj, _) = local_block(tensors, prepack=prepack, group=group)
        s[CL].tensorize(cj, NAME)
        with pytest.raises(ScheduleError, match=r"B.* must hold each lane's group .*"
                                                r"prepack with group=4"):
            tvmlite.lower(s, tensors)


def test_refused_inside_a_vectorized_loop_and_under_a_guard():
    tensors = ops.qmatmul(4, 32, 8)
    s, CL, (ko, ci, cj, ki) = local_block(tensors)
    s[CL].tensorize(cj, NAME)
    s[CL].vectorize(ci)
    with pytest.raises(ScheduleError, match="inside the vectorized loop"):
        tvmlite.lower(s, tensors)
    tensors = ops.qmatmul(4, 24, 8)     # 24 columns: the second 16-wide block is guarded
    s, CL, (_, _, cj, _) = local_block(tensors, prepack=False)
    s[tensors[2]].parallel(s[tensors[2]].leaf_iter_vars[0])   # kept whole: not peeled
    s[CL].tensorize(cj, NAME)
    with pytest.raises(ScheduleError, match="no guard"):
        tvmlite.lower(s, tensors)


def test_a_tensorized_loop_cannot_be_annotated_or_split_afterwards():
    s, CL, (_, _, cj, _) = local_block(ops.qmatmul(4, 32, 8))
    s[CL].tensorize(cj, NAME)
    with pytest.raises(ScheduleError, match="already annotated tensorize"):
        s[CL].vectorize(cj)
    with pytest.raises(ScheduleError, match="already annotated"):
        s[CL].split(cj, factor=4)
