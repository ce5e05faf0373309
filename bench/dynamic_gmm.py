"""Dynamic shapes: GMM with M symbolic and N = K = 1024, tuned once over a range of M,
against kernels tuned for each exact M with the same total budget split evenly, and numpy.

1. ``dynamic``: one SearchTask over ``te.var("M")`` with ``shapes={"M": (lo, hi)}`` and
   ``--trials`` measurements: a few variants and a dispatch table (search/template_free/
   dynamic.py);
2. ``exact``: for each of 8 evaluation sizes, sampled log-uniformly in the range and
   never among the dynamic task's tuned sizes, a static SearchTask with ``trials // 8``;
3. in one fresh process per contender kind, at every evaluation size: (a) the dispatching
   kernel rebuilt from the dynamic log, (b) the best exact kernel of that size, (c) numpy
   (OpenBLAS) -- all in the same run, median of repeats.

Prints a table (GFLOP/s and the ratios a/b and a/numpy per size, their median and
minimum) and the two tuning times. Time it under ``flock /work/timing.lock``.

    python bench/dynamic_gmm.py [--lo 1] [--hi 1024] [--trials 96] [--population 256]
        [--out bench/out/dynamic]
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402

N = K = 1024
N_EVAL = 8

_DYNAMIC = """
import numpy as np, tvmlite
from tvmlite import te, search
task = search.SearchTask(func=tvmlite.ops.matmul, args=(te.var("M"), payload["N"], payload["K"]),
                         shapes={"M": tuple(payload["range"])})
mod = task.apply_best(payload["log"])
from tvmlite.search.records.dispatch import latest_table
from tvmlite.search.records.record import load_records
table = latest_table(load_records(payload["log"]), task.workload)[1]
out = {}
for m in payload["sizes"]:
    rng = np.random.default_rng(0)
    a = tvmlite.asaligned(rng.uniform(-1, 1, (m, payload["K"])), "float32")
    b = tvmlite.asaligned(rng.uniform(-1, 1, (payload["K"], payload["N"])), "float32")
    c = tvmlite.empty((m, payload["N"]), "float32")
    mod(a, b, c)
    err = float(np.abs(c - a.astype("float64") @ b).max())
    t = mod.time_evaluator(number=1, repeat=payload["repeat"], min_repeat_ms=20)(a, b, c)
    out[str(m)] = {"seconds": t.median, "variant": table.variant_for(m), "max_err": err}
print(json.dumps(out))
"""

_EXACT = """
import numpy as np, tvmlite
from tvmlite import search
out = {}
for m, log in payload["logs"].items():
    task = search.SearchTask(func=tvmlite.ops.matmul, args=(int(m), payload["N"], payload["K"]))
    s, args = task.apply_best(log)
    mod = tvmlite.build(s, args)
    rng = np.random.default_rng(0)
    a = tvmlite.asaligned(rng.uniform(-1, 1, (int(m), payload["K"])), "float32")
    b = tvmlite.asaligned(rng.uniform(-1, 1, (payload["K"], payload["N"])), "float32")
    c = tvmlite.empty((int(m), payload["N"]), "float32")
    t = mod.time_evaluator(number=1, repeat=payload["repeat"], min_repeat_ms=20)(a, b, c)
    out[m] = {"seconds": t.median}
