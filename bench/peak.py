"""Measure this CPU's peak fp32 FMA throughput (GFLOP/s): a thin wrapper over tvmlite.target.peak.

    python -m bench peak [--threads N] [--seconds S] [--runs R]

From another benchmark::

    from bench.peak import measure_peak_gflops

``tvmlite target --peak`` does the same measurement and caches it for tuning summaries.
"""
from __future__ import annotations

from bench import args as bench_args
from tvmlite.target.peak import measure_runs as _measure_runs
from tvmlite.target.target import Target


def measure_runs(threads: int | None = None, seconds: float = 1.0, runs: int = 5
                 ) -> list[float]:
    """GFLOP/s of ``runs`` timed runs with ``threads`` bound threads (default: all cores)."""
    return _measure_runs(Target.host(), threads, seconds, runs)


def measure_peak_gflops(threads: int | None = None, seconds: float = 1.0,
                        runs: int = 5) -> float:
    """Peak fp32 FMA GFLOP/s: the best of ``runs`` runs with ``threads`` threads (a peak is
    an upper bound; the other runs lost time to something else, as ``tvmlite target
    --peak`` reads them too)."""
    return max(measure_runs(threads, seconds, runs))


def main(argv: list[str] | None = None) -> None:
    parser = bench_args.parser("peak", __doc__)
    parser.add_argument("--threads", type=int, default=None, help="default: all cores")
    parser.add_argument("--seconds", type=float, default=1.0, help="per run")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    target = Target.host()
    threads = args.threads or target.cores
    runs = measure_runs(threads, args.seconds, args.runs)
    peak = max(runs)
    print(f"peak fp32 FMA: {peak:.1f} GFLOP/s, the best of {len(runs)} runs "
          f"({threads} threads, bound), per core {peak / threads:.1f}")
    print(f"  runs: {', '.join(f'{r:.1f}' for r in runs)}; paper estimate "
          f"{target.peak_gflops_estimate():.1f}")


if __name__ == "__main__":
    raise SystemExit(main())
