"""replay(log, out_dir): deployable kernels from a log alone, re-checked before export;
a C program links the bundle and calls a kernel with no Python."""
import dataclasses
import json
import subprocess
import warnings

import numpy as np
import pytest

from tvmlite import ops
from tvmlite.codegen_c import load_library
from tvmlite.schedule.steps import SplitStep
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureResult
from tvmlite.search.options import TuningOptions
from tvmlite.search.records.deploy import BUNDLE, replay
from tvmlite.search.records.record import TargetMismatchWarning, append_record, load_records
from tvmlite.search.template_free.task import SearchTask
from tvmlite.target.target import Target

QUICK = TuningOptions(population=32, generations=1, measures_per_round=4, number=1, repeat=2,
                      min_repeat_ms=1)


@pytest.fixture(scope="module")
def tuned_log(tmp_path_factory):
    log = tmp_path_factory.mktemp("replay") / "two.jsonl"
    SearchTask(func=ops.matmul, args=(16, 24, 8, "float32")).tune(4, log, QUICK)
    SearchTask(func=ops.softmax, args=(4, 32, "float32")).tune(4, log, QUICK)
    return log


def test_replay_writes_kernels_bundle_and_manifest(tuned_log, tmp_path):
    report = replay(tuned_log, tmp_path / "dist")
    out = tmp_path / "dist"
    assert [k["name"] for k in report.kernels] == ["matmul", "softmax"] and not report.skipped
    for name in ("matmul", "softmax"):
        for f in (f"{name}.c", f"{name}.h", f"lib{name}.so"):
            assert (out / f).is_file()
    assert (out / f"lib{BUNDLE}.so").is_file() and (out / f"{BUNDLE}.h").is_file()
    manifest = json.loads((out / "manifest.json").read_text())
    mm = manifest["kernels"][0]
    assert mm["args"] == [{"name": "A", "shape": [16, 8], "dtype": "float32", "role": "input"},
                          {"name": "B", "shape": [8, 24], "dtype": "float32", "role": "input"},
                          {"name": "C", "shape": [16, 24], "dtype": "float32", "role": "output"}]
    best = min((r for r in load_records(tuned_log) if r.workload.name == "matmul"),
               key=lambda r: r.mean_cost)
    assert mm["record"]["key"] == best.key
    assert mm["logged"]["gflops"] == pytest.approx(best.gflops)
    here = mm["measured_here"]  # the re-check timed it on this machine, labelled as such
    assert here["time_seconds"] > 0 and here["gflops"] == pytest.approx(
        mm["flops"] / here["time_seconds"] / 1e9)
    assert "gflops" not in mm and "time_seconds" not in mm  # no unlabelled number
    assert manifest["target"]["arch"] == Target.host().arch
    assert "matmul" in str(report) and "logged on this CPU (" in str(report)
    assert mm["logged"]["same_cpu"]
    assert "measured here:" in str(report)


def test_each_exported_kernel_compiles_once(tuned_log, tmp_path, monkeypatch):
    """A kernel's own library and the bundle link the same cached object: each source is
    compiled once, and a second replay compiles nothing."""
    monkeypatch.setenv("TVMLITE_CACHE_DIR", str(tmp_path / "cache"))
    replay(tuned_log, tmp_path / "one", check=False)
    objects = sorted((tmp_path / "cache").rglob("*.o"))
    assert len(objects) == 2 and not list((tmp_path / "cache").rglob("*.so"))
    mtimes = [o.stat().st_mtime_ns for o in objects]
    replay(tuned_log, tmp_path / "two", check=False)
    assert [o.stat().st_mtime_ns for o in sorted((tmp_path / "cache").rglob("*.o"))] == mtimes
    assert (tmp_path / "two" / f"lib{BUNDLE}.so").is_file()


