"""The tuning benchmarks' common part: tune a GEMM and a ResNet conv with one search
method, then compare with numpy / PyTorch measured in the same run.

``python -m bench tune-template-free`` and ``python -m bench tune-templated``
(bench/tune_template_free.py, bench/tune_templated.py) call ``main`` with their methods.
For each operator it tunes up to ``--trials`` measurements per seed (logs in ``--out``;
an interrupted run resumes from them), then prints: the best GFLOP/s (the best record
rebuilt and re-timed in a fresh process, median of 25), its ratio to numpy (native
OpenBLAS kernel) and to PyTorch CPU when installed, % of the measured FMA peak, the tuning
wall time, the trials needed to reach 90% of the final best, and the search overhead (the
share of tuning time spent proposing candidates rather than compiling and running them).
``--random-seeds K`` also runs the same search guided by a random model (K seeds), to show
what the XGBoost model buys at an equal number of trials (medians over seeds). The same
goes to ``<out>/results.md`` and ``results.json`` (bench/results.py).
"""
from __future__ import annotations

import inspect
import time
from pathlib import Path

from bench import args as bench_args
from bench import peers, results
from bench.results import Table

HERE = Path(__file__).resolve().parent

OPS = {
    # name: (tvmlite op, args, kwargs, numpy peer, torch peer)
    "gmm": ("matmul", (1024, 1024, 1024), {},
            ("matmul", [[1024, 1024], [1024, 1024]]),
            ("matmul", [[1024, 1024], [1024, 1024]], {})),
    # the ResNet conv (1x64x56x56, 64 3x3 filters, pad 1), in the NHWC layout CPUs favour
    # (channels innermost: whole vectors); PyTorch runs the same conv in its NCHW
    "conv": ("conv2d_nhwc", (1, 56, 56, 64, 64, 3), {"padding": 1},
             None,
             ("conv2d", [[1, 64, 56, 56], [64, 64, 3, 3]], {"padding": 1})),
}


def _task(op: str, method: str):
    name, args, kwargs, _, _ = OPS[op]
    if method.endswith("-templated"):
        from tvmlite.ops import OPS as LIB
        from tvmlite.search.templated.task import create
        named = inspect.signature(LIB[name]).bind(*args, **kwargs)
        named.apply_defaults()
        return create(name, dict(named.arguments))
    from tvmlite.search.template_free.task import SearchTask
    return SearchTask(func=name, args=args, kwargs=kwargs)


def tune(op: str, seed: int, trials: int, out: Path, method: str, population: int) -> dict:
    """One tuning run: ``method`` is xgb / random (template-free, cost model or random
    model guiding the evolution) or xgb-templated / ga-templated / random-templated."""
    from tvmlite.search.model.cost_model import RandomModel
    from tvmlite.search.options import TuningOptions
    task = _task(op, method)
    log = out / f"{op}_{method}_s{seed}.jsonl"
    opts = TuningOptions(seed=seed, population=population)

    def progress(t):
        if t.index % 64 == 0:
            print(f"  [{op} {method} s{seed}] trial {t.index}: best {t.best_gflops:.1f} "
                  f"GFLOP/s", flush=True)

    t0 = time.perf_counter()
    if method.endswith("-templated"):
        from tvmlite.search.templated import tuners
        from tvmlite.search.templated.xgb_tuner import XGBTuner
        kind = {"xgb": XGBTuner, "ga": tuners.GATuner,
                "random": tuners.RandomTuner}[method.split("-")[0]]
        res = kind(task, seed=seed).tune(trials, log, opts, callback=progress)
    else:
        res = task.tune(trials, log, opts, callback=progress,
                        model=RandomModel(seed) if method == "random" else None)
    wall = time.perf_counter() - t0
    curve = peers.curve_from_log(str(log), task.workload.key)
    spent = res.search_seconds + res.measure_seconds
    return {"op": op, "seed": seed, "model": method, "log": str(log),
            "key": task.workload.key, "flops": task.workload.flops,
            "wall_seconds": wall, "measured_now": res.measured,
            "overhead": res.search_seconds / spent if spent else float("nan"),
            "trials": len(curve), "best_logged_gflops": curve[-1][2] if curve else 0.0,
            "trials_to_90": peers.trials_to_reach(curve),
            "curve": [b for _, _, b in curve], "errors": dict(res.errors)}


