"""Dynamic shapes: GMM with M symbolic and N = K = 1024 (or, ``--op conv``, a 3x3 conv2d
NHWC 14x14x128 -> 128 with a symbolic batch N), tuned once over a range of the size,
against kernels tuned for each exact size with the same total budget split evenly, and
numpy (GMM only: numpy has no convolution) and PyTorch.

1. ``dynamic``: one SearchTask over ``te.var("M")`` with ``shapes={"M": (lo, hi)}`` and
   ``--trials`` measurements: a few variants and a dispatch table (search/template_free/
   dynamic.py);
2. ``exact``: for each of 8 evaluation sizes, sampled log-uniformly in the range and
   never among the dynamic task's tuned sizes, a static SearchTask with ``trials // 8``;
3. in one fresh process per contender kind, at every evaluation size: (a) the dispatching
   kernel rebuilt from the dynamic log, (b) the best exact kernel of that size, (c) numpy
   (OpenBLAS; GMM only) and PyTorch (``--torch-python``: default ``$TVMLITE_TORCH_PYTHON``,
   else this python; its conv2d in channels_last, our NHWC) -- all in the same run,
   median of repeats.

Prints a table (GFLOP/s and the ratios a/b and a/numpy per size, their median and
minimum) and the two tuning times, and writes them to ``<out>/results.md`` and
``results.json`` (bench/results.py). Time it under ``flock /work/timing.lock``.

    python -m bench dynamic [--op gmm|conv] [--lo 1] [--hi 1024] [--trials 96]
        [--population 256] [--out bench/out/dynamic]
"""
from __future__ import annotations

import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import args as bench_args
from bench import peers, results
from bench.results import Table

HERE = Path(__file__).resolve().parent

N = K = 1024
N_EVAL = 8
# op: (tvmlite.ops name, arguments with None where the symbolic size goes, its name,
#      flops per unit of the size, numpy shapes at size m or None,
#      PyTorch (op, shapes at size m, kwargs, channels_last))
OPS = {"gmm": ("matmul", [None, N, K], "M", 2.0 * N * K, lambda m: [[m, K], [K, N]],
               lambda m: ("matmul", [[m, K], [K, N]], {}, False)),
       "conv": ("conv2d_nhwc", [None, 14, 14, 128, 128, 3, 1, 1], "N",
                2.0 * 14 * 14 * 128 * 128 * 9, None,
                lambda m: ("conv2d", [[m, 128, 14, 14], [128, 128, 3, 3]], {"padding": 1},
                           True))}

_SETUP = """
import numpy as np, tvmlite
from tvmlite import te, search
from tvmlite.te.bind import bind_sizes
from tvmlite.testing import random_inputs
def arrays(tensors):
    ins = iter(random_inputs(tensors, seed=0))
    return [next(ins) if t.op.__class__.__name__ == "PlaceholderOp" else
            tvmlite.empty(t.shape, t.dtype) for t in tensors]
def with_size(m):
    return [m if a is None else a for a in payload["args"]]
"""

_DYNAMIC = _SETUP + """
task = search.SearchTask(func=payload["op"], args=tuple(with_size(te.var(payload["size"]))),
                         shapes={payload["size"]: tuple(payload["range"])})
mod = task.apply_best(payload["log"])
from tvmlite.search.records.dispatch import latest_table
from tvmlite.search.records.record import load_records
table = latest_table(load_records(payload["log"]), task.workload)[1]
out = {}
for m in payload["sizes"]:
    xs = arrays(bind_sizes(task.workload.tensors, {payload["size"]: m}))
    t = mod.time_evaluator(number=1, repeat=payload["repeat"], min_repeat_ms=20)(*xs)
    out[str(m)] = {"seconds": t.median, "variant": table.variant_for(m)}
print(json.dumps(out))
"""

_EXACT = _SETUP + """
out = {}
for m, log in payload["logs"].items():
    task = search.SearchTask(func=payload["op"], args=tuple(with_size(int(m))))
    s, args = task.apply_best(log)
    mod = tvmlite.build(s, args)
    t = mod.time_evaluator(number=1, repeat=payload["repeat"], min_repeat_ms=20)(*arrays(args))
    out[m] = {"seconds": t.median}
print(json.dumps(out))
"""


def eval_sizes(lo: int, hi: int, tuned: list) -> list:
    """8 sizes log-uniform in [lo, hi] (bin centres), none of them a tuned size."""
    out: list = []
    for i in range(N_EVAL):
        m = round(lo * (hi / lo) ** ((i + 0.5) / N_EVAL))
        while (m in tuned or m in out) and m < hi:
            m += 1
        if m not in tuned and m not in out:
            out.append(m)
    return out


