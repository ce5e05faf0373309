"""The measuring process: load a kernel, check it against the reference, time it.

Run as ``python -m tvmlite.search.measure.worker`` by ``runner.LocalRunner``, which speaks JSON
lines with it: one request on stdin, one reply on stdout. Kernels run here, not in the
tuner, so a kernel that crashes or hangs takes down only this process (the runner sees
EOF or its deadline and starts a new one), and so timing never shares a process with
numpy BLAS calls or the tuner's threads, which slow kernels down (PEERS.md). It imports
only numpy, cffi, the loader and the comparison of ``tvmlite.testing.check`` (not its
interpreter), so a restart after a crash is quick; it never calls BLAS.

Requests (``args`` are ArgSpec JSON dicts, ``ref`` names a reference)::

    {"op": "reference", "ref": {...}}   compute and cache a workload's reference outputs
    {"op": "measure", "lib", "decl", "kernel", "args", "check": {...} | null,
     "number", "repeat", "min_repeat_ms", "flush_bytes", "cold", "n_threads", "cutoff"}

``cold`` (a list of input names, or null) times the protocol's ``cold_weights``: before
each one-call timing the caches are flushed and every other array read back.
``cutoff`` (seconds per call, 0 or absent: none) is the protocol's ``cutoff_ratio``
applied by the runner: a first timing above it is the candidate's only one.

Replies: ``{"ok": true}``, ``{"costs": [seconds per call, one per repeat], "number": n}``
or ``{"error": <MeasureErrorNo name>, "msg": "..."}``. The first line the worker writes
is ``{"ready": <pid>}``.

``--cores 1,2`` pins the process to those cores (``os.sched_setaffinity``) before any
kernel library, and so before OpenMP, is loaded. ``TVMLITE_WORKER_TRACE=FILE`` (read
here, at this process's entry point, for tests) appends one line per timed candidate to
FILE before its reply is sent: a witness of what was measured that survives a kill -9 of
the tuner, against which its log is compared.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time

import numpy as np

from tvmlite.codegen_c.loader import load_library
from tvmlite.errors import TvmliteError
from tvmlite.ir.dtypes import BUFFER_DTYPES, CTYPE, numpy_dtype
from tvmlite.runtime.arrays import full

# the comparison, the inputs and the sentinel of the tests' checks (light to import)
from tvmlite.testing.compare import INT_SENTINEL, blank_value, mismatch, seeded_arrays

__all__ = ["make_inputs", "blank_outputs", "mismatch", "measure", "reference", "handle",
           "INT_SENTINEL"]

CPTR = {d: f"{CTYPE[d]} *" for d in BUFFER_DTYPES}
MAX_NUMBER = 1 << 24
_REFS: dict[str, tuple[list, list]] = {}   # ref path prefix -> (inputs, outputs)
_REFS_KEPT = 4
_FLUSH: list[np.ndarray] = []


MIN_COST = 1e-9  # seconds; records need positive costs
# Before its cold timings a kernel runs at least this long: its scratch buffers come from
# malloc, whose first calls fault their pages in (a 56 x 56 depthwise conv's 5 MB padded
# copy: 1.4 ms for its first seven calls, 0.1 after), and a model's run calls it settled.
COLD_WARMUP_MS = 10.0


def make_inputs(args: list[dict], seed: int) -> list[np.ndarray]:
    """Seeded inputs, the same arrays as ``tvmlite.testing.random_inputs``
    (``seeded_arrays``): floats uniform in [-1, 1), integers in [-8, 8), 64-byte aligned."""
    return seeded_arrays([(a["shape"], a["dtype"]) for a in args if not a["is_output"]],
                         seed)


def blank_outputs(args: list[dict]) -> list[np.ndarray]:
    """Outputs prefilled with NaN (integers: a sentinel), so unwritten elements fail."""
    return [full(a["shape"], blank_value(a["dtype"]), numpy_dtype(a["dtype"]))
            for a in args if a["is_output"]]


def call_arrays(args: list[dict], inputs: list, outputs: list) -> list[np.ndarray]:
    ins, outs = iter(inputs), iter(outputs)
    return [next(outs) if a["is_output"] else next(ins) for a in args]


class Kernel:
    """A loaded kernel library: the kernel, its C timer and its thread setter."""

    def __init__(self, lib_path: str, decl: str, name: str, args: list[dict],
                 sizes: list | None = None, packs: list | None = None):
        self.ffi, lib = load_library(lib_path, decl)
        self.args = args
        self.sizes = [int(n) for n in sizes or ()]   # leading int64 size arguments
        self.run_fn = getattr(lib, name)
        self.time_fn = getattr(lib, f"{name}_time")
        self.threads_fn = getattr(lib, f"{name}_set_num_threads")
        self.packs = [(p, getattr(lib, p["fn"])) for p in packs or ()]

    def pack(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The kernel's inputs: each pre-packed one replaced by its packing (done once,
        before checking and timing, so the costs exclude it)."""
        if not self.packs:
            return inputs
        names = [a["name"] for a in self.args if not a["is_output"]]
        out = list(inputs)
        for spec, fn in self.packs:
            i = names.index(spec["input"])
            dst = full(spec["packed"]["shape"], blank_value(spec["packed"]["dtype"]),
                       numpy_dtype(spec["packed"]["dtype"]))
            src_ptr = self.ffi.cast(CPTR[self.args[[a["name"] for a in self.args]
                                                   .index(spec["input"])]["dtype"]],
                                    out[i].ctypes.data)
            if fn(src_ptr, self.ffi.cast(CPTR[spec["packed"]["dtype"]], dst.ctypes.data)) != 0:
                raise Failure("RUNTIME_CRASH", f"{spec['fn']} could not allocate its buffers")
            out[i] = dst
        return out

    def pointers(self, arrays: list[np.ndarray]) -> list:
        return self.sizes + [self.ffi.cast(CPTR[a["dtype"]], x.ctypes.data)
                             for a, x in zip(self.args, arrays)]


