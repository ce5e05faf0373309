"""Tuning records: one JSON line per measurement, appended safely, loaded tolerantly.

A line holds everything needed to rebuild and judge the candidate without the script or
template that made it: the workload (its serialized compute and key), the target it ran
on, the Steps, the costs or the error, timings, the tuner and its decisions, and the
format version. Named keys, never positions.

Map: errors and warnings · Record (validated on construction) · make_record ·
writing (append_record, RecordWriter: flock + one write per line) · reading
(iter_records, load_records: bad lines are warned about and skipped) · choosing
(best_valid: the one rule for "the best record"; best_record, real_first).

Logs come from elsewhere: every field is validated on load, nothing is executed, and a
line that fails validation is skipped with a ``RecordWarning`` naming ``path:lineno``.
"""
from __future__ import annotations

import fcntl
import json
import math
import os
import re
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from tvmlite.errors import TvmliteError, TvmliteWarning
from tvmlite.schedule.state import ScheduleError
from tvmlite.schedule.step_json import step_from_json
from tvmlite.schedule.steps import Step
from tvmlite.search.measure.inputs import MeasureErrorNo, MeasureInput, MeasureResult, state_key
from tvmlite.search.records.workload import Workload, WorkloadError
from tvmlite.target.target import Target

if TYPE_CHECKING:  # the runners import the measure package, which imports records
    from tvmlite.search.measure.base_runner import Runner

__all__ = ["FORMAT_VERSION", "RecordError", "RecordWarning", "TargetMismatchWarning",
           "Record", "make_record", "append_record", "RecordWriter", "iter_records",
           "records_by_workload",
           "load_records", "target_matches", "short_value"]

FORMAT_VERSION = 1
MAX_LINE = 8 << 20            # bytes; a longer line is skipped unread
MAX_COSTS = 1000
MAX_COST = 1e6                # seconds
MAX_MSG = 2000
MAX_STEPS = 4096
MAX_DECISION_DEPTH = 32
MAX_DECISION_NODES = 100_000
_TUNER = re.compile(r"^[A-Za-z0-9_.+-]{0,64}$")
_KEYS = ("version", "workload", "target", "steps", "decisions", "costs", "error",
         "build_seconds", "run_seconds", "timestamp", "tuner", "seed")
# where it was measured; absent in logs written before runners were named. "compiled_on"
# (the Dask worker that compiled it) is written only when set: a record compiled by the
# tuning's own builder stays readable by a tvmlite that does not know the key
_OPTIONAL_KEYS = ("runner", "emulated", "compiled_on")
_RUNNER = re.compile(r"^[A-Za-z0-9_.:/+@-]{0,128}$")
_PLACE = re.compile(r"^[A-Za-z0-9_.:/+@\[\]-]{0,128}$")


class RecordError(TvmliteError, ValueError):
    """A record (or a request about records) that is invalid; the message says why."""


class RecordWarning(TvmliteWarning):
    """A log line was skipped; the message is ``path:lineno: skipped: reason``."""


class TargetMismatchWarning(TvmliteWarning):
    """The best record found was tuned on a CPU with other features than the target."""


