"""A pre-packed schedule through measurement, the log and replay: the runner packs once and
checks pack + kernel against the unscheduled build; replay exports the kernel that reads
the packed layout and its packing function; a C program packs once and calls it twice."""
import dataclasses
import json
import subprocess

import pytest

from tvmlite.search.measure.builder import LocalBuilder
from tvmlite.search.measure.inputs import MeasureInput
from tvmlite.search.measure.runner import LocalRunner
from tvmlite.search.options import TuningOptions
from tvmlite.search.records.deploy import BUNDLE, replay
from tvmlite.search.records.record import append_record, load_records, make_record
from tvmlite.search.records.workload import Workload
from tvmlite.search.template_free.task import SearchTask
from tvmlite.target.target import Target

M, N, K = 16, 32, 8
QUICK = TuningOptions(population=32, generations=1, measures_per_round=4, number=1, repeat=2,
                      min_repeat_ms=1)


def _prepacked_steps(wl):
    s = wl.schedule()
    A, B = wl.tensors[:2]
    C = wl.outputs[0]
    BP = s.prepack(s.cache_read(B, "local", [C]), dim=1, factor=8)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=8)
    s[C].reorder(jo, i, ji)
    s[C].vectorize(ji)
    s[BP].vectorize(s[BP].op.axis[-1])
    return tuple(s.steps)


@pytest.fixture(scope="module")
def prepacked_log(tmp_path_factory):
    log = tmp_path_factory.mktemp("prepack") / "mm.jsonl"
    wl = Workload.from_op("matmul", M, N, K, "float32")
    inp = MeasureInput(wl, _prepacked_steps(wl))
    builder = LocalBuilder()
    [build] = builder.build([inp])
    assert build.ok and [p["fn"] for p in build.packs] == ["tvmlite_kernel_pack_B"]
    with LocalRunner(number=1, repeat=2) as runner:
        [res] = runner.run([inp], [build], builder.build_reference)
    assert res.ok, res.error_msg        # checked: pack + kernel against the reference
    append_record(log, make_record(inp, res, Target.host(), tuner="hand"))
    return log


def test_the_log_records_the_prepack_step(prepacked_log):
    [rec] = load_records(prepacked_log)
    assert any(st.kind == "prepack" for st in rec.steps)


C_PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "tvmlite_kernels.h"

