"""DaskRunner on a real Dask LocalCluster (worker processes, started and stopped here):
a tuning through it, crashes on a worker, a mismatched worker, an unreachable scheduler,
a worker killed mid-batch."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from tvmlite import search  # noqa: E402
from tvmlite.codegen_c import compile_shared  # noqa: E402
from tvmlite.search.measure.base_runner import RunnerError  # noqa: E402
from tvmlite.search.measure.builder import BuildResult, LocalBuilder  # noqa: E402
from tvmlite.search.measure.dask_runner import AHEAD, DaskRunner, DaskWorkerWarning, parse_address  # noqa: E402
from tvmlite.search.measure.dask_worker import START_TOPIC  # noqa: E402
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput  # noqa: E402
from tvmlite.search.records.record import load_records  # noqa: E402
from tvmlite.search.records.workload import Workload  # noqa: E402
from tvmlite.target.target import Target  # noqa: E402
from tvmlite.testing.check import random_inputs  # noqa: E402

E = MeasureErrorNo
N = 8   # the hand-written kernels below are matmul 8x8x8

FAKE = """
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
int32_t tvmlite_kernel(const float* restrict A, const float* restrict B, float* restrict C) {
  BODY
  for (int i = 0; i < 8; ++i) for (int j = 0; j < 8; ++j) {
    float acc = 0; for (int k = 0; k < 8; ++k) acc += A[i * 8 + k] * B[k * 8 + j];
    C[i * 8 + j] = acc; }
  return 0;
}
double tvmlite_kernel_time(const float* A, const float* B, float* C, int32_t number) {
  for (int32_t r = 0; r < number; ++r)
    if (tvmlite_kernel(A, B, C) != 0) return -1.0;
  return 1e-6;
}
void tvmlite_kernel_set_num_threads(int32_t n) { (void)n; }
"""
BODIES = {"ok": "", "segv": "volatile float *p = 0; *p = A[0];", "abort": "abort();",
          "hang": "for (;;) { usleep(1000); }", "slow": "usleep(400000);"}


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes, one thread and one `measure` each: two small machines."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # Dask's own notes about ports and memory
        cl = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      resources={"measure": 1}, dashboard_address=None)
    with distributed.Client(cl.scheduler_address, set_as_default=False) as client:
        _wait_workers(client, 2)      # no test races the workers' start
    yield cl
    cl.close()


@pytest.fixture
def empty_scheduler():
    """A scheduler without workers (each test starts its own, or none)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cl = distributed.LocalCluster(n_workers=0, processes=True, dashboard_address=None)
    yield cl.scheduler_address
    cl.close()


@pytest.fixture(scope="module")
def workload():
    return Workload.from_op("matmul", N, N, N)


@pytest.fixture(scope="module")
def builder(tmp_path_factory):
    return LocalBuilder(cache_dir=tmp_path_factory.mktemp("cc"))


def fake_build(kind: str, workload: Workload, builder: LocalBuilder) -> BuildResult:
    """A real build of the workload whose C body is replaced by a hand-written kernel."""
    real = builder.build([MeasureInput(workload, ())])[0]
    path = compile_shared(FAKE.replace("BODY", BODIES[kind]), builder.target,
                          cache_dir=builder.cache_dir)
    return BuildResult(str(path), real.decl, real.kernel, "", real.args, E.NO_ERROR, "", 0.0)