@dataclass(frozen=True, eq=False)
class Record:
    """One measured candidate. Validated on construction, so every Record can be written
    and read back: a bad field raises RecordError naming it."""
    workload: Workload
    target: Target
    steps: tuple
    result: MeasureResult
    decisions: Any = None
    tuner: str = ""
    seed: int | None = None
    runner: str = ""          # the Runner's name: "local", "qemu-aarch64", ...
    emulated: bool = False    # timed under an emulator: correct, but says nothing of speed

    def __post_init__(self) -> None:
        if not isinstance(self.workload, Workload):
            raise RecordError(f"Record.workload must be a Workload, got "
                              f"{short_value(self.workload)}")
        if not isinstance(self.target, Target):
            raise RecordError(f"Record.target must be a Target, got {short_value(self.target)}")
        steps = tuple(self.steps)
        if len(steps) > MAX_STEPS or not all(isinstance(s, Step) for s in steps):
            raise RecordError(f"Record.steps must be at most {MAX_STEPS} Step objects "
                              "(tvmlite.schedule.steps), e.g. tuple(schedule.steps)")
        object.__setattr__(self, "steps", steps)
        if not isinstance(self.result, MeasureResult):
            raise RecordError(f"Record.result must be a MeasureResult, got "
                              f"{short_value(self.result)}")
        _check_result(self.result)
        _check_decisions(self.decisions)
        if not isinstance(self.tuner, str) or not _TUNER.match(self.tuner):
            raise RecordError(f"Record.tuner must be a name of at most 64 letters, digits or "
                              f"'_.+-' (e.g. 'xgb'), got {short_value(self.tuner)}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(
                self.seed, int) or not -2**63 <= self.seed < 2**64):
            raise RecordError(f"Record.seed must be an int or None, got {short_value(self.seed)}")
        if not isinstance(self.runner, str) or not _RUNNER.match(self.runner):
            raise RecordError(f"Record.runner must be a runner name (e.g. 'local'), got "
                              f"{short_value(self.runner)}")
        if not isinstance(self.emulated, bool):
            raise RecordError(f"Record.emulated must be True or False, got "
                              f"{short_value(self.emulated)}")

    @property
    def key(self) -> str:
        """The candidate's identity: workload key and exact Step list."""
        return state_key(self.workload.key, self.steps)

    @property
    def mean_cost(self) -> float:
        return self.result.mean_cost

    @property
    def gflops(self) -> float:
        if self.workload.is_dynamic and self.workload.sizes is None:
            return 0.0   # a dispatch table over all sizes: no one flop count
        return self.workload.flops / self.mean_cost / 1e9 if self.result.ok else 0.0

    def __repr__(self) -> str:
        r = self.result
        outcome = f"{self.mean_cost * 1e3:.4g} ms" if r.ok else r.error_no.name
        return (f"Record({self.workload!r}, {len(self.steps)} steps, {outcome}, "
                f"{self.target.arch}, tuner={self.tuner or '-'})")

    def to_json(self) -> dict:
        r = self.result
        return {"version": FORMAT_VERSION, "workload": self.workload.to_json(),
                "target": self.target.to_json(), "steps": [s.to_json() for s in self.steps],
                "decisions": self.decisions, "costs": list(r.costs),
                "error": {"code": r.error_no.name, "msg": r.error_msg[:MAX_MSG]},
                "build_seconds": r.build_seconds, "run_seconds": r.run_seconds,
                "timestamp": r.timestamp, "tuner": self.tuner, "seed": self.seed,
                "runner": self.runner, "emulated": self.emulated,
                **({"compiled_on": r.compiled_on} if r.compiled_on else {})}

    def to_line(self) -> str:
        line = json.dumps(self.to_json(), allow_nan=False, separators=(",", ":"))
        if len(line) > MAX_LINE:
            raise RecordError(f"record of {self.workload!r} is {len(line)} bytes as JSON, "
                              f"more than the {MAX_LINE} a log line may hold; shrink decisions")
        return line

    @classmethod
    def from_json(cls, d: Any) -> "Record":
        """Validate and build a record from one parsed log line (untrusted input)."""
        try:
            return _from_json(d, {}, {})
        except RecursionError:
            raise RecordError("record nested too deeply") from None


def make_record(inp: MeasureInput, res: MeasureResult, target: Target, tuner: str = "",
                seed: int | None = None, runner: Runner | None = None) -> Record:
    """The record of one measurement, as the measurer appends it to the log; ``runner``
    (the Runner that measured it) gives its name and whether it was emulated."""
    steps = tuple(s if isinstance(s, Step) else _step(s, i) for i, s in enumerate(inp.steps))
    return Record(inp.workload, target, steps, res, inp.decisions, tuner, seed,
                  getattr(runner, "name", ""), bool(getattr(runner, "emulated", False)))


