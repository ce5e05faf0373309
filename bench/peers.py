"""Timing tvmlite kernels and their peers fairly, each in its own fresh process.

Every benchmark in bench/ measures through these functions, following the traps listed
in /work/shared/PEERS.md: each contender runs in a fresh subprocess (OpenBLAS threads spin
after a call; libgomp reads OMP_* once), numpy runs its native OpenBLAS kernel (the
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE overrides removed in its process only), threads are
bound (OMP_PROC_BIND) for our kernels, and every figure is a median of >= 25 samples.

Peers: numpy (matmul, batch matmul, norm), PyTorch CPU (``--torch-python``: the python of
a venv with torch installed; default $TVMLITE_TORCH_PYTHON, else this python), Apache TVM's
MetaSchedule (``--tvm-python``, default $TVMLITE_TVM_PYTHON, else this python; it runs
bench/tvm_peer.py), and the tvmlite kernel of a tuning log's best record.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from tvmlite.target.target import Target

HERE = Path(__file__).resolve().parent
REPEAT = 25
WORKER_TIMEOUT = 1800


def base_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}


def numpy_env(threads: int) -> dict:
    env = {k: v for k, v in base_env().items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    return env


def kernel_env(threads: int) -> dict:
    return dict(base_env(), OMP_PROC_BIND="true", OMP_NUM_THREADS=str(threads),
                OPENBLAS_NUM_THREADS="1")


def run_worker(python: str, code: str, payload: dict, env: dict) -> dict:
    """Run ``code`` (a function body reading ``payload``, printing one JSON line) in a
    fresh ``python`` process; {"error": ...} if it fails."""
    src = f"import json, sys, time, statistics\npayload = json.loads(sys.argv[1])\n{code}"
    try:
        proc = subprocess.run([python, "-c", src, json.dumps(payload)], env=env,
                              capture_output=True, text=True, timeout=WORKER_TIMEOUT,
                              cwd=str(HERE.parent))
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {WORKER_TIMEOUT}s"}
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": " | ".join(tail) or f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


_TIMING = """
from bench.model_worker import median_time
"""

_NUMPY = _TIMING + """
import numpy as np
rng = np.random.default_rng(0)
op, shapes = payload["op"], payload["shapes"]
arrs = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
if op == "matmul":
    fn = lambda: arrs[0] @ arrs[1]
elif op == "norm":
    fn = lambda: np.linalg.norm(arrs[0])
else:
    raise SystemExit(f"no numpy formulation of {op}")
print(json.dumps({"seconds": median_time(fn, payload["repeat"]), "version": np.__version__}))
"""

_TORCH = _TIMING + """
import torch
import torch.nn.functional as F
torch.set_num_threads(payload["threads"])
op, shapes, kw = payload["op"], payload["shapes"], payload.get("kwargs", {})
g = torch.Generator().manual_seed(0)
t = [torch.randn(*s, generator=g) for s in shapes]
if payload.get("channels_last"):     # NHWC / NDHWC in memory: the layout our kernels use
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}
    t = [x.contiguous(memory_format=fmt[x.dim()]) if x.dim() in fmt else x for x in t]
with torch.no_grad():
    fn = {"matmul": lambda: torch.matmul(t[0], t[1]),
          "conv1d": lambda: F.conv1d(t[0], t[1], **kw),
          "conv2d": lambda: F.conv2d(t[0], t[1], **kw),
          "conv3d": lambda: F.conv3d(t[0], t[1], **kw),
          "norm": lambda: torch.linalg.norm(t[0])}[op]
    print(json.dumps({"seconds": median_time(fn, payload["repeat"]),
                      "version": torch.__version__}))
"""

_TVMLITE = """
import numpy as np, tvmlite
from tvmlite.schedule import Schedule
from tvmlite.search.records.best import best_valid
from tvmlite.search.records.record import load_records
from tvmlite.testing import random_inputs
rec = best_valid(r for r in load_records(payload["log"]) if r.workload.key == payload["key"])
wl = rec.workload
s = Schedule.from_steps(wl.outputs, rec.steps)
mod = tvmlite.build(s, list(wl.tensors), target=rec.target.name or None)  # the CPU it was tuned for
ins = iter(random_inputs(wl.tensors, seed=0))
arrays = [next(ins) if t.op.__class__.__name__ == "PlaceholderOp"
          else tvmlite.empty(t.shape, t.dtype) for t in wl.tensors]
