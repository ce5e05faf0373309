"""Records across targets: a 16-lane schedule tuned for x86_64-avx512 replayed for the
8-lane x86_64-avx2 (warned, rebuilt, still right), an x86_64-avx2 tuning with real timings
on a newer host, and emulated records never beating real ones."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tvmlite import ops, te
from tvmlite.codegen_c import load_library
from tvmlite.search.measure.inputs import MeasureInput, MeasureResult
from tvmlite.search.options import TuningOptions
from tvmlite.search.records.best import best_record
from tvmlite.search.records.deploy import replay
from tvmlite.search.records.record import (
    TargetMismatchWarning,
    append_record,
    load_records,
    make_record,
)
from tvmlite.search.records.workload import Workload
from tvmlite.search.template_free.task import SearchTask
from tvmlite.target import Target
from tvmlite.testing.check import random_inputs

HOST = Target.host()
RUNS_AVX2 = HOST.arch == "x86_64" and {"avx2", "fma"} <= set(HOST.features)


def _sixteen_lane_steps(wl: Workload) -> tuple:
    C = wl.outputs[-1]
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=16)
    (k,) = s[C].op.reduce_axis
    s[C].reorder(i, jo, k, ji)
    s[C].vectorize(ji)
    s[C].parallel(i)
    return tuple(s.steps)


@pytest.mark.skipif(not RUNS_AVX2, reason="needs an x86-64 host with AVX2 + FMA")
def test_replay_for_another_target_warns_rebuilds_and_stays_correct(tmp_path) -> None:
    wl = Workload.from_op("matmul", M=8, N=48, K=5)
    log = tmp_path / "avx512.jsonl"
    avx512 = dataclasses.replace(HOST, name="x86_64-avx512", features=("avx512f", "fma"),
                                 vector_bits=512)
    append_record(log, make_record(MeasureInput(wl, _sixteen_lane_steps(wl)),
                                   MeasureResult(costs=(1e-5,)), avx512))
    with pytest.warns(TargetMismatchWarning, match="x86_64-avx512.*x86_64-avx2"):
        report = replay(log, tmp_path / "dist", target="x86_64-avx2")
    assert report.kernels and report.checked_by == "local"
    assert "-march=haswell" in (tmp_path / "dist" / "manifest.json").read_text()
    src = (tmp_path / "dist" / "matmul.c").read_text()
    # the schedule's 16-lane loop is cut into the 8-lane target's native vectors
    assert "tvmlite_f32x8" in src and "tvmlite_f32x16" not in src
    ffi, lib = load_library(tmp_path / "dist" / "libmatmul.so",
                            "int32_t matmul(const float*, const float*, float*);")
    a, b = random_inputs(wl.tensors, seed=3)
    c = np.full((8, 48), np.nan, dtype="float32")
    assert lib.matmul(*(ffi.cast("float *", x.ctypes.data) for x in (a, b, c))) == 0
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not RUNS_AVX2, reason="needs an x86-64 host with AVX2 + FMA")
def test_avx2_tuning_on_a_newer_host_has_real_timings(tmp_path) -> None:
    log = tmp_path / "avx2.jsonl"
    opts = TuningOptions(population=16, generations=1, measures_per_round=4, number=1,
                         repeat=2, min_repeat_ms=1)
    res = SearchTask(func=ops.matmul, args=(16, 16, 16), target="x86_64-avx2").tune(4, log, opts)
    assert res.best is not None
    recs = load_records(log)
    assert all(r.target.name == "x86_64-avx2" and r.runner == "local" and not r.emulated
               for r in recs)


def test_emulated_records_never_beat_real_ones() -> None:
    wl = Workload.from_op("matmul", M=4, N=4, K=4)
    inp = MeasureInput(wl, ())
    real = make_record(inp, MeasureResult(costs=(2e-3,)), HOST)
    fast_but_emulated = dataclasses.replace(
        make_record(inp, MeasureResult(costs=(1e-6,)), HOST), runner="qemu-x86_64",
        emulated=True)
    assert best_record([fast_but_emulated, real], wl, HOST) is real
    assert best_record([fast_but_emulated], wl, HOST) is fast_but_emulated
    again = type(real).from_json(fast_but_emulated.to_json())
    assert again.emulated and again.runner == "qemu-x86_64"


def test_replay_exports_the_real_record_over_a_faster_emulated_one(tmp_path) -> None:
    """Replay ranks by the one rule of the best valid record (records.best_first)."""
    wl = Workload.from_op("matmul", M=4, N=4, K=4)
    inp = MeasureInput(wl, ())
    log = tmp_path / "mixed.jsonl"
    append_record(log, dataclasses.replace(
        make_record(inp, MeasureResult(costs=(1e-6,)), HOST), runner="qemu-x86_64",
        emulated=True))
    append_record(log, make_record(inp, MeasureResult(costs=(2e-3,)), HOST))
    (kernel,) = replay(log, tmp_path / "dist", check=False).kernels
    assert kernel["emulated"] is False