# -- validation ---------------------------------------------------------------------------

def short_value(v: Any) -> str:
    """``repr(v)`` cut to 60 characters, for naming a bad value in an error."""
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(v: Any, what: str, lo: float, hi: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or not lo <= v <= hi:
        raise RecordError(f"{what} must be a finite number in [{lo:g}, {hi:g}], got "
                          f"{short_value(v)}")
    return float(v)


def _check_result(r: MeasureResult) -> None:
    if not isinstance(r.costs, tuple) or len(r.costs) > MAX_COSTS:
        raise RecordError(f"costs must be a tuple of at most {MAX_COSTS} seconds")
    for c in r.costs:
        if _number(c, "each cost", 0.0, MAX_COST) <= 0:
            raise RecordError(f"each cost must be positive seconds, got {c!r}")
    if not isinstance(r.error_no, MeasureErrorNo):
        raise RecordError(f"error_no must be a MeasureErrorNo, got {short_value(r.error_no)}")
    if (r.error_no == MeasureErrorNo.NO_ERROR) != bool(r.costs):
        raise RecordError(f"costs must be empty exactly when there is an error (error "
                          f"{r.error_no.name}, {len(r.costs)} costs)")
    if not isinstance(r.error_msg, str):
        raise RecordError(f"error message must be a string, got {short_value(r.error_msg)}")
    if not isinstance(r.compiled_on, str) or not _PLACE.match(r.compiled_on):
        raise RecordError(f"compiled_on must be a worker address (e.g. 'tcp://10.0.0.2:"
                          f"40123') or '', got {short_value(r.compiled_on)}")
    _number(r.build_seconds, "build_seconds", 0.0, math.inf)
    _number(r.run_seconds, "run_seconds", 0.0, math.inf)
    _number(r.timestamp, "timestamp", 0.0, math.inf)


def _check_decisions(d: Any) -> None:
    """Plain JSON only (it is data for the search, never run), bounded in depth and size;
    checked without recursion."""
    stack, nodes = [(d, 1)], 0
    while stack:
        v, depth = stack.pop()
        nodes += 1
        if depth > MAX_DECISION_DEPTH or nodes > MAX_DECISION_NODES:
            raise RecordError(f"decisions nest deeper than {MAX_DECISION_DEPTH} or hold more "
                              f"than {MAX_DECISION_NODES} values")
        if isinstance(v, dict):
            if not all(isinstance(k, str) for k in v):
                raise RecordError("decisions: object keys must be strings")
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)
        elif isinstance(v, float) and not math.isfinite(v):
            raise RecordError(f"decisions: {v} is not valid JSON; use finite numbers")
        elif v is not None and not isinstance(v, (str, int, float, bool)):
            raise RecordError(f"decisions must be plain JSON (dict, list, str, number, bool, "
                              f"None), got {type(v).__name__}")


def _step(d: Any, i: int) -> Step:
    try:
        return step_from_json(d)
    except ScheduleError as err:
        raise RecordError(f"step {i}: {err}") from None


