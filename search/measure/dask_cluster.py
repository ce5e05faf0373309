"""Which workers of a Dask cluster may measure a target, and on which cores: the pure
part of ``DaskRunner``'s worker selection (no Dask import, so it is testable and cheap).

Map: ``parse_address`` · ``unusable`` (why a worker must not measure) · ``share_cores``
(workers that share a machine split its CPUs) · ``compiler_differs`` (why a worker must
not compile what it measures).
"""
from __future__ import annotations

from tvmlite.target.target import Target

__all__ = ["MEASURE", "COMPARED", "START_COMMAND", "COMPILE_ON", "parse_address",
           "unusable", "share_cores", "compiler_differs"]

MEASURE = "measure"      # the Dask resource: candidates a worker may time at once
COMPARED = ("arch", "features", "vector_bits", "cores")    # Target fields that must match
START_COMMAND = "dask worker SCHEDULER --nthreads 1 --resources measure=1"
# DaskRunner(compile_on=...): where candidates are compiled. "auto": on each worker whose
# compiler is the client's (``compiler_differs``), on the client for the others
COMPILE_ON = ("auto", "worker", "client")
# the parts of dask_worker.compiler_identity, in the order a difference is named
IDENTITY = (("error", "it cannot run the compiler"), ("path", "compiler path"),
            ("version", "`--version` output"), ("sha256", "compiler binary"),
            ("commands", "what the target's flags resolve to (`-###`)"),
            ("programs", "the programs it runs (cc1, as, collect2)"))


def parse_address(text: str) -> str:
    """``dask://HOST:PORT``, ``tcp://HOST:PORT`` or ``HOST:PORT`` -> the scheduler's
    ``tcp://HOST:PORT``; ValueError naming the form otherwise."""
    if not isinstance(text, str):
        raise TypeError(f"DaskRunner(scheduler=...) must be an address string or a "
                        f"distributed.Client, got {type(text).__name__}")
    rest = text[len("dask://"):] if text.startswith("dask://") else \
        text[len("tcp://"):] if text.startswith("tcp://") else text
    host, colon, port = rest.rpartition(":")
    if not colon or not host or "/" in rest or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"Dask scheduler address {text!r}: write dask://HOST:PORT, e.g. "
                         f"dask://127.0.0.1:8786 (the port `dask scheduler` prints)")
    return f"tcp://{host}:{port}"


def unusable(desc: dict, resources: dict, target: Target) -> str:
    """Why the worker that described itself as ``desc`` (``dask_worker.describe_worker``)
    and offers ``resources`` must not measure ``target`` ('' when it may)."""
    if resources.get(MEASURE, 0) < 1:
        return (f"it offers no '{MEASURE}' resource, so nothing would bound how many "
                f"candidates it times at once; start it with `{START_COMMAND}`")
    if desc.get("target") is None:
        return desc.get("error") or "it reported no target"
    theirs, ours = desc["target"], target.to_json()
    diff = [f"{k} {theirs[k]!r} (the task's: {ours[k]!r})" for k in COMPARED
            if theirs[k] != ours[k]]
    return f"its target differs: {', '.join(diff)}" if diff else ""


def share_cores(workers: dict[str, dict]) -> tuple[dict[str, tuple], dict[str, str]]:
    """(cores per worker address, workers left out and why). Workers sharing a host each
    get an equal share of its CPUs, in address order; a worker alone on its host is not
    pinned (absent from the first dict); past one worker per CPU, the rest are left out."""
    cores: dict[str, tuple] = {}
    dropped: dict[str, str] = {}
    hosts: dict[str, list[str]] = {}
    for addr, desc in sorted(workers.items()):
        hosts.setdefault(desc["host"], []).append(addr)
    for host, addrs in hosts.items():
        if len(addrs) < 2:
            continue
        cpus = sorted({c for a in addrs for c in workers[a]["cpus"]})
        per = len(cpus) // len(addrs)
        if per == 0:
            for extra in addrs[len(cpus):]:
                dropped[extra] = (f"{len(addrs)} workers share host {host} and its "
                                  f"{len(cpus)} CPU(s); one per CPU measures")
            addrs, per = addrs[:len(cpus)], 1
        for i, addr in enumerate(addrs):
            cores[addr] = tuple(cpus[i * per:(i + 1) * per])
    return cores, dropped


def compiler_differs(theirs: object, ours: dict) -> str:
    """Why a worker whose ``dask_worker.compiler_identity`` is ``theirs`` must not compile
    for the client whose identity is ``ours`` ('' when they are the same compiler: then
    the library it builds from a source is the one the client would have built)."""
    if not isinstance(theirs, dict):
        return f"it did not say which compiler it has ({theirs!r})"
    if ours.get("error"):
        return f"the client's compiler cannot be identified: {ours['error']}"
    for key, what in IDENTITY:
        if theirs.get(key) != ours.get(key):
            if key == "error":
                return f"{what}: {theirs[key]}"
            if key == "version":
                mine, yours = str(ours.get(key)).splitlines(), \
                    str(theirs.get(key)).splitlines()
                line = next((i for i, (x, y) in enumerate(zip(mine, yours)) if x != y),
                            min(len(mine), len(yours)))
                return (f"its {what} differs: {_line(yours, line)!r} (the client's: "
                        f"{_line(mine, line)!r})")
            return f"its {what} differs from the client's"
    return ""


def _line(lines: list[str], i: int) -> str:
    return lines[i] if i < len(lines) else "(no such line)"
