"""How busy this machine is before a tuning times kernels on it.

A parallel kernel timed while other processes hold the cores waits at every OpenMP
barrier for a thread the OS has not scheduled: a 90 us classifier matmul of two threads
measured 30 ms beside a few compiles on a 2-core machine, while a serial naive loop
measured its usual 1.4 ms, so the search kept the naive loop and the tuned model ran 25x
slower than the untuned one. The measurements are true for the moment they were taken;
what a user wants is the schedule that is fastest on a quiet machine. No measuring
protocol recovers that from inside a loaded one, so a tuning that starts on a busy
machine says so before it measures anything (timings there favour serial schedules).
"""
from __future__ import annotations

import os

__all__ = ["BUSY_LOAD_PER_CORE", "busy_warning", "machine_busy_warning"]

# a 1-minute load average above this share of the cores is "busy": a quiet 2-core machine
# reads 0.0-0.5, one running a second tuning or a compile job reads 1.5 and up
BUSY_LOAD_PER_CORE = 0.75


def busy_warning(load: float, cores: int) -> str | None:
    """The warning for a 1-minute load average of ``load`` on ``cores`` cores, or None."""
    if cores < 1 or load <= BUSY_LOAD_PER_CORE * cores:
        return None
    return (f"warning: this machine is busy (load average {load:.1f} on {cores} cores): "
            f"parallel candidates will time slower than they run on a quiet machine and "
            f"the search may keep worse, serial schedules; tune when it is quiet")


def machine_busy_warning(cores: int | None = None) -> str | None:
    """``busy_warning`` for this machine now (None where the OS gives no load average)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):   # not every OS has one
        return None
    return busy_warning(load, cores or os.cpu_count() or 1)