def test_tuning_through_dask_gives_valid_records_whose_best_checks_out(cluster, tmp_path):
    log = tmp_path / "mm.jsonl"
    task = search.SearchTask(func="matmul", args=(32, 32, 32, "float32"))
    runner = DaskRunner(cluster.scheduler_address, number=1, repeat=2, timeout=20.0)
    assert runner.name.startswith("dask://127.0.0.1:")
    opts = search.TuningOptions(population=16, generations=1, measures_per_round=4,
                                runner=runner)
    res = task.tune(trials=8, log_file=log, options=opts)
    records = load_records(log)
    assert len(records) == 8 and res.best is not None
    assert len({r.key for r in records}) == 8          # none logged twice
    assert all(r.result.ok or r.result.error_no != E.NO_ERROR for r in records)
    assert sum(r.result.ok for r in records) >= 1
    s, args = task.apply_best(log)
    import tvmlite
    mod = tvmlite.build(s, args)
    a, b = random_inputs(args[:2], seed=3)
    c = np.empty((32, 32), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    # the runner was closed by the tuning, and reconnects when used again
    assert runner.workers == {}
    again = runner.run([MeasureInput(task.workload, ())],
                       LocalBuilder().build([MeasureInput(task.workload, ())]),
                       reference=LocalBuilder().build_reference)
    assert again[0].ok
    runner.close()


def test_the_task_scheduler_measures_through_dask(cluster, tmp_path):
    log = tmp_path / "two.jsonl"
    tasks = [search.SearchTask(func="matmul", args=(16, 16, 16, "float32")),
             search.SearchTask(func="relu", args=((64,),))]
    with DaskRunner(cluster.scheduler_address, number=1, repeat=1) as runner:
        opts = search.TuningOptions(population=8, generations=1, measures_per_round=2,
                                    runner=runner)
        search.TaskScheduler(tasks, strategy="round-robin").tune(6, log, opts)
    records = load_records(log)
    assert len(records) == 6 and {r.workload.key for r in records} == \
        {t.workload.key for t in tasks}
    assert all(r.result.ok for r in records)


def test_crashing_and_hanging_candidates_are_error_records_and_workers_survive(
        cluster, workload, builder):
    kinds = ["segv", "ok", "abort", "hang", "ok"]
    builds = [fake_build(k, workload, builder) for k in kinds]
    inputs = [MeasureInput(workload, (), decisions=k) for k in kinds]
    before = set(cluster.scheduler_info["workers"])
    with DaskRunner(cluster.scheduler_address, number=1, repeat=1, timeout=2.0) as runner:
        got = dict(runner.iter_run(inputs, builds, builder.build_reference))
    assert sorted(got) == list(range(len(kinds)))
    codes = [got[i].error_no for i in range(len(kinds))]
    assert codes == [E.RUNTIME_CRASH, E.NO_ERROR, E.RUNTIME_CRASH, E.RUN_TIMEOUT, E.NO_ERROR]
    assert "SIGSEGV" in got[0].error_msg and "SIGABRT" in got[2].error_msg
    assert set(cluster.scheduler_info["workers"]) == before   # no Dask worker died


def test_a_stream_is_pulled_as_workers_free_up_and_its_failures_reach_the_caller(
        cluster, workload, builder):
    """``iter_stream`` (what the Measurer uses: it compiles while pulled) keeps a few
    candidates per worker submitted (AHEAD), no more; every position comes back once; an error
    while compiling reaches the tuning; an empty stream is fine."""
    ok = fake_build("ok", workload, builder)
    done, ahead = [], []

    def compiled(n, fail_at=None):
        for i in range(n):
            if i == fail_at:
                raise RuntimeError("the compiler went away")
            ahead.append(i - len(done))     # pulled but not yet measured
            yield MeasureInput(workload, (), decisions=i), ok

    with DaskRunner(cluster.scheduler_address, number=1, repeat=1, timeout=10.0,
                    check_correctness=False) as runner:
        for j, res in runner.iter_stream(compiled(10)):
            assert res.ok and j not in done
            done.append(j)
        assert sorted(done) == list(range(10))
        assert max(ahead) <= AHEAD * len(runner.workers)
        with pytest.raises(RuntimeError, match="the compiler went away"):
            list(runner.iter_stream(compiled(3, fail_at=2)))
        assert list(runner.iter_stream(iter(()))) == []


def _start_worker(address: str, cpus: set[int], *extra: str) -> subprocess.Popen:
    """A `dask worker` process on these CPUs only (so its target has fewer cores)."""
    return subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
         "--no-nanny", "--no-dashboard", *extra], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, preexec_fn=lambda: os.sched_setaffinity(0, cpus))


def _wait_workers(client, n: int) -> None:
    client.wait_for_workers(n, timeout=60)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs for a 1-CPU worker")
def test_mismatched_and_unresourced_workers_are_named_and_skipped(cluster, workload, builder):
    cpu = min(os.sched_getaffinity(0))
    odd = _start_worker(cluster.scheduler_address, {cpu}, "--resources", "measure=1")
    bare = _start_worker(cluster.scheduler_address, os.sched_getaffinity(0))
    try:
        with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
            _wait_workers(client, 4)
            pids = {a: w.get("pid") for a, w in client.scheduler_info(n_workers=-1)
                    ["workers"].items()}
            runner = DaskRunner(client, number=1, repeat=1)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                runner.check_target(builder.target)
            text = [str(w.message) for w in caught if w.category is DaskWorkerWarning]
            assert len(runner.workers) == 2
            skipped = set(pids) - set(runner.workers)
            assert len(skipped) == 2 and len(text) == 2
            assert any("cores 1 (the task's: " in t for t in text)
            assert any("no 'measure' resource" in t for t in text)
            assert all(any(a in t for t in text) for a in skipped)
            (res,) = runner.run([MeasureInput(workload, ())],
                                builder.build([MeasureInput(workload, ())]),
                                builder.build_reference)
            assert res.ok
            runner.close()
            assert client.status == "running"   # a client we passed in stays open
    finally:
        for p in (odd, bare):
            p.terminate()
            p.wait(30)