print(json.dumps(out))
"""


def eval_sizes(lo: int, hi: int, tuned: list) -> list:
    """8 sizes log-uniform in [lo, hi] (bin centres), none of them a tuned size."""
    out: list = []
    for i in range(N_EVAL):
        m = round(lo * (hi / lo) ** ((i + 0.5) / N_EVAL))
        while m in tuned or m in out:
            m += 1
        out.append(min(m, hi))
    return out


def main() -> int:
    import tvmlite
    from tvmlite import search, te
    from tvmlite.search.template_free.dynamic import representative_sizes
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lo", type=int, default=1)
    p.add_argument("--hi", type=int, default=1024)
    p.add_argument("--trials", type=int, default=96)
    p.add_argument("--population", type=int, default=256)
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--out", default="bench/out/dynamic")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    threads = tvmlite.Target.host().cores
    opts = search.TuningOptions(seed=0, population=args.population, repeat=2,
                                min_repeat_ms=10)
    tuned = representative_sizes((args.lo, args.hi))
    sizes = eval_sizes(args.lo, args.hi, tuned)
    print(f"GMM M x {N} x {K}; range M={args.lo}..{args.hi}, tuned at {tuned}; evaluated at "
          f"{sizes}; {args.trials} trials each way", flush=True)

    dyn_log = out / "dynamic.jsonl"
    dyn_log.unlink(missing_ok=True)
    task = search.SearchTask(func=tvmlite.ops.matmul, args=(te.var("M"), N, K),
                             shapes={"M": (args.lo, args.hi)})
    t0 = time.perf_counter()
    res = task.tune(args.trials, dyn_log, opts)
    t_dyn = time.perf_counter() - t0
    table = res.dispatch
    print(f"dynamic: {t_dyn:.0f}s, {len(table.variants)} variant(s), ranges "
          f"{[(lo, hi, v) for lo, hi, v in table.ranges]}", flush=True)

    logs, t_exact = {}, 0.0
    for m in sizes:
        log = out / f"exact_{m}.jsonl"
        log.unlink(missing_ok=True)
        t0 = time.perf_counter()
        search.SearchTask(func=tvmlite.ops.matmul, args=(m, N, K)).tune(
            args.trials // N_EVAL, log, opts)
        t_exact += time.perf_counter() - t0
        logs[str(m)] = str(log)
    print(f"exact: {t_exact:.0f}s for {len(sizes)} sizes", flush=True)

    payload = {"N": N, "K": K, "range": [args.lo, args.hi], "log": str(dyn_log),
               "sizes": sizes, "logs": logs, "repeat": args.repeat}
    a = peers.run_worker(sys.executable, _DYNAMIC, payload, peers.kernel_env(threads))
    b = peers.run_worker(sys.executable, _EXACT, payload, peers.kernel_env(threads))
    for r in (a, b):
        if "error" in r:
            print("error:", r["error"])
            return 1
    rows, ab, an = [], [], []
    for m in sizes:
        flops = 2.0 * m * N * K
        ga = flops / a[str(m)]["seconds"] / 1e9
        gb = flops / b[str(m)]["seconds"] / 1e9
        npy = peers.time_numpy("matmul", [[m, K], [K, N]], threads)
        gn = flops / npy["seconds"] / 1e9 if "seconds" in npy else float("nan")
        ab.append(ga / gb)
        an.append(ga / gn)
        rows.append(f"| {m} | v{a[str(m)]['variant']} | {ga:.1f} | {gb:.1f} | {gn:.1f} | "
                    f"{ga / gb:.2f} | {ga / gn:.2f} |")
        assert a[str(m)]["max_err"] < 1e-2, a[str(m)]
    lines = [f"GMM M x {N} x {K}, M = {args.lo}..{args.hi} (tuned at {tuned}), "
             f"{args.trials} trials for the dynamic task and {args.trials // N_EVAL} per exact size",
             "", "| M | variant | (a) dispatch GFLOP/s | (b) exact GFLOP/s | (c) numpy GFLOP/s "
             "| a/b | a/numpy |", "| --- | --- | --- | --- | --- | --- | --- |", *rows, "",
             f"a/b: median {statistics.median(ab):.2f}, min {min(ab):.2f}; a/numpy: median "
             f"{statistics.median(an):.2f}, min {min(an):.2f}",
             f"tuning time: dynamic {t_dyn:.0f}s, exact {t_exact:.0f}s "
             f"({t_dyn / t_exact:.2f}x)"]
    text = "\n".join(lines)
    print(text)
    (out / "RESULTS.md").write_text(text + "\n")
    (out / "results.json").write_text(json.dumps(
        {"sizes": sizes, "tuned": tuned, "a": a, "b": b, "t_dynamic": t_dyn,
         "t_exact": t_exact, "ratio_ab": ab, "ratio_a_numpy": an}, indent=1))
    return 0 if all(math.isfinite(x) for x in ab) else 1


if __name__ == "__main__":
    raise SystemExit(main())
