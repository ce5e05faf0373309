"""The loop that builds, runs and logs candidates, one record at a time.

Both searches measure through ``Measurer.measure``: it skips candidates the log already
holds (so a resumed tuning never pays for a candidate twice), then works through the
rest in small chunks: compile a chunk in parallel, time its candidates one by one in the
isolated runner, and append each record to the log (one line, flushed) the moment its
timing ends, before the next candidate is timed. A kill -9 or Ctrl-C therefore loses at
most the candidate being timed, and progress displays see every candidate as it ends.

Why chunks, and not compiling ahead while timing: the compiler would share the cores
with the kernel being timed and disturb its timing. A chunk's compiles all finish before
its first timing starts and the next chunk compiles only after its last timing, so
compiling never overlaps timing in this process. A chunk ends with its slowest compile,
and compiles of one batch differ tenfold (0.1 s to 3 s for a dynamic GMM's candidates):
``BUILDS_PER_JOB`` builds per compile job keep the jobs busy beside the slow one and
still get the first timing seconds after the start, not after a whole batch has
compiled. A runner that times on other machines (``times_elsewhere``, a
Dask cluster) is the exception: there compiling beside the timing costs nothing, so the
candidates stream (``Runner.iter_stream``): each is handed over the moment its compile
ends, candidates in flight count against quotas, and no worker waits for a chunk; a
runner whose machines have this builder's compiler (``accepts_sources``) is handed the
lowered C instead, and its machines compile it.

The measurer's ``clock`` (``result.PhaseClock``) adds up the seconds spent compiling and
running (checking and timing) candidates, for the tuning's per-round split. Every
valid real record it reads or logs is told to the runner (``Runner.note_cost``), so the
protocol's ``cutoff_ratio`` knows the best of the log from the first candidate on.
``retime`` re-times logged candidates, interleaved, and logs a re-timing record each
(``search.records.best`` says how they are judged).

The log is shared: other processes may append to it while we measure. The measurer
follows it (``refresh``), so ``Quota`` budgets ("at most N records of this workload in
the log") count what is really in the file. The check and the append happen under the
log's lock, so two tunings of one workload on one log stop at exactly N records.
"""
from __future__ import annotations

import fcntl
import itertools
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from tvmlite.search.measure.base_runner import Runner
from tvmlite.search.measure.builder import LocalBuilder
from tvmlite.search.measure.inputs import MeasureInput, MeasureResult
from tvmlite.search.measure.runner import LocalRunner
from tvmlite.search.records.best import RETIMING
from tvmlite.search.records.record import (
    Record,
    RecordWriter,
    load_records,
    make_record,
    target_matches,
)
from tvmlite.search.result import PhaseClock
from tvmlite.target.target import Target

__all__ = ["Measurer", "Quota", "check_log_path"]

# builds per compile job in a chunk. With 2 (chunks of 4 on 2 cores), a cold dynamic GMM
# tuning spent 25.0 s measuring, 5 static ones 35.4 s; with 8, 22.0 s and 33.4 s
BUILDS_PER_JOB = 8


def check_log_path(path: Any) -> None:
    """Raise ValueError, naming the path and why, if a log cannot be written at ``path``
    (a folder, a path under a regular file, no permission, a read-only file system).
    Creates missing parent folders, as the first append would; leaves no file behind."""
    p = Path(os.fspath(path))
    if p.is_dir():
        raise ValueError(f"log {os.fspath(path)!r} is a directory: pass a file path, e.g. "
                         f"{p / 'tuning.jsonl'}")
    anc = p.absolute().parent
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise ValueError(f"log {os.fspath(path)!r} cannot be created: {anc} is a file, not "
                         f"a folder; pass a path whose folders are folders")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.close(os.open(p, os.O_WRONLY | os.O_APPEND))
        except FileNotFoundError:
            # Probe the folder with a file of our own: creating and removing the log itself
            # would race another tuning that starts appending to it in between.
            tempfile.TemporaryFile(dir=p.parent).close()
    except OSError as e:
        raise ValueError(f"log {os.fspath(path)!r} is not writable ({e.strerror}): pass a "
                         f"path in a folder you can write to") from None


class Quota:
    """At most ``limit`` records for which ``belongs(record)`` holds may be in the log
    (``Measurer.measure(quotas=...)``); counts every line, ours and other writers'."""

    def __init__(self, belongs: Callable[[Record], bool], limit: int):
        self.belongs, self.limit = belongs, limit
        self._seen = 0
        self._count = 0

    def count(self, measurer: "Measurer") -> int:
        """Records of the measurer's log (this target's) that belong to this quota."""
        logged = measurer.logged
        for rec in logged[self._seen:]:
            self._count += bool(self.belongs(rec))
        self._seen = len(logged)
        return self._count

    def room(self, measurer: "Measurer") -> int:
        return self.limit - self.count(measurer)