def test_no_matching_worker_is_an_error_before_tuning(cluster, builder, tmp_path):
    host = builder.target
    other = Target(arch=host.arch, features=host.features, vector_bits=host.vector_bits,
                   cores=host.cores + 7, caches=host.caches, compiler=host.compiler,
                   compiler_version=host.compiler_version, cflags=host.cflags)
    runner = DaskRunner(cluster.scheduler_address)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DaskWorkerWarning)
        with pytest.raises(RunnerError, match=r"no Dask worker .* cores"):
            search.Measurer(tmp_path / "log.jsonl", LocalBuilder(other), runner, other)
    runner.close()
    assert not (tmp_path / "log.jsonl").exists()


def test_a_runner_started_before_its_worker_waits_for_it_then_measures(
        empty_scheduler, workload, builder):
    """Scheduler, tuning, then worker, as from three terminals: the runner says once that
    it waits (naming the address and the timeout) and measures once the worker is there."""
    runner = DaskRunner(empty_scheduler, number=1, repeat=1, worker_timeout=120.0)
    checked: list = []
    worker = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        thread = threading.Thread(target=lambda: checked.append(
            runner.check_target(builder.target) or "ok"))
        thread.start()
        deadline = time.monotonic() + 60
        while not any("waiting up to 120s" in str(w.message) for w in caught):
            assert time.monotonic() < deadline and thread.is_alive(), "the runner did not wait"
            time.sleep(0.1)
        try:     # only now, with the runner waiting, does a worker start
            worker = _start_worker(empty_scheduler, os.sched_getaffinity(0),
                                   "--resources", "measure=1")
            thread.join(150)
            assert checked == ["ok"] and len(runner.workers) == 1
            (res,) = runner.run([MeasureInput(workload, ())],
                                builder.build([MeasureInput(workload, ())]),
                                builder.build_reference)
            assert res.ok
        finally:
            runner.close()
            if worker is not None:
                worker.terminate()
                worker.wait(30)
    waits = [str(w.message) for w in caught if w.category is DaskWorkerWarning]
    assert len(waits) == 1 and empty_scheduler.split("://")[1] in waits[0]


def test_a_runner_without_workers_fails_after_its_worker_timeout(empty_scheduler, builder):
    runner = DaskRunner(empty_scheduler, worker_timeout=1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RunnerError, match=r"no Dask worker .*: the scheduler has no "
                                              r"workers \(waited 1s\)\. Start workers"):
            runner.check_target(builder.target)   # the message says it waited
    assert any("waiting up to 1s" in str(w.message) for w in caught)


def test_unreachable_scheduler_is_a_clear_error_naming_the_address(builder):
    with socket.socket() as s:      # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    runner = DaskRunner(f"dask://127.0.0.1:{port}", connect_timeout=1.0)
    with pytest.raises(RunnerError, match=rf"tcp://127.0.0.1:{port}.*dask scheduler"):
        runner.check_target(builder.target)
    with pytest.raises(ValueError, match="dask://HOST:PORT"):
        DaskRunner("dask://nowhere")
    assert parse_address("dask://h:1") == "tcp://h:1" == parse_address("h:1")


def test_cli_tune_replay_and_compare_measure_on_the_cluster(cluster, tmp_path, capsys):
    from tvmlite.cli.commands import main
    url = "dask://" + cluster.scheduler_address.split("://")[1]
    log = tmp_path / "mm.jsonl"
    small = ["--population", "8", "--batch", "4", "--quiet", "--runner", url]
    assert main(["tune", "matmul", "M=16", "N=16", "K=16", "--trials", "4", "--log",
                 str(log), *small]) == 0
    assert len(load_records(log)) == 4
    assert main(["replay", str(log), "--out", str(tmp_path / "dist"), "--runner", url]) == 0
    assert (tmp_path / "dist" / "manifest.json").is_file()
    assert main(["compare", "matmul", "M=16", "N=16", "K=16", "--trials", "2", "--seeds", "1",
                 "--out", str(tmp_path / "cmp"), *small]) == 0
    assert len(load_records(tmp_path / "cmp" / "templated_seed0.jsonl")) == 2
    assert main(["tune", "matmul", "M=16", "N=16", "K=16", "--trials", "4", "--log",
                 str(tmp_path / "x.jsonl"), "--runner", "dask://nohost"]) == 2


