"""Replay a tuning log into deployable kernels: C sources, headers, libraries, a manifest.

A log alone is enough: each workload's compute is in its records, the schedule is its
Steps. For every workload the best valid record for this CPU is rebuilt, checked again
against the unscheduled build of the same compute (in the isolated runner, like any
measurement), and only then exported::

    out/<name>.c  out/<name>.h  out/lib<name>.so     one kernel each
    out/tvmlite_kernels.h  out/libtvmlite_kernels.so  all kernels in one library
    out/manifest.json                                   what is where, and how fast

A record that no longer applies, builds or gives the right answer is reported in
``ReplayReport.skipped`` and never exported; the next best record is tried instead. Kernel
names are the workloads' validated identifiers (with the key's first 8 hex digits when two
workloads share a name).

Numbers are labelled with where they were measured: the log's time is the tuning
machine's ("logged on ..."); the re-check times every kernel again on this machine when
it can run them (not under emulation, not with ``check=False``), and both are shown, in
the report and in manifest.json. A log tuned on another CPU warns once per replay call
(never swallowed by Python's once-per-location filter: see ``_warn_each_time``).
"""
from __future__ import annotations

import json
import math
import statistics
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tvmlite.codegen_c import link_shared
from tvmlite.codegen_c.header import header, pack_doc, size_doc
from tvmlite.errors import TvmliteWarning
from tvmlite.ir.dtypes import DTYPE_INFO
from tvmlite.runtime.module import generate_c
from tvmlite.schedule.prepack import declare_constants
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError
from tvmlite.search.measure.base_runner import Runner, RunnerError
from tvmlite.search.measure.builder import LocalBuilder
from tvmlite.search.measure.inputs import MeasureInput, declared_constants
from tvmlite.search.measure.runner import LocalRunner
from tvmlite.search.records.best import best_first
from tvmlite.search.records.dispatch import (
    DISPATCH_TUNER,
    DispatchTable,
    export_dispatch,
    latest_table,
)
from tvmlite.search.records.record import Record, TargetMismatchWarning, load_records
from tvmlite.search.records.workload import Workload
from tvmlite.target.target import Target

BUNDLE = "tvmlite_kernels"


class UncheckedWarning(TvmliteWarning):
    """Replayed kernels were built for a target no given runner can run: not re-checked."""


MAX_TRIES = 5          # records tried per workload before giving up on it
MANIFEST_VERSION = 1


@dataclass
class ReplayReport:
    out_dir: Path
    kernels: list = field(default_factory=list)     # manifest entries of exported kernels
    skipped: list = field(default_factory=list)     # {"workload", "key", "reason"}
    bundle: Path | None = None
    target: Target | None = None
    checked_by: str = ""        # the runner that re-checked each kernel ("" = not checked)
    unchecked_reason: str = ""

    def __str__(self) -> str:
        t = self.target
        where = ""
        if t is not None:
            arch_flags = " ".join(f for f in t.cflags
                                  if f.startswith(("-march", "-mcpu", "-mtune")))
            where = f" for {t.name or t.arch} ({t.arch}, {arch_flags})"
        lines = [f"exported {len(self.kernels)} kernel(s) to {self.out_dir}{where}"]
        if self.checked_by:
            lines.append(f"  checked against the unscheduled build by the {self.checked_by} runner")
        elif self.unchecked_reason:
            lines.append(f"  NOT checked here: {self.unchecked_reason}")
        for k in self.kernels:
            logged, here = k["logged"], k["measured_here"]
            now = (f"measured here: {here['gflops']:.2f} GFLOP/s "
                   f"({here['time_seconds'] * 1e3:.4g} ms)" if here else
                   f"not measured here ({k['measured_here_note']})")
            lines.append(f"  {k['name']:<28} lib{k['name']}.so  logged on {logged['target']}: "
                         f"{logged['gflops']:.2f} GFLOP/s; {now}"
                         f"{'  (emulated timing)' if k['emulated'] else ''}")
        if self.bundle is not None:
            lines.append(f"  bundle: {self.bundle.name} + {BUNDLE}.h")
        for s in self.skipped:
            lines.append(f"  skipped {s['workload']} ({s['key'][:8]}): {s['reason']}")
        return "\n".join(lines)


