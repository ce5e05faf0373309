"""The isolated runner: time built candidates one at a time in a worker process.

A kernel from a search may crash, hang, or compute the wrong thing. Running it inside the
tuner would let a segfault kill the search, so ``LocalRunner`` runs every candidate in a
long-lived child (``python -m tvmlite.search.measure.worker``, see worker.py), speaking JSON lines
over pipes. The runner reads each reply against a deadline (select, never a blocking
read), so a hang becomes RUN_TIMEOUT and a dead worker RUNTIME_CRASH naming the signal;
either way the worker is replaced for the next candidate. Candidates run one by one,
never concurrently, because concurrent kernels would time each other; and whatever the
worker executes (a reference, a check, a timing) runs under a ``CoreLock`` on the cores
it uses (``cores=`` pins the worker to some; default: all of this process's), so two
measuring processes on one machine take turns instead of timing each other's kernels.

Correctness: each candidate's outputs are compared with the reference build of the same
workload (``reference``, usually ``LocalBuilder.build_reference``: the schedule of
``reference.reference_steps``, bit-identical to the unscheduled build but reordered and
parallel, so fast) on seeded inputs. The worker keeps reference outputs in memory and as
.npy files in a temp dir owned by the runner (``tvmlite-ref-<pid>-*``: a folder whose
owner died without cleaning up, as after a kill -9, is deleted by the next runner that
starts), so a restarted worker does not recompute them. A reference that fails makes
every candidate of its workload UNKNOWN: without it, nothing can be called correct.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from tvmlite.errors import TvmliteError
from tvmlite.search.measure.base_runner import KernelRunner, RunnerError, Stopwatch
from tvmlite.search.measure.builder import BuildResult
from tvmlite.search.measure.core_lock import CoreLock, usable_cores
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput, declared_constants
from tvmlite.search.measure.protocol import (
    REFERENCE_TIMEOUT_FACTOR,
    REFERENCE_TIMEOUT_MIN,
    SLOW_FRACTION,
    MeasureConfig,
    Verdict,
    check_tolerances,
)
from tvmlite.target.target import Target

if TYPE_CHECKING:  # the records package imports this one
    from tvmlite.search.records.workload import Workload

# the protocol's constants stay importable from here (defined in protocol.py)
__all__ = ["LocalRunner", "REFERENCE_TIMEOUT_FACTOR", "REFERENCE_TIMEOUT_MIN", "SLOW_FRACTION"]

_START_TIMEOUT = 60.0        # a worker start on a loaded machine; not a candidate's time
_STDERR_TAIL = 10            # lines of the worker's stderr quoted when it dies
_MIN_FLUSH_BYTES = 64 << 20


def worker_env(environ: Mapping[str, str], cores: Sequence[int] | None = None,
               n_threads: int | None = None) -> dict:
    """The measuring process's environment: tvmlite importable from where it is; no idle
    BLAS threads; OpenMP threads bound to cores unless the user chose otherwise, as the
    benchmarks time kernels (an unbound kernel's threads may share a core, and each
    measurement then depends on where the scheduler put them). A worker pinned to
    ``cores`` runs one OpenMP thread per core of them (or ``n_threads``)."""
    import tvmlite
    root = os.path.dirname(os.path.dirname(os.path.abspath(tvmlite.__file__)))
    env = dict(environ, OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [root, environ.get("PYTHONPATH")])))
    env.setdefault("OMP_PROC_BIND", "true")
    if cores is not None:
        env["OMP_NUM_THREADS"] = str(n_threads or len(cores))
    return env


_REF_PREFIX = "tvmlite-ref-"
_REF_NAME = re.compile(r"^tvmlite-ref-(\d+)-")


def sweep_stale_reference_dirs(folder: str | None = None) -> list[str]:
    """Delete ``tvmlite-ref-<pid>-*`` folders of this user whose owning process is dead
    (a tuning killed with SIGKILL cannot clean up); returns the deleted paths. A folder
    of a live process, another user's, or one without a pid in its name is left alone."""
    folder = folder or tempfile.gettempdir()
    gone: list[str] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return gone
    for name in names:
        m = _REF_NAME.match(name)
        if not m:
            continue
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
            os.kill(int(m.group(1)), 0)
            continue                       # its owner is alive
        except ProcessLookupError:
            pass
        except (PermissionError, OSError, OverflowError):
            continue                       # alive under another user, or unreadable
        if st.st_uid == os.getuid() and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            gone.append(path)
    return gone