class Failure(TvmliteError):
    """A verdict on the candidate: its MeasureErrorNo name and message."""

    def __init__(self, error: str, msg: str):
        super().__init__(msg)
        self.error = error


def reference(req: dict) -> tuple[list, list]:
    """(inputs, expected outputs) of a workload: from memory, else from the .npy files
    the runner's temp dir keeps across worker restarts, else by running the reference."""
    prefix = req["path"]
    if prefix in _REFS:
        return _REFS[prefix]
    args = req["args"]
    inputs = make_inputs(args, req["seed"])
    n_out = sum(a["is_output"] for a in args)
    files = [f"{prefix}.{i}.npy" for i in range(n_out)]
    try:
        outputs = [np.load(f) for f in files]
    except (OSError, ValueError):
        kernel = Kernel(req["lib"], req["decl"], req["kernel"], args, req.get("sizes"))
        outputs = blank_outputs(args)
        if kernel.run_fn(*kernel.pointers(call_arrays(args, inputs, outputs))) != 0:
            raise Failure("UNKNOWN", "the reference kernel could not allocate its buffers")
        for f, out in zip(files, outputs):
            tmp = f"{f}.{os.getpid()}.tmp"
            with open(tmp, "wb") as fh:
                np.save(fh, out)
            os.replace(tmp, f)
    while len(_REFS) >= _REFS_KEPT:
        del _REFS[next(iter(_REFS))]
    _REFS[prefix] = (inputs, outputs)
    return inputs, outputs