int main(void) {
  static float A[16 * 8], B[8 * 32], C[16 * 32];
  float* Bp = aligned_alloc(64, sizeof(float) * MATMUL_B_PACKED_SIZE);
  for (int i = 0; i < 16 * 8; ++i) A[i] = (float)(i % 7) - 3.0f;
  for (int i = 0; i < 8 * 32; ++i) B[i] = (float)(i % 5) * 0.5f;
  if (matmul_pack_B(B, Bp) != 0) return 2;          /* once, at load time */
  for (int call = 0; call < 2; ++call) {
    for (int i = 0; i < 16 * 32; ++i) C[i] = NAN;
    if (matmul(A, Bp, C) != 0) return 3;
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 32; ++j) {
        float want = 0.0f;
        for (int k = 0; k < 8; ++k) want += A[i * 8 + k] * B[k * 32 + j];
        if (!(fabsf(C[i * 32 + j] - want) <= 1e-4f)) { printf("bad %d %d\n", i, j); return 1; }
      }
  }
  free(Bp);
  printf("ok\n");
  return 0;
}
"""


def test_replay_exports_kernel_and_pack_function_for_a_c_program(prepacked_log, tmp_path):
    report = replay(prepacked_log, tmp_path)
    [entry] = report.kernels
    manifest = json.loads((tmp_path / "manifest.json").read_text())["kernels"][0]
    assert manifest["packs"] == [{"input": "B", "packed": "B_packed", "function": "matmul_pack_B",
                                  "shape": [N // 8, K, 8], "dtype": "float32",
                                  "bytes": N * K * 4}]
    assert [a["name"] for a in manifest["kernel_args"]] == ["A", "B_packed", "C"]
    assert "exclude the packing" in manifest["timing_note"]
    head = (tmp_path / "matmul.h").read_text()
    assert f"#define MATMUL_B_PACKED_SIZE {N * K}" in head
    assert "int32_t matmul_pack_B(const float* B, float* B_packed);" in head
    (tmp_path / "main.c").write_text(C_PROGRAM)
    cc = Target.host().compiler
    subprocess.run([cc, "-Wall", "-Werror", "-O2", "main.c", "-I.", "-L.", f"-l{BUNDLE}",
                    "-Wl,-rpath,$ORIGIN", "-lm", "-o", "main"], cwd=tmp_path, check=True)
    run = subprocess.run(["./main"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_search_task_constants_must_name_inputs():
    with pytest.raises(ValueError, match="'C' is not an input of workload matmul"):
        SearchTask(func="matmul", args=(M, N, K, "float32"), constants=["C"])
    with pytest.raises(ValueError, match="'W' is not an input"):
        SearchTask(func="matmul", args=(M, N, K, "float32"), constants="B,W")
    assert SearchTask(func="matmul", args=(M, N, K, "float32"),
                      constants="B").constants == ("B",)


def test_template_free_search_may_prepack_a_constant_input(tmp_path):
    log = tmp_path / "t.jsonl"
    cold = dataclasses.replace(QUICK, pretrained=False)   # independent of the shipped model
    SearchTask(func="matmul", args=(M, N, K, "float32"), constants=["B"]).tune(8, log, cold)
    recs = load_records(log)
    packed = [r for r in recs if any(st.kind == "prepack" for st in r.steps)]
    assert packed and all(r.result.ok for r in packed)      # checked like any candidate
    for r in packed:
        assert r.decisions["decisions"]["prepack:B"] > 0
    plain = SearchTask(func="matmul", args=(M, N, K, "float32"))
    log2 = tmp_path / "u.jsonl"
    plain.tune(4, log2, cold)
    assert not any(st.kind == "prepack" for r in load_records(log2) for st in r.steps)


def test_templated_matmul_offers_prepack_for_a_constant_b():
    from tvmlite.search import templated
    from tvmlite.search.templated.task import TemplateError
    from tvmlite.testing.check import check_schedule
    with pytest.raises(TemplateError, match="'X' is not an input"):
        templated.create("matmul", (M, N, K, "float32"), constants=["X"])
    plain = templated.create("matmul", (M, N, K, "float32"))
    task = templated.create("matmul", (M, N, K, "float32"), constants=["B"])
    assert len(task.space) == len(plain.space) * 3 // 2
    assert task.workload.key == plain.workload.key
    import random
    rng, seen = random.Random(0), 0
    for _ in range(40):
        cfg = task.space.random_config(rng)
        if cfg["pack_b"].val != "prepack":
            continue
        s, tensors = task.instantiate(cfg)
        if any(st.kind == "prepack" for st in s.steps):
            check_schedule(s, tensors, lambda a, b: a.astype("float64") @ b, atol=1e-4)
            seen += 1
        if seen == 2:
            break
    assert seen == 2


# -- a declared constant's API does not depend on which record was best -----------------

def _copied_steps(wl):
    """A schedule that reads B through an in-kernel copy (decision prepack:B = 0)."""
    s = wl.schedule()
    B, C = wl.tensors[1], wl.outputs[0]
    BL = s.cache_read(B, "local", [C])
    s[BL].compute_at(s[C], s[C].op.axis[0])
    return tuple(s.steps)


def _logged(tmp_path, name, steps, decisions):
    log = tmp_path / f"{name}.jsonl"
    wl = Workload.from_op("matmul", M, N, K, "float32")
    inp = MeasureInput(wl, steps, decisions)
    builder = LocalBuilder()
    with LocalRunner(number=1, repeat=2) as runner:
        [res] = runner.run([inp], builder.build([inp]), builder.build_reference)
    assert res.ok, res.error_msg
    append_record(log, make_record(inp, res, Target.host(), tuner="hand"))
    return log


def _api(head: str) -> list:
    """A header's declarations: prototypes and size macros (not the doc comments)."""
    return [line for line in head.splitlines() if line.startswith(("int32_t ", "double ",
                                                                   "void ", "#define MATMUL"))]


@pytest.fixture(scope="module")
def both_logs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fixed_api")
    wl = Workload.from_op("matmul", M, N, K, "float32")
    plain = _logged(tmp, "plain", _copied_steps(wl),
                    {"sketch": 0, "sketch_desc": "hand", "decisions": {"prepack:B": 0},
                     "constants": ["B"]})
    packed = _logged(tmp, "packed", _prepacked_steps(wl),
                     {"sketch": 0, "sketch_desc": "hand", "decisions": {"prepack:B": 8},
                      "constants": ["B"]})
    return {"plain": plain, "packed": packed}