def replay(log: Any, out_dir: Any, target: Target | str | None = None,
           check: bool | None = True, runner: Runner | None = None) -> ReplayReport:
    """Export the best record of every workload in ``log`` into ``out_dir``, built for
    ``target`` (a Target or a name; default this machine).

    ``check=False`` skips the re-check (the records' own correctness checks stand);
    ``runner`` is the Runner to verify with (a LocalRunner, a QemuRunner, a DaskRunner;
    default: a fresh LocalRunner). ``check=None`` checks when it can: with ``runner``, else
    locally when this machine runs the target, else it builds without checking and the
    report says so (pass an emulated runner, ``QemuRunner``, or one on a machine of the
    target to check)."""
    target = Target.resolve(target)
    records = load_records(log)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = ReplayReport(out, target=target)
    groups: dict[str, list] = {}
    for r in records:  # a dynamic workload's records at every size make one group
        groups.setdefault(getattr(r.workload, "base_key", r.workload.key), []).append(r)
    names = _kernel_names([g[0].workload for g in groups.values()])
    builder = LocalBuilder(target)
    own_runner = runner is None
    runner = runner or LocalRunner(number=1, repeat=3, min_repeat_ms=10.0, timeout=60.0)
    if check is not False:
        try:
            getattr(runner, "check_target", lambda t: None)(target)   # stand-ins may lack it
            check = True
        except RunnerError as e:
            if check:          # asked to check, and this runner cannot: say so, build nothing
                raise
            report.unchecked_reason = (
                f"the kernels are built for {target.name or target.arch} but not run: the "
                f"{getattr(runner, 'name', 'given')} runner cannot run {target.arch} code ({e}); "
                f"pass --runner qemu (or a runner on an {target.arch} machine) to check them")
            warnings.warn(f"replay: {report.unchecked_reason}", UncheckedWarning, stacklevel=2)
            check = False
    report.checked_by = getattr(runner, "name", "given") if check else ""
    timing_note = _why_not_timed_here(runner if check else None)
    try:
        for key, recs in groups.items():
            if _export_dynamic(recs, names[key], target, out, builder,
                               runner if check else None, report):
                continue
            found = _first_good(recs, target, builder, runner if check else None, report, log)
            if found is not None:
                rec, costs = found
                here = None if timing_note else costs
                report.kernels.append(_export(rec, names[key], target, out, here,
                                              timing_note or ""))
    finally:
        if own_runner:
            runner.close()
    if report.kernels:
        report.bundle = link_shared([out / f for k in report.kernels
                                     for f in k.get("sources", [k["source"]])], target,
                                    out / f"lib{BUNDLE}.so")
        decls = "".join(_decl_of(out / f"{k['name']}.h") for k in report.kernels)
        (out / f"{BUNDLE}.h").write_text(header(BUNDLE, decls))
    manifest = {"version": MANIFEST_VERSION, "log": str(log), "created": time.time(),
                "target_name": target.name, "arch": target.arch,
                "compiler": f"{target.compiler} ({target.compiler_version})",
                "cflags": list(target.cflags), "target": target.to_json(),
                "checked_by": report.checked_by or None,
                "bundle": ({"library": f"lib{BUNDLE}.so", "header": f"{BUNDLE}.h"}
                           if report.bundle else None),
                "kernels": report.kernels, "skipped": report.skipped}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return report


