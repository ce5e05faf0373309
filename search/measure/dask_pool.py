"""``WorkerPool``: the workers of a Dask cluster that may measure one target.

A ``DaskRunner`` measures; which workers it may send a candidate to is a question of its
own, asked again before every batch, since workers come and go: connect to the scheduler
(waiting for a first worker when there is none yet), describe each worker once when it
is first seen, keep those whose target is the task's (``dask_cluster.unusable``), learn
which of them compile with the client's compiler (``compiler_identity``, compared once
per worker), pin workers that share a machine to their own cores
(``dask_cluster.share_cores``), and hear of one leaving (the scheduler's removal event on
the topic named by the worker's address). The pure rules are dask_cluster.py; this
module is the part that talks to Dask.

Map: ``WorkerPool`` (connect · check_target / refresh · the compile check · waiting for
a first worker · splitting cores · missing workers and removal · close).
"""
from __future__ import annotations

import queue
import warnings
from typing import Any

import distributed

from tvmlite.errors import TvmliteWarning
from tvmlite.search.measure.base_runner import RunnerError
from tvmlite.search.measure.dask_cluster import (
    START_COMMAND,
    compiler_differs,
    parse_address,
    share_cores,
    unusable,
)
from tvmlite.search.measure.dask_worker import START_TOPIC, compiler_identity, describe_worker
from tvmlite.target.target import Target

__all__ = ["WorkerPool", "DaskWorkerWarning"]


class DaskWorkerWarning(TvmliteWarning):
    """A Dask worker is not used (another target, no ``measure`` resource) or left, or
    the runner waits for a first worker to register."""


