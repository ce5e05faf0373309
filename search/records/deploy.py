"""Replay a tuning log into deployable kernels: C sources, headers, libraries, a manifest.

A log alone is enough: each workload's compute is in its records, the schedule is its
Steps. For every workload the best valid record for this CPU is rebuilt, checked again
against the unscheduled build of the same compute (in the isolated runner, like any
measurement), and only then exported::

    out/<name>.c  out/<name>.h  out/lib<name>.so     one kernel each
    out/tvmlite_kernels.h  out/libtvmlite_kernels.so  all kernels in one library
    out/manifest.json                                   what is where, and how fast

A record that no longer applies, builds or gives the right answer is reported in
``ReplayReport.skipped`` and never exported; the next best record is tried instead. Kernel names are the workloads' validated
identifiers (with the key's first 8 hex digits when two workloads share a name).
"""
from __future__ import annotations

import json
import shutil
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tvmlite.runtime.module import generate_c, header, size_doc
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import ScheduleError

BUNDLE = "tvmlite_kernels"
MAX_TRIES = 5          # records tried per workload before giving up on it
MANIFEST_VERSION = 1


@dataclass
class ReplayReport:
    out_dir: Path
    kernels: list = field(default_factory=list)     # manifest entries of exported kernels
    skipped: list = field(default_factory=list)     # {"workload", "key", "reason"}
    bundle: Path | None = None

    def __str__(self) -> str:
        lines = [f"exported {len(self.kernels)} kernel(s) to {self.out_dir}"]
        for k in self.kernels:
            lines.append(f"  {k['name']:<28} {k['gflops']:9.2f} GFLOP/s  {k['time_seconds'] * 1e3:9.4f} ms"
                         f"  lib{k['name']}.so")
        if self.bundle is not None:
            lines.append(f"  bundle: {self.bundle.name} + {BUNDLE}.h")
        for s in self.skipped:
            lines.append(f"  skipped {s['workload']} ({s['key'][:8]}): {s['reason']}")
        return "\n".join(lines)


def replay(log: Any, out_dir: Any, target: Any = None, check: bool = True,
           runner: Any = None) -> ReplayReport:
    """Export the best record of every workload in ``log`` into ``out_dir``.

    ``check=False`` skips the re-check (the records' own correctness checks stand);
    ``runner`` is a LocalRunner to verify with (default: a fresh one)."""
    from tvmlite.codegen_c import link_shared
    from tvmlite.target.target import Target
    from tvmlite.search.measure.builder import LocalBuilder
    from tvmlite.search.records.record import load_records
    from tvmlite.search.measure.runner import LocalRunner
    target = target or Target.host()
    records = load_records(log)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = ReplayReport(out)
    groups: dict[str, list] = {}
    for r in records:  # a dynamic workload's records at every size make one group
        groups.setdefault(getattr(r.workload, "base_key", r.workload.key), []).append(r)
    names = _kernel_names([g[0].workload for g in groups.values()])
    builder = LocalBuilder(target)
    own_runner = runner is None
    runner = runner or LocalRunner(number=1, repeat=1, timeout=60.0)
    try:
        for key, recs in groups.items():
            if _export_dynamic(recs, names[key], target, out, builder,
                               runner if check else None, report):
                continue
            rec = _first_good(recs, target, builder, runner if check else None, report)
            if rec is not None:
                report.kernels.append(_export(rec, names[key], target, out))
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
                "target": target.to_json(),
                "bundle": ({"library": f"lib{BUNDLE}.so", "header": f"{BUNDLE}.h"}
                           if report.bundle else None),
                "kernels": report.kernels, "skipped": report.skipped}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return report


def _first_good(recs: list, target: Any, builder: Any, runner: Any,
                report: ReplayReport) -> Any:
    """The fastest record that still applies, builds and matches the reference (runner
    None: trust the log); every rejected one is reported."""
    wl = recs[0].workload
    for cand in _ranked(recs, target)[:MAX_TRIES]:
        reason = _verify(cand, builder, runner)
        if reason is None:
            return cand
        report.skipped.append(_skip(wl, f"record {cand.key[:8]}: {reason}"))
    report.skipped.append(_skip(wl, "no valid record left to export"))
    return None


