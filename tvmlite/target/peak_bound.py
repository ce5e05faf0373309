"""The peak as an upper bound: this CPU's theoretical peak, the probe's noise, and what a
kernel's GFLOP/s means against both.

A measured peak (``peak.py``) only ever reads low: other work on the machine, a clock
that has not ramped, a timer tick all take from it, nothing adds to it. So a good kernel
can honestly run a little above it, and that is a result, not an error. Three figures
decide what a kernel's GFLOP/s means (``Verdict.kind``):

- below the measured peak x (1 - the probe's noise) it is a share of it (``"share"``);
- within the noise of the measured peak, up to measured x (1 + noise), the kernel runs
  *at the peak* (``"at_peak"``); the noise is the spread of the probe's runs, at least
  ``MIN_NOISE``;
- above that but not above the theoretical peak the probe read low, and the kernel's
  figure is the better estimate of the peak (``"peak_low"``: the caller caches it);
- above the theoretical peak it cannot be: a wrong time (``"impossible"``). With no
  clock to compute the theoretical peak from, such a figure is ``"unchecked"``.

The theoretical peak is cores x FMA pipes x vector lanes x 2 flops x the highest clock
the CPU reports (``max_clock``), read from the Target, never from a table of CPUs. It is
a bound, not a prediction: a CPU that splits a wide FMA into halves (Zen 4 runs a 512-bit
FMA as two 256-bit ones) reaches half of it. The clock is the cpufreq maximum; without
cpufreq (most VMs) only /proc/cpuinfo's "cpu MHz" is known, which is the nominal clock
there, and turbo runs above it, so that figure is raised by ``NOMINAL_HEADROOM`` before
it bounds anything.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Sequence

from tvmlite.target.detect import cpuinfo_mhz
from tvmlite.target.target import Target

__all__ = ["MIN_NOISE", "MAX_NOISE", "NOMINAL_HEADROOM", "Clock", "Verdict", "max_clock",
           "run_noise", "share_of_peak", "theoretical_gflops"]

MIN_NOISE = 0.03        # a probe never repeats closer than this on a shared machine
MAX_NOISE = 0.10        # a wider spread says the probe read low, not that 1.5x is "at" it
NOMINAL_HEADROOM = 1.5  # turbo over a nominal clock (cpu MHz without cpufreq), generous
CPU_DIR = "/sys/devices/system/cpu"
CPUINFO = "/proc/cpuinfo"


@dataclass(frozen=True)
class Clock:
    """The highest clock the CPU reports: ``ghz``, and whether it is the cpufreq maximum
    (``is_max``) or only /proc/cpuinfo's cpu MHz (a nominal clock, exceeded by turbo)."""
    ghz: float
    is_max: bool

    @property
    def bound_ghz(self) -> float:
        """The clock a bound may use: the maximum, or the nominal one with headroom."""
        return self.ghz if self.is_max else self.ghz * NOMINAL_HEADROOM