def _why_not_timed_here(runner: Runner | None) -> str | None:
    """Why the re-check's timings are not this machine's performance (None: they are).
    ``runner`` has passed ``check_target`` already (None: not checking)."""
    if runner is None:
        return "replayed with check=False"
    if getattr(runner, "emulated", False):
        return f"the runner {getattr(runner, 'name', '')} emulates the target"
    return None


def _first_good(recs: list, target: Target, builder: LocalBuilder, runner: Runner | None,
                report: ReplayReport, log: Any) -> tuple | None:
    """The fastest record that still applies, builds and matches the reference (runner
    None: trust the log), with the re-check's costs; every rejected one is reported."""
    wl = recs[0].workload
    for cand in _ranked(recs, target, log)[:MAX_TRIES]:
        reason, costs = _verify(cand, builder, runner)
        if reason is None:
            return cand, costs
        report.skipped.append(_skip(wl, f"record {cand.key[:8]}: {reason}"))
    report.skipped.append(_skip(wl, "no valid record left to export"))
    return None


def exported_schedule(rec: Record) -> Schedule:
    """The schedule replay exports for ``rec``: its Steps, then every declared constant
    input read through its pack function (``declare_constants``), so the kernel's API is
    the same whichever record of the workload was best. ScheduleError if a Step fails."""
    s = Schedule.from_steps(rec.workload.outputs, rec.steps)
    return declare_constants(s, declared_constants(rec.decisions, rec.workload))


def _export(rec: Record, name: str, target: Target, out: Path, costs: tuple | None,
            note: str) -> dict:
    wl = rec.workload
    s = exported_schedule(rec)
    func, source, decl = generate_c(s, list(wl.tensors), target, name)
    (out / f"{name}.c").write_text(source)
    (out / f"{name}.h").write_text(header(name, size_doc(func) + pack_doc(func) + decl))
    link_shared([out / f"{name}.c"], target, out / f"lib{name}.so")   # its object: the bundle's
    return _entry(name, rec, decl, target, costs, note, func)


def _ranked(recs: list, target: Target, log: Any) -> list:
    """Valid records, fastest first: those tuned for this CPU, else (with a warning) any."""
    dynamic = any(getattr(r.workload, "sizes", None) for r in recs)
    if dynamic:   # one workload at several sizes: times are not comparable, throughput is
        valid = sorted((r for r in recs if r.result.ok), key=lambda r: (r.emulated, -r.gflops))
    else:         # the one rule of the best valid record
        valid = best_first(recs)
    here = [r for r in valid if r.target.same_cpu(target)]
    if valid and not here:
        other = valid[0].target
        _warn_each_time(f"replay {log}: {valid[0].workload.name} ({valid[0].workload.key[:8]}) "
                        f"was tuned on {other.which_cpu(target)}; building its "
                        f"schedule for {target.name or target.arch}, where it is still correct "
                        f"but may be slower; its logged GFLOP/s are that CPU's, the re-check "
                        f"times it here", TargetMismatchWarning, log)
        return valid
    return here


def _warn_each_time(message: str, category: type, log: Any) -> None:
    """Warn on every call. ``warnings.warn`` remembers (message, location) in the calling
    module's registry and, under Python's default filter, stays silent the second time:
    a second replay of a foreign log in one process would say nothing. A fresh registry
    per call keeps the filters (``error``, ``ignore``) working but drops that memory."""
    warnings.warn_explicit(message, category, filename=str(log), lineno=1,
                           module="tvmlite.search.replay", registry={})


# the old names of Target.which_cpu and Target.label (target facts live in tvmlite/target/)
where_logged = Target.which_cpu
target_label = Target.label


def _verify(rec: Record, builder: LocalBuilder, runner: Runner | None) -> tuple[str | None, tuple]:
    """(why this record must not be exported, the re-check's costs in seconds). The
    reason is None when it applies, builds and matches the reference (with no runner,
    only that its steps apply; then there are no costs)."""
    try:
        s = exported_schedule(rec)
    except ScheduleError as e:
        return f"its steps no longer apply: {e}", ()
    if runner is None:
        return None, ()
    inp = MeasureInput(rec.workload, tuple(s.steps))   # what is exported: its packs too
    (res,) = runner.run([inp], builder.build([inp]), reference=builder.build_reference)
    if not res.ok:
        msg = res.error_msg.splitlines()[0] if res.error_msg else ""
        return f"{res.error_no.name}: {msg}", ()
    return None, tuple(res.costs)