def _from_json(d: Any, workloads: dict, targets: dict) -> Record:
    """``workloads``/``targets`` cache parsed values by their JSON text, so a log of many
    lines for one workload validates and rebuilds its compute once."""
    if not isinstance(d, dict):
        raise RecordError(f"a record must be a JSON object, got {type(d).__name__}")
    version = d.get("version")
    if type(version) is not int or version != FORMAT_VERSION:
        raise RecordError(f"format version {short_value(version)}, this tvmlite reads "
                          f"{FORMAT_VERSION}")
    missing = [k for k in _KEYS if k not in d]
    extra = sorted(str(k) for k in d if k not in _KEYS + _OPTIONAL_KEYS)
    if missing or extra:
        raise RecordError(f"missing keys {missing}, unknown keys {extra[:5]}")
    wl = _cached(workloads, d["workload"], Workload.from_json, WorkloadError, "workload")
    target = _cached(targets, d["target"], Target.from_json, (ValueError, TypeError),
                     "target")
    steps = d["steps"]
    if not isinstance(steps, list) or len(steps) > MAX_STEPS:
        raise RecordError(f"steps must be a list of at most {MAX_STEPS} steps")
    costs = d["costs"]
    if not isinstance(costs, list) or len(costs) > MAX_COSTS:
        raise RecordError(f"costs must be a list of at most {MAX_COSTS} numbers")
    err = d["error"]
    if not isinstance(err, dict) or set(err) != {"code", "msg"}:
        raise RecordError('error must be {"code": ..., "msg": ...}')
    try:
        code = MeasureErrorNo.parse(err["code"])
    except ValueError as e:
        raise RecordError(f"error: {e}") from None
    if not isinstance(err["msg"], str):
        raise RecordError(f"error msg must be a string, got {short_value(err['msg'])}")
    result = MeasureResult(
        costs=tuple(_number(c, "each cost", 0.0, MAX_COST) for c in costs),
        error_no=code, error_msg=err["msg"][:MAX_MSG],
        build_seconds=_number(d["build_seconds"], "build_seconds", 0.0, math.inf),
        run_seconds=_number(d["run_seconds"], "run_seconds", 0.0, math.inf),
        timestamp=_number(d["timestamp"], "timestamp", 0.0, math.inf),
        compiled_on=d.get("compiled_on", ""))
    return Record(wl, target, tuple(_step(s, i) for i, s in enumerate(steps)), result,
                  d["decisions"], d["tuner"], d["seed"], d.get("runner", ""),
                  d.get("emulated", False))


def _cached(cache: dict, raw: Any, parse: Any, error: Any, what: str) -> Any:
    """Parse ``raw`` once per distinct JSON text; a failure is cached too."""
    text = json.dumps(raw, sort_keys=True, separators=(",", ":"))
    if text not in cache:
        try:
            cache[text] = parse(raw)
        except error as e:
            cache[text] = RecordError(f"{what}: {e}")
    value = cache[text]
    if isinstance(value, RecordError):
        raise value
    return value


# -- writing ------------------------------------------------------------------------------

