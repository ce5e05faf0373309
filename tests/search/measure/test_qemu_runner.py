"""The emulated runner and the whole AArch64 flow from this machine: tune under qemu
(records marked emulated), replay into an AArch64 bundle, and a C program cross-compiled
against it that runs under qemu and checks its result; pre-packed candidates packed once
by their pack function in the harness, a broken pack caught. Skipped with the reason shown when
the cross toolchain or qemu is missing."""
from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tvmlite.cli.commands import main
from tvmlite.codegen_c import compile_shared
from tvmlite.codegen_c.harness import emulator_prefix
from tvmlite.search.measure.builder import LocalBuilder
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput
from tvmlite.search.measure.qemu_runner import QemuRunner
from tvmlite.search.records.deploy import replay
from tvmlite.search.records.record import append_record, load_records, make_record
from tvmlite.search.records.workload import Workload
from tvmlite.target import Target
from tvmlite.testing.cross import cross_unavailable, run_on_target

REASON = cross_unavailable("aarch64-neon")
pytestmark = pytest.mark.skipif(REASON is not None,
                                reason=f"AArch64 toolchain or qemu unavailable: {REASON}")


def test_qemu_runner_checks_and_times_candidates() -> None:
    from tvmlite import te
    target = Target.from_name("aarch64-neon")
    wl = Workload.from_op("matmul", M=8, N=16, K=5)
    s = te.create_schedule(wl.outputs[-1].op)
    C = wl.outputs[-1]
    _, j = s[C].op.axis
    _, ji = s[C].split(j, factor=8)
    s[C].vectorize(ji)
    plain, tiled = MeasureInput(wl, ()), MeasureInput(wl, tuple(s.steps))
    builder = LocalBuilder(target)
    with QemuRunner(n_parallel=2) as runner:
        runner.check_target(target)
        assert runner.name == "qemu-aarch64" and runner.emulated
        results = dict(runner.iter_run([plain, tiled], builder.build([plain, tiled]),
                                       builder.build_reference))
    assert sorted(results) == [0, 1]
    for r in results.values():
        assert r.ok, r.error_msg
        assert r.costs and all(c > 0 for c in r.costs)


def test_qemu_runner_needs_check_target_first() -> None:
    with QemuRunner() as runner, pytest.raises(ValueError, match="check_target"):
        list(runner.iter_run([], [], None))


def test_wrong_answer_is_caught_under_qemu() -> None:
    """A 'reference' that computes something else makes the candidate WRONG_ANSWER."""
    target = Target.from_name("aarch64-neon")
    mm = Workload.from_op("matmul", M=4, N=8, K=3)
    builder = LocalBuilder(target)

    def fake_reference(workload):      # the reference of a 2x-scaled compute
        from tvmlite import te
        A = te.placeholder((4, 3), name="A")
        B = te.placeholder((3, 8), name="B")
        k = te.reduce_axis((0, 3), name="k")
        C = te.compute((4, 8), lambda i, j: te.sum(A[i, k] * B[k, j] * 2.0, axis=k), name="C")
        return builder.build_reference(Workload.from_tensors([A, B, C], name="scaled"))
    inp = MeasureInput(mm, ())
    with QemuRunner() as runner:
        runner.check_target(target)
        (res,) = runner.run([inp], builder.build([inp]), fake_reference)
    assert res.error_no == MeasureErrorNo.WRONG_ANSWER, res


def _prepacked(wl: Workload) -> MeasureInput:
    s = wl.schedule()
    B, C = wl.tensors[1], wl.outputs[0]
    BP = s.prepack(s.cache_read(B, "local", [C]), dim=1, factor=8)
    _, j = s[C].op.axis
    _, ji = s[C].split(j, factor=8)
    s[C].vectorize(ji)
    s[BP].vectorize(s[BP].op.axis[-1])
    return MeasureInput(wl, tuple(s.steps))


PACK_FN = "tvmlite_kernel_pack_B"
HAND_PACK = """
int32_t tvmlite_kernel_pack_B(const float* restrict B, float* restrict P) {
  BODY
  return 0;
}
"""