def tune_both(op, with_size, size, args, sizes, dyn_log, logs, opts) -> tuple:
    """(seconds of the dynamic tuning, seconds of all per-size tunings), logs written.
    Each side compiles into an empty kernel cache of its own (``TVMLITE_CACHE_DIR``), as
    a first tuning does: a cache warm from an earlier run makes its candidates free."""
    from tvmlite import search, te
    with tempfile.TemporaryDirectory(prefix="tvmlite-bench-cache-") as cold:
        os.environ["TVMLITE_CACHE_DIR"] = os.path.join(cold, "dynamic")
        dyn_log.unlink(missing_ok=True)
        task = search.SearchTask(func=op, args=with_size(te.var(size)),
                                 shapes={size: (args.lo, args.hi)})
        t0 = time.perf_counter()
        res = task.tune(args.trials, dyn_log, opts)
        t_dyn = time.perf_counter() - t0
        table = res.dispatch
        print(f"dynamic: {t_dyn:.0f}s, {len(table.variants)} variant(s), ranges "
              f"{[(lo, hi, v) for lo, hi, v in table.ranges]}", flush=True)
        t_exact = 0.0
        os.environ["TVMLITE_CACHE_DIR"] = os.path.join(cold, "exact")
        for m in sizes:
            Path(logs[str(m)]).unlink(missing_ok=True)
            t0 = time.perf_counter()
            search.SearchTask(func=op, args=with_size(m)).tune(
                args.trials // len(sizes), logs[str(m)], opts)
            t_exact += time.perf_counter() - t0
        print(f"exact: {t_exact:.0f}s for {len(sizes)} sizes", flush=True)
        os.environ.pop("TVMLITE_CACHE_DIR", None)
    return t_dyn, t_exact


def main(argv: list[str] | None = None) -> int:
    import tvmlite
    from tvmlite import search
    from tvmlite.search.template_free.dynamic import representative_sizes
    p = bench_args.parser("dynamic", __doc__, trials=96, out=HERE / "out" / "dynamic",
                          torch_python=True)
    p.add_argument("--op", choices=sorted(OPS), default="gmm")
    p.add_argument("--lo", type=int, default=1)
    p.add_argument("--hi", type=int, default=1024)
    p.add_argument("--population", type=int, default=256)
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--evaluate-only", action="store_true",
                   help="reuse the logs and tuning times of an earlier run in --out; time "
                        "(a), (b) and the peers again")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    threads = tvmlite.Target.host().cores
    opts = search.TuningOptions(seed=0, population=args.population, repeat=2,
                                min_repeat_ms=10)
    op, op_args, size, unit_flops, np_shapes, torch_case = OPS[args.op]
    tuned = representative_sizes((args.lo, args.hi))
    sizes = eval_sizes(args.lo, args.hi, tuned)
    what = f"GMM M x {N} x {K}" if args.op == "gmm" else \
        "conv2d NHWC N x 14 x 14 x 128 -> 128, 3x3, pad 1"
    print(f"{what}; range {size}={args.lo}..{args.hi}, tuned at {tuned}; evaluated at "
          f"{sizes}; {args.trials} trials each way", flush=True)

    def with_size(m):
        return tuple(m if a is None else a for a in op_args)

    dyn_log = out / "dynamic.jsonl"
    logs = {str(m): str(out / f"exact_{m}.jsonl") for m in sizes}
    if args.evaluate_only:
        before = json.loads((out / "results.json").read_text())
        t_dyn, t_exact = before["t_dynamic"], before["t_exact"]
    else:
        t_dyn, t_exact = tune_both(op, with_size, size, args, sizes, dyn_log, logs, opts)

    payload = {"op": op, "args": op_args, "size": size, "range": [args.lo, args.hi],
               "log": str(dyn_log),
               "sizes": sizes, "logs": logs, "repeat": args.repeat}
    a = peers.run_worker(sys.executable, _DYNAMIC, payload, peers.kernel_env(threads))
    b = peers.run_worker(sys.executable, _EXACT, payload, peers.kernel_env(threads))
    for r in (a, b):
        if "error" in r:
            print("error:", r["error"])
            return 1
    rows, ab, an, at_ = [], [], [], []
    torch_version = None
    for m in sizes:
        flops = unit_flops * m
        ga = flops / a[str(m)]["seconds"] / 1e9
        gb = flops / b[str(m)]["seconds"] / 1e9
        npy = peers.time_numpy("matmul", np_shapes(m), threads) if np_shapes else {}
        gn = flops / npy["seconds"] / 1e9 if "seconds" in npy else float("nan")
        t_op, t_shapes, t_kw, t_cl = torch_case(m)
        tch = peers.time_torch(t_op, t_shapes, threads, t_kw, python=args.torch_python,
                               channels_last=t_cl)
        gt = flops / tch["seconds"] / 1e9 if "seconds" in tch else float("nan")
        torch_version = tch.get("version", torch_version)
        ab.append(ga / gb)
        if np_shapes:
            an.append(ga / gn)
        if "seconds" in tch:
            at_.append(ga / gt)
        rows.append((m, f"v{a[str(m)]['variant']}", ga, gb, gn, gt, ga / gb, ga / gn, ga / gt))
    summary = [f"a/b: median {statistics.median(ab):.2f}, min {min(ab):.2f}"
               + (f"; a/numpy: median {statistics.median(an):.2f}, min {min(an):.2f}"
                  if an else "")
               + (f"; a/torch: median {statistics.median(at_):.2f}, min {min(at_):.2f}"
                  if at_ else ""),
               f"tuning time: dynamic {t_dyn:.0f}s, exact {t_exact:.0f}s "
               f"({t_dyn / t_exact:.2f}x)"]
    table = Table((size, "variant", "(a) dispatch GFLOP/s", "(b) exact GFLOP/s",
                   "(c) numpy GFLOP/s", f"(c) PyTorch {torch_version or '(not found)'} GFLOP/s",
                   "a/b", "a/numpy", "a/torch"), tuple(rows), notes=tuple(summary))
    md, _ = results.write(
        out / "results.md", f"{what}: tuned once over a range vs per exact size", [table],
        name="dynamic", argv=argv or [],
        notes=[f"{size} = {args.lo}..{args.hi} (tuned at {tuned}), {args.trials} trials for "
               f"the dynamic task and {args.trials // len(sizes)} per exact size."],
        header={"sizes": sizes, "tuned": tuned, "a": a, "b": b, "t_dynamic": t_dyn,
                "t_exact": t_exact, "ratio_ab": ab, "ratio_a_numpy": an,
                "ratio_a_torch": at_})
    print(md.read_text())
    return 0 if all(math.isfinite(x) for x in ab) else 1


if __name__ == "__main__":
    raise SystemExit(main())
