"""Dynamic workloads in records: symbolic computes serialize, records at sizes round-trip,
replay exports one kernel over M with its int64 size argument, callable from C."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tvmlite import te
from tvmlite.runtime.module import generate_c
from tvmlite.schedule.schedule import Schedule
from tvmlite.search.measure.builder import LocalBuilder, arg_specs
from tvmlite.search.measure.inputs import MeasureInput
from tvmlite.search.measure.runner import LocalRunner
from tvmlite.search.records.compute_json import WorkloadError, canonical, compute_json, read_compute
from tvmlite.search.records.deploy import replay
from tvmlite.search.records.record import Record, append_record, load_records, make_record
from tvmlite.search.records.workload import Workload
from tvmlite.target.target import Target


def _steps(wl):
    s = wl.schedule()
    st = s[wl.outputs[-1]]
    i, j = st.op.axis
    io, ii = st.split(i, factor=8)
    jo, ji = st.split(j, factor=16)
    st.vectorize(ji)
    st.parallel(io)
    return tuple(s.steps)


def test_symbolic_compute_json_round_trips():
    M, L = te.var("M"), te.var("L")
    A = te.placeholder((M, L), name="A")
    k = te.reduce_axis((0, L), name="k")
    r = te.compute((M,), lambda i: te.sum(A[M - 1 - i, k], axis=k), name="r")
    text = canonical(compute_json([A, r]))
    back = read_compute(json.loads(text))
    assert canonical(compute_json(back)) == text
    assert [str(d) for d in back[0].shape] == ["M", "L"]
    assert str(back[1].op.reduce_axis[0].extent) == "L"


def test_bad_symbolic_dimension_in_a_log_is_refused():
    wl = Workload.from_op("matmul", te.var("M"), 8, 8)
    d = json.loads(json.dumps(wl.to_json()))
    d["compute"]["ops"][0]["shape"][0] = {"node": "const", "dtype": "float32", "value": 2.0}
    with pytest.raises(WorkloadError, match="symbolic dimension must be an integer expression"):
        Workload.from_json(d)
    with pytest.raises(WorkloadError, match="must give exactly the sizes"):
        wl.at({"N": 3})
    with pytest.raises(WorkloadError, match="M=0 must be an int"):
        wl.at({"M": 0})


def test_records_at_sizes_round_trip_and_replay_from_c(tmp_path):
    wl = Workload.from_op("matmul", te.var("M"), 64, 64)
    assert wl.is_dynamic and wl.size_names == ("M",)
    assert wl.args["M"] == "te.var(M)"
    steps = _steps(wl)
    builder, runner = LocalBuilder(), LocalRunner(number=1, repeat=1)
    log = tmp_path / "dyn.jsonl"
    try:
        for m in (8, 100):
            w = wl.at({"M": m})
            assert w.base_key == wl.key and w.key != wl.key and w.flops == 2 * m * 64 * 64
            assert arg_specs(w)[0].shape == (m, 64)
            inp = MeasureInput(w, steps)
            (b,) = builder.build([inp])
            assert b.sizes == (m,)
            (res,) = runner.run([inp], [b], reference=builder.build_reference)
            assert res.ok, res.error_msg
            append_record(log, make_record(inp, res, Target.host()))
    finally:
        runner.close()
    recs = load_records(log)
    assert [r.workload.sizes for r in recs] == [{"M": 8}, {"M": 100}]
    for r in recs:
        again = Record.from_json(json.loads(r.to_line()))
        assert again.key == r.key and again.workload.key == r.workload.key
        c1 = generate_c(Schedule.from_steps(r.workload.outputs, r.steps), list(r.workload.tensors),
                        name="matmul")[1]
        c0 = generate_c(Schedule.from_steps(wl.outputs, steps), list(wl.tensors), name="matmul")[1]
        assert c1 == c0 and "int32_t matmul(int64_t M," in c1
    out = tmp_path / "dist"
    report = replay(log, out)
    assert len(report.kernels) == 1 and not report.skipped
    manifest = json.loads((out / "manifest.json").read_text())
    (k,) = manifest["kernels"]
    assert k["args"][0]["shape"] == ["M", 64] and k["sizes"] == ["M"]
    assert "int32_t matmul(int64_t M, const float* A" in (out / "tvmlite_kernels.h").read_text()
    _call_from_c(tmp_path, out)


MAIN_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "tvmlite_kernels.h"
int main(void) {
  const int64_t sizes[] = {1, 7, 8, 100, 1025};
  float B[64 * 64];
  for (int i = 0; i < 64 * 64; ++i) B[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
  for (int s = 0; s < 5; ++s) {
    int64_t M = sizes[s];
    float *A = malloc(sizeof(float) * M * 64), *C = malloc(sizeof(float) * M * 64);
    for (int64_t i = 0; i < M * 64; ++i) A[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
    if (matmul(M, A, B, C) != 0) { printf("error at M=%ld\n", (long)M); return 1; }
    for (int64_t i = 0; i < M; ++i)
      for (int j = 0; j < 64; ++j) {
        double want = 0;
        for (int k = 0; k < 64; ++k) want += (double)A[i * 64 + k] * B[k * 64 + j];
        if (fabs(want - C[i * 64 + j]) > 1e-4) { printf("wrong at M=%ld\n", (long)M); return 1; }
      }
    free(A); free(C);
  }
  float dummy[64];
  if (matmul(0, dummy, B, dummy) != -2 || matmul(-5, dummy, B, dummy) != -2) {
    printf("bad size accepted\n"); return 1;
  }
  printf("ok\n");
  return 0;
}
"""


def _call_from_c(tmp_path, out):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "main.c").write_text(MAIN_C)
    exe = tmp_path / "main"
    subprocess.run([cc, str(tmp_path / "main.c"), f"-I{out}", f"-L{out}", "-ltvmlite_kernels",
                    f"-Wl,-rpath,{out}", "-lm", "-o", str(exe)], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr
