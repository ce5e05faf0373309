"""LocalRunner and its worker: timing, crash/hang/wrong-answer isolation, worker life."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from tvmlite import te
from tvmlite.codegen_c import compile_shared
from tvmlite.ops import OPS
from tvmlite.schedule.steps import SplitStep
from tvmlite.search.measure import worker
from tvmlite.search.measure.builder import BuildResult, LocalBuilder
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput
from tvmlite.search.measure.protocol import MeasureConfig
from tvmlite.search.measure.runner import LocalRunner
from tvmlite.target.target import Target
from tvmlite.testing.check import random_inputs

E = MeasureErrorNo


class StandInWorkload:
    """The attributes of search.workload.Workload the builder and runner use."""

    def __init__(self, n: int = 8):
        self.name = "matmul"
        self.key = f"stand-in-matmul-{n}"
        self.tensors = OPS["matmul"](n, n, n)
        self.outputs = [t for t in self.tensors if not isinstance(t.op, te.PlaceholderOp)]
        self.flops = 2 * n ** 3


# Same entry points as a real build of matmul 8x8x8 (see its .decl); BODY is the kernel.
FAKE = """
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
int32_t tvmlite_kernel(const float* restrict A, const float* restrict B, float* restrict C) {
  BODY
  return 0;
}
double tvmlite_kernel_time(const float* A, const float* B, float* C, int32_t number) {
  for (int32_t r = 0; r < number; ++r)
    if (tvmlite_kernel(A, B, C) != 0) return -1.0;
  return 1e-6;
}
void tvmlite_kernel_set_num_threads(int32_t n) { (void)n; }
"""
BODIES = {
    "segv": "volatile float *p = 0; *p = A[0];",
    "abort": 'fprintf(stderr, "boom\\n"); abort();',
    "chatty": 'printf("protocol noise\\n"); fflush(stdout);\n'
              "  for (int i = 0; i < 8; ++i) for (int j = 0; j < 8; ++j) {\n"
              "    float acc = 0; for (int k = 0; k < 8; ++k) acc += A[i * 8 + k] * B[k * 8 + j];\n"
              "    C[i * 8 + j] = acc; }",
    "hang": "volatile int x = 0; for (;;) { x++; }",
    "wrong": "for (int i = 0; i < 64; ++i) C[i] = 1.0f;",
    "unwritten": "(void)A; (void)B; (void)C;",
    "oom": "return -1;",
}


@pytest.fixture(scope="module")
def wl() -> StandInWorkload:
    return StandInWorkload(8)


@pytest.fixture(scope="module")
def builder(tmp_path_factory) -> LocalBuilder:
    return LocalBuilder(cache_dir=tmp_path_factory.mktemp("kernels"))


@pytest.fixture(scope="module")
def good(wl, builder) -> tuple[MeasureInput, BuildResult]:
    inp = MeasureInput(wl, (SplitStep("C", "j", 4),))
    [b] = builder.build([inp])
    assert b.ok, b.error_msg
    return inp, b


@pytest.fixture(scope="module")
def fake(good, builder) -> dict:
    """Hand-written libraries with the good build's signature, by behaviour."""
    _, b = good
    assert "tvmlite_kernel(const float* A, const float* B, float* C)" in b.decl
    out = {}
    for name, body in BODIES.items():
        src = FAKE.replace("BODY", body)
        path = compile_shared(src, Target.host(), cache_dir=builder.cache_dir)
        out[name] = dataclasses.replace(b, lib_path=str(path), source=src)
    return out


def test_a_candidate_clearly_slower_than_the_best_is_timed_once(good, builder) -> None:
    """The protocol's cutoff_ratio: a first timing above ratio x the best known cost of
    the workload (here told, as the Measurer tells the log's) ends the timing; 0 turns
    it off."""
    inp, b = good
    for ratio, want in ((2.0, 1), (0.0, 4)):
        with LocalRunner(config=MeasureConfig(repeat=4, n_threads=1,
                                              cutoff_ratio=ratio)) as runner:
            runner.note_cost(inp.workload.key, 1e-12)     # a best no kernel beats by 2x
            (r,) = runner.run([inp], [b], builder.build_reference)
        assert r.ok and len(r.costs) == want, (ratio, r)


def test_good_candidates_have_one_positive_cost_per_repeat(wl, builder, good) -> None:
    inp, b = good
    ref = MeasureInput(wl, ())
    # no cutoff: the reference, slower than the candidate, is timed 4 times too
    with LocalRunner(config=MeasureConfig(repeat=4, n_threads=1, cutoff_ratio=0)) as runner:
        results = runner.run([inp, ref], [b, builder.build_reference(wl)],
                             builder.build_reference)
    for r in results:
        assert r.ok, r.error_msg
        assert len(r.costs) == 4 and all(c > 0 for c in r.costs)
        assert r.build_seconds == b.seconds or r.build_seconds > 0
        assert r.run_seconds > 0


def test_crash_abort_hang_are_isolated_and_the_next_candidate_runs(
        good, fake, builder) -> None:
    inp, b = good
    with LocalRunner(timeout=2.0, cutoff_ratio=0) as runner:   # every repeat, whatever the best
        [first] = runner.run([inp], [b], builder.build_reference)
        pid = runner.worker_pid
        results = runner.run([inp] * 4, [fake["segv"], fake["abort"], fake["hang"], b],
                             builder.build_reference)
        assert first.ok and pid is not None
        segv, abort, hang, after = results
        assert segv.error_no == E.RUNTIME_CRASH and "SIGSEGV" in segv.error_msg
        assert abort.error_no == E.RUNTIME_CRASH and "SIGABRT" in abort.error_msg
        assert "boom" in abort.error_msg                 # the tail of the worker's stderr
        assert hang.error_no == E.RUN_TIMEOUT and "timeout=2.0" in hang.error_msg
        assert hang.run_seconds > 1.9                    # the deadline was waited for
        assert after.ok and len(after.costs) == 3, after.error_msg
        assert runner.worker_pid not in (None, pid)      # replaced after the crashes


def test_wrong_and_unwritten_outputs_are_wrong_answer(good, fake, builder) -> None:
    inp, _ = good
    with LocalRunner() as runner:
        wrong, unwritten, oom, chatty = runner.run(
            [inp] * 4, [fake["wrong"], fake["unwritten"], fake["oom"], fake["chatty"]],
            builder.build_reference)
    assert chatty.ok, chatty.error_msg     # a kernel printing to stdout cannot break replies
    assert wrong.error_no == E.WRONG_ANSWER and "of 64 elements wrong" in wrong.error_msg
    assert unwritten.error_no == E.WRONG_ANSWER and "64 NaN/unwritten" in unwritten.error_msg
    assert oom.error_no == E.RUNTIME_CRASH and "out of memory" in oom.error_msg


def test_a_failing_reference_makes_every_candidate_unknown(good, fake) -> None:
    inp, b = good
    with LocalRunner(timeout=5.0) as runner:
        results = runner.run([inp, inp], [b, b], lambda w: fake["segv"])
        assert [r.error_no for r in results] == [E.UNKNOWN, E.UNKNOWN]
        assert "reference" in results[0].error_msg and "SIGSEGV" in results[0].error_msg
        failed = dataclasses.replace(b, lib_path=None, error_no=E.COMPILE_ERROR,
                                     error_msg="cc said no")
    with LocalRunner() as runner:
        [r] = runner.run([inp], [b], lambda w: failed)
    assert r.error_no == E.UNKNOWN and "cc said no" in r.error_msg


def test_failed_builds_pass_their_error_through(good) -> None:
    inp, b = good
    failed = dataclasses.replace(b, lib_path=None, error_no=E.INVALID_SCHEDULE,
                                 error_msg="no loop q", seconds=0.25)
    with LocalRunner(check_correctness=False) as runner:
        [r] = runner.run([inp], [failed])
        assert runner.worker_pid is None                 # nothing to run: no worker
    assert (r.error_no, r.error_msg, r.build_seconds, r.costs) == \
        (E.INVALID_SCHEDULE, "no loop q", 0.25, ())


def test_flush_cache_and_min_repeat_ms(good, builder) -> None:
    inp, b = good
    with LocalRunner(flush_cache=True, repeat=2) as runner:
        [r] = runner.run([inp], [b], builder.build_reference)
    assert r.ok and len(r.costs) == 2, r.error_msg
    with LocalRunner(number=1, repeat=3, min_repeat_ms=20, check_correctness=False) as runner:
        [r] = runner.run([inp], [b])
    assert r.ok and len(r.costs) == 3
    assert r.run_seconds >= 3 * 0.020        # number grew: each repeat lasted >= 20 ms


