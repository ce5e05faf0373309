"""Template-free search (sketches + evolution + XGBoost) on a GEMM and a ResNet conv,
against numpy / PyTorch measured in the same run.

For each operator it tunes up to ``--trials`` measurements per seed (logs in ``--out``;
an interrupted run resumes from them), then prints: the best GFLOP/s (the best record
rebuilt and re-timed in a fresh process, median of 25), its ratio to numpy (native
OpenBLAS kernel) and to PyTorch CPU when installed, % of the measured FMA peak, the tuning
wall time, the trials needed to reach 90% of the final best, and the search overhead (the
share of tuning time spent proposing candidates rather than compiling and running them).
``--random-seeds K`` also runs the same search guided by a random model (K seeds), to show
what the XGBoost model buys at an equal number of trials (medians over seeds).

    python bench/tune_template_free.py [--ops gmm conv] [--trials 1000] [--seeds 1]
        [--random-seeds 0] [--out bench/out/template_free] [--threads 2]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import peers  # noqa: E402

OPS = {
    # name: (tvmlite op, args, kwargs, numpy peer, torch peer)
    "gmm": ("matmul", (1024, 1024, 1024), {},
            ("matmul", [[1024, 1024], [1024, 1024]]),
            ("matmul", [[1024, 1024], [1024, 1024]], {})),
    "conv": ("conv2d_nchw", (1, 64, 56, 56, 64, 3), {"padding": 1},
             None,
             ("conv2d", [[1, 64, 56, 56], [64, 64, 3, 3]], {"padding": 1})),
}


def tune(op: str, seed: int, trials: int, out: Path, model: str, population: int) -> dict:
    from tvmlite.search.cost_model import RandomModel
    from tvmlite.search.options import TuningOptions
    from tvmlite.search.task import SearchTask
    name, args, kwargs, _, _ = OPS[op]
    task = SearchTask(func=name, args=args, kwargs=kwargs)
    log = out / f"{op}_{model}_s{seed}.jsonl"
    opts = TuningOptions(seed=seed, population=population)
    t0 = time.perf_counter()
    res = task.tune(trials, log, opts, model=RandomModel(seed) if model == "random" else None,
                    callback=lambda t: print(f"  [{op} {model} s{seed}] trial {t.index}: "
                                             f"best {t.best_gflops:.1f} GFLOP/s", flush=True)
                    if t.index % 64 == 0 else None)
    wall = time.perf_counter() - t0
    curve = peers.curve_from_log(str(log), task.workload.key)
    spent = res.search_seconds + res.measure_seconds
    return {"op": op, "seed": seed, "model": model, "log": str(log),
            "key": task.workload.key, "flops": task.workload.flops,
            "wall_seconds": wall, "measured_now": res.measured,
            "overhead": res.search_seconds / spent if spent else float("nan"),
            "trials": len(curve), "best_logged_gflops": curve[-1][2] if curve else 0.0,
            "trials_to_90": peers.trials_to_reach(curve),
            "curve": [b for _, _, b in curve], "errors": dict(res.errors)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", nargs="+", choices=sorted(OPS), default=["gmm", "conv"])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=1, help="XGBoost-guided runs")
    parser.add_argument("--random-seeds", type=int, default=0, help="random-guided runs")
    parser.add_argument("--population", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=HERE / "out" / "template_free")
    a = parser.parse_args(argv)
    from tvmlite.target import Target
    threads = a.threads or Target.host().cores
    a.out.mkdir(parents=True, exist_ok=True)

    peak = peers.measure_peak(threads)
    print(f"peak fp32 FMA (measured, {threads} threads): {peak:.1f} GFLOP/s", flush=True)
    report = {"peak_gflops": peak, "threads": threads, "runs": [], "peers": {}}
    for op in a.ops:
        _, _, _, np_peer, torch_peer = OPS[op]
        runs = [tune(op, s, a.trials, a.out, "xgb", a.population) for s in range(a.seeds)]
        runs += [tune(op, s, a.trials, a.out, "random", a.population)
                 for s in range(a.random_seeds)]
        for r in runs:
            t = peers.time_best_record(r["log"], r["key"], threads)
            r["gflops"] = r["flops"] / t["seconds"] / 1e9 if "seconds" in t else 0.0
        report["runs"] += runs
        flops = runs[0]["flops"]
        peer = {}
        if np_peer:
            t = peers.time_numpy(np_peer[0], np_peer[1], threads)
            peer["numpy"] = flops / t["seconds"] / 1e9 if "seconds" in t else None
        t = peers.time_torch(torch_peer[0], torch_peer[1], threads, torch_peer[2])
        peer["torch"] = flops / t["seconds"] / 1e9 if "seconds" in t else None
        peer["torch_version"] = t.get("version", t.get("error", ""))
        report["peers"][op] = peer
        _print(op, runs, peer, peak)
    (a.out / "results.json").write_text(json.dumps(report, indent=1))
    return 0


def _print(op: str, runs: list, peer: dict, peak: float) -> None:
    print(f"\n== {op} ==")
    for name in ("numpy", "torch"):
        if peer.get(name):
            print(f"  {name:<8} {peer[name]:8.1f} GFLOP/s")
    if peer.get("torch") is None:
        print(f"  torch    not measured ({peer.get('torch_version')})")
    for model in ("xgb", "random"):
        rs = [r for r in runs if r["model"] == model]
        if not rs:
            continue
        best = peers.median([r["gflops"] for r in rs])
        ratios = "  ".join(f"{best / peer[n]:.2f}x {n}" for n in ("numpy", "torch")
                           if peer.get(n))
        print(f"  tvmlite {model:<6} {best:8.1f} GFLOP/s (median of {len(rs)} seed(s))  "
              f"{ratios}  {100 * best / peak:.0f}% of peak")
        for r in rs:
            print(f"    seed {r['seed']}: {r['gflops']:.1f} GFLOP/s re-timed, "
                  f"{r['trials']} trials, 90% of final at trial {r['trials_to_90']}, "
                  f"tuning {r['wall_seconds']:.0f} s (this run), search overhead "
                  f"{100 * r['overhead']:.0f}%, errors {r['errors']}")
    x = [r for r in runs if r["model"] == "xgb"]
    rnd = [r for r in runs if r["model"] == "random"]
    if x and rnd:
        n = min(min(len(r["curve"]) for r in x), min(len(r["curve"]) for r in rnd))
        mx = peers.median([r["curve"][n - 1] for r in x])
        mr = peers.median([r["curve"][n - 1] for r in rnd])
        print(f"  at {n} trials: xgb {mx:.1f} vs random {mr:.1f} GFLOP/s (logged, medians)")


if __name__ == "__main__":
    raise SystemExit(main())
