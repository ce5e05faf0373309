"""The tables of ``bench/models.py`` (pure functions of its rows) and the models section
of docs/benchmarks.md, written from a results JSON so the page shows only figures a run
measured.

A row is one model: ``{"model", "source", "tasks", "notes", "tune": {...}, <contender>:
answer}`` where an answer is ``{"seconds", "err", ...}`` or ``{"error": why}``.
Speedups are the peer's time over ours (tvmlite tuned, or untuned when the run did not
tune): above 1, tvmlite is faster.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Iterator

from bench import results

# contender key: column name
CONTENDERS = {"untuned": "tvmlite untuned", "tuned": "tvmlite tuned",
              "bf16": "tvmlite bf16 untuned", "ort": "onnxruntime",
              "openvino": "OpenVINO f32", "openvino-default": "OpenVINO default",
              "torch-eager": "PyTorch eager", "torch-compile": "torch.compile",
              "tvm": "TVM MetaSchedule"}
SPEEDUP_PEERS = ("ort", "openvino", "openvino-default", "torch-eager", "torch-compile", "tvm",
                 "untuned")
BEGIN, END = "<!-- bench models: begin -->", "<!-- bench models: end -->"


def seconds(row: dict, who: str) -> float | None:
    answer = row.get(who) or {}
    s = answer.get("seconds")
    return float(s) if isinstance(s, (int, float)) and s > 0 else None


def ours(row: dict) -> str:
    """Which of our builds the speedups are of: tuned when the run tuned."""
    return "tuned" if "tuned" in row else "untuned"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b is not None else None


def speedup(row: dict, peer: str) -> float | None:
    mine = ours(row)
    return None if peer == mine else _ratio(seconds(row, peer), seconds(row, mine))


def _ms(row: dict, who: str) -> float | None:
    s = seconds(row, who)
    return None if s is None else s * 1e3


def summary_line(row: dict) -> str:
    """One line per model for the console: every contender's ms, or why it is missing."""
    parts = []
    for who, label in CONTENDERS.items():
        if who not in row:
            continue
        ms = _ms(row, who)
        parts.append(f"{label} {ms:.3f} ms" if ms is not None else
                     f"{label} -- ({str(row[who].get('error', '?'))[:60]})")
    return f"{row['model']}: " + "; ".join(parts)


def _processes(a: argparse.Namespace) -> str:
    n = getattr(a, "processes", 1)
    return "a fresh process" if n == 1 else f"{n} fresh processes"


def _spreads(rows: list[dict], present: list[str]) -> Iterator[str]:
    """Per model, each contender's fastest and slowest process, where it had several."""
    for r in rows:
        parts = [f"{CONTENDERS[w]} {min(ps) * 1e3:.3g}-{max(ps) * 1e3:.3g}"
                 for w in present if len(ps := (r.get(w) or {}).get("process_seconds", [])) > 1]
        if parts:
            yield f"{r['model']}, fastest-slowest process, ms -- " + "; ".join(parts)