class Measurer:
    """Builds, runs and logs candidates for one tuning run.

    ``log_file`` may already hold records (from an interrupted run, another search on
    the same workload, or another process still tuning): a candidate whose state key is
    in it is not measured again, its logged result is returned instead. ``logged`` is
    every record of this target in the log, in file order, kept up to date with other
    writers' appends; ``records`` are the ones this Measurer measured. ``chunk`` is the
    number of candidates compiled before they are timed (default: ``BUILDS_PER_JOB`` per
    compile job).
    """

    def __init__(self, log_file: Any = None, builder: LocalBuilder | None = None,
                 runner: Runner | None = None,
                 target: Target | None = None, tuner: str = "", seed: int | None = None,
                 chunk: int | None = None):
        if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int)
                                  or chunk < 1):
            raise ValueError(f"Measurer(chunk={chunk!r}): use a positive int, or None for "
                             f"two candidates per compile job")
        if log_file is not None:
            check_log_path(log_file)       # before any work: not after a batch of timing
        self.target = target or Target.host()
        self.builder = builder or LocalBuilder(self.target)
        self.runner = runner or LocalRunner()
        check = getattr(self.runner, "check_target", None)   # a Runner has it; a stand-in may not
        if check is not None:
            check(self.target)   # a runner that cannot run the target is refused here, first
        self.tuner, self.seed, self._chunk = tuner, seed, chunk
        self.log_file = log_file
        self.known: dict[str, Any] = {}     # state key -> Record (this target's, from the log)
        self.records: list = []             # records measured by this Measurer
        self.logged: list = []              # this target's records in the log, file order
        self._writer: RecordWriter | None = None
        self._offset = 0                    # bytes of the log read so far
        self._mine: set[bytes] = set()      # our lines, not to be read back as others'
        # the log's state is read by a streaming runner's feeding thread as well
        self._lock = threading.RLock()
        self.clock = PhaseClock()           # seconds compiling and measuring
        if log_file is not None:
            self._load()

    # -- the log -----------------------------------------------------------------------
    def _load(self) -> None:
        """Everything in the log now (tolerantly, with load_records' warnings), with the
        writers held off so the read offset matches what was read."""
        try:
            fd = os.open(self.log_file, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            self._offset = os.fstat(fd).st_size
            for rec in load_records(self.log_file, missing_ok=True):
                self._add(rec)
        finally:
            os.close(fd)

    def _add(self, rec: Record) -> None:
        # an emulated timing is no answer for a real runner, nor the reverse
        if target_matches(rec.target, self.target) \
                and rec.emulated == bool(getattr(self.runner, "emulated", False)):
            self.logged.append(rec)
            self.known.setdefault(rec.key, rec)
            note = getattr(self.runner, "note_cost", None)   # a stand-in may not have it
            if note is not None and rec.result.ok and not rec.emulated:
                note(rec.workload.key, rec.mean_cost)

    def _read_new(self, fd: int) -> int:
        """Parse the complete lines other writers appended since the last read; returns
        how many records they held. A bad line (a writer killed mid-line) is skipped."""
        size = os.fstat(fd).st_size
        if size <= self._offset:
            return 0
        data = os.pread(fd, size - self._offset, self._offset)
        end = data.rfind(b"\n") + 1
        self._offset += end
        n = 0
        for raw in data[:end].splitlines():
            raw = raw.strip()
            if not raw:
                continue
            if raw in self._mine:
                self._mine.discard(raw)
                continue
            try:
                rec = Record.from_json(json.loads(raw))
            except (ValueError, RecursionError):
                continue
            self._add(rec)
            n += 1
        return n

    def refresh(self) -> int:
        """Read what other processes appended to the log since the last look; returns the
        number of new records."""
        if self.log_file is None:
            return 0
        with self._lock:
            try:
                fd = os.open(self.log_file, os.O_RDONLY)
            except FileNotFoundError:
                return 0
            try:
                return self._read_new(fd)
            finally:
                os.close(fd)

    def _log(self, rec: Record, quotas: Sequence[Quota]) -> bool:
        """Append ``rec`` unless, under the log's lock, a quota is already full. Called
        with ``self._lock`` held (the runner's feeding thread reads the log too)."""
        if self.log_file is None:
            if any(q.room(self) <= 0 for q in quotas):
                return False
            self.logged.append(rec)
            return True
        if self._writer is None:
            self._writer = RecordWriter(self.log_file)
        line = rec.to_line().encode()
        self._mine.add(line)

        def admit(fd: int) -> bool:
            self._read_new(fd)
            return all(q.room(self) > 0 for q in quotas)

        if self._writer.append(rec, admit):
            self.logged.append(rec)
            return True
        self._mine.discard(line)
        return False

    # -- measuring ---------------------------------------------------------------------
    @property
    def chunk(self) -> int:
        if self._chunk is not None:
            return self._chunk
        return BUILDS_PER_JOB * max(1, int(getattr(self.builder, "n_parallel", 4)))

    def measure(self, inputs: Sequence[MeasureInput],
                on_result: Callable[[MeasureInput, MeasureResult, Record], object] | None = None,
                quotas: Sequence[Quota] = ()) -> list[MeasureResult | None]:
        """Results in input order. Duplicates within the batch are measured once.

        ``on_result(input, result, record)`` is called for each new measurement right
        after its record is in the log. With ``quotas``, candidates are measured only
        while every quota has room, re-read from the log before each chunk and checked
        again under the log's lock before each append: an input left unmeasured (or
        measured after another writer filled the quota, and so not logged) gets None."""
        results: dict[str, MeasureResult] = {}
        todo: list[MeasureInput] = []
        seen: set[str] = set()
        for inp in inputs:
            if inp.key not in seen:
                seen.add(inp.key)
                todo.append(inp)
        if getattr(self.runner, "times_elsewhere", False) and hasattr(self.runner, "iter_stream"):
            self._measure_streamed(todo, results, on_result, quotas)
        else:
            self._measure_in_turns(todo, results, on_result, quotas)
        for inp in todo:   # not measured here (a quota filled): only what the log holds
            if inp.key not in results and inp.key in self.known:
                results[inp.key] = self.known[inp.key].result
        return [results.get(inp.key) for inp in inputs]

    def _measure_in_turns(self, todo: list, results: dict, on_result: Any,
                          quotas: Sequence[Quota]) -> None:
        """Compile a chunk, time it, compile the next: on this machine's cores a compile
        beside a timing would disturb it."""
        pos = 0
        while True:
            part, pos = self._next_part(todo, pos, results, quotas)
            if not part:
                return
            with self.clock.timed("compile"):
                builds = self.builder.build(part)
            with self.clock.timed("measure"):
                for j, res in self._iter_run(part, builds):
                    self._record(part[j], res, results, on_result, quotas)

    def _measure_streamed(self, todo: list, results: dict, on_result: Any,
                          quotas: Sequence[Quota]) -> None:
        """The runner times on other cores: it pulls candidates (in its own thread) while
        it times earlier ones, and each pull compiles, so compiling overlaps timing and
        no machine waits for a chunk to end before it gets its next candidate."""
        pulled: list[MeasureInput] = []     # in pull order: the builder's positions
        sent: list[MeasureInput] = []       # in hand-over order: the runner's positions
        unlogged: set[str] = set()          # pulled, not yet logged (or refused)

        def wanted() -> Any:
            """``todo`` not yet in the log, while every quota has room for one more
            beside the ones being compiled or timed (re-reading the log each time)."""
            for inp in todo:
                with self._lock:
                    self.refresh()
                    if inp.key in self.known:
                        results[inp.key] = self.known[inp.key].result
                        continue
                    if any(q.room(self) - len(unlogged) <= 0 for q in quotas):
                        return
                    unlogged.add(inp.key)
                pulled.append(inp)
                yield inp

        def compiled() -> Any:
            # a runner whose machines compile (DaskRunner.accepts_sources) gets the C
            accepts = getattr(self.runner, "accepts_sources", None)
            builds = self.builder.iter_lower(wanted()) \
                if accepts is not None and accepts(self.builder) else self._iter_build(wanted())
            for j, build in builds:
                sent.append(pulled[j])
                yield pulled[j], build

        with self.clock.timed("measure"):   # compiling overlaps: all of it is measuring
            for j, res in self.runner.iter_stream(compiled(),
                                                  reference=self.builder.build_reference):
                self._record(sent[j], res, results, on_result, quotas,
                             settled=lambda key: unlogged.discard(key))

    def _iter_build(self, inputs: Any) -> Any:
        """The builder's ``iter_build``; for a builder of whole batches only, one chunk
        at a time."""
        if hasattr(self.builder, "iter_build"):
            yield from self.builder.iter_build(inputs)
            return
        it, pos = iter(inputs), 0
        while True:
            part = list(itertools.islice(it, self.chunk))
            if not part:
                return
            for k, build in enumerate(self.builder.build(part)):
                yield pos + k, build
            pos += len(part)

    def _record(self, inp: MeasureInput, res: MeasureResult, results: dict, on_result: Any,
                quotas: Sequence[Quota], settled: Callable[[str], Any] | None = None) -> None:
        """Log one measurement (unless a quota filled meanwhile) and report it.
        ``settled(key)`` runs under the lock once the log has taken or refused it."""
        rec = make_record(inp, res, self.target, tuner=self.tuner, seed=self.seed,
                          runner=self.runner)
        with self._lock:
            logged = self._log(rec, quotas)
            if settled is not None:
                settled(inp.key)
            if not logged:
                return
            self.known[inp.key] = rec
            self.records.append(rec)
            results[inp.key] = res
        if on_result is not None:
            on_result(inp, res, rec)

    def retime(self, inputs: Sequence[MeasureInput], rounds: int) -> list[Record]:
        """Re-time ``inputs`` (candidates measured before) ``rounds`` times, interleaved:
        each round times every candidate once, in an order rotated by one per round, so
        a slow spell of the machine falls on all of them, not on one. They are compiled
        once, timed as any candidate (the runner's protocol), and each gets one record
        logged at the end: the costs of all its rounds, its decisions tagged
        ``"retiming": {"session": start, "rounds": n}`` (``records.best.is_retiming``); a
        candidate that failed a round gets that round's error instead. No quota: a
        re-timing is not a trial. Returns the records, in input order."""
        inputs = list({inp.key: inp for inp in inputs}.values())
        if not inputs:
            return []
        session = time.time()
        with self.clock.timed("compile"):
            builds = self.builder.build(inputs)
        costs: list[list[float]] = [[] for _ in inputs]
        failed: dict[int, MeasureResult] = {}
        with self.clock.timed("measure"):
            for r in range(rounds):
                for k in range(len(inputs)):
                    i = (k + r) % len(inputs)
                    if i in failed:
                        continue
                    for _, res in self._iter_run([inputs[i]], [builds[i]]):
                        if res.ok:
                            costs[i].extend(res.costs)
                        else:
                            failed[i] = res
        out = []
        for i, inp in enumerate(inputs):
            res = failed.get(i) or MeasureResult(costs=tuple(costs[i]),
                                                 build_seconds=builds[i].seconds)
            tag = {RETIMING: {"session": session, "rounds": rounds}}
            decisions = {**inp.decisions, **tag} if isinstance(inp.decisions, dict) else \
                {**tag, "measured": inp.decisions}
            rec = make_record(MeasureInput(inp.workload, inp.steps, decisions), res,
                              self.target, tuner=self.tuner, seed=self.seed, runner=self.runner)
            self.append(rec)
            out.append(rec)
        return out

    def append(self, rec: Record) -> None:
        """Log ``rec``, a record measured outside ``measure`` (a re-timing), without a
        quota; it joins ``logged`` and ``records`` (not ``known``: the candidate's first
        record stays its answer)."""
        with self._lock:
            if self._log(rec, ()):
                self.records.append(rec)

    def _next_part(self, todo: list, pos: int, results: dict, quotas: Sequence[Quota]
                   ) -> tuple[list, int]:
        """The next chunk of ``todo`` from ``pos`` still to measure (re-reading the log
        first: another writer may have measured some meanwhile; at most what every quota
        has room for), and the position after it. Known candidates get their logged
        result; an empty chunk means stop."""
        self.refresh()
        room = min([q.room(self) for q in quotas], default=len(todo))
        part: list = []
        while pos < len(todo) and len(part) < min(self.chunk, room):
            inp = todo[pos]
            pos += 1
            if inp.key in self.known:
                results[inp.key] = self.known[inp.key].result
            else:
                part.append(inp)
        return part, pos

    def _iter_run(self, inputs: list, builds: list) -> Any:
        """(index, result) as each candidate ends: the Runner seam's ``iter_run``; a
        runner with only ``run`` (a batch at once) is accepted too."""
        ref = self.builder.build_reference
        if hasattr(self.runner, "iter_run"):
            return self.runner.iter_run(inputs, builds, reference=ref)
        return enumerate(self.runner.run(inputs, builds, reference=ref))

    def close(self) -> None:
        try:
            self.runner.close()
        finally:
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    def __enter__(self) -> "Measurer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