def test_a_model_over_a_symbolic_size_tunes_on_the_cluster(cluster, tmp_path, capsys,
                                                            symbolic_model):
    """``tvmlite tune MODEL --shape x=1,1..4,16 --runner dask://``: the dynamic task's
    waves and the static task are measured by the workers, and the summary's dispatch
    table is built from what they measured."""
    from tvmlite.cli.commands import main
    from tvmlite.search.records.best import is_retiming
    url = "dask://" + cluster.scheduler_address.split("://")[1]
    log = tmp_path / "sym.jsonl"
    assert main(["tune", str(symbolic_model), "--trials", "4", "--log", str(log),
                 "--shape", "x=1,1..4,16", "--shape", "z=1,16", "--population", "8",
                 "--batch", "2", "--no-pretrained", "--quiet", "--runner", url]) == 0
    out = capsys.readouterr().out
    trials = [r for r in load_records(log) if not is_retiming(r) and r.tuner != "dispatch"]
    assert len(trials) == 4
    assert "holds 4 of --trials 4" in out and "L=" in out, out


class Killer:
    """Kills the Dask worker that starts a candidate, ``times`` times: a client of its
    own follows the start events the measuring tasks log."""

    def __init__(self, address: str, pids: dict, times: int):
        self.pids, self.times, self.killed = dict(pids), times, []
        self.heard = threading.Event()
        self.client = distributed.Client(address, set_as_default=False)
        self.client.subscribe_topic(START_TOPIC, self.on_start)
        # subscribing is asynchronous: hear an event of our own before any task starts
        deadline = time.monotonic() + 10
        while not self.heard.is_set() and time.monotonic() < deadline:
            self.client.log_event(START_TOPIC, {"worker": "probe", "key": "probe"})
            self.heard.wait(0.2)
        assert self.heard.is_set(), "the killer never heard its own start event"

    def on_start(self, event: tuple) -> None:
        worker = event[1]["worker"]
        if worker == "probe":
            self.heard.set()
            return
        if len(self.killed) < self.times and worker in self.pids and worker not in self.killed:
            os.kill(self.pids[worker], signal.SIGKILL)
            self.killed.append(worker)

    def close(self) -> None:
        self.client.close()


def _slow_batch(cluster, workload, builder, n: int, kills: int):
    """Measure ``n`` slow candidates, killing the worker that starts one ``kills`` times."""
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as c:
        _wait_workers(c, 2)
    runner = DaskRunner(cluster.scheduler_address, number=1, repeat=1, timeout=20.0,
                        check_correctness=False)
    runner.check_target(builder.target)
    killer = Killer(cluster.scheduler_address,
                    {a: d["pid"] for a, d in runner.workers.items()}, kills)
    builds = [fake_build("slow", workload, builder)] * n
    inputs = [MeasureInput(workload, (), decisions=i) for i in range(n)]
    got: dict = {}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i, res in runner.iter_run(inputs, builds):
                assert i not in got     # each candidate exactly once
                got[i] = res
    finally:
        runner.close()
        killer.close()
    assert sorted(got) == list(range(n))
    return got, killer.killed, [str(w.message) for w in caught
                                if w.category is DaskWorkerWarning]


def test_a_worker_killed_during_a_batch_loses_nothing(cluster, workload, builder):
    """Its candidate is measured again on the other worker; nothing lost, nothing twice.
    (The nanny restarts the killed worker under a new address.)"""
    got, killed, msgs = _slow_batch(cluster, workload, builder, n=6, kills=1)
    assert len(killed) == 1
    assert all(r.ok for r in got.values())
    assert any(killed[0] in m and "the 1 matching worker(s) that remain" in m for m in msgs)


def test_a_scheduler_that_gives_up_at_once_still_gets_one_retry(workload, builder):
    """With allowed-failures 0, Dask fails the task (KilledWorker) at the first death:
    the runner submits it once more itself, and counts that death once."""
    import dask
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cl = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      resources={"measure": 1}, dashboard_address=None)
    try:
        got, killed, _ = _slow_batch(cl, workload, builder, n=2, kills=1)
    finally:
        cl.close()
    assert len(killed) == 1 and all(r.ok for r in got.values())


def test_a_candidate_whose_worker_dies_twice_is_an_error_record(cluster, workload, builder):
    got, killed, msgs = _slow_batch(cluster, workload, builder, n=1, kills=2)
    assert len(killed) == 2
    (res,) = got.values()
    assert res.error_no == E.UNKNOWN and res.error_msg.count("died while measuring it") == 2
    assert all(w in res.error_msg for w in killed)


def test_tuning_options_take_a_runner_name_or_object_and_nothing_else():
    with pytest.raises(ValueError,
                       match="TuningOptions.runner must be one of local, qemu or a Runner"):
        search.TuningOptions(runner="dask://127.0.0.1:8786")
    with pytest.raises(ValueError,
                       match=r"DaskRunner\(repeat=\.\.\.\) must be a positive int, got 0"):
        DaskRunner("dask://127.0.0.1:8786", repeat=0)