def _export_dynamic(recs: list, name: str, target: Target, out: Path, builder: LocalBuilder,
                    runner: Runner | None, report: ReplayReport) -> bool:
    """A dynamic workload with a dispatch table: export the dispatching entry point and
    its variants (each re-checked at a size it serves). False: no table, export as usual."""
    tables = [r for r in recs if r.tuner == DISPATCH_TUNER]
    found = latest_table(tables, tables[0].workload) if tables else None
    if found is None:
        return False
    rec, table = found
    wl = rec.workload
    for vi, steps in enumerate(table.variants):
        m = next((m for m, (v, _) in sorted(table.tuned.items()) if v == vi), 1)
        try:
            Schedule.from_steps(wl.outputs, steps)
        except ScheduleError as e:
            report.skipped.append(_skip(wl, f"dispatch variant {vi}: steps do not apply: {e}"))
            return True
        if runner is not None:
            inp = MeasureInput(wl.at({table.size: m}), steps)
            (res,) = runner.run([inp], builder.build([inp]), reference=builder.build_reference)
            if not res.ok:
                report.skipped.append(_skip(wl, f"dispatch variant {vi} at {table.size}={m}: "
                                                f"{res.error_no.name}"))
                return True
    files, _ = export_dispatch(wl, table, target, name, out)
    outputs = {t.name for t in wl.outputs}
    report.kernels.append({
        "name": name, "source": f"{name}.c", "sources": [f.name for f in files],
        "header": f"{name}.h", "library": f"lib{name}.so",
        "functions": {"kernel": name, "time": f"{name}_time",
                      "set_num_threads": f"{name}_set_num_threads"},
        "workload": {"name": wl.name, "key": wl.key, "args": wl.args},
        "sizes": list(wl.size_names),
        "dispatch": {"size": table.size, "ranges": [
            {"lo": lo, "hi": hi, "kernel": f"{name}_v{v}"} for lo, hi, v in table.ranges]},
        "variants": [f"{name}_v{i}" for i in range(len(table.variants))],
        "tuned": [{"size": m, "kernel": f"{name}_v{v}", "time_seconds": t}
                  for m, (v, t) in sorted(table.tuned.items())],
        "args": [{"name": t.name, "shape": [_dim(d) for d in t.shape], "dtype": t.dtype,
                  "role": "output" if t.name in outputs else "input"} for t in wl.tensors],
        "logged": {**_at_largest(wl, table), "target": rec.target.which_cpu(target),
                   "same_cpu": rec.target.same_cpu(target)},
        "measured_here": None,
        "measured_here_note": "a dispatching kernel: each variant was re-checked at a size "
                              "it serves; its timings are the log's",
        "emulated": rec.emulated,
        "record": {"key": rec.key, "timestamp": rec.result.timestamp, "tuner": rec.tuner},
    })
    return True


def _at_largest(wl: Workload, table: DispatchTable) -> dict:
    """Time and GFLOP/s of a dispatching kernel at its largest tuned size."""
    if not table.tuned:
        return {"time_seconds": 0.0, "gflops": 0.0}
    m = max(table.tuned)
    t = table.tuned[m][1]
    flops = wl.at({table.size: m}).flops
    return {"time_seconds": t, "gflops": flops / t / 1e9 if t > 0 else 0.0,
            "measured_at": {table.size: m}}


