"""``DaskRunner``: measure candidates on the workers of a Dask distributed cluster.

Measuring is what a tuning waits for, and several identical machines can measure at
once. Dask brings the scheduling, worker health and a live dashboard; this module adds
what tuning needs on top:

- **Where compiling happens** (``compile_on``). A client that compiles every candidate
  caps the trials per minute however many workers there are on other machines, so with
  ``"auto"`` each worker whose compiler is the client's -- the same path, ``--version`` output,
  binaries and resolved flags (``dask_worker.compiler_identity``, compared once per
  worker when it is first seen) -- compiles what it measures: the client only lowers
  (``LocalBuilder.iter_lower``) and ships the C with the target, whose flags the worker
  compiles it with. The binary a record describes is then still the one its target
  names, and the record says which worker built it (``compiled_on``). The client
  compiles (``LocalBuilder``, through its content-addressed cache) and ships the
  library's bytes for the other workers (``"auto"``, a share of the candidates in
  proportion to their number), or for all (``"client"``: workers then need Python and
  tvmlite, not the client's compiler); ``"worker"`` measures only on workers that can
  compile. A compile error on a worker is the candidate's error record, in the words a
  compile on the client gives.
- **Isolation.** A worker never loads a kernel in its own process: ``dask_worker`` runs
  each candidate in the isolated measuring process of a ``LocalRunner`` living in the
  worker, so a crash or hang is an error record and the Dask worker keeps serving.
- **Exclusivity.** Every candidate needs one unit of the Dask resource ``measure``; a
  worker started with ``--resources measure=1`` times one candidate at a time. Workers
  that share a machine are each pinned to their own cores (``pin=True``), so they can time
  at once without timing each other.
- **Any start order.** Scheduler, workers and tuning are started from three terminals in
  any order: a runner that finds the scheduler without workers waits for one (up to
  ``worker_timeout``, saying so once), and fails only when none came.
- **Comparable records.** Every worker reports its target; only workers whose arch,
  features, vector width and cores equal the task's measure it. Others are named in a
  warning and not used; if none is left, ``check_target`` raises before any tuning starts.
- **Faults.** A worker that dies while timing a candidate: Dask reschedules it on another
  worker once; a second death records it as an error with the reason. Each candidate is
  yielded exactly once, whatever Dask does; the client alone writes the log (the
  ``Measurer``). The run goes on with the workers that remain, and a warning says how many.

Map: ``DaskRunner`` (its workers, chosen and followed by dask_pool.py's ``WorkerPool``,
whose pure rules -- which worker may measure, on which cores, which may compile -- are
dask_cluster.py; accepts_sources and where each candidate is compiled: _lowered_job,
_placed; iter_run and its fault handling).
"""
from __future__ import annotations

import dataclasses
import queue
import uuid
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

try:
    from distributed import KilledWorker
except ImportError as _e:  # pragma: no cover -- the dask extra is not installed
    raise ImportError("search.DaskRunner needs Dask distributed: pip install "
                      "'tvmlite[dask]' (or pip install distributed)") from _e

from tvmlite.checks import check_number
from tvmlite.search.measure.base_runner import Runner, RunnerError
from tvmlite.search.measure.builder import BuildResult, LocalBuilder
from tvmlite.search.measure.dask_cluster import (
    COMPARED,
    COMPILE_ON,
    MEASURE,
    START_COMMAND,
    parse_address,
)
from tvmlite.search.measure.dask_pool import DaskWorkerWarning, WorkerPool
from tvmlite.search.measure.dask_worker import Config, Job, measure_job
from tvmlite.search.measure.feeder import Feeder
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput, MeasureResult
from tvmlite.search.measure.protocol import MeasureConfig, ReferenceCache, Verdict
from tvmlite.target.target import Target

if TYPE_CHECKING:  # the records package imports this one
    from tvmlite.search.records.workload import Workload

