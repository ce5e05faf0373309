"""How many measured candidates a kill -9 of `tvmlite tune` loses (issue 14, point 1).

Runs ``--runs`` tunings one after the other (``tvmlite tune matmul M=128 N=128 K=128
--trials 48`` by default, each into its own log) and kills each with SIGKILL at a random
moment, uniform in [``--min``, ``--max``] seconds after it started: some during start-up
or the first compiles, most while measuring. What was measured is counted by a process
the kill does not touch: the measuring worker (its own session) appends one line per
candidate it timed to ``TVMLITE_WORKER_TRACE`` before replying. After the kill, the
candidates it timed are compared with the records in the log that a worker executed
(not build errors). Lost = timed - logged; the goal is at most one (the candidate being
timed, or whose record was being written, at the kill).

    python -m bench kill-tune [--runs 10] [--min 2] [--max 20] [--seed S] [--keep DIR]
        [--out bench/out/kill_tune]

The table goes to ``<out>/results.md`` and ``results.json`` (bench/results.py).
"""
from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from bench import args as bench_args
from bench import results
from bench.results import Table
from tvmlite.search.measure.inputs import MeasureErrorNo
from tvmlite.search.records.record import load_records

ROOT = Path(__file__).resolve().parents[1]

BUILD_ERRORS = {MeasureErrorNo.INVALID_SCHEDULE, MeasureErrorNo.COMPILE_ERROR,
                MeasureErrorNo.BUILD_TIMEOUT}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (ProcessLookupError, OSError):
        return False


def one_run(folder: Path, i: int, delay: float, tune: list[str]) -> dict:
    log, trace = folder / f"run{i}.jsonl", folder / f"run{i}.worker"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TVMLITE_WORKER_TRACE=str(trace))
    proc = subprocess.Popen([sys.executable, "-m", "tvmlite", "tune", *tune, "--log", str(log),
                             "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env)
    time.sleep(delay)
    finished = proc.poll() is not None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    lines = trace.read_text().splitlines() if trace.exists() else []
    pids = {int(p) for p in re.findall(r'"pid": (\d+)', "\n".join(lines))}
    end = time.monotonic() + 30
    while any(_alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.1)            # an orphaned worker exits within a second
    timed = len(trace.read_text().splitlines()) if trace.exists() else 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        recs = load_records(log, missing_ok=True)
    executed = sum(r.result.error_no not in BUILD_ERRORS for r in recs)
    return {"run": i, "kill_at_s": delay, "finished_first": finished, "timed": timed,
            "logged": len(recs), "executed": executed, "lost": max(0, timed - executed)}


def main(argv: list[str] | None = None) -> int:
    ap = bench_args.parser("kill-tune", __doc__, out=ROOT / "bench" / "out" / "kill_tune")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--min", type=float, default=2.0, help="earliest kill, seconds")
    ap.add_argument("--max", type=float, default=20.0, help="latest kill, seconds")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", help="keep the logs and traces in this folder")
    ap.add_argument("--tune", default="matmul M=128 N=128 K=128 --trials 48",
                    help="the arguments of `tvmlite tune` (without --log)")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kill-tune-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"seed {seed}; tvmlite tune {args.tune}; logs in {folder}")
    print(f"{'run':>3} {'kill at':>8} {'timed':>6} {'logged':>7} {'executed':>9} {'lost':>5}")
    rows = []
    for i in range(args.runs):
        row = one_run(folder, i, rng.uniform(args.min, args.max), args.tune.split())
        rows.append(row)
        note = "  (had finished)" if row["finished_first"] else ""
        print(f"{i:>3} {row['kill_at_s']:>7.1f}s {row['timed']:>6} {row['logged']:>7} "
              f"{row['executed']:>9} {row['lost']:>5}{note}", flush=True)
    lost = [r["lost"] for r in rows]
    print(f"lost per run: {lost}; total {sum(lost)} of {sum(r['timed'] for r in rows)} "
          f"timed; runs losing more than one: {sum(x > 1 for x in lost)}")
    results.write(args.out / "results.md", "kill -9 of real tunings: candidates lost", [
        Table(("run", "kill at s", "timed", "logged", "executed", "lost", "had finished"),
              tuple((i, r["kill_at_s"], r["timed"], r["logged"], r["executed"], r["lost"],
                     "yes" if r["finished_first"] else "") for i, r in enumerate(rows)))],
        name="kill-tune", argv=argv or [],
        notes=[f"Seed {seed}; each run `tvmlite tune {args.tune}` killed with SIGKILL at a "
               f"random moment in [{args.min:g}, {args.max:g}] s. Lost = timed - logged; "
               f"total {sum(lost)} of {sum(r['timed'] for r in rows)} timed."])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