def flush_cache(nbytes: int) -> None:
    """Write through a buffer larger than the last-level cache, so the next repeat starts
    with the kernel's data evicted."""
    if not _FLUSH or _FLUSH[0].nbytes < nbytes:
        _FLUSH[:] = [np.empty(nbytes // 8, np.float64)]
    _FLUSH[0].fill(time.perf_counter())


def read_back(arrays: list[np.ndarray]) -> None:
    """Read one byte per cache line of each array, bringing it back into the caches as a
    model's previous kernel leaves its activations there."""
    for x in arrays:
        int(np.bitwise_or.reduce(x.reshape(-1).view(np.uint8)[::64]))


def measure(req: dict) -> dict:
    """Check (if asked) and time one candidate; raises Failure with the verdict."""
    args = req["args"]
    kernel = Kernel(req["lib"], req["decl"], req["kernel"], args, req.get("sizes"),
                    req.get("packs"))
    if req.get("n_threads"):
        kernel.threads_fn(req["n_threads"])
    check = req.get("check")
    if check:
        inputs, expected = reference(check["ref"])
        inputs = [x.copy() for x in inputs]   # a kernel scribbling on them cannot poison
        inputs = kernel.pack(inputs)          # the check covers pack + kernel together
        outputs = blank_outputs(args)
        t0 = time.perf_counter()
        status = kernel.run_fn(*kernel.pointers(call_arrays(args, inputs, outputs)))
        first_call = time.perf_counter() - t0
        if status != 0:
            raise Failure("RUNTIME_CRASH", "out of memory: the kernel could not allocate "
                                           "its buffers")
        names = [a["name"] for a in args if a["is_output"]]
        for name, got, want, (rtol, atol) in zip(names, outputs, expected, check["tol"]):
            msg = mismatch(name, got, want, rtol, atol)
            if msg:
                raise Failure("WRONG_ANSWER", msg)
        if first_call > req.get("slow_seconds", float("inf")):
            # far too slow to matter: one sample is enough, and saves the tuner seconds
            return {"costs": [first_call], "number": 1}
    else:
        inputs = kernel.pack(make_inputs(args, req.get("seed", 0)))
        outputs = blank_outputs(args)
    arrays = call_arrays(args, inputs, outputs)
    ptrs = kernel.pointers(arrays)
    number = req["number"]
    oom = Failure("RUNTIME_CRASH", "out of memory: the kernel could not allocate its buffers")
    if not check and kernel.run_fn(*ptrs) != 0:   # warm-up (the check run was one)
        raise oom
    costs: list[float] = []
    cold = req.get("cold")
    probe_ms = req["min_repeat_ms"] if cold is None else max(req["min_repeat_ms"], COLD_WARMUP_MS)
    if probe_ms > 0:
        while number < MAX_NUMBER:
            t = kernel.time_fn(*ptrs, number)
            if t < 0:
                raise oom
            if t * number * 1e3 >= probe_ms:
                if not req["flush_bytes"]:    # the probe that lasted long enough is a
                    costs.append(max(t, MIN_COST))   # repeat (warm, as the others)
                break
            wanted = int(probe_ms / (t * 1e3)) + 1 if t > 0 else 2 * number
            number = min(max(2 * number, wanted), MAX_NUMBER)
    cutoff = req.get("cutoff") or 0.0
    if cold is not None:     # one call per timing, only the constants left out of cache
        number = 1
        warm = [x for a, x in zip(args, arrays) if a["name"] not in cold]
    while len(costs) < req["repeat"]:
        if cutoff and costs and costs[0] > cutoff:
            break          # clearly slower than the best: its first timing decides
        if req["flush_bytes"]:
            flush_cache(req["flush_bytes"])
        if cold is not None:
            read_back(warm)
        t = kernel.time_fn(*ptrs, number)
        if t < 0:
            raise oom
        costs.append(max(t, MIN_COST))   # a clock tick can read 0 for a tiny kernel
    return {"costs": costs, "number": number}


def handle(req: dict) -> dict:
    try:
        if req.get("op") == "reference":
            reference(req["ref"])
            return {"ok": True}
        if req.get("op") == "measure":
            return measure(req)
        return {"error": "UNKNOWN", "msg": f"worker: unknown request op {req.get('op')!r}"}
    except Failure as f:
        return {"error": f.error, "msg": str(f)}
    except Exception as e:  # noqa: BLE001 -- a failed request is a verdict, not a dead worker
        return {"error": "UNKNOWN", "msg": f"{type(e).__name__}: {e}"}


def _exit_when_orphaned(parent: int) -> None:
    """If the runner dies while a kernel hangs, stdin EOF is never read: exit anyway."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _parse_cores(argv: list[str]) -> set[int] | None:
    if not argv:
        return None
    if len(argv) != 2 or argv[0] != "--cores":
        sys.exit(f"usage: python -m tvmlite.search.measure.worker [--cores 0,1]; got {argv}")
    try:
        return {int(c) for c in argv[1].split(",")}
    except ValueError:
        sys.exit(f"worker: --cores {argv[1]!r}: use comma-separated core numbers")


def _trace(path: str | None, req: dict) -> None:
    if path and req.get("op") == "measure":
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps({"lib": req.get("lib"), "pid": os.getpid()}) + "\n").encode())
        finally:
            os.close(fd)


def main() -> None:
    cores = _parse_cores(sys.argv[1:])
    if cores is not None:
        os.sched_setaffinity(0, cores)
    trace = os.environ.get("TVMLITE_WORKER_TRACE")
    # Replies go to a private copy of stdout; fd 1 becomes stderr, so a kernel that
    # prints cannot corrupt the protocol.
    reply = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()
    reply.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        if line.strip():
            req = json.loads(line)
            answer = handle(req)
            _trace(trace, req)
            reply.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