class _WorkerGone(TvmliteError):
    """The worker stopped answering: ``timed_out`` or dead (message says how)."""

    def __init__(self, msg: str, timed_out: bool):
        super().__init__(msg)
        self.timed_out = timed_out


class _Worker:
    """One worker process (pinned to ``cores`` if given): send a request, wait for its
    reply until a deadline."""

    def __init__(self, cores: Sequence[int] | None = None,
                 n_threads: int | None = None) -> None:
        env = worker_env(os.environ, cores, n_threads)
        self.stderr = tempfile.TemporaryFile(prefix="tvmlite-worker-")
        pin = ["--cores", ",".join(map(str, cores))] if cores is not None else []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tvmlite.search.measure.worker", *pin], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.stderr, bufsize=0, env=env,
            start_new_session=True)
        self._finalizer = weakref.finalize(self, _kill, self.proc, self.stderr)
        self._buf = b""
        try:
            self.pid = int(json.loads(self._read(time.monotonic() + _START_TIMEOUT, 0))["ready"])
        except (ValueError, KeyError, TypeError) as e:
            self.close()
            raise _WorkerGone(f"bad first line from the worker ({e})", timed_out=False) from None

    def request(self, msg: dict, deadline: float) -> dict:
        mark = self._stderr_size()
        data = (json.dumps(msg) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.proc.stdin.fileno(), data):]  # type: ignore[union-attr]
        except BrokenPipeError:
            raise _WorkerGone(self._death(mark), timed_out=False) from None
        return json.loads(self._read(deadline, mark))

    def _read(self, deadline: float, mark: int) -> bytes:
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise _WorkerGone("no reply before the deadline", timed_out=True)
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise _WorkerGone(self._death(mark), timed_out=False)
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def _death(self, mark: int) -> str:
        """How the worker died, with what it wrote to stderr since ``mark``."""
        try:
            rc = self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            rc = None
        start = max(mark, self._stderr_size() - (1 << 16))
        tail = os.pread(self.stderr.fileno(), 1 << 16, start).decode(errors="replace")
        self.close()
        if rc is not None and rc < 0:
            how = f"worker killed by {_signal_name(-rc)}"
        else:
            how = f"worker exited with code {rc}" if rc is not None else "worker closed its output"
        tail = "\n".join(tail.rstrip().splitlines()[-_STDERR_TAIL:])
        return f"{how}; its stderr:\n{tail}" if tail else how

    def _stderr_size(self) -> int:
        return os.fstat(self.stderr.fileno()).st_size

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self._finalizer()


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _kill(proc: subprocess.Popen, stderr: Any) -> None:
    """Kill the worker's process group (anything a kernel spawned goes too), reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    for f in (proc.stdin, proc.stdout, stderr):
        if f is not None:   # the worker's pipes always exist; mypy cannot know
            f.close()


class LocalRunner(KernelRunner):
    """Measures built candidates in an isolated worker; see the module docstring.

    ``config`` (a ``MeasureConfig``) is the measuring protocol: ``number`` calls make one
    repeat (``min_repeat_ms`` raises it until a repeat lasts that long); a result has
    ``repeat`` costs in seconds per call. ``timeout`` bounds each candidate's check and
    timing. ``flush_cache`` evicts the caches before each repeat; ``n_threads`` sets the
    kernel's OpenMP threads; ``seed`` picks the inputs. The same names as keyword
    arguments (``LocalRunner(number=10)``) build the config, or replace its fields (one
    left at None keeps the config's value).

    ``cores`` pins the worker to those cores (``os.sched_setaffinity``, one OpenMP thread
    per core unless ``n_threads``), e.g. ``cores=(1,), n_threads=1`` for one worker per
    core; the runner then locks only those cores while it executes (see core_lock.py).
    Default: the worker may use every core of this process, and locks them all.
    """

    def __init__(self, number: int | None = None, repeat: int | None = None,
                 min_repeat_ms: float | None = None, timeout: float | None = None,
                 flush_cache: bool | None = None, check_correctness: bool | None = None,
                 n_threads: int | None = None, seed: int | None = None,
                 cores: Sequence[int] | None = None, *, config: MeasureConfig | None = None,
                 cutoff_ratio: float | None = None, cold_weights: bool | None = None):
        given = {"number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms,
                 "timeout": timeout, "flush_cache": flush_cache, "cold_weights": cold_weights,
                 "check_correctness": check_correctness, "n_threads": n_threads, "seed": seed,
                 "cutoff_ratio": cutoff_ratio}
        super().__init__(config, {k: v for k, v in given.items() if v is not None})
        if cores is not None:
            allowed = set(usable_cores())
            if isinstance(cores, (str, bytes)) or not hasattr(cores, "__iter__") \
                    or not list(cores) or any(isinstance(c, bool) or not isinstance(c, int)
                                              or c not in allowed for c in cores):
                raise ValueError(f"LocalRunner(cores={cores!r}): use a non-empty tuple of "
                                 f"cores this process may run on ({sorted(allowed)}), or "
                                 f"None for all of them")
            cores = tuple(sorted(set(cores)))
        self.cores = cores
        self._lock = CoreLock(cores if cores is not None else usable_cores())
        self._worker: _Worker | None = None
        self._ref_dir: tempfile.TemporaryDirectory | None = None
        self._refs_ready: set[str] = set()
        self._flush_bytes: int | None = None

    # -- public ----------------------------------------------------------------------
    name = "local"
    emulated = False

    def check_target(self, target: Target) -> None:
        """This machine runs code for its own architecture and ISA features only."""
        host = Target.host()
        if target.arch != host.arch or not set(target.features) <= set(host.features):
            missing = sorted(set(target.features) - set(host.features))
            raise RunnerError(
                f"the local runner cannot run code for target {target.arch}"
                f"{' with ' + ', '.join(missing) if missing else ''}: this machine is "
                f"{host.arch}; use an emulated runner (--runner qemu) or a runner on a "
                f"machine of that target")

    @property
    def worker_pid(self) -> int | None:
        """The live worker's pid (None before the first candidate or after close)."""
        return self._worker.pid if self._worker is not None and self._worker.alive() else None

    def close(self) -> None:
        """Kill the worker and delete the reference cache."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        if self._ref_dir is not None:
            self._ref_dir.cleanup()
            self._ref_dir = None
        super().close()
        self._refs_ready.clear()

    # -- one candidate -----------------------------------------------------------------
    def run_kernel(self, inp: MeasureInput, build: BuildResult, prepared: dict | None,
                   clock: Stopwatch) -> tuple[float, ...]:
        """Check (against ``prepared``, the check part of the request) and time one
        candidate in the worker, under the core lock."""
        worker = self._live_worker()
        with self._lock:   # waiting for another process's timing is not ours either
            clock.restart()
            if prepared is not None and prepared["ref"]["path"] not in self._refs_ready:
                # the reference can be slow on big shapes; it runs once per workload
                deadline = time.monotonic() + self.config.reference_timeout
                self._compute_reference(inp.workload, prepared, worker, deadline)
                worker = self._live_worker()
                clock.restart()
            deadline = time.monotonic() + self.timeout
            request = self._request(build, prepared, self.cutoff(inp),
                                    declared_constants(inp.decisions, inp.workload))
            reply = self._ask(worker, request, deadline)
        return tuple(reply["costs"])

    def _ask(self, worker: _Worker, msg: dict, deadline: float) -> dict:
        """The worker's reply, or a Verdict: RUN_TIMEOUT, RUNTIME_CRASH, or its error."""
        try:
            reply = worker.request(msg, deadline)
        except _WorkerGone as gone:
            self._worker = None
            if gone.timed_out:
                raise Verdict(MeasureErrorNo.RUN_TIMEOUT,
                               f"ran longer than timeout={self.timeout}s (check and timing); "
                               f"the worker was killed") from None
            raise Verdict(MeasureErrorNo.RUNTIME_CRASH, str(gone)) from None
        if "error" in reply:
            raise Verdict(MeasureErrorNo.parse(reply["error"]), reply["msg"])
        return reply

    def _live_worker(self) -> _Worker:
        if self._worker is None or not self._worker.alive():
            try:
                self._worker = _Worker(self.cores, self.n_threads)
            except (_WorkerGone, OSError) as e:
                self._worker = None
                raise Verdict(MeasureErrorNo.UNKNOWN, f"the measuring worker (python -m "
                               f"tvmlite.search.measure.worker) did not start: {e}") from None
        return self._worker

    def _request(self, build: BuildResult, check: dict | None, cutoff: float = 0.0,
                 constants: Sequence[str] = ()) -> dict:
        return {"op": "measure", "lib": build.lib_path, "decl": build.decl,
                "kernel": build.kernel, "args": [a.to_json() for a in build.args],
                "sizes": list(build.sizes), "packs": list(build.packs),
                "check": check, "seed": self.seed, "number": self.number,
                "repeat": self.repeat, "min_repeat_ms": self.min_repeat_ms,
                "flush_bytes": self._flush() if self.flush_cache or self.cold_weights else 0,
                "cold": list(constants) if self.cold_weights else None,
                "slow_seconds": self.config.slow_seconds, "cutoff": cutoff,
                "n_threads": self.n_threads}

    # -- the reference ---------------------------------------------------------------------
    def prepare_reference(self, workload: Workload, ref: BuildResult) -> dict:
        """The check part of a request for ``workload``: where the worker keeps the
        reference outputs, how to compute them, the tolerances. Nothing runs yet: the
        worker computes them on the first candidate, under the core lock."""
        if self._ref_dir is None:
            sweep_stale_reference_dirs()
            self._ref_dir = tempfile.TemporaryDirectory(prefix=f"{_REF_PREFIX}{os.getpid()}-")
        name = hashlib.sha256(json.dumps([workload.key, ref.lib_path, self.seed]).encode())
        return {"ref": {"path": os.path.join(self._ref_dir.name, name.hexdigest()[:32]),
                        "lib": ref.lib_path, "decl": ref.decl, "kernel": ref.kernel,
                        "args": [a.to_json() for a in ref.args], "seed": self.seed,
                        "sizes": list(ref.sizes)},
                "tol": check_tolerances(workload, ref)}

    def _compute_reference(self, workload: Workload, check: dict, worker: _Worker,
                           deadline: float) -> None:
        """Have the worker compute (and store) the reference outputs. A failure here is
        the reference's, so it marks the whole workload UNKNOWN."""
        try:
            self._ask(worker, {"op": "reference", "ref": check["ref"]}, deadline)
        except Verdict as v:
            raise self.references.fail(workload, f"{v.error_no.name}: {v}") from None
        self._refs_ready.add(check["ref"]["path"])

    def _flush(self) -> int:
        """Bytes written between repeats to evict the caches: 2 x L3, at least 64 MiB."""
        if self._flush_bytes is None:
            from tvmlite.target.target import CompilerNotFoundError, Target
            try:
                l3 = Target.host().cache_bytes("L3") or 0
            except CompilerNotFoundError:
                l3 = 0
            self._flush_bytes = max(2 * l3, _MIN_FLUSH_BYTES)
        return self._flush_bytes