DEPLOY_PACKED = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "tvmlite_kernels.h"
int main(void) {
  static float A[4 * 5], B[5 * 16], C[4 * 16];
  float* Bp = aligned_alloc(64, 64 * ((sizeof(float) * MATMUL_B_PACKED_SIZE + 63) / 64));
  for (int i = 0; i < 4 * 5; ++i) A[i] = (float)(i % 7) - 3.0f;
  for (int i = 0; i < 5 * 16; ++i) B[i] = (float)(i % 5) * 0.5f;
  if (Bp == NULL || matmul_pack_B(B, Bp) != 0) return 2;     /* once, at load time */
  if (matmul(A, Bp, C) != 0) return 3;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 16; ++j) {
      float want = 0.0f;
      for (int k = 0; k < 5; ++k) want += A[i * 5 + k] * B[k * 16 + j];
      if (!(fabsf(C[i * 16 + j] - want) <= 1e-4f)) { printf("wrong at %d %d\n", i, j); return 1; }
    }
  free(Bp);
  printf("ok\n");
  return 0;
}
"""


def test_prepacked_candidates_are_packed_checked_and_timed_under_qemu(tmp_path: Path) -> None:
    """The harness packs B once, the kernel reads the panels; checked against the
    unscheduled reference like any candidate. A pack that copies B unpanelled is a
    WRONG_ANSWER, a pack that fails an error record: neither passes. The good one's record
    replays (re-checked under qemu) into a bundle a C program packs once and calls."""
    target = Target.from_name("aarch64-neon")
    wl = Workload.from_op("matmul", M=4, N=16, K=5)
    inp = _prepacked(wl)
    builder = LocalBuilder(target)
    [build] = builder.build([inp])
    assert build.ok and [p["fn"] for p in build.packs] == [PACK_FN], build.error_msg
    head, _ = build.source.split(f"int32_t {PACK_FN}(", 1)   # the pack function comes last

    def hand_packed(body: str):
        lib = compile_shared(head + HAND_PACK.replace("BODY", body), target,
                             cache_dir=builder.cache_dir)
        return dataclasses.replace(build, lib_path=str(lib))
    builds = [build, hand_packed("for (int i = 0; i < 5 * 16; ++i) P[i] = B[i];"),
              hand_packed("(void)B; (void)P; return 5;")]
    with QemuRunner(n_parallel=2) as runner:
        runner.check_target(target)
        good, copied, failing = runner.run([inp] * 3, builds, builder.build_reference)
    assert good.ok, good.error_msg
    assert good.costs and all(c > 0 for c in good.costs)
    assert copied.error_no == MeasureErrorNo.WRONG_ANSWER, copied
    assert not failing.ok and f"{PACK_FN} returned 5" in failing.error_msg, failing

    log, dist = tmp_path / "packed.jsonl", tmp_path / "dist"
    append_record(log, make_record(inp, good, target, tuner="hand", runner=runner))
    with QemuRunner() as checker:
        report = replay(log, dist, target=target, runner=checker)
    [kernel] = report.kernels
    assert report.checked_by == "qemu-aarch64" and not report.skipped
    assert [p["function"] for p in kernel["packs"]] == ["matmul_pack_B"]
    (tmp_path / "main.c").write_text(DEPLOY_PACKED)
    subprocess.run([target.compiler, "main.c", f"-I{dist}", f"-L{dist}", "-ltvmlite_kernels",
                    "-lm", "-fopenmp", "-o", "main"], cwd=tmp_path, check=True)
    run = subprocess.run([*emulator_prefix("aarch64"), str(tmp_path / "main")],
                         capture_output=True, text=True, env={"LD_LIBRARY_PATH": str(dist)},
                         timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_search_with_a_constant_input_measures_prepacked_candidates_under_qemu(
        tmp_path: Path) -> None:
    """SearchTask(constants=["B"]) for aarch64-neon with the qemu runner: the search's
    pre-packed candidates are measured (checked), not refused."""
    from tvmlite.search.options import TuningOptions
    from tvmlite.search.template_free.task import SearchTask
    log = tmp_path / "c.jsonl"
    task = SearchTask(func="matmul", args=(16, 32, 8, "float32"), target="aarch64-neon",
                      constants=["B"])
    task.tune(8, log, TuningOptions(population=16, generations=1, measures_per_round=4,
                                    pretrained=False, runner=QemuRunner(n_parallel=2)))
    packed = [r for r in load_records(log) if any(st.kind == "prepack" for st in r.steps)]
    assert packed and all(r.emulated for r in packed)
    assert all(r.result.ok for r in packed), [r.result.error_msg for r in packed]


def test_run_on_target_packs_prepacked_inputs_first() -> None:
    """Two pack functions (A and B both constant), each in its argument's place."""
    from tvmlite import ops, te
    A, B, C = ops.matmul(6, 8, 4)
    s = te.create_schedule(C.op)
    s.prepack(s.cache_read(B, "local", [C]), dim=1, factor=4)
    s.prepack(s.cache_read(A, "local", [C]), dim=0, factor=3)
    rng = np.random.default_rng(0)
    a, b = rng.random((6, 4), dtype=np.float32), rng.random((4, 8), dtype=np.float32)
    (c,) = run_on_target(s, [A, B, C], "aarch64-neon", [a, b])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-6)