def main(argv: list[str] | None, methods: tuple[str, str], doc: str | None,
         out_name: str, name: str) -> int:
    """``methods``: (the method the benchmark is about, the baseline it is compared with
    at equal trials, e.g. ("xgb", "random")); ``name``: the benchmark's name."""
    parser = bench_args.parser(name, doc, trials=1000, seeds=1, out=HERE / "out" / out_name,
                               torch_python=True)
    parser.add_argument("--ops", nargs="+", choices=sorted(OPS), default=["gmm", "conv"])
    parser.add_argument("--baseline-seeds", type=int, default=0,
                        help=f"{methods[1]} runs (seeds), compared at equal trials")
    parser.add_argument("--population", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=None)
    a = parser.parse_args(argv)
    from tvmlite.target.target import Target
    threads = a.threads or Target.host().cores
    a.out.mkdir(parents=True, exist_ok=True)

    peak = peers.measure_peak(threads)
    print(f"peak fp32 FMA (measured, {threads} threads): {peak:.1f} GFLOP/s", flush=True)
    report = {"peak_gflops": peak, "threads": threads, "runs": [], "peers": {}}
    for op in a.ops:
        _, _, _, np_peer, torch_peer = OPS[op]
        runs = [tune(op, s, a.trials, a.out, methods[0], a.population) for s in range(a.seeds)]
        runs += [tune(op, s, a.trials, a.out, methods[1], a.population)
                 for s in range(a.baseline_seeds)]
        for r in runs:
            t = peers.time_best_record(r["log"], r["key"], threads)
            r["gflops"] = r["flops"] / t["seconds"] / 1e9 if "seconds" in t else 0.0
        report["runs"] += runs
        flops = runs[0]["flops"]
        peer = {}
        if np_peer:
            t = peers.time_numpy(np_peer[0], np_peer[1], threads)
            peer["numpy"] = flops / t["seconds"] / 1e9 if "seconds" in t else None
        t = peers.time_torch(torch_peer[0], torch_peer[1], threads, torch_peer[2],
                             python=a.torch_python)
        peer["torch"] = flops / t["seconds"] / 1e9 if "seconds" in t else None
        peer["torch_version"] = t.get("version", t.get("error", ""))
        report["peers"][op] = peer
        _print(op, runs, peer, peak, methods)
    rows = tuple((r["op"], r["model"], r["seed"], r["gflops"],
                  *(r["gflops"] / report["peers"][r["op"]][n]
                    if report["peers"][r["op"]].get(n) else None for n in ("numpy", "torch")),
                  100 * r["gflops"] / peak, r["trials"], r["trials_to_90"], r["wall_seconds"],
                  100 * r["overhead"]) for r in report["runs"])
    peer_rows = tuple((op, p.get("numpy"), p.get("torch"), p.get("torch_version"))
                      for op, p in report["peers"].items())
    results.write(a.out / "results.md", f"{name}: {methods[0]} against {methods[1]}", [
        Table(("op", "method", "seed", "GFLOP/s (re-timed)", "x numpy", "x torch", "% peak",
               "trials", "trials to 90%", "tune s", "search overhead %"), rows, "Runs"),
        Table(("op", "numpy GFLOP/s", "torch GFLOP/s", "torch version"), peer_rows,
              "Peers, same run")], name=name, argv=argv or [],
        notes=[f"Measured fp32 FMA peak {peak:.1f} GFLOP/s, {threads} threads. Each run's "
               "best record rebuilt and re-timed in a fresh process, median of 25."],
        header={"peak_gflops": peak, "threads": threads, "runs": report["runs"]})
    print(f"\nwrote {a.out / 'results.md'} and {a.out / 'results.json'}")
    return 0


def _print(op: str, runs: list, peer: dict, peak: float, methods: tuple) -> None:
    print(f"\n== {op} ==")
    for name in ("numpy", "torch"):
        if peer.get(name):
            print(f"  {name:<8} {peer[name]:8.1f} GFLOP/s")
    if peer.get("torch") is None:
        print(f"  torch    not measured ({peer.get('torch_version')})")
    for model in methods:
        rs = [r for r in runs if r["model"] == model]
        if not rs:
            continue
        best = peers.median([r["gflops"] for r in rs])
        ratios = "  ".join(f"{best / peer[n]:.2f}x {n}" for n in ("numpy", "torch")
                           if peer.get(n))
        print(f"  tvmlite {model:<16} {best:8.1f} GFLOP/s (median of {len(rs)} seed(s))  "
              f"{ratios}  {100 * best / peak:.0f}% of peak")
        for r in rs:
            print(f"    seed {r['seed']}: {r['gflops']:.1f} GFLOP/s re-timed, "
                  f"{r['trials']} trials, 90% of final at trial {r['trials_to_90']}, "
                  f"tuning {r['wall_seconds']:.0f} s (this run), search overhead "
                  f"{100 * r['overhead']:.0f}%, errors {r['errors']}")
    x = [r for r in runs if r["model"] == methods[0]]
    rnd = [r for r in runs if r["model"] == methods[1]]
    if x and rnd:
        n = min(min(len(r["curve"]) for r in x), min(len(r["curve"]) for r in rnd))
        mx = peers.median([r["curve"][n - 1] for r in x])
        mr = peers.median([r["curve"][n - 1] for r in rnd])
        print(f"  at {n} trials: {methods[0]} {mx:.1f} vs {methods[1]} {mr:.1f} GFLOP/s "
              f"(logged, medians over seeds)")
