"""Dispatch tables: a few kernel variants over a symbolic size, and which serves which M.

Tuning a dynamic workload for a range of sizes ends with a handful of schedules (each a
kernel over symbolic ``M``, correct for every M) and a table measured at the tuned sizes:
``ranges`` split ``[1, inf)`` into intervals, each served by one variant. The table is a
log record of its own (``tuner="dispatch"``: no Steps, the variants' Steps and the ranges
in its decisions, the chosen variant's time at each tuned size as its costs), so a log
alone rebuilds the dispatching kernel, as ``replay`` and ``SearchTask.apply_best`` do.

The dispatching kernel is C: one entry point ``name(M, ...)`` that checks M and calls
``name_v<i>`` (every variant stays callable), compiled and linked with the variants.

Map: DispatchTable (+ from/to record) · ranges_from_choice · the variants' and the
dispatcher's C (written by ``tvmlite.codegen_c.dispatch``) ·
build_dispatch (a Module) · export_dispatch (files for replay).
"""
from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from tvmlite.codegen_c import link_shared
from tvmlite.codegen_c.dispatch import dispatcher_c, variant_name
from tvmlite.codegen_c.header import header, size_doc
from tvmlite.codegen_c.signature import cdecl
from tvmlite.runtime.module import Module, generate_c
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError
from tvmlite.schedule.step_json import step_from_json
from tvmlite.search.measure.inputs import MeasureResult
from tvmlite.search.records.record import Record, RecordError
from tvmlite.search.records.workload import Workload
from tvmlite.target.target import Target

DISPATCH_TUNER = "dispatch"
MAX_VARIANTS = 8


@dataclass(frozen=True)
class DispatchTable:
    """``variants``: Step tuples; ``ranges``: ``(lo, hi, variant)`` with ``hi`` None for
    the last (unbounded) range, contiguous from 1; ``tuned``: {size: (variant, seconds)}."""
    size: str
    variants: tuple
    ranges: tuple
    tuned: dict

    def variant_for(self, m: int) -> int:
        for lo, hi, v in self.ranges:
            if m >= lo and (hi is None or m <= hi):
                return v
        raise ValueError(f"size {self.size}={m} is below 1")

    def to_decisions(self) -> dict:
        return {"dispatch": {
            "size": self.size,
            "variants": [[s.to_json() for s in steps] for steps in self.variants],
            "ranges": [{"lo": lo, "hi": hi, "variant": v} for lo, hi, v in self.ranges],
            "tuned": [{"size": m, "variant": v, "seconds": t}
                      for m, (v, t) in sorted(self.tuned.items())]}}

    @classmethod
    def from_record(cls, rec: Record) -> "DispatchTable":
        """The table of a dispatch record, every part checked (logs are untrusted)."""
        d = rec.decisions.get("dispatch") if isinstance(rec.decisions, dict) else None
        if not isinstance(d, dict):
            raise RecordError("dispatch record: decisions must hold {'dispatch': {...}}")
        size = d.get("size")
        if not isinstance(size, str) or size not in rec.workload.size_names:
            raise RecordError(f"dispatch record: size {str(size)[:40]!r} is not a symbolic "
                              f"size of the workload {list(rec.workload.size_names)}")
        raw = d.get("variants")
        if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_VARIANTS:
            raise RecordError(f"dispatch record: 1 to {MAX_VARIANTS} variants expected")
        try:
            variants = tuple(tuple(step_from_json(s) for s in v) for v in raw)
        except (ScheduleError, TypeError, AttributeError) as e:
            raise RecordError(f"dispatch record: a variant's steps do not parse: {e}") from None
        ranges = []
        expect = 1
        for i, r in enumerate(d.get("ranges") or []):
            lo, hi, v = (r.get(k) for k in ("lo", "hi", "variant")) if isinstance(r, dict) \
                else (None, None, None)
            last = i == len(d["ranges"]) - 1
            ok = lo == expect and isinstance(v, int) and 0 <= v < len(variants) and \
                ((hi is None and last) or (isinstance(hi, int) and hi >= lo and not last))
            if not ok or isinstance(v, bool):
                raise RecordError(f"dispatch record: range {i} is not a contiguous "
                                  f"[lo, hi] from 1 naming a variant: {str(r)[:60]}")
            ranges.append((lo, hi, v))
            expect = (hi or 0) + 1
        if not ranges:
            raise RecordError("dispatch record: no ranges")
        tuned = {}
        for t in d.get("tuned") or []:
            if isinstance(t, dict) and isinstance(t.get("size"), int) and \
                    isinstance(t.get("variant"), int) and \
                    isinstance(t.get("seconds"), (int, float)):
                tuned[t["size"]] = (t["variant"], float(t["seconds"]))
        return cls(size, variants, tuple(ranges), tuned)