def max_clock(cpu_dir: str | Path = CPU_DIR, cpuinfo: str | Path = CPUINFO) -> Clock | None:
    """The highest ``cpu*/cpufreq/cpuinfo_max_freq`` under ``cpu_dir`` (kHz), else the
    highest "cpu MHz" line of ``cpuinfo``, else None (unknown)."""
    khz = []
    for p in Path(cpu_dir).glob("cpu[0-9]*/cpufreq/cpuinfo_max_freq"):
        try:
            khz.append(float(p.read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            continue
    if khz and max(khz) > 0:
        return Clock(max(khz) / 1e6, True)
    mhz = cpuinfo_mhz(cpuinfo)
    return Clock(max(mhz) / 1e3, False) if mhz else None


def theoretical_gflops(target: Target, dtype: str = "float32",
                       clock: Clock | Literal["detect"] | None = "detect") -> float | None:
    """cores x FMA pipes x lanes of ``dtype`` x 2 x the clock ``bound_ghz`` of ``target``,
    GFLOP/s; None when the clock is unknown. ``clock`` defaults to ``max_clock()``."""
    clk = max_clock() if isinstance(clock, str) else clock
    if clk is None:
        return None
    _, pipes = target.fma_latency_pipes
    return target.cores * pipes * target.vector_lanes(dtype) * 2 * clk.bound_ghz


def run_noise(runs: Sequence[float]) -> float:
    """The probe's noise: its runs' spread (best - worst) / best, within
    [``MIN_NOISE``, ``MAX_NOISE``]."""
    vals = [float(r) for r in runs if r > 0]
    spread = (max(vals) - min(vals)) / max(vals) if vals else 0.0
    return min(MAX_NOISE, max(MIN_NOISE, spread))


@dataclass(frozen=True)
class Verdict:
    """A kernel's ``gflops`` read against a ``peak`` (the measured or estimated one, <= 0:
    none), the probe's ``noise`` and the ``theoretical`` peak (None: unknown); ``how``
    says where the peak came from ("measured", "estimated; ...")."""
    gflops: float
    peak: float
    noise: float = MIN_NOISE
    theoretical: float | None = None
    how: str = ""

    @property
    def bound(self) -> float | None:
        """The theoretical peak, when it bounds anything: a figure below the measured
        peak itself says the clock read is not the one the CPU ran at."""
        t = self.theoretical
        return t if t is not None and t >= self.peak else None

    @property
    def kind(self) -> str:
        """"unknown", "share", "at_peak", "peak_low", "unchecked" or "impossible"."""
        if self.peak <= 0:
            return "unknown"
        if self.bound is not None and self.gflops > self.bound:
            return "impossible"
        if self.gflops < self.peak * (1 - self.noise):
            return "share"
        if self.gflops <= self.peak * (1 + self.noise):
            return "at_peak"
        return "peak_low" if self.bound is not None else "unchecked"

    @property
    def at_peak(self) -> bool:
        """The kernel runs at the peak (within the noise, or above a probe that read low)."""
        return self.kind in ("at_peak", "peak_low")

    def text(self, what: str = "the peak") -> str:
        """The share, or what the figure means when it is not one, in one phrase."""
        g, p, kind = self.gflops, self.peak, self.kind
        how = f", {self.how}" if self.how else ""
        probe = f"the probe's {p:.1f}" + (f" ({self.how})" if self.how else "")
        if kind == "unknown":
            return f"unknown share of {what} (no peak)"
        if kind == "share":
            pct = 100.0 * g / p
            share = f"{pct:.2f}%" if pct >= 1 else f"{pct:.3g}%"
            return f"{share} of {what}" + (f" ({p:.1f} GFLOP/s{how})" if self.how else "")
        if kind == "at_peak":
            return f"at {what} ({g:.1f} of {p:.1f} GFLOP/s{how})"
        if kind == "peak_low":
            return (f"at {what}: {g:.1f} GFLOP/s, more than its noise ({self.noise:.0%}) "
                    f"above {probe} and below the theoretical "
                    f"{self.bound:.1f}: the probe read low, so this figure is the new "
                    f"measured peak")
        if kind == "unchecked":
            return (f"above {what}: {g:.1f} GFLOP/s, more than its noise ({self.noise:.0%}) "
                    f"above {probe}; the CPU reports no clock, so no "
                    f"theoretical peak can check it: re-run `tvmlite target --peak` on a "
                    f"quiet machine")
        return (f"MEASUREMENT PROBLEM: {g:.1f} GFLOP/s is above this CPU's theoretical "
                f"peak ({self.bound:.1f} GFLOP/s: cores x FMA pipes x lanes x 2 x clock), "
                f"which cannot be: the time is wrong")


def share_of_peak(gflops: float, peak_gflops: float, what: str = "the peak",
                  noise: float = MIN_NOISE, theoretical: float | None = None) -> str:
    """``"42.10% of <what>"``, or what a figure above ``peak_gflops`` means
    (``Verdict.text``): at the peak within ``noise``, a peak measured low below
    ``theoretical``, a measurement problem above it."""
    return Verdict(gflops, peak_gflops, noise, theoretical).text(what)