def geomean(xs: list[float]) -> float | None:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def tables(rows: list[dict], a: argparse.Namespace) -> list[results.Table]:
    """Latency, speedup, tuning and accuracy tables, and which contender was skipped why."""
    present = [w for w in CONTENDERS if any(w in r for r in rows)]
    latency = results.Table(
        ("model", "source", *(CONTENDERS[w] for w in present), "OpenVINO default precision"),
        tuple((r["model"], r.get("source"), *(_ms(r, w) for w in present),
               (r.get("openvino-default") or {}).get("precision")) for r in rows),
        f"latency, ms (batch 1, {a.threads} threads, median of {a.repeat} samples, "
        f"each contender in {_processes(a)}: the median process)",
        tuple(_skipped(rows, present)) + tuple(_spreads(rows, present)))
    peers = [p for p in SPEEDUP_PEERS if p in present and p != "tuned"]
    ratio_rows = [(r["model"], ours(r), *(speedup(r, p) for p in peers)) for r in rows]
    gm = ("geometric mean", "", *(geomean([s for r in rows if (s := speedup(r, p))])
                                  for p in peers))
    speed = results.Table(("model", "tvmlite", *(f"x {CONTENDERS[p]}" for p in peers)),
                          (*ratio_rows, gm), "speedup: the peer's time over tvmlite's "
                          "(above 1: tvmlite is faster)")
    out = [latency, speed]
    if "bf16" in present:
        out.append(results.Table(
            ("model", "tvmlite bf16 ms", "OpenVINO default ms", "OpenVINO default precision",
             "x OpenVINO default", "tvmlite bf16 error", "OpenVINO default error"),
            tuple((r["model"], _ms(r, "bf16"), _ms(r, "openvino-default"),
                   (r.get("openvino-default") or {}).get("precision"),
                   _ratio(seconds(r, "openvino-default"), seconds(r, "bf16")),
                   (r.get("bf16") or {}).get("err"),
                   (r.get("openvino-default") or {}).get("err")) for r in rows),
            "bf16: tvmlite --precision bf16 (untuned) against OpenVINO's default precision "
            "(x: OpenVINO's time over ours; errors against onnxruntime's fp32 output, "
            "relative to its largest)"))
    if any("tune" in r for r in rows):
        out.append(results.Table(
            ("model", "tasks", "trials", "tune s (wall)", "search s", "measure s",
             "TVM trials", "TVM tune s", "torch.compile s"),
            tuple((r["model"], r.get("tasks"), (r.get("tune") or {}).get("trials"),
                   (r.get("tune") or {}).get("seconds"), (r.get("tune") or {}).get("search_s"),
                   (r.get("tune") or {}).get("measure_s"), (r.get("tvm") or {}).get("trials"),
                   (r.get("tvm") or {}).get("tuning_seconds"),
                   (r.get("torch-compile") or {}).get("compile_seconds")) for r in rows),
            f"tuning: {a.trials_per_task} trials per task, MetaSchedule the same total "
            "(its tasks at most as many each); wall time includes tvmlite tune's closing "
            "timing of the built models, TVM's its compile"))
    errs = [w for w in present if w != "ort"]
    out.append(results.Table(("model", *(CONTENDERS[w] for w in errs)),
                             tuple((r["model"], *((r.get(w) or {}).get("err") for w in errs))
                                   for r in rows),
                             "largest error against onnxruntime, relative to its largest "
                             "output"))
    return out


def _skipped(rows: list[dict], present: list[str]) -> list[str]:
    notes = []
    for r in rows:
        why = [f"{CONTENDERS[w]}: {str(r[w]['error'])[:160]}" for w in present
               if isinstance(r.get(w), dict) and "error" in r[w]]
        why += list(r.get("notes") or [])
        if why:
            notes.append(f"{r['model']}, not measured -- " + "; ".join(why))
    return notes


def run_notes(a: argparse.Namespace) -> list[str]:
    kind = "SMOKE RUN (--quick): toy models, 2 trials per task, 3 repeats; its figures " \
        "say nothing of speed. " if a.quick else ""
    return [kind + f"Peers: onnxruntime {sys.executable}; OpenVINO {a.openvino_python}; "
            f"PyTorch {a.torch_python}; TVM "
            f"{a.tvm_python} (mcpu {a.tvm_mcpu}); OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset "
            "in the peers' processes. The light zoo models have seeded random weights; "
            "MobileNet-V2 and the BERT encoder come from torch.onnx.export when the "
            "source column says so (the same weights for every contender)."]


def doc_section(data: dict[str, Any]) -> str:
    """The docs/benchmarks.md section (between the markers) for one results JSON."""
    smoke = "--quick" in str(data.get("command", ""))
    cpu = str(data.get("cpu", "")).splitlines()
    lines = [BEGIN, "",
             ("**Smoke run (`--quick`): toy models and 2 trials per task, not a "
              "measurement.** " if smoke else "") +
             f"`{data['command']}` at commit {data['commit']}, {data['date']}, load "
             f"{data['load']} when written; TVM mcpu {data.get('tvm_mcpu')}. CPU: "
             f"{data.get('cpu_name', '')} ("
             + "; ".join(f"{v.strip()}{' cores' if k == 'cores' else ''}"
                         for k, _, v in (ln.partition(":") for ln in cpu)
                         if k in ("arch", "vector", "cores", "caches"))
             + ").",
             ""]
    for t in data["tables"]:
        lines += [f"**{t['title']}**", "", "| " + " | ".join(t["columns"]) + " |",
                  "|" + "---|" * len(t["columns"])]
        lines += ["| " + " | ".join(results.cell(v) for v in row) + " |" for row in t["rows"]]
        lines.append("")
        lines += [f"- {n}" for n in t["notes"]]
        if t["notes"]:
            lines.append("")
    return "\n".join(lines + [END])


def write_doc(results_json: Path, page: Path) -> Path:
    """Replace the text between the markers in ``page`` with ``results_json``'s tables."""
    data = json.loads(Path(results_json).read_text())
    text = page.read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{page} has no {BEGIN} ... {END} markers to write between")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    page.write_text(head + doc_section(data) + tail)
    return page
