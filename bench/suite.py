"""The single-operator suite (issue 7): tvmlite against numpy, PyTorch and TVM MetaSchedule.

Our template-free search next to numpy/OpenBLAS, PyTorch CPU and Apache TVM's
MetaSchedule, all measured in one run, batch 1, float32:

    python -m bench suite [--ops gmm c1d c2d c3d dep nrm] [--trials 200] [--quick]
        [--torch-python PY] [--tvm-python PY] [--tvm-mcpu CPU] [--threads N] [--seed S]
        [--population P] [--out bench/out/suite] [--results <out>/results.md]

For every case it tunes our kernel with ``--trials`` measurements (log
``<out>/<case>.jsonl``: an interrupted run resumes from it), tunes MetaSchedule with the
same budget (cached in ``<out>/tvm/``), then times every contender in its own fresh
process, median of 25 (bench/peers.py): our best record rebuilt, numpy with the OpenBLAS
overrides unset, torch with our thread count (conv in NCHW and channels-last, the faster
one counts), TVM's exported best kernel. It writes ``--results`` (bench/results.py: a
table per operator, per-operator geometric means of the ratios, the goals checked) and
the same as JSON beside it, rewritten after each case. ``--quick`` runs the smallest case of each
operator with 16 trials and a small population, logs in ``<out>/quick/``: a smoke run.

Map: Formulation and the CASES table · tuning (ours, TVM) · timing one case · ratios and
geometric means · the results writer · main.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench import args as bench_args
from bench import peers, suite_report
from bench.results import git_commit
from bench.suite_report import PEERS

HERE = Path(__file__).resolve().parent

TVM_TUNE_TIMEOUT = 6 * 3600
QUICK_TRIALS, QUICK_POPULATION = 16, 128


@dataclass(frozen=True)
class Formulation:
    """One case as each contender states it: our operator and its keyword arguments (also
    what bench/tvm_peer.py mirrors), numpy's and torch's (op, input shapes[, kwargs]) or
    None, and the conventional flop count (2 per multiply-add) that every GFLOP/s uses."""
    op: str
    kwargs: dict
    flops: int
    numpy: tuple | None
    torch: tuple | None
    padding_share: float = 0.0
    constants: tuple = ()     # inputs our search may pre-pack (SearchTask(constants=...))


def padding_share(sizes: tuple, k: int, s: int, p: int) -> float:
    """Share of a convolution's multiply-adds whose input element lies in the zero
    padding (the taps are independent per spatial axis). The flop counts include them, as
    every contender's code does the work except oneDNN's, which skips such taps: it can
    then show more GFLOP/s than the FMA peak."""
    valid = 1.0
    for n in sizes:
        out = (n + 2 * p - k) // s + 1
        valid *= sum(0 <= i * s + j - p < n for i in range(out) for j in range(k)) / (out * k)
    return 1.0 - valid


def gmm(N: int, M: int, K: int) -> Formulation:
    """The issue's (N, M, K): C (N x M) = A (N x K) @ B (K x M), i.e. our matmul(M=N, N=M)."""
    return Formulation("matmul", {"M": N, "N": M, "K": K}, 2 * N * M * K,
                       ("matmul", [[N, K], [K, M]]), ("matmul", [[N, K], [K, M]], {}))


def gmm_const(N: int, M: int, K: int) -> Formulation:
    """GMM with B a constant (a layer's weights): our search may pre-pack it, and the
    packing runs once, outside the timed call. The peers are the same as GMM's."""
    return dataclasses.replace(gmm(N, M, K), constants=("B",))


def c1d(L: int, CI: int, CO: int, k: int, s: int, p: int) -> Formulation:
    OL = (L + 2 * p - k) // s + 1
    return Formulation("conv1d", dict(N=1, L=L, CI=CI, CO=CO, kernel=k, stride=s, padding=p,
                                      layout="NLC"), 2 * OL * CO * CI * k, None,
                       ("conv1d", [[1, CI, L], [CO, CI, k]], {"stride": s, "padding": p}),
                       padding_share((L,), k, s, p))