class WorkerPool:
    """The usable workers of the cluster at ``scheduler`` (an address or a
    ``distributed.Client``, kept open on ``close``) for the target last checked.

    ``workers`` maps each usable worker's address to its description, ``cores`` to the
    CPUs it measures on (when ``pin``), ``compilers`` holds those that compile what they
    measure (never with ``compile_on="client"``). Events the runner waits on (a task
    started on a worker, a worker gone) are put on ``inbox`` while it is set.
    """

    def __init__(self, scheduler: Any, *, pin: bool, connect_timeout: float,
                 worker_timeout: float, compile_on: str):
        if isinstance(scheduler, distributed.Client):
            self.client: Any = scheduler
            self.own_client = False
            self.address = scheduler.scheduler.address
        else:
            self.client, self.own_client = None, True
            self.address = parse_address(scheduler)
        self.name = "dask://" + self.address.split("://", 1)[-1]
        self.pin, self.connect_timeout = pin, connect_timeout
        self.worker_timeout, self.compile_on = worker_timeout, compile_on
        self.target: Target | None = None
        self.workers: dict[str, dict] = {}     # usable address -> its description
        self.cores: dict[str, tuple] = {}      # address -> cores it measures on
        self.compilers: set[str] = set()      # usable workers that compile what they measure
        self.inbox: queue.Queue | None = None
        self._known: dict[str, str] = {}       # address -> "" (usable) or why not
        self._watched: set[str] = set()       # worker addresses whose topic we follow
        self._warned_waiting = False

    def connect(self) -> Any:
        """The client, connecting first when there is none (RunnerError naming how to
        start a scheduler when it cannot be reached)."""
        if self.client is None:
            try:
                self.client = distributed.Client(self.address, timeout=self.connect_timeout,
                                                 set_as_default=False)
            except (OSError, TimeoutError, ValueError) as e:
                raise RunnerError(
                    f"cannot reach the Dask scheduler at {self.address} within "
                    f"{self.connect_timeout:g}s ({type(e).__name__}: {e}); start one there "
                    f"with `dask scheduler` (and workers with `{START_COMMAND}`), or fix the "
                    f"address given as --runner dask://HOST:PORT") from None
            self._known.clear()
            self.compilers.clear()
            self._watched.clear()
        self.client.subscribe_topic(START_TOPIC, self._on_start)
        return self.client

    def _on_start(self, event: tuple) -> None:
        inbox, msg = self.inbox, event[1]
        if inbox is not None and isinstance(msg, dict) and "key" in msg and "worker" in msg:
            inbox.put(("start", msg))

    def _watch(self, address: str) -> None:
        """Hear of ``address`` leaving: the scheduler logs its removal on the topic named
        by the worker's address, with the tasks it was processing."""
        def on_event(event: tuple, _address: str = address) -> None:
            inbox, msg = self.inbox, event[1]
            if inbox is not None and isinstance(msg, dict) \
                    and msg.get("action") == "remove-worker":
                inbox.put(("gone", dict(msg, worker=_address)))
        self.client.subscribe_topic(address, on_event)
        self._watched.add(address)

    def check_target(self, target: Target) -> None:
        """Connect, ask every worker for its target and keep those that match ``target``;
        RunnerError naming each worker and why, when none does."""
        self.target = target
        self._known.clear()
        self.compilers.clear()
        try:
            self.refresh(target)
        except RunnerError:
            self.close()     # nothing will use the connection: do not leave it open
            raise

    def refresh(self, target: Target) -> None:
        """Bring ``workers`` up to date with the cluster (measuring for ``target``, the
        checked one): describe workers not seen yet, drop those gone, re-split shared
        machines' cores."""
        client = self.connect()
        info = client.scheduler_info(n_workers=-1)["workers"]
        if not info and self.worker_timeout > 0:
            info = self._wait_for_workers(client)
        new = [a for a in info if a not in self._known]
        if new:
            described = client.run(describe_worker, workers=new, on_error="return")
            why_not = self._compile_check(client, target, new)
            for addr in new:
                desc = described.get(addr)
                if isinstance(desc, BaseException) or desc is None:
                    desc = {"error": f"it did not answer ({desc!r}); is tvmlite importable "
                                     f"there?", "target": None, "host": "?", "cpus": []}
                why = unusable(desc, info[addr].get("resources") or {}, target)
                if not why and self.compile_on == "worker" and why_not.get(addr):
                    why = f"it cannot compile (compile_on='worker'): {why_not[addr]}"
                self._known[addr] = why
                if why:
                    warnings.warn(f"{self.name}: not measuring on Dask worker {addr}: {why}",
                                  DaskWorkerWarning, stacklevel=5)
                    continue
                self.workers[addr] = desc
                self._watch(addr)
                if self.compile_on == "client":
                    continue
                if why_not.get(addr):
                    warnings.warn(f"{self.name}: the client compiles for Dask worker {addr}: "
                                  f"{why_not[addr]}", DaskWorkerWarning, stacklevel=5)
                else:
                    self.compilers.add(addr)
        for addr in list(self._known):
            if addr not in info:      # gone: described afresh if it comes back
                del self._known[addr]
                self.workers.pop(addr, None)
                self.compilers.discard(addr)
        if not self.workers:
            reasons = "; ".join(f"{a}: {w}" for a, w in self._known.items() if w)
            raise RunnerError(
                f"no Dask worker of {self.name} can measure for this target ("
                f"{target.arch} {' '.join(target.features)}, "
                f"{target.vector_bits}-bit vectors, {target.cores} cores)"
                + (f": {reasons}" if reasons else
                   f": the scheduler has no workers (waited {self.worker_timeout:g}s)")
                + f". Start workers of that target with `{START_COMMAND}`")
        self._split_cores()

    def _compile_check(self, client: Any, target: Target, addresses: list[str]
                       ) -> dict[str, str]:
        """Why each of ``addresses`` must not compile for ``target`` ('' when its compiler
        is the client's): asked once per worker, when it is first seen."""
        if self.compile_on == "client":
            return {}
        ours = compiler_identity(target)
        theirs = client.run(compiler_identity, target, workers=addresses, on_error="return")
        return {a: compiler_differs(theirs.get(a), ours) for a in addresses}

    def _wait_for_workers(self, client: Any) -> dict:
        """The scheduler's workers once there is one, waiting up to ``worker_timeout``
        (saying so once); {} when none came."""
        if not self._warned_waiting:
            self._warned_waiting = True
            warnings.warn(f"{self.name}: the Dask scheduler at {self.address} has no workers "
                          f"yet; waiting up to {self.worker_timeout:g}s for one "
                          f"(DaskRunner(worker_timeout=...)). Start workers with "
                          f"`{START_COMMAND}`", DaskWorkerWarning, stacklevel=6)
        try:
            client.wait_for_workers(1, timeout=self.worker_timeout)
        except TimeoutError:
            return {}
        return client.scheduler_info(n_workers=-1)["workers"]

    def _split_cores(self) -> None:
        """Pin workers that share a host to their share of its CPUs (``share_cores``);
        those past one per CPU are not used, with a warning."""
        self.cores = {}
        if not self.pin:
            return
        self.cores, dropped = share_cores(self.workers)
        for addr, why in dropped.items():
            del self.workers[addr]
            self.compilers.discard(addr)
            self._known[addr] = why
            warnings.warn(f"{self.name}: not measuring on Dask worker {addr}: {why}",
                          DaskWorkerWarning, stacklevel=6)

    def missing_workers(self) -> list[str]:
        """Our workers the scheduler no longer has (a removal whose event we missed);
        RunnerError when the scheduler itself is gone."""
        try:
            info = self.client.scheduler_info(n_workers=-1)["workers"]
        except (OSError, TimeoutError) as e:
            raise RunnerError(f"lost the Dask scheduler at {self.address} in the middle of a "
                              f"batch ({e}); the candidates not yet measured are not logged: "
                              f"resuming the tuning measures them") from None
        return [a for a in self.workers if a not in info]

    def remove(self, address: str) -> bool:
        """Forget a worker that left (described afresh if it comes back); True when it
        was one of the usable workers."""
        was_ours = self.workers.pop(address, None) is not None
        self.compilers.discard(address)
        self._known.pop(address, None)
        self.cores.pop(address, None)
        return was_ours

    def close(self) -> None:
        """Disconnect (a client given to the constructor stays open)."""
        if self.client is not None and self.client.status == "running":
            for topic in (START_TOPIC, *self._watched):
                try:
                    self.client.unsubscribe_topic(topic)
                except ValueError:
                    pass
            if self.own_client:
                self.client.close()
        if self.own_client:
            self.client = None
        self._watched.clear()
        self.workers.clear()
        self._known.clear()
        self.compilers.clear()
