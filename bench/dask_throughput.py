"""Throughput of one tuning measured on a Dask cluster: trials per minute with 1 and with
2 Dask workers, the client compiling every candidate (``compile_on="client"``) against
the workers compiling what they measure (``compile_on="worker"``), against
``LocalRunner``, and the overhead Dask adds per candidate.

The cluster is a ``LocalCluster`` of worker processes on this machine, each worker with
one thread and ``measure=1``: two workers on a 2-core machine are two small "machines",
each timing its candidates pinned to its own core (``DaskRunner`` splits a shared host's
cores between its workers), with single-threaded kernels (``n_threads=1``). Every
configuration runs the same template-free tuning (same workload, seed and settings) and
starts from an empty compile cache (the client's and the workers': ``HOME`` is set before
the cluster starts), so each pays its own compiles, as a fresh tuning does. With
``compile_on="worker"`` the client only lowers; each worker compiles on its own core
before it times.

Overhead per candidate: one batch of already-compiled candidates measured by a
``LocalRunner`` and by a ``DaskRunner`` on one worker with the same (tiny) timing
settings, after a warm-up batch; (Dask wall - local wall) / candidates.

    python -m bench dask-throughput [--trials 128] [--batch 64] [--out bench/out/dask]
        [--compile-on client,worker] [--workers 1,2]

The table goes to ``<out>/results.md`` and ``results.json`` (bench/results.py).

Run it alone (flock /work/timing.lock ...): the numbers are wall times.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from bench import args as bench_args
from bench import results
from bench.results import Table

HERE = Path(__file__).resolve().parent

OP, ARGS = "matmul", (64, 64, 64, "float32")


def _options(args: argparse.Namespace, runner=None):
    from tvmlite.search.options import TuningOptions
    return TuningOptions(population=args.population, generations=1,
                         measures_per_round=args.batch, seed=0, number=1, repeat=args.repeat,
                         min_repeat_ms=args.min_repeat_ms, n_threads=1, runner=runner)


def _measuring(args: argparse.Namespace) -> dict:
    return dict(number=1, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms,
                n_threads=1, timeout=10.0)


def fresh_home(tmp: Path, label: str) -> None:
    """An empty compile cache for this process and the workers it starts next (the cache
    lives under ~/.cache; TVMLITE_CACHE_DIR would override it, so it is unset)."""
    home = tmp / f"home-{label}"
    home.mkdir()
    os.environ["HOME"] = str(home)
    os.environ.pop("TVMLITE_CACHE_DIR", None)


def tune_once(args: argparse.Namespace, runner, tmp: Path, label: str) -> dict:
    """One tuning from an empty log (and the compile cache ``fresh_home`` emptied); its
    trials per minute, and how many candidates the workers compiled."""
    from tvmlite.search.records.record import load_records
    from tvmlite.search.template_free.task import SearchTask
    task = SearchTask(func=OP, args=ARGS)
    start = time.perf_counter()
    res = task.tune(args.trials, tmp / f"{label}.jsonl", _options(args, runner))
    wall = time.perf_counter() - start
    records = load_records(tmp / f"{label}.jsonl")
    return {"label": label, "trials": res.measured, "wall": wall,
            "on_workers": sum(bool(r.result.compiled_on) for r in records),
            "per_min": 60.0 * res.measured / wall,
            "best_ms": res.best.mean_cost * 1e3 if res.best is not None else float("nan"),
            "search_s": res.search_seconds, "measure_s": res.measure_seconds,
            "run_s": sum(r.result.run_seconds for r in records)}


def overhead(args: argparse.Namespace, address: str, n: int = 32) -> dict:
    """Dask's wall time per candidate over LocalRunner's, on one batch of built ones."""
    from tvmlite.search.measure.builder import LocalBuilder
    from tvmlite.search.measure.dask_runner import DaskRunner
    from tvmlite.search.measure.inputs import MeasureInput
    from tvmlite.search.measure.runner import LocalRunner
    from tvmlite.search.records.workload import Workload
    wl = Workload.from_op(OP, *ARGS)
    builder = LocalBuilder()
    inputs = [MeasureInput(wl, (), decisions=i) for i in range(n)]
    builds = builder.build(inputs)
    tiny = dict(number=1, repeat=1, min_repeat_ms=0.0, n_threads=1, timeout=10.0)
    walls = {}
    for name, runner in (("local", LocalRunner(**tiny)), ("dask", DaskRunner(address, **tiny))):
        with runner:
            runner.run(inputs[:2], builds[:2], builder.build_reference)    # warm-up
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                results = runner.run(inputs, builds, builder.build_reference)
                best = min(best, time.perf_counter() - start)
            assert all(r.ok for r in results), [r.error_msg for r in results if not r.ok]
            walls[name] = best
    return {"local_ms": 1e3 * walls["local"] / n, "dask_ms": 1e3 * walls["dask"] / n,
            "overhead_ms": 1e3 * (walls["dask"] - walls["local"]) / n, "n": n}


def main(argv: Sequence[str] | None = None) -> int:
    p = bench_args.parser("dask-throughput", __doc__, trials=128, out=HERE / "out" / "dask")
    p.add_argument("--batch", type=int, default=64,
                   help="measurements per round (default: TuningOptions' default, 64)")
    p.add_argument("--population", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--min-repeat-ms", type=float, default=100.0)
    p.add_argument("--compile-on", default="client,worker", type=_choices("client", "worker"),
                   help="where candidates are compiled, one run each (default client,worker)")
    p.add_argument("--workers", default="1,2", type=_counts,
                   help="Dask workers, one cluster each (default 1,2)")
    args = p.parse_args(argv)
    try:
        import distributed
    except ImportError:
        p.error("needs Dask's distributed: pip install 'tvmlite[dask]'")
    from tvmlite.search.measure.dask_runner import DaskRunner
    load0 = os.getloadavg()[0]
    rows, cost = [], None
    with tempfile.TemporaryDirectory(prefix="tvmlite-dask-bench-") as d:
        tmp = Path(d)
        home = os.environ.get("HOME")
        try:
            warm = argparse.Namespace(**{**vars(args), "trials": 4, "batch": 4})
            fresh_home(tmp, "warm-up")
            tune_once(warm, None, tmp, "warm-up")     # imports, xgboost, the peak cache
            fresh_home(tmp, "local")
            rows.append(tune_once(args, None, tmp, "LocalRunner"))
            for n_workers in args.workers:
                for where in args.compile_on:
                    label = f"DaskRunner, {n_workers} worker(s), compile on {where}"
                    fresh_home(tmp, label)      # before the workers start: theirs too
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        cluster = distributed.LocalCluster(
                            n_workers=n_workers, threads_per_worker=1, processes=True,
                            resources={"measure": 1}, dashboard_address=None)
                    try:
                        runner = DaskRunner(cluster.scheduler_address, compile_on=where,
                                            **_measuring(args))
                        rows.append(tune_once(args, runner, tmp, label))
                        if n_workers == 1 and cost is None:
                            cost = overhead(args, cluster.scheduler_address)
                    finally:
                        cluster.close()
        finally:
            if home is not None:
                os.environ["HOME"] = home
    one = next((r for r in rows if "1 worker(s), compile on client" in r["label"]), rows[0])
    table = Table(("runner", "trials", "compiled on workers", "wall s", "trials/min",
                   f"x {one['label']}", "search s", "build+measure s",
                   "timing s (sum over workers)", "best ms"),
                  tuple((r["label"], r["trials"], r["on_workers"], r["wall"], r["per_min"],
                         r["per_min"] / one["per_min"], r["search_s"], r["measure_s"],
                         r["run_s"], f"{r['best_ms']:.4f}") for r in rows),
                  notes=() if cost is None else (
                      f"Dask's overhead per candidate: {cost['overhead_ms']:.1f} ms "
                      f"({cost['n']} built candidates, tiny timing: {cost['local_ms']:.1f} ms "
                      f"each with LocalRunner, {cost['dask_ms']:.1f} ms with DaskRunner on 1 "
                      "worker; best of 3).",))
    md, js = results.write(
        args.out / "results.md", "Measuring on a Dask cluster: throughput", [table],
        name="dask-throughput", argv=list(argv or []),
        notes=[f"A shared machine: load average {load0:.1f} at the start, "
               f"{os.getloadavg()[0]:.1f} at the end.",
               f"One template-free tuning of {OP}{ARGS[:3]}: {args.trials} trials, batches of "
               f"{args.batch}, population {args.population}, seed 0; each candidate checked, "
               f"then timed {args.repeat} x >= {args.min_repeat_ms:g} ms, single-threaded "
               "(n_threads=1); an empty compile cache per run. Dask: a LocalCluster of "
               "worker processes (1 thread, measure=1 each); 2 workers measure pinned to "
               "one core each. Compile on worker: the client lowers each candidate and "
               "the worker that times it compiles it (DaskRunner(compile_on='worker'), "
               "the same compiler here), on its own core; compile on client: the client "
               "compiles on its cores and ships the library."], header={"overhead": cost})
    print(md.read_text())
    print(f"wrote {md} and {js}")
    return 0


def _choices(*allowed: str):
    def parse(text: str) -> tuple[str, ...]:
        got = tuple(t.strip() for t in text.split(",") if t.strip())
        bad = [t for t in got if t not in allowed]
        if bad or not got:
            raise argparse.ArgumentTypeError(f"{text!r}: use a comma list of "
                                             f"{', '.join(allowed)}")
        return got
    return parse


def _counts(text: str) -> tuple[int, ...]:
    try:
        got = tuple(int(t) for t in text.split(","))
    except ValueError:
        got = ()
    if not got or min(got) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: use a comma list of worker counts, "
                                         "e.g. 1,2")
    return got


if __name__ == "__main__":
    raise SystemExit(main())
