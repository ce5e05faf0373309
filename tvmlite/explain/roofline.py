"""The roofline of one kernel: what bounds it, and how close the measured time comes.

Attainable GFLOP/s = min(FMA peak, for every level: its bandwidth x flops / its bytes).
The peak is ``target/peak.py``'s measured fp32 FMA peak (halved for float64); the
bandwidths are ``target/bandwidth.py``'s measured read GB/s per level; the bytes per
level come from ``traffic.py`` (L1: every load and store executed; L2, L3, memory: the
bytes crossing the boundary below L1d, L2, L3 by the reuse-distance model).

The measured figures only ever read low, so a kernel measured a little above its
attainable GFLOP/s runs *at* its bound (``peak_bound.Verdict``: within the noise of the
probe, or above a probe that read low), and is said to be, not shown as 101%.
"""
from __future__ import annotations

from dataclasses import dataclass

from tvmlite.target.peak_bound import MIN_NOISE, Verdict


@dataclass(frozen=True)
class Level:
    """One memory level: the bytes it serves, its bandwidth, the flops/s they allow."""
    name: str
    bytes: int
    gbps: float | None

    def attainable(self, flops: int) -> float | None:
        if self.gbps is None or self.bytes <= 0:
            return None
        return self.gbps * flops / self.bytes


@dataclass(frozen=True)
class Roofline:
    flops: int
    levels: tuple                 # Level, L1 first
    peak_gflops: float
    peak_source: str              # how the peak was obtained
    bandwidth_source: str
    seconds: float | None = None  # measured time of one run
    noise: float = MIN_NOISE      # the peak probe's relative spread
    theoretical_gflops: float | None = None   # the CPU's theoretical peak (None: unknown)

    @property
    def bound(self) -> str:
        """"compute" or the name of the level whose bandwidth limits the kernel."""
        best, name = self.peak_gflops, "compute"
        for lv in self.levels:
            a = lv.attainable(self.flops)
            if a is not None and a < best:
                best, name = a, lv.name
        return name

    @property
    def attainable_gflops(self) -> float:
        vals = [lv.attainable(self.flops) for lv in self.levels]
        return min([self.peak_gflops, *[v for v in vals if v is not None]])

    @property
    def measured_gflops(self) -> float | None:
        return None if not self.seconds else self.flops / self.seconds / 1e9

    @property
    def fraction(self) -> float | None:
        m = self.measured_gflops
        return None if m is None else m / self.attainable_gflops

    @property
    def verdict(self) -> Verdict | None:
        """The measured GFLOP/s read against the attainable ones (None: not measured)."""
        m = self.measured_gflops
        if m is None:
            return None
        return Verdict(m, self.attainable_gflops, self.noise, self.theoretical_gflops)

    @property
    def at_bound(self) -> bool:
        """The kernel runs at what its bound allows: nothing in its schedule limits it."""
        v = self.verdict
        return v is not None and v.at_peak

    def _measured_text(self) -> str:
        """"91% of attainable", "at the peak (216.6 of 215.2 GFLOP/s)", or why a figure
        above the roofline is not a result."""
        v = self.verdict
        if v is None:
            return ""
        kind, pct = v.kind, f"{v.gflops / v.peak:.0%} of attainable"
        if kind == "share":
            return pct
        if kind == "impossible":
            return (f"MEASUREMENT PROBLEM: {v.gflops:.1f} GFLOP/s is above this CPU's "
                    f"theoretical peak ({v.bound:.1f}): the time is wrong")
        if self.bound != "compute":
            if kind == "at_peak":
                return f"at attainable ({v.gflops:.1f} of {v.peak:.1f} GFLOP/s)"
            return pct + " (above the roofline: a bandwidth measured low, or the model " \
                "overcounts the bytes, see explain)"
        if kind == "at_peak":
            return f"at the peak ({v.gflops:.1f} of {v.peak:.1f} GFLOP/s)"
        if kind == "peak_low":
            return (f"at the peak ({v.gflops:.1f} GFLOP/s; the {v.peak:.1f} measured read "
                    f"low)")
        return pct + " (above the measured peak by more than its noise; no clock to check " \
            "it against the theoretical peak)"

    def level(self, name: str) -> Level | None:
        return next((lv for lv in self.levels if lv.name == name), None)

    def bound_level(self) -> Level:
        """The level ``bound`` names; only for a kernel not compute-bound (StopIteration
        otherwise), as ``bound`` then always names one of ``levels``."""
        return next(lv for lv in self.levels if lv.name == self.bound)

    def one_line(self) -> str:
        """"compute-bound, 91% of attainable" / "L2-bound: 4.1 B/flop, 60% of attainable" /
        "compute-bound, at the peak (216.6 of 215.2 GFLOP/s)"."""
        frac = self._measured_text()
        if self.bound == "compute":
            return "compute-bound" + (f", {frac}" if frac else "")
        lv = self.bound_level()
        head = f"{self.bound}-bound: {lv.bytes / max(1, self.flops):.2g} B/flop"
        return head + (f", {frac}" if frac else "")

    def lines(self) -> list[str]:
        out = [f"flops:       {self.flops:,} per run",
               f"peak:        {self.peak_gflops:.1f} GFLOP/s ({self.peak_source})",
               f"bandwidth:   {self.bandwidth_source}"]
        for lv in self.levels:
            a = lv.attainable(self.flops)
            bw = "unknown" if lv.gbps is None else f"{lv.gbps:.0f} GB/s"
            intensity = f"{self.flops / lv.bytes:8.3g}" if lv.bytes else f"{'-':>8}"
            att = "-" if a is None else f"{a:.1f} GFLOP/s"
            out.append(f"  {lv.name:<7} {lv.bytes:>14,} B  {intensity} flop/B  at {bw:>9}"
                       f" -> {att}")
        m, v = self.measured_gflops, self.verdict
        out.append(f"bound:       {self.bound}; attainable {self.attainable_gflops:.1f} GFLOP/s")
        if m is not None and v is not None and self.seconds is not None:  # all three, or none
            out.append(f"measured:    {m:.2f} GFLOP/s ({self.seconds * 1e3:.4g} ms): "
                       f"{self._measured_text()}")
            if self.bound != "compute" and v.kind not in ("share", "at_peak"):
                out.append("             (the bandwidth was measured on a busier machine, or "
                           "the model overcounts: its L1 bytes count every load the IR holds, "
                           "some of which the compiler merges)")
        return out
