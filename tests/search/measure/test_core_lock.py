"""Core locks: measuring processes take turns for the cores they time on; disjoint cores
do not wait for each other; the runner holds the lock of its cores while it executes a
candidate, and a pinned runner's worker runs on its cores only."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tvmlite.schedule.schedule import Schedule
from tvmlite.search.measure.builder import LocalBuilder
from tvmlite.search.measure.core_lock import CoreLock, lock_dir, usable_cores
from tvmlite.search.measure.inputs import MeasureInput
from tvmlite.search.measure.runner import LocalRunner
from tvmlite.search.records.workload import Workload

ROOT = Path(__file__).resolve().parents[3]

HOLDER = """
import sys, time
from tvmlite.search.measure.core_lock import CoreLock
cores, folder, hold = [int(c) for c in sys.argv[1].split(",")], sys.argv[2], sys.argv[3]
lock = CoreLock(cores, folder)
asked = time.time()
with lock:
    got = time.time()
    print("held", asked, got, flush=True)
    if hold == "until-told":
        sys.stdin.readline()
    released = time.time()
print("released", released, flush=True)
"""


def _holder(cores: str, folder: Path, hold: str = "no") -> subprocess.Popen:
    """A process that takes the lock of ``cores``, prints when it holds it, and (with
    hold="until-told") keeps it until a line arrives on its stdin."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-c", HOLDER, cores, str(folder), hold],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)


def _release(proc: subprocess.Popen) -> float:
    proc.stdin.write("go\n")              # type: ignore[union-attr]
    proc.stdin.flush()                    # type: ignore[union-attr]
    return float(proc.stdout.readline().split()[1])   # type: ignore[union-attr]


def _held_at(proc: subprocess.Popen) -> tuple[float, float]:
    _, asked, got = proc.stdout.readline().split()   # type: ignore[union-attr]
    return float(asked), float(got)


def test_a_second_process_waits_for_the_cores_and_disjoint_cores_do_not(tmp_path):
    first = _holder("0,1", tmp_path, "until-told")
    _held_at(first)                                   # holds cores 0 and 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["core-0.lock", "core-1.lock"]
    second = _holder("1", tmp_path)                   # overlaps on core 1: must wait
    time.sleep(1.0)
    released = _release(first)
    _, got = _held_at(second)
    assert got >= released, "the second locker got core 1 while the first held it"
    first.wait(30), second.wait(30)

    # lockers of different cores hold at the same time: b gets core 1 while a keeps 0
    a = _holder("0", tmp_path, "until-told")
    _held_at(a)
    b = _holder("1", tmp_path)
    _held_at(b)                                       # returns only if b got its lock
    assert b.wait(30) == 0
    _release(a)
    a.wait(30)


def test_lock_folder_is_per_user_and_the_lock_is_not_reentrant(tmp_path):
    folder = lock_dir()
    assert folder.name == f"tvmlite-locks-{os.getuid()}" and folder.is_dir()
    assert folder.stat().st_mode & 0o077 == 0
    lock = CoreLock([1, 0, 1], tmp_path)
    assert lock.cores == (0, 1)
    with lock:
        assert lock.held
        with pytest.raises(RuntimeError, match="already held"):
            lock.acquire()
    assert not lock.held
    for bad in ([], [-1], [True], ["0"]):
        with pytest.raises(ValueError, match="CoreLock"):
            CoreLock(bad)


@pytest.fixture(scope="module")
def candidate():
    wl = Workload.from_op("matmul", 16, 16, 16)
    s = Schedule.create(wl.outputs)
    s[wl.outputs[0]].split("i", factor=4)
    inp = MeasureInput(wl, tuple(s.steps))
    builder = LocalBuilder()
    return inp, builder.build([inp])[0], builder


def test_the_runner_waits_for_its_cores_before_executing(candidate):
    inp, build, builder = candidate
    core = usable_cores()[0]
    done = []
    with LocalRunner(cores=(core,), n_threads=1) as runner:
        builder.build_reference(inp.workload)
        with CoreLock((core,)):           # another measuring process, say, is timing
            worker = threading.Thread(target=lambda: done.append(
                runner.run([inp], [build], builder.build_reference)[0]))
            worker.start()
            time.sleep(1.0)
            assert not done, "the runner executed a candidate on a core held by another"
        worker.join(60)
    assert done and done[0].ok, done


def test_a_pinned_runner_runs_its_worker_on_those_cores_only(candidate):
    inp, build, builder = candidate
    core = usable_cores()[-1]
    with LocalRunner(cores=(core,), n_threads=1) as runner:
        [res] = runner.run([inp], [build], builder.build_reference)
        assert res.ok, res.error_msg
        assert os.sched_getaffinity(runner.worker_pid) == {core}
    with pytest.raises(ValueError, match="cores"):
        LocalRunner(cores=(max(usable_cores()) + 64,))
    with pytest.raises(ValueError, match="cores"):
        LocalRunner(cores=())
