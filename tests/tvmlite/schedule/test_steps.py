"""Steps: JSON round trip, Python-like text, exact replay (byte-identical C) and hostile
step JSON (every bad input is a ScheduleError, never code or text in C)."""
from __future__ import annotations

import ast
import json

import numpy as np
import pytest

import tvmlite
from tvmlite import ScheduleError, ops, te
from tvmlite.schedule.prepack import ConstantStep, PrepackStep
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.stage_steps import CacheReadStep, CacheWriteStep, RfactorStep
from tvmlite.schedule.step_json import STEP_KINDS, step_from_json
from tvmlite.schedule.steps import (
    AnnotateStep,
    ComputeAtStep,
    ComputeInlineStep,
    ComputeRootStep,
    FuseStep,
    PragmaStep,
    ReorderStep,
    SplitStep,
)
from tvmlite.schedule.tensorize import TensorizeStep
from tvmlite.schedules.dot import gemm_dot
from tvmlite.target.intrinsics import best_intrinsic
from tvmlite.target.target import Target
from tvmlite.testing.check import check_schedule as check
from tvmlite.testing.workloads import ODD_MNK, matmul_reference

M, N, K = ODD_MNK


# -- helpers -------------------------------------------------------------------------

def matmul():
    return ops.matmul(M, N, K)


# -- a catalogue of schedules, together using every step kind ---------------------------

def sched_split_tile_vectorize():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    ko, ki = s[C].split(k, nparts=5)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].unroll(ki)
    s[C].parallel(io)
    s[C].pragma(jo, "auto_unroll_max_step", 16)
    return s, [A, B, C], matmul_reference


def sched_fuse():
    A = te.placeholder((M, N), name="A")
    C = te.compute((M, N), lambda i, j: te.exp(A[i, j]) + 1, name="C")
    s = te.create_schedule(C.op)
    f = s[C].fuse(*s[C].op.axis)
    fo, fi = s[C].split(f, factor=16)
    s[C].parallel(fo)
    s[C].vectorize(fi)
    return s, [A, C], lambda a: np.exp(a) + 1


