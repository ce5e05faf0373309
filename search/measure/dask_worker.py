"""What runs inside a Dask worker for ``DaskRunner``: describe this machine, and measure
one candidate in an isolated measuring process.

A Dask worker is a long-lived process that may serve many tunings; a kernel that
segfaults, aborts or hangs must not take it down. So a Dask task never loads a kernel
itself: it hands the candidate to a ``LocalRunner`` kept in this process, whose measuring
subprocess (``python -m tvmlite.search.measure.worker``) loads and times it. A crash kills
that subprocess and comes back as a RUNTIME_CRASH record; a hang is killed at the
runner's timeout and comes back as RUN_TIMEOUT. The Dask worker keeps serving.

The client compiled the candidate and ships the library's bytes (``Job``); they are
written here under their sha256 (the loader caches by path, so equal paths must mean equal
bytes), measured, and the candidate's file deleted again. Reference libraries stay: the
runner keeps each workload's reference outputs beside them.

Pinning: workers that share a machine are each given their own cores by the client
(``Config.cores``, by worker address), so two of them timing at once do not time each
other. The measuring subprocess and all its threads are bound to those cores
(``os.sched_setaffinity``) before it loads a kernel, so OpenMP starts on them only.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import platform
import socket
import tempfile
import threading
from dataclasses import dataclass

from tvmlite.search.measure.builder import BuildResult
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput, MeasureResult
from tvmlite.search.measure.protocol import MeasureConfig
from tvmlite.search.measure.runner import LocalRunner
from tvmlite.target.target import CompilerNotFoundError, Target

__all__ = ["Config", "Job", "START_TOPIC", "describe_worker", "measure_job"]

START_TOPIC = "tvmlite-measure-start"   # event a worker logs when it starts a candidate


@dataclass(frozen=True)
class Config:
    """How to measure (the client's ``MeasureConfig``) and where: the cores each worker
    address measures on (absent: not pinned)."""
    measure: MeasureConfig = MeasureConfig()
    cores: tuple = ()      # ((worker address, (cpu, ...)), ...)

    @property
    def params(self) -> tuple:
        """The protocol as sorted (name, value) pairs (LocalRunner's keyword arguments)."""
        return tuple(sorted(self.measure.to_json().items()))

    def cores_of(self, address: str) -> tuple[int, ...] | None:
        return dict(self.cores).get(address)


@dataclass(frozen=True)
class Job:
    """One candidate as it travels to a worker: plain dataclasses and bytes only."""
    inp: MeasureInput
    build: BuildResult
    lib: bytes
    reference: BuildResult | None = None
    reference_lib: bytes = b""


def describe_worker() -> dict:
    """This machine as the client needs it to choose workers: its Target (None and an
    error when it cannot be detected), host name, the CPUs this process may use, pid."""
    try:
        target, error = Target.host().to_json(), ""
    except (CompilerNotFoundError, OSError, ValueError) as e:
        target, error = None, f"its target could not be detected: {e}"
    return {"target": target, "error": error, "host": socket.gethostname(),
            "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else list(range(os.cpu_count() or 1)),
            "pid": os.getpid(), "python": platform.python_version()}


# -- measuring ---------------------------------------------------------------------------

_RUNNERS: dict[tuple, LocalRunner] = {}
_LOCK = threading.Lock()            # one candidate at a time in this process
_LIBS: list[tempfile.TemporaryDirectory] = []


def _lib_dir() -> str:
    if not _LIBS:
        _LIBS.append(tempfile.TemporaryDirectory(prefix="tvmlite-dask-libs-"))
    return _LIBS[0].name


def _runner(config: Config, cores: tuple[int, ...] | None) -> LocalRunner:
    key = (config.measure, cores)
    if key not in _RUNNERS:
        for old in _RUNNERS.values():    # another tuning's settings: free its process
            old.close()
        _RUNNERS.clear()
        measure = config.measure
        if cores and measure.n_threads is None:   # OpenMP's default would be the machine's
            measure = dataclasses.replace(measure, n_threads=len(cores))
        # pinned to this worker's cores, and locking only those while it times
        _RUNNERS[key] = LocalRunner(cores=cores or None, config=measure)
    return _RUNNERS[key]


def _store(data: bytes) -> str:
    """The library ``data`` as a file named by its content (written once)."""
    path = os.path.join(_lib_dir(), hashlib.sha256(data).hexdigest()[:40] + ".so")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return path


def measure_job(job: Job, config: Config) -> MeasureResult:
    """Measure one candidate here, in this worker's isolated measuring process. Runs as
    a Dask task; announces its start (``START_TOPIC``) so the client knows which
    candidates a dying worker was timing."""
    address = None
    try:
        from distributed import get_worker
        worker = get_worker()
        address = worker.address
        worker.log_event(START_TOPIC, {"key": worker.get_current_task(), "worker": address})
    except (ImportError, ValueError):
        pass     # called outside a Dask worker (tests of this function): not pinned
    with _LOCK:
        runner = _runner(config, config.cores_of(address) if address else None)
        build = job.build
        lib = _store(job.lib) if build.ok else None
        if lib is not None:
            build = dataclasses.replace(build, lib_path=lib)
        ref = job.reference
        if ref is not None and ref.ok:
            ref = dataclasses.replace(ref, lib_path=_store(job.reference_lib))
        reference = None if ref is None else (lambda _workload: ref)
        try:
            (result,) = runner.run([job.inp], [build], reference=reference)
        except (OSError, ValueError) as e:
            result = MeasureResult(error_no=MeasureErrorNo.UNKNOWN,
                                   error_msg=f"the Dask worker {address} could not measure: "
                                             f"{type(e).__name__}: {e}",
                                   build_seconds=build.seconds)
        finally:
            if lib is not None and (ref is None or lib != ref.lib_path):
                try:
                    os.unlink(lib)
                except OSError:
                    pass
    return result