def test_exported_library_computes_the_right_numbers(tuned_log, tmp_path):
    replay(tuned_log, tmp_path)
    decl = "".join(line + "\n" for line in (tmp_path / f"{BUNDLE}.h").read_text().splitlines()
                   if line.startswith(("int32_t ", "double ", "void ")))
    ffi, lib = load_library(tmp_path / f"lib{BUNDLE}.so", decl)
    a = np.random.rand(16, 8).astype("float32")
    b = np.random.rand(8, 24).astype("float32")
    c = np.zeros((16, 24), "float32")
    ptr = lambda x: ffi.cast("float *", x.ctypes.data)  # noqa: E731
    assert lib.matmul(ptr(a), ptr(b), ptr(c)) == 0
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


C_PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include "tvmlite_kernels.h"
int main(void) {
  float A[16 * 8], B[8 * 24], C[16 * 24];
  for (int i = 0; i < 16 * 8; ++i) A[i] = (float)(i % 7) - 3.0f;
  for (int i = 0; i < 8 * 24; ++i) B[i] = (float)(i % 5) * 0.5f;
  if (matmul(A, B, C) != 0) return 2;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 24; ++j) {
      float want = 0.0f;
      for (int k = 0; k < 8; ++k) want += A[i * 8 + k] * B[k * 24 + j];
      if (fabsf(C[i * 24 + j] - want) > 1e-4f) { printf("bad %d %d\n", i, j); return 1; }
    }
  printf("ok\n");
  return 0;
}
"""


def test_a_c_program_links_the_bundle(tuned_log, tmp_path):
    replay(tuned_log, tmp_path)
    (tmp_path / "main.c").write_text(C_PROGRAM)
    cc = Target.host().compiler
    subprocess.run([cc, "-Wall", "-Werror", "-O2", "main.c", "-I.", "-L.", f"-l{BUNDLE}",
                    "-Wl,-rpath,$ORIGIN", "-lm", "-o", "main"], cwd=tmp_path, check=True)
    run = subprocess.run(["./main"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def _rewrite(log, out, change):
    for rec in load_records(log):
        append_record(out, change(rec))


def test_a_record_that_no_longer_applies_is_skipped_not_exported(tuned_log, tmp_path):
    log = tmp_path / "broken.jsonl"
    good = load_records(tuned_log)
    mm = [r for r in good if r.workload.name == "matmul"]
    best = min(mm, key=lambda r: r.mean_cost)
    broken = dataclasses.replace(best, steps=best.steps + (SplitStep("C", "nope", 2, None),),
                                 result=MeasureResult(costs=(1e-12,)))
    for r in mm:
        append_record(log, r)
    append_record(log, broken)
    report = replay(log, tmp_path / "out")
    assert [k["name"] for k in report.kernels] == ["matmul"]
    assert report.kernels[0]["record"]["key"] == best.key
    assert "no longer apply" in report.skipped[0]["reason"]


class WrongRunner:
    """Reports every candidate as a wrong answer."""

    def run(self, inputs, builds, reference=None):
        return [MeasureResult(error_no=MeasureErrorNo.WRONG_ANSWER, error_msg="3 of 9 differ")
                for _ in inputs]


def test_a_record_giving_wrong_answers_is_never_exported(tuned_log, tmp_path):
    report = replay(tuned_log, tmp_path, runner=WrongRunner())
    assert report.kernels == [] and report.bundle is None
    assert any("WRONG_ANSWER" in s["reason"] for s in report.skipped)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["kernels"] == [] and manifest["bundle"] is None
    assert not list(tmp_path.glob("*.so"))


def test_a_log_from_another_cpu_warns_and_still_builds(tuned_log, tmp_path):
    log = tmp_path / "other.jsonl"
    other = dataclasses.replace(Target.host(), features=("sse2",))
    _rewrite(tuned_log, log, lambda r: dataclasses.replace(r, target=other))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = replay(log, tmp_path / "out")
    assert len(report.kernels) == 2
    assert any(issubclass(w.category, TargetMismatchWarning) for w in caught)


def _foreign_log(tuned_log, tmp_path):
    log = tmp_path / "other.jsonl"
    other = dataclasses.replace(Target.host(), features=("sse2",))
    _rewrite(tuned_log, log, lambda r: dataclasses.replace(r, target=other))
    return log


def test_a_foreign_log_shows_logged_and_here_numbers_labelled(tuned_log, tmp_path):
    log = _foreign_log(tuned_log, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TargetMismatchWarning)
        report = replay(log, tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    for k in manifest["kernels"]:
        assert k["logged"]["target"].startswith(f"another CPU ({Target.host().arch}; it lacks")
        assert not k["logged"]["same_cpu"]
        assert k["measured_here"]["gflops"] > 0
        assert k["measured_here"]["target"].startswith("this machine (")
    line = next(x for x in str(report).splitlines() if "matmul" in x)
    assert f"logged on {manifest['kernels'][0]['logged']['target']}:" in line
    assert "measured here:" in line


def test_not_measured_here_without_the_check(tuned_log, tmp_path):
    report = replay(tuned_log, tmp_path, check=False)
    k = report.kernels[0]
    assert k["measured_here"] is None and "check=False" in k["measured_here_note"]
    assert "not measured here (replayed with check=False)" in str(report)


def test_two_replays_of_a_foreign_log_in_one_process_both_warn(tuned_log, tmp_path):
    log = _foreign_log(tuned_log, tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's own filter: once per location
        replay(log, tmp_path / "a", check=False)
        first = [w for w in caught if issubclass(w.category, TargetMismatchWarning)]
        replay(log, tmp_path / "b", check=False)
    every = [w for w in caught if issubclass(w.category, TargetMismatchWarning)]
    assert len(first) == 2 and len(every) == 4  # two workloads, two calls
    assert {str(w.message) for w in every[:2]} == {str(w.message) for w in every[2:]}


def test_search_replay_works_twice_and_after_importing_the_module(tuned_log, tmp_path):
    """In a fresh process: the package attribute stays the function."""
    code = f"""