def sched_compute_at_inline_root():
    n = 37
    A = te.placeholder((n + 2,), name="A")
    B0 = te.compute((n + 2,), lambda i: A[i] * 2, name="B0")
    B = te.compute((n + 2,), lambda i: B0[i] + 1, name="B")
    D = te.compute((n + 2,), lambda i: A[i] - 1, name="D")
    C = te.compute((n,), lambda i: B[i] + B[i + 1] * D[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(s[C].op.axis[0], factor=8)
    s[B0].compute_inline()
    s[B].compute_at(s[C], xo)
    s[D].compute_at(s[C], xo)
    s[D].compute_root()

    def ref(a):
        b, d = a * 2 + 1, a - 1
        return b[:-2] + b[1:-1] * d[2:]
    return s, [A, C], ref


def sched_cache_write():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(k, factor=4)
    s[CC].reorder(ko, ci, ki, cj)
    s[CC].vectorize(cj)
    s[CC].unroll(ki)
    s[C].vectorize(ji)
    return s, [A, B, C], matmul_reference


def sched_cache_read():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [C])
    BB = s.cache_read(B, "global", [C])
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[AA].compute_at(s[C], ko)
    s[BB].vectorize(s[BB].op.axis[1])
    return s, [A, B, C], matmul_reference


def sched_rfactor():
    A = te.placeholder((3, 500), name="A")
    k = te.reduce_axis((0, 500), name="k")
    C = te.compute((3,), lambda i: te.sum(A[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, factor=16)
    CF = s.rfactor(C, ki, factor_axis=1)
    s[CF].vectorize(s[CF].op.axis[1])
    s[CF].parallel(s[CF].op.axis[0])
    return s, [A, C], lambda a: a.astype(np.float64).sum(axis=1).astype(np.float32)


def sched_prepack():
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    BB = s.cache_read(B, "local", [C])
    BP = s.prepack(BB, dim=1, factor=23)
    s[BP].parallel(s[BP].op.axis[0])
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=4)
    s[C].vectorize(j)
    return s, [A, B, C], matmul_reference


def sched_constant():
    """A constant input read through a plain-copy pack stage (no prepack layout)."""
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    BB = s.cache_read(B, "local", [C])
    s[BB].compute_at(s[C], s[C].op.axis[0])
    s.constant(B)
    return s, [A, B, C], matmul_reference


def sched_tensorize():
    """u8 x s8 -> s32 with this CPU's best dot-product intrinsic (a fallback without
    VNNI/dotprod), B pre-packed in its groups."""
    host = Target.host()
    intr = best_intrinsic(host.arch, host.features, "uint8", "int8", "int32")
    assert intr is not None
    tensors = ops.qmatmul(4, 2 * intr.lanes, 8)
    s = gemm_dot(tensors, intr.name, 2, 2)
    return s, tensors, lambda a, b: (a.astype(np.int32) @ b.astype(np.int32))


SCHEDULES = [sched_split_tile_vectorize, sched_fuse, sched_compute_at_inline_root,
             sched_cache_write, sched_cache_read, sched_rfactor, sched_prepack,
             sched_constant, sched_tensorize]


def test_catalogue_uses_every_step_kind():
    kinds = {st.kind for make in SCHEDULES for st in make()[0].steps}
    assert kinds == set(STEP_KINDS)


@pytest.mark.parametrize("make", SCHEDULES, ids=lambda f: f.__name__)
def test_from_steps_json_is_byte_identical(make):
    s, tensors, ref = make()
    original = tvmlite.build(s, tensors).get_source()
    text = json.dumps([st.to_json() for st in s.steps])
    outputs = [t for t in tensors if not isinstance(t.op, te.PlaceholderOp)]
    s2 = Schedule.from_steps(outputs, json.loads(text))
    assert s2.steps == s.steps
    assert s2.steps_json() == s.steps_json() == text
    mod = check(s2, tensors, ref, atol=1e-4)
    assert mod.get_source() == original
    assert str(tvmlite.lower(s2, tensors)) == str(tvmlite.lower(s, tensors))


@pytest.mark.parametrize("make", SCHEDULES, ids=lambda f: f.__name__)
def test_from_step_objects_and_on_fresh_tensors(make):
    """Replay needs only the compute definition: fresh tensors of the same compute work."""
    s, tensors, ref = make()
    original = tvmlite.build(s, tensors).get_source()
    s_obj = Schedule.from_steps([t for t in tensors if t.op.name in s.state.outputs], s.steps)
    assert tvmlite.build(s_obj, tensors).get_source() == original
    _, fresh, _ = make()                          # a second, independent definition
    s3 = Schedule.from_steps([t for t in fresh if t.op.name in s.state.outputs],
                             [st.to_json() for st in s.steps])
    mod = check(s3, fresh, ref, atol=1e-4)
    assert mod.get_source() == original


@pytest.mark.parametrize("make", SCHEDULES, ids=lambda f: f.__name__)
def test_printed_steps_replay_as_python(make):
    """``str(s)`` is the Python that makes the schedule: running it rebuilds the same C."""
    s, tensors, ref = make()
    text = str(s)
    assert text.splitlines() == [str(st) for st in s.steps]
    ast.parse(text)
    s2 = te.create_schedule([t.op for t in tensors if t.op.name in s.state.outputs])
    exec(compile(text, "<steps>", "exec"), {"s": s2})  # our own printed steps, nothing else
    assert s2.steps == s.steps
    assert tvmlite.build(s2, tensors).get_source() == tvmlite.build(s, tensors).get_source()


# -- every step kind: JSON round trip and text ------------------------------------------

STEPS = [
    (SplitStep("C", "i", 4, None), 's["C"].split("i", factor=4)'),
    (SplitStep("C", "k", None, 3), 's["C"].split("k", nparts=3)'),
    (FuseStep("C", ("i", "j")), 's["C"].fuse("i", "j")'),
    (FuseStep("C", ("a", "b", "c")), 's["C"].fuse("a", "b", "c")'),
    (ReorderStep("C", ("j", "k", "i")), 's["C"].reorder("j", "k", "i")'),
    (AnnotateStep("C", "i", "parallel"), 's["C"].parallel("i")'),
    (AnnotateStep("C", "j", "vectorize"), 's["C"].vectorize("j")'),
    (AnnotateStep("C", "k", "unroll"), 's["C"].unroll("k")'),
    (AnnotateStep("C", "k", "none"), 's["C"].annotate("k", "none")'),
    (PragmaStep("C", "i", "auto_unroll_max_step", 64),
     's["C"].pragma("i", "auto_unroll_max_step", 64)'),
    (ComputeAtStep("B", "C", "i_outer"), 's["B"].compute_at(s["C"], "i_outer")'),
    (ComputeInlineStep("B"), 's["B"].compute_inline()'),
    (ComputeRootStep("B"), 's["B"].compute_root()'),
    (CacheWriteStep("C", "local"), 's.cache_write("C", "local")'),
    (CacheWriteStep("C", "global"), 's.cache_write("C", "global")'),
    (CacheReadStep("A", "local", ("C", "D")), 's.cache_read("A", "local", ["C", "D"])'),
    (RfactorStep("C", "k_inner", 1), 's.rfactor("C", "k_inner", factor_axis=1)'),
    (RfactorStep("C", "k_outer"), 's.rfactor("C", "k_outer", factor_axis=0)'),
    (PrepackStep("B_local", 1, 16), 's.prepack("B_local", dim=1, factor=16)'),
    (ConstantStep("B"), 's.constant("B")'),
    (PrepackStep("B_local", 1, 16, 0, 4),
     's.prepack("B_local", dim=1, factor=16, group_dim=0, group=4)'),
    (TensorizeStep("C_local", "j_inner", "vpdpbusd_avx512"),
     's["C_local"].tensorize("j_inner", "vpdpbusd_avx512")'),
]


def test_step_list_covers_every_kind():
    assert {st.kind for st, _ in STEPS} == set(STEP_KINDS)


@pytest.mark.parametrize("step,text", STEPS, ids=lambda x: x if isinstance(x, str) else "")
def test_step_json_round_trip_and_text(step, text):
    d = step.to_json()
    assert d["kind"] == step.kind
    wire = json.dumps(d)
    back = step_from_json(json.loads(wire))
    assert back == step and type(back) is type(step)
    assert json.dumps(back.to_json()) == wire
    assert str(step) == text
    ast.parse(text)


def test_step_json_defaults_may_be_omitted():
    assert step_from_json({"kind": "split", "stage": "C", "iter": "i", "factor": 4}) == \
        SplitStep("C", "i", 4, None)
    assert step_from_json({"kind": "cache_write", "stage": "C"}) == CacheWriteStep("C")
    assert step_from_json({"kind": "rfactor", "stage": "C", "iter": "ki"}) == \
        RfactorStep("C", "ki", 0)


def test_annotate_none_resets_an_annotation():
    A = te.placeholder((M, N), name="A")
    C = te.compute((M, N), lambda i, j: A[i, j] + 1, name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].op.axis[1])
    s.apply(step_from_json({"kind": "annotate", "stage": "C", "iter": "j",
                            "annotation": "none"}))
    s[C].parallel(s[C].op.axis[1])
    assert "#pragma omp parallel for" in check(s, [A, C], lambda a: a + 1).get_source()


# -- hostile JSON ------------------------------------------------------------------------

GOOD = {"kind": "split", "stage": "C", "iter": "i", "factor": 4}
EVIL = 'i; system("rm -rf /")'


def _with(**kw):
    d = dict(GOOD)
    d.update(kw)
    return d


HOSTILE = [
    pytest.param({"kind": "exec", "code": "x"}, id="unknown-kind"),
    pytest.param({"kind": None}, id="kind-none"),
    pytest.param({"kind": 3}, id="kind-int"),
    pytest.param({"kind": ["split"]}, id="kind-list"),
    pytest.param({"stage": "C", "iter": "i", "factor": 4}, id="no-kind"),
    pytest.param({"kind": "__class__"}, id="kind-dunder"),
    pytest.param(_with(iter=EVIL), id="iter-c-code"),
    pytest.param(_with(stage="C[0]=1;//"), id="stage-c-code"),
    pytest.param(_with(iter="i\n#include <x>"), id="iter-newline"),
    pytest.param(_with(iter=""), id="iter-empty"),
    pytest.param(_with(iter="x" * 65), id="iter-too-long"),
    pytest.param(_with(iter="ï"), id="iter-unicode"),
    pytest.param(_with(iter=7), id="iter-int"),
    pytest.param(_with(iter={"a": 1}), id="iter-dict"),
    pytest.param(_with(factor=-4), id="factor-negative"),
    pytest.param(_with(factor=0), id="factor-zero"),
    pytest.param(_with(factor=1 << 40), id="factor-huge"),
    pytest.param(_with(factor=10 ** 100), id="factor-enormous"),
    pytest.param(_with(factor=True), id="factor-bool"),
    pytest.param(_with(factor=4.0), id="factor-float"),
    pytest.param(_with(factor="4"), id="factor-str"),
    pytest.param(_with(factor=float("nan")), id="factor-nan"),
    pytest.param(_with(nparts=-1, factor=None), id="nparts-negative"),
    pytest.param(_with(evil=1), id="extra-key"),
    pytest.param(_with(__class__="x"), id="extra-dunder-key"),
    pytest.param({"kind": "split", "stage": "C"}, id="missing-iter"),
    pytest.param({"kind": "fuse", "stage": "C", "iters": "ij"}, id="iters-string"),
    pytest.param({"kind": "fuse", "stage": "C", "iters": ["i", EVIL]}, id="iters-c-code"),
    pytest.param({"kind": "fuse", "stage": "C", "iters": ["i", 1]}, id="iters-int"),
    pytest.param({"kind": "reorder", "stage": "C", "order": ["i"] * 65}, id="order-too-long"),
    pytest.param({"kind": "annotate", "stage": "C", "iter": "i", "annotation": "omp simd"},
                 id="annotation-unknown"),
    pytest.param({"kind": "annotate", "stage": "C", "iter": "i", "annotation": ["parallel"]},
                 id="annotation-list"),
    pytest.param({"kind": "pragma", "stage": "C", "iter": "i", "key": "unroll; x",
                  "value": 4}, id="pragma-key"),
    pytest.param({"kind": "pragma", "stage": "C", "iter": "i", "key": "auto_unroll_max_step",
                  "value": -1}, id="pragma-negative"),
    pytest.param({"kind": "pragma", "stage": "C", "iter": "i", "key": "auto_unroll_max_step",
                  "value": 1 << 20}, id="pragma-huge"),
    pytest.param({"kind": "pragma", "stage": "C", "iter": "i", "key": "auto_unroll_max_step",
                  "value": False}, id="pragma-bool"),
    pytest.param({"kind": "cache_write", "stage": "C", "scope": "shared"}, id="scope-unknown"),
    pytest.param({"kind": "cache_read", "tensor": "A", "scope": "local", "readers": "C"},
                 id="readers-string"),
    pytest.param({"kind": "cache_read", "tensor": "A", "scope": "local", "readers": [EVIL]},
                 id="readers-c-code"),
    pytest.param({"kind": "compute_at", "stage": "B", "target": EVIL, "iter": "i"},
                 id="target-c-code"),
    pytest.param({"kind": "rfactor", "stage": "C", "iter": "k", "factor_axis": -1},
                 id="factor-axis-negative"),
    pytest.param({"kind": "rfactor", "stage": "C", "iter": "k", "factor_axis": True},
                 id="factor-axis-bool"),
    pytest.param({"kind": "rfactor", "stage": "C", "iter": "k", "factor_axis": 1000},
                 id="factor-axis-huge"),
    pytest.param({"kind": "prepack", "stage": "B_local", "dim": 1, "factor": None},
                 id="prepack-factor-none"),
    pytest.param({"kind": "prepack", "stage": "B_local", "dim": -1, "factor": 4},
                 id="prepack-dim-negative"),
    pytest.param({"kind": "prepack", "stage": EVIL, "dim": 0, "factor": 4},
                 id="prepack-stage-c-code"),
    pytest.param(["split", "C", "i", 4], id="list"),
    pytest.param("split", id="string"),
    pytest.param(None, id="none"),
    pytest.param(42, id="int"),
    pytest.param({"kind": "split", "stage": "C", "iter": "i", "factor": 4, 1: 2, "x": 3},
                 id="non-string-keys"),
]


@pytest.mark.parametrize("d", HOSTILE)
def test_hostile_step_json_raises_schedule_error(d):
    with pytest.raises(ScheduleError):
        step_from_json(d)


@pytest.mark.parametrize("d", [
    pytest.param(*p.values, id=p.id) for p in HOSTILE])
def test_hostile_step_json_in_from_steps(d):
    A, B, C = matmul()
    with pytest.raises(ScheduleError):
        Schedule.from_steps(C, [GOOD, d])


@pytest.mark.parametrize("steps", [
    pytest.param([{"kind": "split", "stage": "Z", "iter": "i", "factor": 4}], id="no-stage"),
    pytest.param([{"kind": "split", "stage": "C", "iter": "q", "factor": 4}], id="no-loop"),
    pytest.param([{"kind": "split", "stage": "C", "iter": "i"}], id="no-factor"),
    pytest.param([{"kind": "split", "stage": "C", "iter": "i", "factor": 2, "nparts": 2}],
                 id="factor-and-nparts"),
    pytest.param([GOOD, GOOD], id="split-twice"),
    pytest.param([{"kind": "annotate", "stage": "C", "iter": "k", "annotation": "vectorize"}],
                 id="vectorize-reduce"),
    pytest.param([{"kind": "compute_inline", "stage": "C"}], id="inline-output"),
    pytest.param([{"kind": "rfactor", "stage": "C", "iter": "k"}], id="rfactor-unsplit"),
    pytest.param([{"kind": "cache_read", "tensor": "A", "scope": "local", "readers": ["A"]}],
                 id="cache-read-not-a-reader"),
])
def test_well_formed_steps_that_do_not_apply(steps):
    A, B, C = matmul()
    with pytest.raises(ScheduleError):
        Schedule.from_steps(C, steps)


def test_valid_names_cannot_reach_c_unchecked():
    """Names in steps only select existing loops: a valid identifier that is no loop fails,
    and new loop names are derived from existing ones."""
    A, B, C = matmul()
    s = Schedule.from_steps(C, [GOOD, {"kind": "split", "stage": "C", "iter": "i_inner",
                                       "factor": 2}])
    names = [it.name for it in s.state.stage("C").leaves]
    assert names == ["i_outer", "i_inner_outer", "i_inner_inner", "j", "k"]
    check(s, [A, B, C], matmul_reference)
