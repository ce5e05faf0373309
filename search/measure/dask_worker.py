"""What runs inside a Dask worker for ``DaskRunner``: describe this machine, and measure
one candidate in an isolated measuring process.

A Dask worker is a long-lived process that may serve many tunings; a kernel that
segfaults, aborts or hangs must not take it down. So a Dask task never loads a kernel
itself: it hands the candidate to a ``LocalRunner`` kept in this process, whose measuring
subprocess (``python -m tvmlite.search.measure.worker``) loads and times it. A crash kills
that subprocess and comes back as a RUNTIME_CRASH record; a hang is killed at the
runner's timeout and comes back as RUN_TIMEOUT. The Dask worker keeps serving.

Compiling: either the client compiled the candidate and ships the library's bytes
(``Job.lib``), written here under their sha256 (the loader caches by path, so equal paths
must mean equal bytes), measured, and the candidate's file deleted again; or, on a worker
whose compiler is the client's (``compiler_identity``, compared by the client once per
worker), the client ships the lowered C and its target (``Job.target``: the compiler path
and the exact flags) and this worker compiles it (``LocalBuilder.compile_lowered``, into
this machine's kernel cache) on its own cores, then measures it. A compile error is the
candidate's error record, as on the client. Reference libraries are always shipped (one
per workload) and stay: the runner keeps each workload's reference outputs beside them.

Why the identity is enough for "the record's binary is the one its target names": the
bytes a compile gives are decided by the compiler driver and the programs it runs (cc1,
as, collect2: ``-###`` names them, each hashed), the flags (the target's, shipped, so
equal by construction; what ``-march=native`` resolves to on this CPU is in the ``-###``
commands), and the source (shipped). Headers and libgomp are those of the installation the version
line and hashes pin; the library links them dynamically, as it would from the client.

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
import re
import shutil
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass

from tvmlite.search.measure.builder import BuildResult, LocalBuilder
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput, MeasureResult
from tvmlite.search.measure.protocol import MeasureConfig
from tvmlite.search.measure.runner import LocalRunner
from tvmlite.target.target import CompilerNotFoundError, Target

__all__ = ["Config", "Job", "START_TOPIC", "describe_worker", "compiler_identity",
           "measure_job"]

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
    """One candidate as it travels to a worker: plain dataclasses and bytes only. A
    ``lowered`` build (no ``lib``) is compiled here for ``target``, within
    ``compile_timeout`` seconds (the client's builder's) counting its lowering."""
    inp: MeasureInput
    build: BuildResult
    lib: bytes
    reference: BuildResult | None = None
    reference_lib: bytes = b""
    target: Target | None = None
    compile_timeout: float = 30.0


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


_TEMP_FILE = re.compile(r"\S*/cc[A-Za-z0-9]{6}\.[A-Za-z]+")   # gcc's temp names in -###


def compiler_identity(target: Target) -> dict:
    """What decides the bytes ``target``'s compiler makes of a source on this machine:
    the compiler's path, its whole ``--version`` output, the sha256 of its binary, the
    commands ``-###`` says the target's flags run (``-march=native`` resolved for this
    CPU; gcc's temp file names blanked) and the sha256 of each program they run. Equal
    identities build equal libraries; ``{"error": ...}`` when the compiler does not run
    here. Not cached: a long-lived worker may have had its compiler upgraded since the
    last tuning (the client asks each worker once per connection, a fraction of a
    second)."""
    path = shutil.which(target.compiler)
    if path is None:
        return {"error": f"the compiler {target.compiler!r} is not there"}
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True,
                                 timeout=30, cwd="/")
        # a whole build of a library as compile_shared runs it (-lm is its link library)
        dry = subprocess.run([path, *target.cflags, "-###", "-x", "c", os.devnull, "-o",
                              os.devnull, "-lm"], capture_output=True, text=True,
                             timeout=30, cwd="/")
    except (OSError, subprocess.SubprocessError) as e:
        return {"error": f"the compiler {target.compiler!r} does not run: {e}"}
    if version.returncode != 0 or dry.returncode != 0:
        return {"error": f"the compiler {target.compiler!r} failed on --version or -### "
                         f"with the target's flags: {(version.stderr + dry.stderr)[-300:]}"}
    commands = [_TEMP_FILE.sub("TMP", line.strip()) for line in dry.stderr.splitlines()
                if line.startswith(" ")]
    programs = {}
    for line in commands:
        prog = line.split()[0].strip('"')
        found = prog if os.path.isabs(prog) else shutil.which(prog)
        programs[prog] = _sha256(found) if found else "missing"
    return {"error": "", "path": path, "version": version.stdout, "sha256": _sha256(path),
            "commands": commands, "programs": programs}


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as e:
        return f"unreadable: {e.strerror}"
    return h.hexdigest()


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
        cores = config.cores_of(address) if address else None
        runner = _runner(config, cores)
        build, compiled_here = job.build, job.build.lowered
        if compiled_here:
            build = _compile(job, cores)
        lib = _store(job.lib) if build.ok and not compiled_here else None
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
    if compiled_here:
        result = dataclasses.replace(result, compiled_on=address or socket.gethostname())
    return result


def _compile(job: Job, cores: tuple[int, ...] | None) -> BuildResult:
    """The job's lowered build compiled here, on this worker's cores only (a compile
    beside another worker's timing on a shared machine must not use its cores): the
    compiler inherits the affinity of the thread that starts it."""
    if job.target is None:
        return dataclasses.replace(job.build, error_no=MeasureErrorNo.UNKNOWN, error_msg=(
            "the client sent C without the target to compile it for"))
    builder = LocalBuilder(job.target, n_parallel=1, timeout=job.compile_timeout)
    pin = bool(cores) and hasattr(os, "sched_setaffinity")
    before = os.sched_getaffinity(0) if pin else None
    try:
        if pin and cores:
            os.sched_setaffinity(0, cores)   # this thread, and the compiler it starts
        return builder.compile_lowered(job.build)
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)
