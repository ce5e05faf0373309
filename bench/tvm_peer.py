"""Apache TVM's MetaSchedule as a peer of the single-operator suite (bench/suite.py) and of
whole models (bench/models.py: ``tune-model`` / ``time-model``, at the end of this file).

This file runs BY the python of a virtual environment where apache-tvm is installed
(``bench/peers.run_tvm_peer`` starts it in a fresh process); tvmlite never imports it and
it never imports tvmlite, so neither package becomes a dependency of the other.

    python bench/tvm_peer.py tune '{"op": "matmul", "kwargs": {"M": 128, "N": 128, "K": 128},
                                    "trials": 200, "threads": 2, "work_dir": "...", "seed": 0}'
    python bench/tvm_peer.py time '{"op": "matmul", "kwargs": {...}, "so": ".../best.so",
                                    "flops": 4194304}'
    python bench/tvm_peer.py tune-model '{"onnx": "m.onnx", "input_name": "x",
        "shape": [1, 3, 224, 224], "trials": 2048, "per_task": 64, "threads": 2,
        "mcpu": "sapphirerapids", "work_dir": "..."}'
    python bench/tvm_peer.py time-model '{"so": ".../model.so", "input": "x.npy",
                                          "output": "y.npy", "repeat": 25}'

Each operator is written again here with TVM's ``te``, in the layouts, weight shapes and
stages of ``tvmlite.ops`` (NLC / NHWC / NDHWC data, a separate zero-padding stage only where
padding is non-zero), so both tuners face the same computation. ``tune`` runs MetaSchedule
(``tune_tir``, evolutionary search + XGBoost model) with the trial budget on an ``llvm``
target for this CPU (``mcpu``: LLVM's name for the host CPU unless given, because
``-mcpu=native`` silently falls back to generic code), compiles the best schedule found and
exports it as a shared library. ``time`` loads that library in a fresh process and times it
with TVM's own evaluator (median of ``repeat`` samples of >= 20 ms each), so the figure is
not disturbed by the tuning process's worker pools. The answer is one JSON line on stdout
prefixed ``TVM_PEER_RESULT``, among TVM's own log lines.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import tvm
from tvm import te
from tvm.s_tir import meta_schedule as ms

RESULT = "TVM_PEER_RESULT "     # bench/peers.py looks for this prefix
BUILD_TIMEOUT = 300.0           # each build worker first imports tvm.s_tir.tensor_intrin:
RUN_TIMEOUT = 60.0              # ~19 s of CPU here, past TVM's 30 s default on a busy machine


class PeerError(ValueError):
    """A request this peer cannot serve; the message names the argument and the fix."""


# -- the operators, as in tvmlite.ops --------------------------------------------------

def _window(o, stride: int, r):
    """Input coordinate of output ``o`` under kernel offset ``r`` (dilation 1)."""
    return (o * stride if stride != 1 else o) + r


def _pad(data: te.Tensor, pads: tuple) -> te.Tensor:
    """``data`` with ``pads[d]`` zeros on both sides of dimension d, as its own stage."""
    if not any(pads):
        return data
    shape = tuple(int(n) + 2 * p for n, p in zip(data.shape, pads))

    def body(*idx):
        conds = [c for i, p, n in zip(idx, pads, data.shape) if p for c in (i >= p, i < n + p)]
        src = data[tuple(i - p if p else i for i, p in zip(idx, pads))]
        return te.if_then_else(te.all(*conds), src, te.const(0.0, data.dtype))
    return te.compute(shape, body, name="pad")


def _ints(op: str, kw: dict, names: tuple) -> list[int]:
    vals = []
    for name in names:
        v = kw.get(name)
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "padding" else 1):
            raise PeerError(f"{op}: argument {name} must be a positive int (padding: >= 0), "
                            f"got {v!r}; pass it in 'kwargs'")
        vals.append(v)
    return vals


def _only_defaults(op: str, kw: dict, known: tuple) -> None:
    """Reject options this mirror does not implement rather than tune something else."""
    defaults = {"dilation": 1, "groups": 1, "multiplier": 1, "dtype": "float32",
                "layout": "NLC"}
    for name, v in kw.items():
        if name in known:
            continue
        if name not in defaults or v != defaults[name]:
            raise PeerError(f"{op}: argument {name}={v!r} is not mirrored in tvm_peer.py "
                            f"(supported: {', '.join(known)}, and the defaults {defaults})")


def matmul(M: int, N: int, K: int) -> list[te.Tensor]:
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    return [A, B, te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")]


def conv1d(N: int, L: int, CI: int, CO: int, kernel: int, stride: int, padding: int):
    """NLC: data (N, L, CI), weight (kernel, CI, CO) -> (N, OL, CO)."""
    OL = (L + 2 * padding - kernel) // stride + 1
    data = te.placeholder((N, L, CI), name="data")
    weight = te.placeholder((kernel, CI, CO), name="weight")
    padded = _pad(data, (0, padding, 0))
    rc = te.reduce_axis((0, CI), name="rc")
    rl = te.reduce_axis((0, kernel), name="rl")
    out = te.compute((N, OL, CO), lambda n, x, f: te.sum(
        padded[n, _window(x, stride, rl), rc] * weight[rl, rc, f], axis=[rc, rl]),
        name="conv1d")
    return [data, weight, out]


def conv2d_nhwc(N: int, H: int, W: int, CI: int, CO: int, kernel: int, stride: int,
                padding: int):
    """data (N, H, W, CI), weight (K, K, CI, CO) -> (N, OH, OW, CO)."""
    OH, OW = ((n + 2 * padding - kernel) // stride + 1 for n in (H, W))
    data = te.placeholder((N, H, W, CI), name="data")
    weight = te.placeholder((kernel, kernel, CI, CO), name="weight")
    padded = _pad(data, (0, padding, padding, 0))
    ry = te.reduce_axis((0, kernel), name="ry")
    rx = te.reduce_axis((0, kernel), name="rx")
    rc = te.reduce_axis((0, CI), name="rc")
    out = te.compute((N, OH, OW, CO), lambda n, h, w, f: te.sum(
        padded[n, _window(h, stride, ry), _window(w, stride, rx), rc] * weight[ry, rx, rc, f],
        axis=[ry, rx, rc]), name="conv2d_nhwc")
    return [data, weight, out]


def depthwise_conv2d_nhwc(N: int, H: int, W: int, C: int, kernel: int, stride: int,
                          padding: int):
    """data (N, H, W, C), weight (K, K, C, 1) -> (N, OH, OW, C)."""
    OH, OW = ((n + 2 * padding - kernel) // stride + 1 for n in (H, W))
    data = te.placeholder((N, H, W, C), name="data")
    weight = te.placeholder((kernel, kernel, C, 1), name="weight")
    padded = _pad(data, (0, padding, padding, 0))
    ry = te.reduce_axis((0, kernel), name="ry")
    rx = te.reduce_axis((0, kernel), name="rx")
    out = te.compute((N, OH, OW, C), lambda n, h, w, c: te.sum(
        padded[n, _window(h, stride, ry), _window(w, stride, rx), c] * weight[ry, rx, c, 0],
        axis=[ry, rx]), name="depthwise_conv2d_nhwc")
    return [data, weight, out]


def conv3d_ndhwc(N: int, D: int, H: int, W: int, CI: int, CO: int, kernel: int, stride: int,
                 padding: int):
    """data (N, D, H, W, CI), weight (K, K, K, CI, CO) -> (N, OD, OH, OW, CO)."""
    OD, OH, OW = ((n + 2 * padding - kernel) // stride + 1 for n in (D, H, W))
    data = te.placeholder((N, D, H, W, CI), name="data")
    weight = te.placeholder((kernel, kernel, kernel, CI, CO), name="weight")
    padded = _pad(data, (0, padding, padding, padding, 0))
    rd, ry, rx = (te.reduce_axis((0, kernel), name=n) for n in ("rd", "ry", "rx"))
    rc = te.reduce_axis((0, CI), name="rc")
    s = stride
    out = te.compute((N, OD, OH, OW, CO), lambda n, d, h, w, f: te.sum(
        padded[n, _window(d, s, rd), _window(h, s, ry), _window(w, s, rx), rc]
        * weight[rd, ry, rx, rc, f], axis=[rd, ry, rx, rc]), name="conv3d_ndhwc")
    return [data, weight, out]


def norm2(N: int, M: int):
    """Frobenius norm as a (1,) tensor: a "sumsq" reduction over both axes, then a root."""
    A = te.placeholder((N, M), name="A")
    ri = te.reduce_axis((0, N), name="ri")
    rj = te.reduce_axis((0, M), name="rj")
    sumsq = te.compute((1,), lambda i: te.sum(A[ri, rj] * A[ri, rj], axis=[ri, rj]),
                       name="sumsq")
    return [A, te.compute((1,), lambda i: te.sqrt(sumsq[i]), name="norm")]


OPS = {  # name: (definition, its integer arguments, in order)
    "matmul": (matmul, ("M", "N", "K")),
    "conv1d": (conv1d, ("N", "L", "CI", "CO", "kernel", "stride", "padding")),
    "conv2d_nhwc": (conv2d_nhwc, ("N", "H", "W", "CI", "CO", "kernel", "stride", "padding")),
    "depthwise_conv2d_nhwc": (depthwise_conv2d_nhwc,
                              ("N", "H", "W", "C", "kernel", "stride", "padding")),
    "conv3d_ndhwc": (conv3d_ndhwc,
                     ("N", "D", "H", "W", "CI", "CO", "kernel", "stride", "padding")),
    "norm2": (norm2, ("N", "M")),
}


def define(op: str, kwargs: dict) -> list[te.Tensor]:
    """The tensors [inputs..., output] of ``op`` at tvmlite.ops-style keyword arguments."""
    if op not in OPS:
        raise PeerError(f"op {op!r} is not mirrored in tvm_peer.py; use one of {sorted(OPS)}")
    fn, names = OPS[op]
    kw = dict(kwargs)
    kw.setdefault("stride", 1)
    kw.setdefault("padding", 0)
    if op in ("matmul", "norm2"):
        kw.pop("stride"), kw.pop("padding")
    _only_defaults(op, kw, names)
    return fn(*_ints(op, kw, names))


# -- tuning and timing ------------------------------------------------------------------

def target_of(mcpu: str | None, threads: int) -> tvm.target.Target:
    from tvm.target import codegen
    cpu = mcpu or codegen.llvm_get_system_cpu()
    return tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": threads})


def tune(p: dict) -> dict:
    """Tune with ``trials`` measurements in a fresh ``work_dir``; export the best kernel."""
    trials = p["trials"]
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise PeerError(f"tune: trials must be a positive int, got {trials!r}")
    func = te.create_prim_func(define(p["op"], p["kwargs"]))
    target = target_of(p.get("mcpu"), p["threads"])
    work = Path(p["work_dir"])
    shutil.rmtree(work, ignore_errors=True)   # a half-finished run is not resumed: restart
    work.mkdir(parents=True)
    t0 = time.perf_counter()
    db = ms.tune_tir(func, target, str(work), max_trials_global=trials,
                     num_trials_per_iter=min(64, trials), seed=p.get("seed", 0),
                     builder=ms.builder.LocalBuilder(timeout_sec=BUILD_TIMEOUT),
                     runner=ms.runner.LocalRunner(timeout_sec=RUN_TIMEOUT))
    sch = ms.tir_integration.compile_tir(db, func, target)
    seconds = time.perf_counter() - t0
    if sch is None:
        raise PeerError(f"tune: no valid schedule among {trials} trials (see the logs in "
                        f"{work / 'logs'}); raise trials")
    so = work / "best.so"
    tvm.compile(sch.mod, target=target).export_library(str(so))
    valid = sum(1 for r in db.get_all_tuning_records() if r.run_secs)
    return {"tuning_seconds": seconds, "so": str(so), "trials": trials, "valid": valid,
            "target": str(target), "version": tvm.__version__}


def time_kernel(p: dict) -> dict:
    """Median seconds of the exported kernel on random inputs, in this fresh process."""
    tensors = define(p["op"], p["kwargs"])
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    shapes = [tuple(int(n) for n in t.shape) for t in tensors]
    args = [tvm.runtime.tensor(rng.standard_normal(s, dtype=np.float32), dev)
            for s in shapes[:-1]]
    args.append(tvm.runtime.empty(shapes[-1], "float32", dev))
    lib = tvm.runtime.load_module(p["so"])
    lib["main"](*args)                        # warm up: pages, thread pool
    timer = lib.time_evaluator("main", dev, number=1, repeat=p.get("repeat", 25),
                               min_repeat_ms=20)
    seconds = timer(*args).median
    answer = {"seconds": seconds, "version": tvm.__version__}
    if p.get("flops"):                        # the caller's count, shared by every contender
        answer["gflops"] = p["flops"] / seconds / 1e9
    return answer


# -- whole models (bench/models.py) ------------------------------------------------------

def tune_model(p: dict) -> dict:
    """Import ``p["onnx"]`` with Relax's ONNX frontend (weights as constants), tune it with
    MetaSchedule (``tune_relax``: ``trials`` in all, at most ``per_task`` per task, this
    file's builder and runner timeouts; no CPU weight pre-packing, which changes the
    deployed interface), compile it from the database and export the VM executable."""
    import onnx
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    trials = p["trials"]
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise PeerError(f"tune-model: trials must be a positive int, got {trials!r}")
    target = target_of(p.get("mcpu"), p["threads"])
    work = Path(p["work_dir"])
    shutil.rmtree(work, ignore_errors=True)   # MetaSchedule does not resume: restart
    work.mkdir(parents=True)
    t0 = time.perf_counter()
    mod = from_onnx(onnx.load(p["onnx"]), shape_dict={p["input_name"]: p["shape"]})
    with target:   # as relax's static_shape_tuning pipeline prepares a module
        mod = tvm.transform.Sequential([relax.transform.DecomposeOpsForInference(),
                                        relax.transform.CanonicalizeBindings(),
                                        relax.pipeline.zero_pipeline()])(mod)
    db = ms.relax_integration.tune_relax(
        mod, {}, target, str(work), max_trials_global=trials,
        max_trials_per_task=p.get("per_task"),
        num_trials_per_iter=min(64, p.get("per_task") or trials, trials),
        seed=p.get("seed", 0), builder=ms.builder.LocalBuilder(timeout_sec=BUILD_TIMEOUT),
        runner=ms.runner.LocalRunner(timeout_sec=RUN_TIMEOUT))
    # compile_relax(db, mod, ...) left this already-legalized module's kernels unscheduled
    # in 0.27 (the BERT encoder ran 343 ms against the 2.8 ms its records add up to):
    # apply the database to the module itself, then build it
    with target, db:
        mod = relax.transform.MetaScheduleApplyDatabase()(mod)
    executable = relax.build(mod, target)
    seconds = time.perf_counter() - t0
    so = work / "model.so"
    executable.export_library(str(so))
    records = db.get_all_tuning_records()
    return {"tuning_seconds": seconds, "so": str(so), "trials": len(records),
            "valid": sum(1 for r in records if r.run_secs), "target": str(target),
            "version": tvm.__version__}


def time_model(p: dict) -> dict:
    """Median seconds of the exported model's ``main`` on ``p["input"]`` (``.npy``), in
    this fresh process; its output saved to ``p["output"]``."""
    from tvm import relax
    dev = tvm.cpu()
    vm = relax.VirtualMachine(tvm.runtime.load_module(p["so"]), dev)
    x = tvm.runtime.tensor(np.load(p["input"]), dev)
    y = vm["main"](x)
    y = y[0] if isinstance(y, (list, tuple)) or not hasattr(y, "numpy") else y
    np.save(p["output"], y.numpy())
    timer = vm.time_evaluator("main", dev, number=1, repeat=p.get("repeat", 25),
                              min_repeat_ms=20)
    return {"seconds": timer(x).median, "version": tvm.__version__}


MODES = {"tune": tune, "time": time_kernel, "tune-model": tune_model, "time-model": time_model}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=tuple(MODES))
    parser.add_argument("payload", help="a JSON object (see the module docstring)")
    a = parser.parse_args(argv)
    try:
        payload = json.loads(a.payload)
        answer = MODES[a.mode](payload)
    except (PeerError, KeyError, json.JSONDecodeError) as err:
        print(f"tvm_peer {a.mode}: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    print(RESULT + json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