def _export(rec: Any, name: str, target: Any, out: Path) -> dict:
    from tvmlite.codegen_c import compile_shared
    wl = rec.workload
    s = Schedule.from_steps(wl.outputs, rec.steps)
    func, source, decl = generate_c(s, list(wl.tensors), target, name)
    lib = compile_shared(source, target)
    (out / f"{name}.c").write_text(source)
    (out / f"{name}.h").write_text(header(name, size_doc(func) + decl))
    shutil.copyfile(lib, out / f"lib{name}.so")
    return _entry(name, rec, decl)


def _ranked(recs: list, target: Any) -> list:
    """Valid records, fastest first: those tuned for this CPU, else (with a warning) any."""
    from tvmlite.search.records.record import TargetMismatchWarning, target_matches
    dynamic = any(getattr(r.workload, "sizes", None) for r in recs)
    # one workload at several sizes: times are not comparable, throughput is
    rank = (lambda r: -r.gflops) if dynamic else (lambda r: r.mean_cost)
    valid = sorted((r for r in recs if r.result.ok), key=rank)
    here = [r for r in valid if target_matches(r.target, target)]
    if valid and not here:
        other = valid[0].target
        warnings.warn(f"replay: {valid[0].workload.name} was tuned on another CPU ({other.arch}: "
                      f"{' '.join(other.features) or 'no features'}); building its schedule for "
                      f"this one, where it may be slower", TargetMismatchWarning, stacklevel=3)
        return valid
    return here


def _verify(rec: Any, builder: Any, runner: Any) -> str | None:
    """Why this record must not be exported (None: it applies, builds and matches the
    reference; with no runner, only that its steps apply)."""
    from tvmlite.search.measure.inputs import MeasureInput
    try:
        Schedule.from_steps(rec.workload.outputs, rec.steps)
    except ScheduleError as e:
        return f"its steps no longer apply: {e}"
    if runner is None:
        return None
    inp = MeasureInput(rec.workload, rec.steps)
    (res,) = runner.run([inp], builder.build([inp]), reference=builder.build_reference)
    if not res.ok:
        return f"{res.error_no.name}: {res.error_msg.splitlines()[0] if res.error_msg else ''}"
    return None


def _export_dynamic(recs: list, name: str, target: Any, out: Path, builder: Any, runner: Any,
                    report: ReplayReport) -> bool:
    """A dynamic workload with a dispatch table: export the dispatching entry point and
    its variants (each re-checked at a size it serves). False: no table, export as usual."""
    from tvmlite.search.measure.inputs import MeasureInput
    from tvmlite.search.records.dispatch import DISPATCH_TUNER, export_dispatch, latest_table
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
        **_at_largest(wl, table),
        "record": {"key": rec.key, "timestamp": rec.result.timestamp, "tuner": rec.tuner},
    })
    return True


def _at_largest(wl: Any, table: Any) -> dict:
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


def _skip(wl: Any, reason: str) -> dict:
    return {"workload": wl.name, "key": wl.key, "reason": reason}


def _entry(name: str, rec: Any, decl: str) -> dict:
    wl = rec.workload
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
        "time_seconds": rec.mean_cost, "gflops": rec.gflops, "flops": wl.flops,
        "record": {"key": rec.key, "timestamp": rec.result.timestamp, "tuner": rec.tuner,
                   "seed": rec.seed, "tuned_on": {"arch": rec.target.arch,
                                                  "features": list(rec.target.features)}},
    }


def _decl_of(header_path: Path) -> str:
    """The prototypes of a kernel header (between its extern "C" guards)."""
    lines = header_path.read_text().splitlines()
    return "".join(line + "\n" for line in lines
                   if line.startswith(("int32_t ", "double ", "void ", "/* ", "   arrays: ")))