def _locked_append(fd: int, data: bytes, admit: Any = None) -> bool:
    """Append ``data`` under an exclusive lock, so two writers never interleave lines.
    A file left without a final newline (a writer killed mid-line) gets one first, so
    the torn line stays alone and is skipped on load. ``admit(fd)``, called under the
    lock, may read what other writers appended and refuse the write (returns False)."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        if admit is not None and not admit(fd):
            return False
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_size and os.pread(fd, 1, st.st_size - 1) != b"\n":
            data = b"\n" + data
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        return True
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _open_log(path: str | os.PathLike) -> int:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)


def _encode(record: Record) -> bytes:
    if not isinstance(record, Record):
        raise RecordError(f"record must be a Record, got {short_value(record)}")
    return (record.to_line() + "\n").encode()


def append_record(path: str | os.PathLike, record: Record) -> None:
    """Append one record as one line (creating the file and its folders)."""
    data = _encode(record)
    fd = _open_log(path)
    try:
        _locked_append(fd, data)
    finally:
        os.close(fd)


class RecordWriter:
    """Keeps a log open for many appends; each record is locked, written and on disk
    (in the OS) before ``append`` returns, exactly as with ``append_record``."""

    def __init__(self, path: str | os.PathLike):
        self.path = path
        self._fd: int | None = _open_log(path)

    def append(self, record: Record, admit: Any = None) -> bool:
        """Append ``record``; ``admit(fd)``, called under the log's lock, may refuse it
        (e.g. when other writers already filled a budget): returns whether it was
        written."""
        if self._fd is None:
            raise RecordError(f"RecordWriter({self.path}) is closed; open a new one")
        return _locked_append(self._fd, _encode(record), admit)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# -- reading ------------------------------------------------------------------------------

def _lines(f: Any) -> Iterator[tuple[int, bytes | None]]:
    """(line number, bytes) per line; None for a line longer than MAX_LINE, which is
    skipped in chunks without being held in memory."""
    lineno = 0
    while True:
        chunk = f.readline(MAX_LINE + 1)
        if not chunk:
            return
        lineno += 1
        if len(chunk) > MAX_LINE and not chunk.endswith(b"\n"):
            while chunk and not chunk.endswith(b"\n"):
                chunk = f.readline(MAX_LINE)
            yield lineno, None
        else:
            yield lineno, chunk


MAX_LINE_WARNINGS = 5  # bad lines reported one by one; the rest in one summary warning


def records_by_workload(path: str | os.PathLike, keys: Iterable[str], target: Any
                        ) -> dict[str, list[Record]]:
    """This CPU's records (``target.same_cpu``) of each workload key, read in one pass of
    the log (none if it does not exist yet); bad lines are skipped silently, as a caller
    reporting per task has said so when it started."""
    mine: dict[str, list[Record]] = {k: [] for k in keys}
    if os.path.isfile(path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _, r in iter_records(path):
                if r.workload.key in mine and r.target.same_cpu(target):
                    mine[r.workload.key].append(r)
    return mine


def iter_records(path: str | os.PathLike, missing_ok: bool = False
                 ) -> Iterator[tuple[int, Record]]:
    """(line number, Record) for every valid line; see ``load_records``."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        if missing_ok:
            return
        raise FileNotFoundError(f"tuning log {os.fspath(path)!r} does not exist; check the "
                                "path, or pass missing_ok=True to start from an empty log") \
            from None
    workloads: dict = {}
    targets: dict = {}
    bad: list = []
    with f:
        for lineno, raw in _lines(f):
            if raw is not None and not raw.strip():
                continue
            try:
                if raw is None:
                    raise RecordError(f"line longer than {MAX_LINE} bytes")
                record = _from_json(json.loads(raw), workloads, targets)
            except json.JSONDecodeError as err:   # before ValueError: it is one
                reason = f"not valid JSON ({err.msg} at character {err.pos}; truncated?)"
            except RecursionError:
                reason = "nested too deeply"
            except ValueError as err:             # Unicode, Record and Workload errors
                reason = str(err)
            else:
                yield lineno, record
                continue
            bad.append(lineno)
            if len(bad) <= MAX_LINE_WARNINGS:
                reason = reason if len(reason) <= 200 else reason[:197] + "..."
                warnings.warn(f"{os.fspath(path)}:{lineno}: skipped: {reason}", RecordWarning,
                              stacklevel=3)
    if len(bad) > MAX_LINE_WARNINGS:
        more = bad[MAX_LINE_WARNINGS:]
        shown = ", ".join(map(str, more[:10])) + (", ..." if len(more) > 10 else "")
        warnings.warn(f"{os.fspath(path)}: {len(bad)} bad lines skipped in all: the first "
                      f"{MAX_LINE_WARNINGS} are reported above, {len(more)} more on lines "
                      f"{shown}", RecordWarning, stacklevel=3)


def load_records(path: str | os.PathLike, missing_ok: bool = False) -> list[Record]:
    """Every valid record of a log, in file order. Each bad line (bad JSON, truncated,
    nested too deeply, wrong version, invalid field, over 8 MiB) is skipped with a
    RecordWarning ``path:lineno: skipped: reason`` -- the first ``MAX_LINE_WARNINGS``
    of them, then one warning counting all (1000 garbage lines are not 1000 warnings). A
    missing file raises FileNotFoundError, or gives [] with ``missing_ok``."""
    return [r for _, r in iter_records(path, missing_ok)]


# the old name of Target.same_cpu (target facts live in tvmlite/target/)
target_matches = Target.same_cpu