def c2d(H: int, W: int, CI: int, CO: int, k: int, s: int, p: int) -> Formulation:
    OH, OW = ((n + 2 * p - k) // s + 1 for n in (H, W))
    return Formulation("conv2d_nhwc", dict(N=1, H=H, W=W, CI=CI, CO=CO, kernel=k, stride=s,
                                           padding=p), 2 * OH * OW * CO * CI * k * k, None,
                       ("conv2d", [[1, CI, H, W], [CO, CI, k, k]], {"stride": s, "padding": p}),
                       padding_share((H, W), k, s, p))


def c3d(D: int, H: int, W: int, CI: int, CO: int, k: int, s: int, p: int) -> Formulation:
    OD, OH, OW = ((n + 2 * p - k) // s + 1 for n in (D, H, W))
    return Formulation("conv3d_ndhwc", dict(N=1, D=D, H=H, W=W, CI=CI, CO=CO, kernel=k,
                                            stride=s, padding=p),
                       2 * OD * OH * OW * CO * CI * k ** 3, None,
                       ("conv3d", [[1, CI, D, H, W], [CO, CI, k, k, k]],
                        {"stride": s, "padding": p}), padding_share((D, H, W), k, s, p))


def dep(H: int, W: int, C: int, k: int, s: int, p: int) -> Formulation:
    OH, OW = ((n + 2 * p - k) // s + 1 for n in (H, W))
    return Formulation("depthwise_conv2d_nhwc", dict(N=1, H=H, W=W, C=C, kernel=k, stride=s,
                                                     padding=p), 2 * OH * OW * C * k * k, None,
                       ("conv2d", [[1, C, H, W], [C, 1, k, k]],
                        {"stride": s, "padding": p, "groups": C}), padding_share((H, W), k, s, p))


def nrm(N: int, M: int) -> Formulation:
    return Formulation("norm2", {"N": N, "M": M}, 2 * N * M,
                       ("norm", [[N, M]]), ("norm", [[N, M]], {}))


# operator: (title, its shape fields as the issue writes them, formulation, shapes)
CASES: dict[str, tuple] = {
    "gmm": ("GMM: matmul", "N, M, K", gmm,
            [(128, 128, 128), (512, 32, 512), (512, 512, 512), (1024, 1024, 1024)]),
    "gmmc": ("GMM, B constant (pre-packed)", "N, M, K", gmm_const,
             [(512, 512, 512), (1024, 1024, 1024)]),
    "c1d": ("C1D: conv1d, NLC", "L, CI, CO, k, s, p", c1d,
            [(256, 64, 128, 3, 2, 1), (128, 128, 256, 1, 2, 0), (64, 256, 256, 5, 1, 2),
             (32, 512, 512, 3, 1, 1)]),
    "c2d": ("C2D: conv2d_nhwc", "H, W, CI, CO, k, s, p", c2d,
            [(224, 224, 3, 64, 7, 2, 3), (56, 56, 64, 64, 1, 1, 0), (14, 14, 256, 256, 3, 1, 1),
             (7, 7, 512, 512, 3, 1, 1)]),
    "c3d": ("C3D: conv3d_ndhwc", "D, H, W, CI, CO, k, s, p", c3d,
            [(16, 56, 56, 64, 64, 1, 1, 0), (16, 14, 14, 256, 256, 3, 1, 1),
             (16, 7, 7, 512, 512, 3, 1, 1)]),
    "dep": ("DEP: depthwise_conv2d_nhwc", "H, W, C, k, s, p", dep,
            [(112, 112, 32, 3, 1, 1), (112, 112, 64, 3, 2, 1), (14, 14, 512, 3, 2, 1),
             (7, 7, 1024, 3, 1, 1)]),
    "nrm": ("NRM: norm2 (Frobenius)", "N, M", nrm,
            [(256, 256), (512, 512), (1024, 1024), (4096, 1024)]),
}


PEERS_OF = {"gmmc": "gmm"}   # an operator whose peers (and TVM tuning) are another's


def case_name(op: str, shape: tuple) -> str:
    return f"{op}_{'x'.join(map(str, shape))}"


def select_cases(ops: list[str], quick: bool, only: list[str] | None = None
                 ) -> list[tuple[str, tuple, Formulation]]:
    """(operator, shape, formulation) of every case to run; ``quick``: the smallest
    (fewest flops) case of each operator; ``only``: just these case names."""
    out = []
    for op in ops:
        _, _, formulate, shapes = CASES[op]
        cases = [(op, shape, formulate(*shape)) for shape in shapes
                 if not only or case_name(op, shape) in only]
        out += [min(cases, key=lambda c: c[2].flops)] if quick and cases else cases
    return out


# -- tuning -----------------------------------------------------------------------------

def tune_ours(name: str, f: Formulation, out: Path, trials: int, options) -> dict:
    """Tune until the case's log holds ``trials`` measurements. Tuning seconds add up
    across resumed runs in ``<case>.tune.json``, so a resumed case reports its whole cost."""
    from tvmlite.search.records.best import best_valid
    from tvmlite.search.records.record import load_records
    from tvmlite.search.template_free.task import SearchTask
    log, side = out / f"{name}.jsonl", out / f"{name}.tune.json"
    task = SearchTask(func=f.op, kwargs=f.kwargs, constants=f.constants)
    key = task.workload.key
    spent = json.loads(side.read_text())["seconds"] if side.exists() else 0.0
    done = sum(r.workload.key == key for r in load_records(log, missing_ok=True))
    if done < trials:
        def progress(t) -> None:
            if t.index % 16 == 0:
                print(f"  [{name}] trial {t.index}: best {t.best_gflops:.1f} GFLOP/s", flush=True)
        t0 = time.perf_counter()
        task.tune(trials, str(log), options, callback=progress)
        spent += time.perf_counter() - t0
        side.write_text(json.dumps({"seconds": spent}))
    recs = [r for r in load_records(log, missing_ok=True) if r.workload.key == key]
    best = best_valid(recs)
    errors = sorted({r.result.error_no.name for r in recs if not r.result.ok})
    return {"log": str(log), "key": key, "tune_seconds": spent, "trials": len(recs),
            "best": best, "errors": errors}


def tune_tvm(name: str, f: Formulation, out: Path, a: argparse.Namespace, threads: int) -> dict:
    """MetaSchedule's best kernel for the case: tuned once per request (op, budget, target,
    seed), kept in ``<out>/tvm/<case>.json`` with its exported library."""
    request = {"op": f.op, "kwargs": f.kwargs, "trials": a.trials, "threads": threads,
               "mcpu": a.tvm_mcpu, "seed": a.seed, "work_dir": str(out / "tvm" / name)}
    meta = out / "tvm" / f"{name}.json"
    if meta.exists():
        cached = json.loads(meta.read_text())
        if cached.get("request") == request and Path(cached["so"]).exists():
            return cached
    print(f"  [{name}] TVM MetaSchedule: tuning {a.trials} trials", flush=True)
    tuned = peers.run_tvm_peer("tune", request, threads, a.tvm_python, TVM_TUNE_TIMEOUT)
    if "error" not in tuned:
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(json.dumps(dict(tuned, request=request), indent=1))
    return tuned


# -- one case ---------------------------------------------------------------------------

def schedule_traits(steps: tuple) -> str:
    """What the best schedule does, in a few words: the start of a note on a shortfall."""
    have = []
    for kind, annotation in (("annotate", "parallel"), ("annotate", "vectorize"),
                             ("annotate", "unroll"), ("pragma", None), ("cache_write", None),
                             ("cache_read", None), ("rfactor", None), ("compute_at", None),
                             ("prepack", None)):
        if any(s.kind == kind and (annotation is None or s.annotation == annotation)
               for s in steps):
            have.append({"pragma": "auto-unroll", "cache_read": "packing (cache_read)",
                         "prepack": "pre-packed once (prepack)"}.get(
                kind, annotation or kind))
    return "+".join(have) or "no transformation"


def shortfall(op: str, row: dict, ours: dict, trials: int) -> str:
    """Where we trail the best peer, the usual suspects our best schedule does without
    (packing only matters for the operators with data reuse), and whether the search ran
    out of distinct candidates before the budget."""
    note = ""
    if ours["best"] is not None and row["ratios"].get("best", 1.0) < 1.0:
        traits = row["note"]
        lacks = [w for w in ("parallel", "vectorize") if w not in traits]
        if op in ("gmm", "c1d", "c2d", "c3d") and "cache_read" not in traits:
            lacks.append("packing")
        note += f"; lacks {', '.join(lacks)}" if lacks else ""
    if ours["trials"] < trials:
        note += f"; the search ran out of candidates after {ours['trials']}"
    return note


def timers(f: Formulation, a: argparse.Namespace, threads: int, ours: dict, tvm: dict,
           available: dict) -> dict:
    """contender -> a function timing it once in a fresh process (seconds, or None)."""
    def seconds(t: dict) -> float | None:
        return t.get("seconds")
    out = {}
    if ours["best"] is not None:
        out["ours"] = lambda: seconds(peers.time_best_record(ours["log"], ours["key"], threads))
    if f.numpy:
        out["numpy"] = lambda: seconds(peers.time_numpy(f.numpy[0], f.numpy[1], threads))
    if f.torch and available["torch"]:
        for layout in ("NCHW", "NHWC") if len(f.torch[1][0]) in (4, 5) else ("",):
            out[f"torch {layout}".strip()] = lambda cl=layout == "NHWC": seconds(peers.time_torch(
                f.torch[0], f.torch[1], threads, f.torch[2], python=a.torch_python,
                channels_last=cl))
    if tvm and "error" not in tvm:
        out["tvm"] = lambda: seconds(peers.run_tvm_peer(
            "time", {"op": f.op, "kwargs": f.kwargs, "so": tvm["so"], "flops": f.flops}, threads,
            a.tvm_python))
    return out


def run_case(op: str, shape: tuple, f: Formulation, a: argparse.Namespace, threads: int,
             peak: float, available: dict, options) -> dict:
    """Tune ours and TVM's, then time every contender ``a.rounds`` times, interleaved, each
    in a fresh process; the best round counts for everyone. On a shared machine a burst of
    load can hit one contender's whole timing (OpenBLAS's threads wait for each other when
    a core is taken); a second round, later, gives every contender the same second chance."""
    name = case_name(op, shape)
    print(f"\n== {name} ({f.flops / 1e9:.3f} GFLOP) ==", flush=True)
    row: dict = {"op": op, "case": name, "shape": shape, "flops": f.flops}
    ours = tune_ours(name, f, a.out, a.trials, options)
    row.update(trials=ours["trials"], tune_s=ours["tune_seconds"],
               t90=peers.trials_to_reach(peers.curve_from_log(ours["log"], ours["key"])))
    row["note"] = (schedule_traits(ours["best"].steps) if ours["best"] is not None else
                   f"no valid schedule (errors: {', '.join(ours['errors'])})")
    peer_name = case_name(PEERS_OF.get(op, op), shape)
    tvm = tune_tvm(peer_name, f, a.out, a, threads) if available["tvm"] else {}
    if "error" in tvm:
        row["tvm_error"] = tvm["error"][-200:]
    elif tvm:
        row["tvm_tune_s"] = tvm["tuning_seconds"]
    best: dict = {}
    contenders = timers(f, a, threads, ours, tvm, available)
    for _ in range(a.rounds):
        for who, timer in contenders.items():
            t = timer()
            if t and (who not in best or t < best[who]):
                best[who] = t
    failed = [who for who in contenders if who not in best]
    if failed:
        row["note"] += f"; timing failed: {', '.join(failed)}"
    gf = {who: f.flops / t / 1e9 for who, t in best.items()}
    torch = max((k for k in gf if k.startswith("torch")), key=gf.get, default=None)
    if torch:
        gf["torch"] = gf[torch]
        row["torch_layout"] = torch[6:]
    row.update(gflops=gf, pct_peak=100 * gf["ours"] / peak if gf.get("ours") else None)
    row["ratios"] = {p: gf["ours"] / gf[p] for p in PEERS if gf.get("ours") and gf.get(p)}
    if row["ratios"]:
        row["ratios"]["best"] = min(row["ratios"].values())
    row["note"] += shortfall(op, row, ours, a.trials)
    if f.padding_share >= 0.05:
        row["note"] += f"; {100 * f.padding_share:.0f}% of the flops multiply zero padding"
    print("  " + "  ".join(f"{k} {v:.1f}" for k, v in gf.items() if k in contenders)
          + " GFLOP/s", flush=True)
    return row


# -- results (bench/suite_report.py) -----------------------------------------------------

def write_results(path: Path, rows: list[dict], header: dict) -> tuple[Path, Path]:
    """The results page ``path`` (.md) and its JSON beside it (bench/results.py)."""
    return suite_report.write_results(path, rows, header, CASES)


# -- main -------------------------------------------------------------------------------


def probe(python: str, module: str) -> str | None:
    """``module``'s version under ``python``, or None when it cannot be imported there."""
    try:
        proc = subprocess.run([python, "-c", f"import {module}; print({module}.__version__)"],
                              capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 and proc.stdout else None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = bench_args.parser("suite", __doc__, out=HERE / "out" / "suite",
                          quick="smallest case per operator, few trials, small population",
                          torch_python=True, tvm_python=True)
    p.add_argument("--ops", nargs="+", choices=list(CASES), default=list(CASES))
    p.add_argument("--cases", nargs="+", default=None, metavar="CASE",
                   help="only these cases, by name (e.g. gmm_1024x1024x1024)")
    p.add_argument("--merge", action="store_true",
                   help="keep the rows of earlier runs into the same --out (<out>/rows.json; "
                        "a case run again replaces its row) in the tables")
    p.add_argument("--trials", type=int, default=None,
                   help=f"measurements per case, ours and TVM's (default 200; --quick: "
                        f"{QUICK_TRIALS})")
    p.add_argument("--population", type=int, default=None,
                   help=f"evolution population (default 2048; --quick: {QUICK_POPULATION})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=2,
                   help="timing rounds per contender, interleaved; the best counts")
    p.add_argument("--threads", type=int, default=None, help="default: all cores")
    p.add_argument("--tvm-mcpu", default=None,
                   help="LLVM CPU name for TVM's target (default: LLVM's host CPU, e.g. znver4)")
    p.add_argument("--results", type=Path, default=None,
                   help="the results page, Markdown, with JSON beside it (default "
                        "<out>/results.md; --quick: logs and page in <out>/quick/)")
    a = p.parse_args(argv)
    a.trials = a.trials or (QUICK_TRIALS if a.quick else 200)
    a.population = a.population or (QUICK_POPULATION if a.quick else 2048)
    a.out = a.out / "quick" if a.quick else a.out
    a.results = a.results or a.out / "results.md"
    if a.trials < 1 or a.population < 1 or a.rounds < 1:
        p.error("--trials, --population and --rounds must be positive")
    known = {case_name(op, shape) for op, (_, _, _, shapes) in CASES.items() for shape in shapes}
    if a.cases and set(a.cases) - known:
        p.error(f"unknown --cases {sorted(set(a.cases) - known)}; known: {sorted(known)}")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    from tvmlite.search.options import TuningOptions
    from tvmlite.target.target import Target
    threads = a.threads or Target.host().cores
    a.out.mkdir(parents=True, exist_ok=True)
    versions = {"torch": probe(a.torch_python, "torch"), "tvm": probe(a.tvm_python, "tvm")}
    available = {k: v is not None for k, v in versions.items()}
    print(f"peers: torch {versions['torch'] or 'missing'} ({a.torch_python}), "
          f"TVM {versions['tvm'] or 'missing'} ({a.tvm_python})", flush=True)
    peak = peers.measure_peak(threads)
    print(f"peak fp32 FMA ({threads} threads): {peak:.1f} GFLOP/s", flush=True)
    options = TuningOptions(seed=a.seed, population=a.population)
    header = {"quick": a.quick, "date": datetime.datetime.now().isoformat(timespec="minutes"),
              "threads": threads, "argv": sys.argv[1:] if argv is None else argv, "peak": peak,
              "trials": a.trials, "population": a.population, "seed": a.seed, "rounds": a.rounds,
              "load": os.getloadavg()[0], "commit": git_commit(),
              "versions": {k: v for k, v in versions.items() if v}}
    np_version = peers.time_numpy("norm", [[4, 4]], threads, repeat=1).get("version")
    header["versions"]["numpy"] = np_version or "?"
    saved = a.out / "rows.json"
    rows = json.loads(saved.read_text()) if a.merge and saved.exists() else []
    for op, shape, f in select_cases(a.ops, a.quick, a.cases):
        row = run_case(op, shape, f, a, threads, peak, available, options)
        rows = [r for r in rows if r["case"] != row["case"]] + [row]
        saved.write_text(json.dumps(rows, indent=1))
        tvm_meta = a.out / "tvm" / f"{rows[-1]['case']}.json"
        if tvm_meta.exists():
            header["tvm_target"] = "`" + json.loads(tvm_meta.read_text())["target"] + "`"
        write_results(a.results, rows, header)
    print(f"\nwrote {a.results.with_suffix('.md')} and {a.results.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