def ranges_from_choice(choice: dict) -> tuple:
    """Ranges from the fastest variant at each measured size: a size goes to the variant
    of the smallest measured size at or above it (above the largest, the largest's). A
    variant fastest at m has tiles that cover m well -- often just: a tile of 104 rows
    at 103 -- so sizes below m need no more tiles than m, while one just above it pays a
    whole extra tile (at M = 117 of a GMM, the variant chosen at 219 ran clearly faster
    than the one chosen at 103, which the nearer size in log scale used to serve)."""
    sizes = sorted(choice)
    ranges: list = []
    lo = 1
    for a, b in zip(sizes, sizes[1:]):
        if choice[a] != choice[b]:
            ranges.append((lo, a, choice[a]))
            lo = a + 1
    ranges.append((lo, None, choice[sizes[-1]]))
    return tuple(ranges)


def dispatch_record(workload: Workload, target: Target, table: DispatchTable) -> Record:
    """The log record of a table; its costs are the chosen times at the tuned sizes."""
    costs = tuple(t for _, (_, t) in sorted(table.tuned.items()))
    return Record(workload, target, (), MeasureResult(costs=costs), table.to_decisions(),
                  DISPATCH_TUNER)


def latest_table(records: Sequence[Record], workload: Workload) -> tuple | None:
    """(record, table) of the newest valid dispatch record of ``workload`` (by key)."""
    recs = [r for r in records if r.tuner == DISPATCH_TUNER and r.workload.key == workload.key]
    for rec in sorted(recs, key=lambda r: -r.result.timestamp):
        try:
            return rec, DispatchTable.from_record(rec)
        except RecordError:
            continue
    return None


# -- C -----------------------------------------------------------------------------------

def _variant_sources(workload: Workload, table: DispatchTable, target: Target, name: str) -> list:
    """(name_v<i>, LoweredFunc, C source, C declarations) per variant."""
    out = []
    for i, steps in enumerate(table.variants):
        s = Schedule.from_steps(workload.outputs, steps)
        vname = variant_name(name, i)
        func, source, decl = generate_c(s, list(workload.tensors), target, vname)
        out.append((vname, func, source, decl))
    return out


def dispatcher_source(name: str, func: Any, table: DispatchTable, outputs: list) -> str:
    """C of the entry point ``name`` that calls the variant of the table's range of M
    (the text is written by ``tvmlite.codegen_c.dispatch.dispatcher_c``)."""
    return dispatcher_c(name, func, outputs, table.size, table.ranges, len(table.variants))


def _dispatch_decl(name: str, func: Any, outputs: list) -> str:
    return cdecl(replace(func, name=name), outputs)


def _parts(workload: Workload, table: DispatchTable, target: Target, name: str) -> tuple:
    variants = _variant_sources(workload, table, target, name)
    outputs = [t.name for t in workload.outputs]
    func = replace(variants[0][1], name=name)
    source = dispatcher_source(name, func, table, outputs)
    decl = _dispatch_decl(name, variants[0][1], outputs) + "".join(v[3] for v in variants)
    return variants, func, source, decl, outputs


def build_dispatch(workload: Workload, table: DispatchTable, target: Target | None = None,
                   name: str = "default_function") -> Module:
    """The dispatching kernel as a Module: call it on arrays of any M; ``module.lib``
    also holds every variant (``<name>_v<i>``)."""
    target = target or Target.host()
    variants, func, source, decl, outputs = _parts(workload, table, target, name)
    digest = hashlib.sha256("\0".join([source] + [v[2] for v in variants] +
                                      list(target.cflags)).encode()).hexdigest()[:24]
    d = Path(tempfile.gettempdir()) / f"tvmlite-dispatch-{digest}"
    lib = d / f"lib{name}.so"
    if not lib.exists():
        d.mkdir(parents=True, exist_ok=True)
        paths = []
        for vname, _, vsrc, _ in variants + [(name, None, source, None)]:
            (d / f"{vname}.c").write_text(vsrc)
            paths.append(d / f"{vname}.c")
        link_shared(paths, target, lib)
    all_outputs = [st.name for st in Schedule.create(workload.outputs).state.stages]
    return Module(func, source, decl, lib, target, all_outputs or outputs)


def dispatch_sources(workload: Workload, table: DispatchTable, target: Target,
                     name: str) -> list[str]:
    """The C texts of the dispatching kernel ``name``: each variant's, then the
    dispatcher's (each compiled on its own: the variants' static helpers would clash)."""
    variants, _, source, _, _ = _parts(workload, table, target, name)
    return [v[2] for v in variants] + [source]


def export_dispatch(workload: Workload, table: DispatchTable, target: Target, name: str,
                    out: Path) -> tuple[list, str]:
    """Write the dispatcher and its variants into ``out`` (``name.c``, ``name_v<i>.c``,
    ``name.h`` declaring all, ``lib<name>.so``); returns (C files, declarations)."""
    variants, func, source, decl, _ = _parts(workload, table, target, name)
    files = []
    for vname, _, vsrc, _ in variants:
        (out / f"{vname}.c").write_text(vsrc)
        files.append(out / f"{vname}.c")
    (out / f"{name}.c").write_text(source)
    files.append(out / f"{name}.c")
    doc = size_doc(func)
    (out / f"{name}.h").write_text(header(name, doc + decl))
    link_shared(files, target, out / f"lib{name}.so")
    return files, doc + decl