def _kernel_names(workloads: list) -> dict:
    count: dict[str, int] = {}
    for w in workloads:
        count[w.name] = count.get(w.name, 0) + 1
    return {_base(w): w.name if count[w.name] == 1 else f"{w.name}_{_base(w)[:8]}"
            for w in workloads}


def _base(w: Any) -> str:
    return getattr(w, "base_key", w.key)


def _dim(d: Any) -> Any:
    """A manifest dimension: an int, or a symbolic size's text ("M")."""
    return d if isinstance(d, int) else str(d)


def _skip(wl: Workload, reason: str) -> dict:
    return {"workload": wl.name, "key": wl.key, "reason": reason}


def _entry(name: str, rec: Record, decl: str, target: Target, costs: tuple | None,
           note: str, func: Any = None) -> dict:
    """A manifest entry. Every number says where it was measured: ``logged`` (on the
    tuning machine, ``logged.target``) and ``measured_here`` (this machine's re-check;
    null, with ``measured_here_note`` saying why, when it could not time the kernel)."""
    wl = rec.workload
    here = None
    if costs:
        t = statistics.median(costs)
        here = {"time_seconds": t, "gflops": wl.flops / t / 1e9 if t > 0 else 0.0,
                "target": f"this machine ({target.label()})", "repeats": len(costs)}
    outputs = {t.name for t in wl.outputs}
    return {
        "name": name,
        "source": f"{name}.c", "header": f"{name}.h", "library": f"lib{name}.so",
        "functions": {"kernel": name, "time": f"{name}_time",
                      "set_num_threads": f"{name}_set_num_threads"},
        "workload": {"name": wl.name, "key": _base(wl), "args": wl.args},
        **({"sizes": list(wl.size_names), "measured_at": dict(wl.sizes)}
           if getattr(wl, "sizes", None) else {}),
        "args": [{"name": t.name, "shape": [_dim(d) for d in t.shape], "dtype": t.dtype,
                  "role": "output" if t.name in outputs else "input"} for t in wl.tensors],
        **_packs_entry(func),
        "flops": wl.flops,
        "logged": {"time_seconds": rec.mean_cost, "gflops": rec.gflops,
                   "target": rec.target.which_cpu(target),
                   "same_cpu": rec.target.same_cpu(target)},
        "measured_here": here,
        "measured_here_note": "" if here else (note or "the re-check gave no timing"),
        "emulated": rec.emulated,
        "record": {"key": rec.key, "timestamp": rec.result.timestamp, "tuner": rec.tuner,
                   "seed": rec.seed, "runner": rec.runner,
                   "tuned_on": {"name": rec.target.name, "arch": rec.target.arch,
                                                  "features": list(rec.target.features)}},
    }


def _packs_entry(func: Any) -> dict:
    """Manifest fields of a kernel with pre-packed constant inputs: its own argument list
    (the packed buffer in place of the input) and, per input, the packing function, the
    packed shape and size; times (logged and measured here) exclude the packing."""
    packs = getattr(func, "packs", ())
    if not packs:
        return {}
    return {
        "kernel_args": [{"name": b.name, "shape": [_dim(d) for d in b.shape], "dtype": b.dtype}
                        for b in func.args],
        "packs": [{"input": p.input, "packed": p.packed, "function": p.func.name,
                   "shape": [int(d) for d in p.func.args[1].shape],
                   "dtype": p.func.args[1].dtype,
                   "bytes": math.prod(int(d) for d in p.func.args[1].shape)
                   * DTYPE_INFO[p.func.args[1].dtype].itemsize} for p in packs],
        "timing_note": "times exclude the packing functions: they run once, at load time",
    }


def _decl_of(header_path: Path) -> str:
    """The prototypes of a kernel header (between its extern "C" guards)."""
    lines = header_path.read_text().splitlines()
    return "".join(line + "\n" for line in lines
                   if line.startswith(("int32_t ", "double ", "void ", "/* ", "   arrays: "))
                   or (line.startswith("#define ") and "_SIZE " in line))   # packed sizes
