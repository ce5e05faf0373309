"""A real `python -m tvmlite tune` killed at random moments loses at most the candidate
being timed; two tunings into one log share its budget; a bad log path is refused
before any work.

The witness of what was measured is the measuring worker itself: with
TVMLITE_WORKER_TRACE it appends a line per candidate it timed, before replying, and it
outlives a kill -9 of the tuner (its own session). So "measured" is counted by a process
the kill does not touch, and compared with the records in the log. The CLI's own hook
(TVMLITE_TRACE_TRIALS) prints a line per candidate after its record is logged.

A tuning that a test signals gets a budget it cannot finish (``UNENDING`` trials), so it
is still running when the signal comes, whatever this CPU's speed; the test waits for
its log to hold records (bounded by ``WAIT``) and signals it then."""
from __future__ import annotations

import glob
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tvmlite.search.measure.inputs import MeasureErrorNo
from tvmlite.search.records.record import load_records

ROOT = Path(__file__).resolve().parents[3]
BUILD_ERRORS = {MeasureErrorNo.INVALID_SCHEDULE, MeasureErrorNo.COMPILE_ERROR,
                MeasureErrorNo.BUILD_TIMEOUT}
TUNE = ["-m", "tvmlite", "tune", "matmul", "M=32", "N=32", "K=32", "--population", "8"]
UNENDING = 100_000   # trials: no CPU measures this many before the test's signal
WAIT = 180.0         # seconds: the longest a test waits for a tuning to reach a state


