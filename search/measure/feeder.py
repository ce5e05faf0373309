"""A thread that pulls candidates from an iterator only as fast as they are wanted.

A runner that measures on other machines (``DaskRunner``) wants the next candidate the
moment a machine frees up, and pulling one from the Measurer is what compiles it. So the
pulls run in their own thread, paced by credits (``want``): a few candidates per machine
are compiled ahead, never the whole round, so a shared budget (a quota) is not overrun.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterator

__all__ = ["Feeder"]


class Feeder:
    """Pulls candidates from an iterator in its own thread, at most as many as asked for
    (``want``), and posts each as ``("job", (position, job, build))`` to the inbox, then
    ``("end", None)``; an exception in the iterator is posted as ``("failed", exc)``.
    Pulling is what compiles a candidate (the Measurer's generator), so it happens while
    the workers time the ones before."""

    def __init__(self, pairs: Iterator, inbox: queue.Queue,
                 make_job: Callable[[Any, Any], Any]):
        self._pairs, self._inbox, self._make_job = pairs, inbox, make_job
        self._credit = threading.Semaphore(0)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._feed, name="tvmlite-dask-feeder",
                                        daemon=True)
        self._thread.start()

    def want(self, n: int) -> None:
        for _ in range(n):
            self._credit.release()

    def _feed(self) -> None:
        try:
            i = 0
            while True:
                self._credit.acquire()
                if self._stopped.is_set():
                    return
                pair = next(self._pairs, None)
                if pair is None:
                    break
                inp, build = pair
                self._inbox.put(("job", (i, self._make_job(inp, build), build)))
                i += 1
            self._inbox.put(("end", None))
        except BaseException as e:     # re-raised in the tuning's thread
            self._inbox.put(("failed", e))

    def stop(self) -> None:
        """No more pulls (a pull under way finishes: a compile is not interrupted)."""
        self._stopped.set()
        self._credit.release()