timer = mod.time_evaluator(number=payload["number"], repeat=payload["repeat"], min_repeat_ms=20)
res = timer(*arrays)
print(json.dumps({"seconds": res.median, "flops": wl.flops}))
"""


def time_numpy(op: str, shapes: list, threads: int, repeat: int = REPEAT) -> dict:
    return run_worker(sys.executable, _NUMPY, {"op": op, "shapes": shapes, "repeat": repeat},
                      numpy_env(threads))


def torch_python() -> str:
    return os.environ.get("TVMLITE_TORCH_PYTHON", sys.executable)


def time_torch(op: str, shapes: list, threads: int, kwargs: dict | None = None,
               python: str | None = None, repeat: int = REPEAT,
               channels_last: bool = False) -> dict:
    """{"seconds", "version"}, or {"error"} (e.g. torch is not installed there).
    ``channels_last`` stores 4-D/5-D tensors as NHWC/NDHWC (torch's shapes stay NCHW)."""
    return run_worker(python or torch_python(), _TORCH,
                      {"op": op, "shapes": shapes, "kwargs": kwargs or {}, "threads": threads,
                       "repeat": repeat, "channels_last": channels_last},
                      kernel_env(threads) | {"OMP_PROC_BIND": "false"})


def tvm_python() -> str:
    return os.environ.get("TVMLITE_TVM_PYTHON", sys.executable)


TVM_RESULT = "TVM_PEER_RESULT "     # prefix of tvm_peer.py's answer among TVM's log lines


def run_tvm_peer(mode: str, payload: dict, threads: int, python: str | None = None,
                 timeout: float = WORKER_TIMEOUT) -> dict:
    """Run ``bench/tvm_peer.py mode payload`` in a fresh ``python`` (a venv with apache-tvm)
    with ``threads`` TVM threads; its answer, or {"error"} (TVM missing, tuning failed)."""
    env = dict(base_env(), TVM_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS="1")
    cmd = [python or tvm_python(), str(HERE / "tvm_peer.py"), mode, json.dumps(payload)]
    return run_answering(cmd, env, TVM_RESULT, timeout)


def run_answering(cmd: list[str], env: dict, prefix: str,
                  timeout: float = WORKER_TIMEOUT) -> dict:
    """Run ``cmd`` (a peer's script, from the repository root) and return the JSON of its
    last stdout line starting with ``prefix`` (among the peer's own log lines), or
    {"error"}: a missing interpreter, a failure, a timeout."""
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                              cwd=str(HERE.parent), check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f}s"}
    except OSError as err:
        return {"error": f"cannot run {cmd[0]}: {err}"}
    answers = [ln[len(prefix):] for ln in proc.stdout.splitlines() if ln.startswith(prefix)]
    if proc.returncode != 0 or not answers:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": " | ".join(tail) or f"exit {proc.returncode}"}
    return json.loads(answers[-1])


def time_best_record(log: str, workload_key: str, threads: int, repeat: int = REPEAT) -> dict:
    """The best record of one workload in ``log``, rebuilt and timed in a fresh process."""
    return run_worker(sys.executable, _TVMLITE, {"log": str(log), "key": workload_key,
                                                 "number": 3, "repeat": repeat},
                      kernel_env(threads))


def measure_peak(threads: int) -> float:
    from bench.peak import measure_peak_gflops
    return measure_peak_gflops(threads)


def curve_from_log(log: str, workload_key: str) -> list[tuple[int, float, float]]:
    """(trial, timestamp, best GFLOP/s so far) for every record of one workload, in the
    order they were measured."""
    from tvmlite.search.records.record import load_records
    recs = sorted((r for r in load_records(log) if r.workload.key == workload_key),
                  key=lambda r: r.result.timestamp)
    best, out = 0.0, []
    for i, r in enumerate(recs, 1):
        best = max(best, r.gflops)
        out.append((i, r.result.timestamp, best))
    return out


def trials_to_reach(curve: list, fraction: float = 0.9) -> int | None:
    if not curve:
        return None
    goal = fraction * curve[-1][2]
    return next(i for i, _, b in curve if b >= goal)


def median(xs: list) -> float:
    return statistics.median(xs) if xs else float("nan")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    fields = {}
    for line in text.split("\n\n")[0].splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def llvm_cpu() -> str | None:
    """LLVM's ``mcpu`` for this CPU, for TVM's target, from its features and family: under
    KVM the CPUID model can be another CPU's (a Sapphire Rapids VM reports model 167,
    which LLVM calls "rocketlake", without AMX), and ``-mcpu=native`` falls back to
    generic code. None: let TVM ask LLVM."""
    host, info = Target.host(), _cpuinfo()
    if host.arch != "x86_64":
        return None
    features, family = set(host.features), int(info.get("cpu family", "0") or 0)
    if info.get("vendor_id") == "AuthenticAMD":
        return {26: "znver5", 25: "znver4" if "avx512f" in features else "znver3",
                23: "znver2"}.get(family)
    if "amx_tile" in features:
        return "sapphirerapids"
    if "avx512vnni" in features:
        return "icelake-server"
    if "avx512f" in features:
        return "skylake-avx512"
    return "haswell" if "avx2" in features else None


def cpu_slug() -> str:
    """A short name of this CPU for results files: ``sapphire-rapids``, ``zen4``, else
    LLVM's name or the architecture."""
    cpu = llvm_cpu()
    names = {"sapphirerapids": "sapphire-rapids", "znver5": "zen5", "znver4": "zen4",
             "znver3": "zen3", "znver2": "zen2"}
    return names.get(cpu or "", cpu or Target.host().arch)