class Tuning:
    """One `tvmlite tune` process with both trace hooks on; stderr read as it comes."""

    def __init__(self, tmp: Path, name: str, trials: int = 64, log: Path | None = None,
                 extra: tuple = ()):
        self.log = log or tmp / f"{name}.jsonl"
        self.trace = tmp / f"{name}.worker"
        env = dict(os.environ, PYTHONPATH=str(ROOT), TVMLITE_TRACE_TRIALS="1",
                   TVMLITE_WORKER_TRACE=str(self.trace), OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen(
            [sys.executable, *TUNE, "--trials", str(trials), "--log", str(self.log), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            preexec_fn=_as_in_a_terminal)
        self.err: list[str] = []
        self.out = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:  # type: ignore[union-attr]
            self.err.append(line)

    def timed(self) -> list[str]:
        return self.trace.read_text().splitlines() if self.trace.exists() else []

    def wait_for_timing(self, deadline: float = WAIT) -> None:
        end = time.monotonic() + deadline
        while not self.timed():
            assert self.proc.poll() is None, "".join(self.err)[-3000:]
            assert time.monotonic() < end, "no candidate was timed"
            time.sleep(0.05)

    def wait_for_records(self, n: int, deadline: float = WAIT) -> None:
        """Poll the log until it holds ``n`` records; the tuning must still be running."""
        end = time.monotonic() + deadline
        while len(load_records(self.log, missing_ok=True)) < n:
            assert self.proc.poll() is None, "".join(self.err)[-3000:]
            assert time.monotonic() < end, f"the log did not reach {n} record(s)"
            time.sleep(0.05)

    def finish(self) -> int:
        try:
            rc = self.proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self._reader.join(timeout=10)
            pytest.fail(f"the tuning did not end {WAIT:.0f} s after its signal; its stderr:\n"
                        + "".join(self.err)[-3000:])
        self.out = self.proc.stdout.read()  # type: ignore[union-attr]
        self._reader.join(timeout=10)
        return rc

    def settle(self) -> None:
        """Wait until every worker that timed something is gone (an orphaned worker
        exits within a second), so its trace is final."""
        end = time.monotonic() + 30
        pids = {int(p) for p in re.findall(r'"pid": (\d+)', "\n".join(self.timed()))}
        while any(_alive(p) for p in pids):
            assert time.monotonic() < end, f"workers {pids} still alive"
            time.sleep(0.1)

    def counts(self) -> tuple[int, int, int, int]:
        """(timed by the worker, records in the log, of them executed by the worker,
        trial lines the CLI printed after logging)."""
        recs = load_records(self.log, missing_ok=True)
        executed = sum(r.result.error_no not in BUILD_ERRORS for r in recs)
        printed = sum(line.startswith("trial ") for line in self.err)
        return len(self.timed()), len(recs), executed, printed


def _as_in_a_terminal() -> None:
    """Ctrl-C reaches the tuning as it would in a terminal: a shell runs background jobs
    with SIGINT ignored, and a child inherits that (CI started with ``&`` did), so Python
    would install no KeyboardInterrupt handler and the SIGINT test would wait forever."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:   # a zombie is dead for our purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _ref_dirs(pid: int) -> list[str]:
    return glob.glob(os.path.join(tempfile.gettempdir(), f"tvmlite-ref-{pid}-*"))


def test_kill_9_and_ctrl_c_lose_at_most_the_candidate_being_timed(tmp_path):
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng = random.Random(seed)
    kills = [Tuning(tmp_path, f"kill{i}", trials=UNENDING) for i in range(2)]
    for t in kills:
        t.wait_for_timing()
    for t in kills:                       # random moments after measuring began
        time.sleep(rng.uniform(0.0, 0.5))
        assert t.proc.poll() is None      # the budget cannot run out first
        t.proc.send_signal(signal.SIGKILL)
    for t in kills:
        assert t.finish() == -signal.SIGKILL
        assert _ref_dirs(t.proc.pid)      # left behind: a kill -9 cannot clean up
    # Ctrl-C and SIGTERM: a clean stop, a message about what is really in the log; these
    # runs start after the killed ones died, so their start sweeps the killed ones' folders
    stops = [(Tuning(tmp_path, "int", trials=UNENDING), signal.SIGINT, 130),
             (Tuning(tmp_path, "term", trials=UNENDING), signal.SIGTERM, 128 + signal.SIGTERM)]
    for t in kills:
        t.settle()
        timed, logged, executed, printed = t.counts()
        assert timed >= 1
        assert executed >= timed - 1, (seed, timed, executed)   # at most one lost
        assert printed <= logged <= printed + 1, (seed, printed, logged)
    for t, _, _ in stops:                 # something logged, so the stop message counts it
        t.wait_for_records(1)
    for t, sig, _ in stops:
        time.sleep(rng.uniform(0.0, 0.5))
        assert t.proc.poll() is None
        t.proc.send_signal(sig)
    for t, sig, code in stops:
        assert t.finish() == code, "".join(t.err)[-2000:]
        t.settle()
        timed, logged, executed, printed = t.counts()
        assert executed >= timed - 1 and printed <= logged, (seed, sig)
        err = "".join(t.err)
        assert "Traceback" not in err
        m = re.search(r"holds (\d+) record\(s\) of matmul", err)
        assert m and int(m.group(1)) == logged, err[-1500:]
        assert not _ref_dirs(t.proc.pid)              # cleaned up on the way out
    for t in kills:   # a kill -9 cannot clean up; the next start swept them (owner dead)
        assert not _ref_dirs(t.proc.pid)


def test_two_tunings_into_one_log_share_its_budget(tmp_path):
    log = tmp_path / "shared.jsonl"
    a = Tuning(tmp_path, "a", trials=8, log=log, extra=("--resume", "--batch", "4"))
    b = Tuning(tmp_path, "b", trials=8, log=log, extra=("--resume", "--batch", "4"))
    assert a.finish() == 0 and b.finish() == 0, "".join(a.err + b.err)[-3000:]
    recs = load_records(log)
    assert len(recs) == 8                             # --trials is the log's count
    for t in (a, b):
        m = re.search(r"(\d+) trial\(s\) in the log, (\d+) new", t.out)
        assert m and int(m.group(1)) == 8, t.out
    news = [int(re.search(r"in the log, (\d+) new", t.out).group(1)) for t in (a, b)]
    assert sum(news) == 8
    best = min((r for r in recs if r.result.ok), key=lambda r: r.mean_cost)
    for t in (a, b):                                  # both report the log's best
        assert f"{best.gflops:.2f} GFLOP/s" in t.out, t.out


@pytest.mark.parametrize("make_bad", ["under_a_file", "read_only"])
def test_an_unwritable_log_is_refused_before_any_work(tmp_path, make_bad):
    if make_bad == "under_a_file":
        (tmp_path / "notes.txt").write_text("a file\n")
        log = tmp_path / "notes.txt" / "sub" / "log.jsonl"
        why = "is a file, not a folder"
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes through file permissions")
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o500)
        log = folder / "log.jsonl"
        why = "not writable"
    t = Tuning(tmp_path, "bad", trials=4, log=log)
    code = t.finish()
    err = "".join(t.err)
    assert code == 2 and why in err and str(log) in err and "Errno" not in err, err
    assert "Traceback" not in err and not t.timed() and "trial " not in err
    assert not log.exists()


def test_an_interrupt_before_anything_was_logged_claims_no_file(tmp_path, monkeypatch, capsys):
    from tvmlite import cli
    from tvmlite.search.template_free.task import SearchTask

    def interrupted(self, *args, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(SearchTask, "tune", interrupted)
    log = tmp_path / "never.jsonl"
    code = cli.main(["tune", "matmul", "M=16", "N=16", "K=16", "--trials", "4",
                     "--log", str(log)])
    err = capsys.readouterr().err
    assert code == 130 and not log.exists()
    assert "nothing was logged" in err and "does not exist" in err and "--resume" not in err
    assert "every measured record is in" not in err


def test_a_tuning_on_a_busy_machine_says_so_before_it_measures(tmp_path, monkeypatch, capsys):
    from tvmlite import cli
    from tvmlite.cli import args as cli_args
    from tvmlite.search.template_free.task import SearchTask

    def interrupted(self, *args, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(SearchTask, "tune", interrupted)
    monkeypatch.setattr(cli_args, "machine_busy_warning",
                        lambda: "warning: this machine is busy (load average 5.0 on 2 cores)")
    cli.main(["tune", "matmul", "M=16", "N=16", "K=16", "--trials", "4",
              "--log", str(tmp_path / "busy.jsonl")])
    assert "this machine is busy" in capsys.readouterr().err