import tvmlite
from tvmlite import search
r1 = search.replay({str(tuned_log)!r}, {str(tmp_path / "a")!r}, check=False)
import tvmlite.search.records.deploy
r2 = search.replay({str(tuned_log)!r}, {str(tmp_path / "b")!r}, check=False)
r3 = tvmlite.search.replay({str(tuned_log)!r}, {str(tmp_path / "c")!r}, check=False)
print(len(r1.kernels), len(r2.kernels), len(r3.kernels))
"""
    import os
    import sys
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ), timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "2", "2"]


def test_two_workloads_with_one_name_get_distinct_kernels(tmp_path):
    log = tmp_path / "mm.jsonl"
    for n in (8, 16):
        SearchTask(func=ops.matmul, args=(n, n, n, "float32")).tune(2, log, QUICK)
    names = [k["name"] for k in replay(log, tmp_path / "out").kernels]
    assert len(set(names)) == 2 and all(n.startswith("matmul_") for n in names)


def test_a_record_round_trip_generates_byte_identical_c():
    from tvmlite.runtime.module import generate_c
    from tvmlite.schedule.schedule import Schedule
    from tvmlite.search.measure.inputs import MeasureInput
    from tvmlite.search.records.record import Record, make_record
    from tvmlite.search.records.workload import Workload
    wl = Workload.from_op("conv2d_nhwc", 1, 8, 8, 4, 8, 3, padding=1)
    s = wl.schedule()
    out = wl.outputs[0]
    n, h, w, f = s[out].op.axis
    ho, hi = s[out].split(h, factor=4)
    fo, fi = s[out].split(f, factor=4)
    s[out].reorder(n, ho, w, fo, hi, fi)
    s[out].vectorize(fi)
    s[out].parallel(ho)
    s["pad"].compute_inline()
    rec = make_record(MeasureInput(wl, tuple(s.steps)), MeasureResult(costs=(1e-3,)),
                      Target.host())
    back = Record.from_json(json.loads(rec.to_line()))
    s2 = Schedule.from_steps(back.workload.outputs, back.steps)
    assert generate_c(s2, list(back.workload.tensors))[1] == generate_c(s, list(wl.tensors))[1]