def test_a_constant_input_has_the_same_exported_api_whether_or_not_the_best_packs(
        both_logs, tmp_path):
    heads, manifests = {}, {}
    for which, log in both_logs.items():
        out = tmp_path / which
        replay(log, out)
        heads[which] = (out / "matmul.h").read_text()
        manifests[which] = json.loads((out / "manifest.json").read_text())["kernels"][0]
        assert _api((out / f"{BUNDLE}.h").read_text()) == _api(heads[which])
        (out / "main.c").write_text(C_PROGRAM)          # one program, both tunings
        subprocess.run([Target.host().compiler, "-Wall", "-Werror", "-O2", "main.c", "-I.",
                        "-L.", f"-l{BUNDLE}", "-Wl,-rpath,$ORIGIN", "-lm", "-o", "main"],
                       cwd=out, check=True)
        run = subprocess.run(["./main"], cwd=out, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr
    assert _api(heads["plain"]) == _api(heads["packed"])
    assert "int32_t matmul(const float* A, const float* B_packed, float* C);" in heads["plain"]
    assert f"#define MATMUL_B_PACKED_SIZE {N * K}" in heads["plain"]
    plain, packed = manifests["plain"]["packs"], manifests["packed"]["packs"]
    assert plain[0]["shape"] == [K, N] and packed[0]["shape"] == [N // 8, K, 8]
    for key in ("input", "packed", "function", "dtype", "bytes"):
        assert plain[0][key] == packed[0][key]
    assert manifests["plain"]["kernel_args"] == [
        {"name": "A", "shape": [M, K], "dtype": "float32"},
        {"name": "B_packed", "shape": [K, N], "dtype": "float32"},
        {"name": "C", "shape": [M, N], "dtype": "float32"}]


@pytest.mark.parametrize("which", ["plain", "packed"])
def test_apply_best_of_a_constant_input_builds_a_module_that_packs(both_logs, which):
    import numpy as np

    import tvmlite
    task = SearchTask(func="matmul", args=(M, N, K, "float32"), constants=["B"])
    s, args = task.apply_best(both_logs[which])
    mod = tvmlite.build(s, args)
    assert [p.input for p in mod.packs] == ["B"]
    rng = np.random.default_rng(0)
    a = rng.random((M, K), dtype=np.float32)
    b = rng.random((K, N), dtype=np.float32)
    c = np.zeros((M, N), np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    bp = mod.pack("B", b)                 # once, then the kernel alone
    c2 = np.zeros((M, N), np.float32)
    mod.run_packed(a, bp, c2)
    np.testing.assert_allclose(c2, a @ b, rtol=1e-5)


def test_constant_step_round_trips_and_refuses_a_non_input():
    from tvmlite.schedule.prepack import ConstantStep, declare_constants
    from tvmlite.schedule.schedule import Schedule
    from tvmlite.schedule.state import ScheduleError
    wl = Workload.from_op("matmul", M, N, K, "float32")
    s = declare_constants(Schedule.from_steps(wl.outputs, _copied_steps(wl)), ["B"])
    assert s.steps[-1] == ConstantStep("B")
    again = Schedule.from_steps(wl.outputs, json.loads(s.steps_json()))
    assert again.steps == s.steps
    packed = declare_constants(Schedule.from_steps(wl.outputs, _prepacked_steps(wl)), ["B"])
    assert not any(st.kind == "constant" for st in packed.steps)   # already packed
    with pytest.raises(ScheduleError, match="'C': not an input"):
        declare_constants(wl.schedule(), ["C"])


def test_a_plain_copy_pack_is_checked_under_qemu_and_exported_for_aarch64(both_logs, tmp_path):
    from tvmlite.search.measure.qemu_runner import QemuRunner
    from tvmlite.testing.cross import cross_unavailable
    reason = cross_unavailable("aarch64-neon")
    if reason:
        pytest.skip(reason)
    from tvmlite.search.records.record import TargetMismatchWarning
    with QemuRunner() as runner, pytest.warns(TargetMismatchWarning):   # tuned on this CPU
        # the qemu harness calls matmul_pack_B once, then checks the kernel on its output
        report = replay(both_logs["plain"], tmp_path, target="aarch64-neon", runner=runner)
    assert report.kernels and not report.skipped and report.checked_by == runner.name
    head = (tmp_path / "matmul.h").read_text()
    assert "int32_t matmul_pack_B(const float* B, float* B_packed);" in head
    assert "int32_t matmul(const float* A, const float* B_packed, float* C);" in head
