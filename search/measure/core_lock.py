"""Measuring processes on one machine take turns for the cores they time on.

Two tunings on one machine (two ``tvmlite tune``, a tuning beside a benchmark) would
otherwise run their kernels at the same moment, and each would time the other's load:
the issue that brought this module measured one schedule at a fraction of its speed.
So whatever executes candidates (the runner's worker: references, checks, timings) holds
a ``CoreLock`` on the cores it runs on, and releases it between candidates; compiling
holds nothing (it is not timed, and a search spends most of its time there).

The lock is one ``flock``-ed file per core in a per-user folder (``lock_dir()``), taken
in increasing core order (two lockers of overlapping sets never deadlock). A kernel of
all cores locks every core; a single-threaded worker pinned to core 1 locks core 1 only,
so workers pinned to different cores (one per core, as a cluster of single-threaded
workers is run) still measure at once. ``flock`` locks die with their process, so a
killed tuning never leaves a core locked.
"""
from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

__all__ = ["CoreLock", "lock_dir", "usable_cores"]


def lock_dir() -> Path:
    """The per-user folder of the lock files (created on first use, private)."""
    path = Path(tempfile.gettempdir()) / f"tvmlite-locks-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def usable_cores() -> tuple[int, ...]:
    """The cores this process may run on (its affinity mask), in order."""
    return tuple(sorted(os.sched_getaffinity(0)))


class CoreLock:
    """An exclusive lock on ``cores`` (core numbers), for use as ``with CoreLock(...):``.

    ``directory`` defaults to ``lock_dir()``. ``acquire`` blocks until every core is free;
    the lock is not re-entrant (a second ``acquire`` of the same object raises)."""

    def __init__(self, cores: Iterable[int], directory: str | os.PathLike | None = None):
        cores = tuple(sorted(set(cores)))
        if not cores or any(isinstance(c, bool) or not isinstance(c, int) or c < 0
                            for c in cores):
            raise ValueError(f"CoreLock(cores={cores!r}): use a non-empty set of core "
                             f"numbers (ints >= 0)")
        self.cores = cores
        self.directory = Path(directory) if directory is not None else None
        self._fds: list[int] = []

    def paths(self) -> list[Path]:
        """The lock file of each core."""
        folder = self.directory if self.directory is not None else lock_dir()
        return [folder / f"core-{c}.lock" for c in self.cores]

    @property
    def held(self) -> bool:
        return bool(self._fds)

    def acquire(self) -> None:
        if self._fds:
            raise RuntimeError(f"CoreLock{self.cores} is already held by this object")
        try:
            for path in self.paths():          # increasing core order: no deadlock
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
                self._fds.append(fd)
                fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:                  # a Ctrl-C while waiting: hold nothing
            self.release()
            raise

    def release(self) -> None:
        while self._fds:
            fd = self._fds.pop()
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def __enter__(self) -> "CoreLock":
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()