def test_local_runner_is_refused_before_tuning(tmp_path: Path, capsys) -> None:
    log = tmp_path / "a.jsonl"
    rc = main(["tune", "matmul", "M=16", "N=16", "K=16", "--target", "aarch64-neon",
               "--trials", "4", "--log", str(log), "--quiet"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "local runner cannot run" in err and "--runner qemu" in err
    assert not log.exists()


def test_tune_replay_and_deploy_on_aarch64(tmp_path: Path, capsys) -> None:
    log, dist = tmp_path / "a.jsonl", tmp_path / "dist"
    rc = main(["tune", "matmul", "M=16", "N=16", "K=16", "--target", "aarch64-neon",
               "--runner", "qemu", "--trials", "6", "--population", "12", "--log", str(log),
               "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "EMULATED" in out and "--target aarch64-neon" in out
    records = load_records(log)
    assert len(records) == 6
    assert all(r.target.arch == "aarch64" and r.target.name == "aarch64-neon"
               and r.emulated and r.runner == "qemu-aarch64" for r in records)
    assert sum(r.result.ok for r in records) >= 1

    rc = main(["replay", str(log), "--target", "aarch64-neon", "--out", str(dist)])
    cap = capsys.readouterr()
    assert rc == 0 and "NOT checked here" in cap.out and "--runner qemu" in cap.out
    assert "not run" in cap.err
    manifest = json.loads((dist / "manifest.json").read_text())
    assert manifest["target_name"] == "aarch64-neon" and manifest["arch"] == "aarch64"
    assert "-march=armv8-a" in manifest["cflags"] and "-march=native" not in manifest["cflags"]
    elf = (dist / "libtvmlite_kernels.so").read_bytes()
    assert elf[:4] == b"\x7fELF" and int.from_bytes(elf[18:20], "little") == 183  # EM_AARCH64

    rc = main(["replay", str(log), "--target", "aarch64-neon", "--runner", "qemu",
               "--out", str(tmp_path / "checked")])
    assert rc == 0 and "checked against the unscheduled build by the qemu-aarch64" in \
        capsys.readouterr().out

    # a C program of the user's, cross-compiled against the bundle, run under qemu
    main_c = tmp_path / "main.c"
    main_c.write_text(r'''
#include <math.h>
#include <stdio.h>
#include "tvmlite_kernels.h"
int main(void) {
  static float A[16 * 16], B[16 * 16], C[16 * 16];
  for (int i = 0; i < 256; ++i) { A[i] = (float)(i % 7) - 3.0f; B[i] = (float)(i % 5) * 0.5f; }
  if (matmul(A, B, C) != 0) return 2;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float want = 0.0f;
      for (int k = 0; k < 16; ++k) want += A[i * 16 + k] * B[k * 16 + j];
      if (fabsf(C[i * 16 + j] - want) > 1e-4f) { printf("wrong at %d %d\n", i, j); return 1; }
    }
  printf("ok\n");
  return 0;
}
''')
    target = Target.from_name("aarch64-neon")
    exe = tmp_path / "main"
    subprocess.run([target.compiler, str(main_c), f"-I{dist}", f"-L{dist}",
                    "-ltvmlite_kernels", "-lm", "-fopenmp", "-o", str(exe)], check=True)
    run = subprocess.run([*emulator_prefix("aarch64"), str(exe)], capture_output=True,
                         text=True, env={"LD_LIBRARY_PATH": str(dist)}, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_a_size_range_tunes_under_qemu(tmp_path: Path, capsys) -> None:
    """A dynamic kernel takes its sizes first: the harness passes them (``--size``), so
    the reference and the candidates run at each measured size, not at garbage ones."""
    log = tmp_path / "dyn.jsonl"
    rc = main(["tune", "matmul", "M=1..8", "N=8", "K=8", "--target", "aarch64-neon",
               "--runner", "qemu", "--trials", "4", "--population", "8", "--log", str(log),
               "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0 and "dispatch:" in out, out
    records = [r for r in load_records(log) if r.workload.sizes]    # not the table's
    assert records and all(r.result.ok for r in records), [r.result for r in records]
    assert {r.workload.sizes["M"] for r in records} <= set(range(1, 9))