def test_cold_weights_time_single_calls_with_only_the_constants_out_of_cache(
        good, builder, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model's kernel finds its activations in cache and its weights evicted: each
    timing is one call after a flush that reads back every array but the constants."""
    inp, b = good
    weighted = dataclasses.replace(inp, decisions={"constants": ["B", "not-an-input"]})
    with LocalRunner(cold_weights=True, repeat=3, min_repeat_ms=1) as runner:
        [r] = runner.run([weighted], [b], builder.build_reference)
        request = runner._request(b, None, 0.0, ("B",))
    assert r.ok and len(r.costs) == 3, r.error_msg
    assert request["cold"] == ["B"] and request["flush_bytes"] >= 64 << 20
    with LocalRunner() as runner:
        assert runner._request(b, None, 0.0, ("B",))["cold"] is None
    read: list = []
    monkeypatch.setattr(worker, "read_back", lambda arrays: read.append(
        [x.shape for x in arrays]))
    monkeypatch.setattr(worker, "flush_cache", lambda nbytes: None)
    req = {"lib": b.lib_path, "decl": b.decl, "kernel": b.kernel,
           "args": [a.to_json() for a in b.args], "check": None, "seed": 0, "number": 5,
           "repeat": 4, "min_repeat_ms": 0, "flush_bytes": 1 << 20, "cold": ["B"]}
    reply = worker.measure(req)
    assert reply["number"] == 1 and len(reply["costs"]) == 4
    assert read == [[(8, 8), (8, 8)]] * 4          # A and C read back before each call, B not
    assert worker.measure(dict(req, cold=None))["number"] == 5


def test_worker_is_reused_replaced_and_killed_at_close(
        good, fake, builder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inp, b = good
    monkeypatch.chdir(tmp_path)        # the worker must start outside the source checkout
    runner = LocalRunner()
    assert runner.worker_pid is None   # started lazily
    runner.run([inp], [b], builder.build_reference)
    pid = runner.worker_pid
    runner.run([inp], [b], builder.build_reference)
    assert runner.worker_pid == pid
    [crash] = runner.run([inp], [fake["segv"]], builder.build_reference)
    assert crash.error_no == E.RUNTIME_CRASH and runner.worker_pid is None
    [r] = runner.run([inp], [b], builder.build_reference)
    assert r.ok and runner.worker_pid not in (None, pid)
    last = runner.worker_pid
    runner.close()
    assert runner.worker_pid is None
    for gone in (pid, last):
        with pytest.raises(ProcessLookupError):
            os.kill(gone, 0)


def test_worker_inputs_and_reference_cache(good, builder, tmp_path: Path) -> None:
    _, b = good
    args = [a.to_json() for a in b.args]
    for x, y in zip(worker.make_inputs(args, 7), random_inputs(StandInWorkload(8).tensors, 7)):
        np.testing.assert_array_equal(x, y)
    ref = builder.build_reference(StandInWorkload(8))
    req = {"path": str(tmp_path / "ref"), "lib": ref.lib_path, "decl": ref.decl,
           "kernel": ref.kernel, "args": args, "seed": 7}
    inputs, [out] = worker.reference(req)
    np.testing.assert_allclose(out, inputs[0] @ inputs[1], rtol=1e-5, atol=1e-5)
    worker._REFS.clear()                  # a restarted worker reads the .npy instead
    _, [again] = worker.reference(dict(req, lib="/nonexistent.so"))
    np.testing.assert_array_equal(again, out)


def test_bad_arguments_raise_naming_the_argument(good) -> None:
    inp, b = good
    for kw in ({"number": 0}, {"repeat": -1}, {"timeout": 0}, {"min_repeat_ms": -1},
               {"n_threads": 0}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            LocalRunner(**kw)
    with LocalRunner() as runner:
        with pytest.raises(ValueError, match="reference"):
            runner.run([inp], [b])
        with pytest.raises(ValueError, match="builds"):
            runner.run([inp, inp], [b], lambda w: b)


def test_worker_threads_are_bound_unless_the_user_says_otherwise():
    from tvmlite.search.measure.runner import worker_env
    env = worker_env({"PATH": "/usr/bin"})
    assert env["OMP_PROC_BIND"] == "true" and env["OPENBLAS_NUM_THREADS"] == "1"
    assert worker_env({"OMP_PROC_BIND": "false"})["OMP_PROC_BIND"] == "false"
    import os

    import tvmlite
    assert os.path.dirname(os.path.dirname(os.path.abspath(tvmlite.__file__))) in \
        env["PYTHONPATH"].split(os.pathsep)


def test_reference_folders_of_dead_tunings_are_swept(tmp_path: Path) -> None:
    """A tuning killed with SIGKILL leaves its tvmlite-ref-<pid>-* folder; the next
    runner that makes one deletes those whose owner is dead, and nothing else."""
    import subprocess
    import sys

    from tvmlite.search.measure.runner import sweep_stale_reference_dirs
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for name in (f"tvmlite-ref-{dead.pid}-abc", f"tvmlite-ref-{os.getpid()}-def",
                 "tvmlite-ref-old_style", f"other-{dead.pid}-x"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "0.npy").write_bytes(b"x")
    gone = sweep_stale_reference_dirs(str(tmp_path))
    assert gone == [str(tmp_path / f"tvmlite-ref-{dead.pid}-abc")]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"tvmlite-ref-{os.getpid()}-def", "tvmlite-ref-old_style", f"other-{dead.pid}-x"])


def test_the_reference_folder_names_its_owner(good, builder) -> None:
    import glob
    import tempfile
    inp, b = good
    with LocalRunner() as runner:
        [r] = runner.run([inp], [b], builder.build_reference)
        assert r.ok, r.error_msg
        mine = glob.glob(os.path.join(tempfile.gettempdir(), f"tvmlite-ref-{os.getpid()}-*"))
        assert runner._ref_dir is not None and runner._ref_dir.name in mine
    assert not os.path.exists(runner_dir := mine[0]), runner_dir    # closed: deleted
