"""The suite's results: ratios' geometric means, the goal check, and the tables it
writes through bench/results.py (Markdown + JSON). Plain functions over the rows
``bench.suite.run_case`` returns."""
from __future__ import annotations

import math
import os
from pathlib import Path

from bench import results
from bench.results import Table

PEERS = ("numpy", "torch", "tvm")


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def op_summary(rows: list[dict]) -> dict:
    """Geometric mean of each ratio over an operator's cases, and its worst case."""
    out = {p: geomean([r["ratios"].get(p) for r in rows]) for p in (*PEERS, "best")}
    worst = [r["ratios"]["best"] for r in rows if "best" in r["ratios"]]
    out["worst"] = min(worst) if worst else None
    return out


def _num(v: float | None, fmt: str) -> str:
    return "" if v is None else format(v, fmt)


def _pct(v: float | None, fmt: str) -> str:
    """A share of the peak; above 100 it is a measurement problem (the peak read low),
    flagged, never printed as a result."""
    return "n/a (>100%: peak measured low)" if v is not None and v > 100 else _num(v, fmt)


def json_row(r: dict) -> dict:
    """A row as the JSON results keep it: a share of the peak above 100 is flagged there
    as on the page, never kept as a number."""
    pct = r.get("pct_peak")
    return {**r, "pct_peak": _pct(pct, ".1f") if pct is not None and pct > 100 else pct}


def header_notes(header: dict) -> list[str]:
    """The run's facts below the common header: peak, budgets, peers' versions, method."""
    return [
        f"Batch 1, float32, {header['threads']} threads.",
        f"- Measured FMA peak: {header['peak']:.1f} GFLOP/s ({header['threads']} threads, "
        f"bound). Load average (1 min): {header['load']:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end: other work on a shared machine lowers "
        "every figure, so read the ratios, measured side by side.\n"
        f"- tvmlite: template-free search, {header['trials']} trials per case, "
        f"population {header['population']}, seed {header['seed']}.\n"
        f"- numpy {header['versions'].get('numpy', '?')}: OpenBLAS's native kernel "
        "(OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset in its process).\n"
        f"- PyTorch: {header['versions'].get('torch') or 'not installed (column empty)'}"
        "; conv timed in NCHW and channels-last, the faster counts.\n"
        f"- Apache TVM MetaSchedule: {header['versions'].get('tvm') or 'not installed'}"
        f", `tune_tir` with the same {header['trials']} trials per case, target "
        f"{header.get('tvm_target', '-')}. Its tuning time includes the time each build "
        "worker spends importing `tvm.s_tir.tensor_intrin`.\n"
        "- Every kernel is timed in its own fresh process, median of 25 (bench/peers.py), "
        f"in {header['rounds']} interleaved rounds; each contender's best round counts. "
        "GFLOP/s use 2 flops per multiply-add for every contender, counting the taps "
        "that fall in a convolution's zero padding (the note gives their share where it "
        "is 5% or more: oneDNN skips them, so PyTorch can pass the FMA peak). `x peer` "
        "= our GFLOP/s / the peer's (above 1: we are faster). The note lists what our "
        "best schedule uses."]


def write_results(path: Path, rows: list[dict], header: dict, cases: dict) -> tuple[Path, Path]:
    """The results page and its JSON (bench/results.py); ``cases`` is suite.CASES (each
    operator's title and fields). The JSON also keeps every row whole, under ``rows``."""
    tables, goal = [], []
    for op in dict.fromkeys(r["op"] for r in rows):
        ops_rows = [r for r in rows if r["op"] == op]
        title, fields = cases[op][0], cases[op][1]
        lines = []
        for r in ops_rows:
            g, x = r["gflops"], r["ratios"]
            torch = _num(g.get("torch"), ".1f") + (f" ({r['torch_layout']})"
                                                   if r.get("torch_layout") else "")
            lines.append((
                ", ".join(map(str, r["shape"])), _num(g.get("ours"), ".1f"),
                _num(g.get("numpy"), ".1f"), torch, _num(g.get("tvm"), ".1f"),
                *(_num(x.get(p), ".2f") for p in PEERS), _pct(r["pct_peak"], ".0f"),
                f"{r['tune_s']:.0f}", _num(r.get("tvm_tune_s"), ".0f"),
                r.get("note", "") + (f"; TVM failed: {r['tvm_error']}" if r.get("tvm_error")
                                     else "")))
        s = op_summary(ops_rows)
        mean = "Geometric mean: " + ", ".join(
            f"{s[p]:.2f}x {p if p != 'best' else 'the best peer'}"
            for p in (*PEERS, "best") if s[p]) + (
            f"; worst case {s['worst']:.2f}x the best peer." if s["worst"] else ".")
        tables.append(Table((fields, "tvmlite", "numpy", "torch", "TVM", "x numpy", "x torch",
                             "x TVM", "% peak", "tune s (ours)", "tune s (TVM)", "note"),
                            tuple(lines), title, (mean,)))
        goal.append((title.split(":")[0], s))
    tables.append(goal_check(rows, goal))
    title = f"Single-operator suite{' (quick smoke run)' if header['quick'] else ''}"
    facts = {k: header[k] for k in ("date", "commit") if k in header}
    return results.write(path, title, tables, name="suite", argv=header["argv"],
                         notes=header_notes(header),
                         header={**facts, "peak": header["peak"],
                                 "rows": [json_row(r) for r in rows]})


def goal_check(rows: list[dict], summaries: list[tuple[str, dict]]) -> Table:
    """The suite's goals (set when it was written), each met or not, from this run's rows."""
    def ok(v: float | None, lim: float) -> str:
        return "" if v is None else ("yes" if v >= lim else "no")
    out: list[tuple[str, str, str]] = []
    for r in rows:
        if r["op"] in ("gmm", "gmmc") and tuple(r["shape"]) == (1024, 1024, 1024):
            x = r["ratios"].get("numpy")
            out.append((f"{r['case']}: >= 1.0x numpy", f"{_num(x, '.2f')}x", ok(x, 1.0)))
    for r in rows:
        if r["op"] in ("gmm", "gmmc"):
            x = r["ratios"].get("best")
            out.append((f"{r['case']}: >= 1.0x the best peer", f"{_num(x, '.2f')}x",
                        ok(x, 1.0)))
    for name, s in summaries:
        if name in ("GMM", "C2D", "C1D", "DEP"):
            out.append((f"{name}: geomean >= 1.1x MetaSchedule", f"{_num(s['tvm'], '.2f')}x",
                        ok(s["tvm"], 1.1)))
    for r in rows:
        x = r["ratios"].get("tvm")
        if x is not None and r["op"] in ("gmm", "c2d", "c1d", "dep"):
            out.append((f"{r['case']}: >= 0.9x MetaSchedule", f"{x:.2f}x", ok(x, 0.9)))
        if r.get("t90") is not None:
            out.append((f"{r['case']}: 90% of the best within 64 trials", f"trial {r['t90']}",
                        "yes" if r["t90"] <= 64 else "no"))
        if r.get("tvm_tune_s"):
            out.append((f"{r['case']}: tuning faster than MetaSchedule's",
                        f"{r['tune_s']:.0f} s vs {r['tvm_tune_s']:.0f} s",
                        "yes" if r["tune_s"] < r["tvm_tune_s"] else "no"))
    return Table(("goal", "measured", "met"), tuple(out), "Goal check")