# parse_address, MEASURE and COMPARED stay importable from here (dask_cluster.py)
__all__ = ["DaskRunner", "DaskWorkerWarning", "parse_address", "MEASURE", "COMPARED",
           "WORKER_TIMEOUT"]

RETRIES = 1              # another worker after the first death, then an error record
AHEAD = 4                # candidates submitted (or compiling) per worker: one being timed,
                         # the rest queued so a worker never waits for the client's compiles
_POLL = 5.0              # seconds without news before checking the workers are there
WORKER_TIMEOUT = 60.0    # seconds a runner waits for a first worker (workers start slowly)


def _with_library(workload: Workload, ref: BuildResult) -> tuple[BuildResult, bytes]:
    """A reference build and its library's bytes, as they travel to the workers."""
    with open(ref.library, "rb") as f:
        return ref, f.read()


class DaskRunner(Runner):
    """Measures on a Dask cluster; see the module docstring.

    ``scheduler`` is an address (``dask://HOST:PORT``) or a ``distributed.Client`` (kept
    open on ``close``). ``config`` (a ``MeasureConfig``) is the measuring protocol, the
    same as ``LocalRunner``'s (each worker's LocalRunner measures with it); the old
    keyword arguments build it or replace its fields. ``compile_on`` says where
    candidates are compiled: ``"client"`` (the default: on a single machine the client's
    compiles overlap the workers' timings, where a worker compiling on its own pinned
    core must compile, then time, and measured fewer trials per minute:
    bench/results/dask-throughput-compile-sapphire-rapids.md),
    ``"auto"`` (each worker whose compiler is the client's, the client for the others:
    for workers on other machines) or ``"worker"`` (only workers that can compile
    measure); ``compilers`` are the workers that compile. ``pin`` gives workers
    sharing a machine their own cores; ``connect_timeout`` bounds reaching the scheduler;
    ``worker_timeout`` is how long to wait for a worker when the scheduler has none yet
    (scheduler, workers and tuning may be started in any order), once per connection
    check, with a warning that it waits. ``close`` disconnects; the runner reconnects when
    used again.
    """

    emulated = False
    times_elsewhere = True   # the workers time; the client compiles the next chunk meanwhile

    def __init__(self, scheduler: Any, number: int | None = None, repeat: int | None = None,
                 min_repeat_ms: float | None = None, timeout: float | None = None,
                 flush_cache: bool | None = None, check_correctness: bool | None = None,
                 n_threads: int | None = None, seed: int | None = None, pin: bool = True,
                 cold_weights: bool | None = None,
                 connect_timeout: float = 10.0, worker_timeout: float = WORKER_TIMEOUT, *,
                 config: MeasureConfig | None = None, compile_on: str = "client"):
        given = {"number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms,
                 "timeout": timeout, "flush_cache": flush_cache, "cold_weights": cold_weights,
                 "check_correctness": check_correctness, "n_threads": n_threads, "seed": seed}
        self.configure(config, {k: v for k, v in given.items() if v is not None})
        if not isinstance(pin, bool):
            raise ValueError(f"DaskRunner(pin={pin!r}): use True or False")
        if compile_on not in COMPILE_ON:
            raise ValueError(f"DaskRunner(compile_on={compile_on!r}): use one of "
                             f"{', '.join(map(repr, COMPILE_ON))} (where candidates are "
                             f"compiled: auto is each worker whose compiler is the client's)")
        self.compile_on = compile_on
        check_number(connect_timeout, "DaskRunner(connect_timeout=...) in seconds", 0,
                     lo_open=True)
        check_number(worker_timeout, "DaskRunner(worker_timeout=...) in seconds (how long "
                                     "to wait for a first worker)", 0)
        self.pin, self.connect_timeout = pin, float(connect_timeout)
        self.worker_timeout = float(worker_timeout)
        self.pool = WorkerPool(scheduler, pin=pin, connect_timeout=self.connect_timeout,
                               worker_timeout=self.worker_timeout, compile_on=compile_on)
        self.address, self.name = self.pool.address, self.pool.name
        self._references: ReferenceCache[tuple[BuildResult, bytes]] = \
            ReferenceCache(_with_library)
        self._builder: LocalBuilder | None = None   # the tuning's (accepts_sources)
        self._fed = 0                         # lowered candidates handed out (auto's share)

    @property
    def params(self) -> dict:
        """The measuring protocol as keyword arguments (``config.to_json()``)."""
        return self.config.to_json()

    def replace(self, **params: Any) -> "DaskRunner":
        """A runner on the same cluster and connection with other measuring arguments."""
        client = self.pool.client
        return DaskRunner(client if client is not None else self.address,
                          config=self.config, pin=self.pin,
                          connect_timeout=self.connect_timeout,
                          worker_timeout=self.worker_timeout, compile_on=self.compile_on,
                          **params)

    @property
    def dashboard_link(self) -> str | None:
        """The scheduler's dashboard, where the tuning's tasks show live."""
        client = self.pool.client
        return client.dashboard_link if client is not None else None

    # -- the workers ---------------------------------------------------------------------
    @property
    def workers(self) -> dict[str, dict]:
        """The usable workers' addresses and descriptions (``WorkerPool.workers``)."""
        return self.pool.workers

    @property
    def compilers(self) -> set[str]:
        """The usable workers that compile what they measure."""
        return self.pool.compilers

    @property
    def cores(self) -> dict[str, tuple]:
        """The CPUs each pinned worker measures on."""
        return self.pool.cores

    def check_target(self, target: Target) -> None:
        """Connect, ask every worker for its target and keep those that match ``target``;
        RunnerError naming each worker and why, when none does."""
        if not isinstance(target, Target):
            raise TypeError(f"DaskRunner.check_target(target=...) must be a Target, got "
                            f"{type(target).__name__}")
        self.pool.check_target(target)

    def accepts_sources(self, builder: LocalBuilder) -> bool:
        """True when some worker compiles what it measures: the Measurer then only lowers
        (``builder.iter_lower``) and hands the lowered builds to ``iter_stream``. The
        runner keeps ``builder`` to compile, on the client, the candidates that go to
        the other workers (its target, timeout and cache)."""
        if self.compile_on == "client" or not isinstance(builder, LocalBuilder):
            return False
        self._builder = builder
        return bool(self.compilers)

    # -- measuring -------------------------------------------------------------------------
    def iter_run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult],
                 reference: Callable[[Any], BuildResult] | None = None
                 ) -> Iterator[tuple[int, MeasureResult]]:
        """Submit every candidate of the batch and yield each result as its task finishes
        (two workers time two candidates at once)."""
        inputs, builds = self.checked_batch(inputs, builds, reference)
        yield from self.iter_stream(zip(inputs, builds), reference)

    def iter_stream(self, pairs: Iterable[tuple[MeasureInput, BuildResult]],
                    reference: Callable[[Any], BuildResult] | None = None
                    ) -> Iterator[tuple[int, MeasureResult]]:
        """Pull candidates from ``pairs`` in a feeding thread (the Measurer compiles them
        there) while the workers time the ones already submitted; keep a few per
        usable worker submitted (``AHEAD``), so none waits for the next. A
        failed build is yielded at once, with its error."""
        if self.pool.target is None:
            self.check_target(Target.host())   # the builder's default target
        else:
            self.pool.refresh(self.pool.target)
        self.checked_batch((), (), reference)     # the reference a check needs
        inbox: queue.Queue = queue.Queue()
        feeder = Feeder(iter(pairs), inbox, lambda inp, b: self._job(inp, b, reference))
        self.pool.inbox = inbox
        try:
            yield from self._run_jobs(inbox, feeder)
        finally:
            self.pool.inbox = None
            feeder.stop()

    def _job(self, inp: MeasureInput, build: BuildResult,
             reference: Callable[[Any], BuildResult] | None) -> Job | MeasureResult:
        """What travels to a worker for one candidate, or its result at once: a failed
        build's error, or UNKNOWN when the workload's reference cannot be built."""
        if not build.ok and not build.lowered:
            return MeasureResult(error_no=build.error_no, error_msg=build.error_msg,
                                 build_seconds=build.seconds)
        ref, ref_lib = None, b""
        if self.check_correctness:
            try:    # the reference build and its library bytes, once per workload
                ref, ref_lib = self._references.get(
                    inp.workload, reference)  # type: ignore[arg-type]  # checked_batch: not None
            except Verdict as v:
                return MeasureResult(error_no=v.error_no, error_msg=str(v),
                                     build_seconds=build.seconds)
        if build.lowered:
            return self._lowered_job(inp, build, ref, ref_lib)
        with open(build.library, "rb") as f:
            lib = f.read()
        return Job(inp, build, lib, ref, ref_lib)

    def _lowered_job(self, inp: MeasureInput, build: BuildResult, ref: BuildResult | None,
                     ref_lib: bytes) -> Job | MeasureResult:
        """A lowered candidate's job: its C, for a worker that compiles, or (the share of
        the other workers, in proportion to their number) compiled here first."""
        builder = self._builder if self._builder is not None else LocalBuilder(self.pool.target)
        compilers, n = len(self.compilers), max(1, len(self.workers))
        self._fed += 1
        if compilers and self._fed % n < compilers:
            return Job(inp, build, b"", ref, ref_lib, target=builder.target,
                       compile_timeout=builder.timeout)
        built = builder.compile_lowered(build)
        if not built.ok:
            return MeasureResult(error_no=built.error_no, error_msg=built.error_msg,
                                 build_seconds=built.seconds)
        with open(built.library, "rb") as f:
            return Job(inp, built, f.read(), ref, ref_lib)

    def _placed(self, job: Job) -> tuple[Job, list[str]]:
        """``job`` and the workers it may run on: C goes to the workers that compile (or,
        when none is left, is compiled here), a library to the others when some compile
        (their share), else to any."""
        if job.build.lowered and not self.compilers:
            builder = self._builder if self._builder is not None \
                else LocalBuilder(job.target)
            built = builder.compile_lowered(job.build)
            lib = b""
            if built.ok:
                with open(built.library, "rb") as f:
                    lib = f.read()
            job = dataclasses.replace(job, build=built, lib=lib)
        if job.build.lowered:
            return job, sorted(self.compilers)
        others = sorted(set(self.workers) - self.compilers)
        return job, others or sorted(self.workers)

    def _run_jobs(self, inbox: queue.Queue, feeder: "Feeder"
                  ) -> Iterator[tuple[int, MeasureResult]]:
        client = self.pool.client
        config = Config(self.config, tuple(sorted(self.cores.items())))
        jobs: dict[int, Job] = {}
        live: dict[str, int] = {}          # task key -> candidate position
        futures: dict[str, Any] = {}
        deaths: dict[int, dict[str, str]] = {}   # position -> {worker: why}
        started: dict[str, str] = {}       # task key -> worker that started it

        def submit(i: int) -> None:
            key = f"tvmlite-measure-{uuid.uuid4().hex}"
            live[key] = i
            jobs[i], workers = self._placed(jobs[i])
            futures[key] = fut = client.submit(
                measure_job, jobs[i], config, key=key, workers=workers,
                allow_other_workers=False, resources={MEASURE: 1}, pure=False)
            fut.add_done_callback(lambda f: inbox.put(("done", f.key)))

        def lost(i: int) -> MeasureResult:
            return MeasureResult(error_no=MeasureErrorNo.UNKNOWN, error_msg=(
                f"not measured: {'; '.join(deaths[i].values())}" + ("" if self.workers else
                f"; no Dask worker of {self.name} that matches the target remains")),
                build_seconds=jobs[i].build.seconds)

        fed = True
        feeder.want(AHEAD * max(1, len(self.workers)))
        try:
            while fed or live:
                try:
                    kind, msg = inbox.get(timeout=_POLL)
                except queue.Empty:     # no news for a while: is everyone still there?
                    for gone in self.pool.missing_workers():
                        inbox.put(("gone", {"worker": gone}))
                    continue
                if kind == "job":
                    i, job, build = msg
                    if isinstance(job, MeasureResult):    # nothing to send to a worker
                        feeder.want(1)
                        yield i, job
                        continue
                    if not self.workers:
                        raise RunnerError(
                            f"no Dask worker of {self.name} that matches the target remains; "
                            f"the candidates not yet measured are not logged: start workers "
                            f"(`{START_COMMAND}`) and resume the tuning")
                    jobs[i], deaths[i] = job, {}
                    submit(i)
                elif kind == "end":
                    fed = False
                elif kind == "failed":
                    raise msg
                elif kind == "start":
                    started[msg["key"]] = msg["worker"]
                elif kind == "done" and msg in live:
                    i, fut = live.pop(msg), futures.pop(msg)
                    if fut.status == "finished":
                        feeder.want(1)
                        yield i, fut.result()
                        continue
                    exc = fut.exception() if fut.status == "error" else None
                    if isinstance(exc, KilledWorker):
                        last = getattr(getattr(exc, "last_worker", None), "address", "?")
                        deaths[i].setdefault(last, f"its Dask worker {last} died while "
                                                   f"measuring it (Dask: {exc})")
                        if len(deaths[i]) <= RETRIES and self.workers:
                            submit(i)
                            continue
                        feeder.want(1)
                        yield i, lost(i)
                    elif fut.status == "cancelled":
                        # not by us (we forget what we cancel): the scheduler is gone
                        raise RunnerError(
                            f"lost the Dask scheduler at {self.address} in the middle of a "
                            f"batch; {len(live) + 1} candidate(s) were not measured (and are "
                            f"not logged: resuming the tuning measures them)")
                    else:
                        why = f"{type(exc).__name__}: {exc}" if exc else f"task {fut.status}"
                        feeder.want(1)
                        yield i, MeasureResult(error_no=MeasureErrorNo.UNKNOWN,
                                               error_msg=f"the Dask task failed: {why}",
                                               build_seconds=jobs[i].build.seconds)
                elif kind == "gone":
                    for i, res in self._worker_gone(msg, live, futures, started, deaths, lost):
                        feeder.want(1)
                        yield i, res
        finally:
            if futures:
                client.cancel(list(futures.values()))

    def _worker_gone(self, msg: dict, live: dict, futures: dict, started: dict,
                     deaths: dict, lost: Callable[[int], MeasureResult]
                     ) -> Iterator[tuple[int, MeasureResult]]:
        """A worker left: the candidates it was timing have one more death (Dask puts
        them on another worker; past RETRIES they become error records); without any
        matching worker left, every pending candidate does."""
        addr = msg.get("worker", "?")
        if self.pool.remove(addr):
            warnings.warn(f"{self.name}: Dask worker {addr} left the cluster; measuring goes "
                          f"on with the {len(self.workers)} matching worker(s) that remain",
                          DaskWorkerWarning, stacklevel=4)
        for key in msg.get("processing-tasks", ()):
            if key in live and started.get(key) == addr:
                i = live[key]
                deaths[i][addr] = f"its Dask worker {addr} died while measuring it"
                if len(deaths[i]) > RETRIES:
                    del live[key]
                    futures.pop(key).cancel()
                    yield i, lost(i)
        if not self.workers:
            for key, i in list(live.items()):
                del live[key]
                futures.pop(key).cancel()
                deaths[i].setdefault(addr, f"its Dask worker {addr} left")
                yield i, lost(i)

    def close(self) -> None:
        """Disconnect (a client given to the constructor stays open)."""
        self.pool.close()
        self._references.clear()
