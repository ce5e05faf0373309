"""Low-precision GEMM (issue 32, "Measure and report"): int8 and bf16 against float32.

    python -m bench lowp-gemm [--size 1024] [--threads 2] [--repeat 25] [--out DIR]
        [--torch-python PATH] [--quick] [--only int8,int8-vector] [--rounds N]

C = A @ B at size^3, ``--threads`` threads, each contender in its own fresh process
(bench/peers.py: OpenMP and the peers' thread pools start clean), the median of
``--repeat`` samples; ``--rounds N`` runs the whole list N times in turn and reports the
median over the rounds and, for our int8 and fp32 rows, the median of the per-round
ratios against onnxruntime (on a shared VM the speed drifts between minutes, so a ratio
of two runs minutes apart says little):

* tvmlite int8, u8 x s8 -> s32, with this CPU's AMX tile intrinsic (tdpbusd, a 2 x 2
  block of 16 x 16 tiles: ``dot_block.tile_block``; skipped without AMX) and with its
  best vector dot-product intrinsic (vpdpbusd with VNNI), B pre-packed once (a constant, as a
  model's weight is) in the intrinsic's layout; and the same for the named AVX2 target
  ``x86_64-avx2`` (Zen 3's code: no AVX-512, no VNNI, so vpmaddwd on a B the pack
  widened to int16), beside float32 on that target, the ratio Zen 3 would see;
* tvmlite bf16 x bf16 -> f32 with AMX tdpbf16ps and with vdpbf16ps where the CPU has
  AVX512-BF16;
* tvmlite float32: the hand GEMM recipe (``schedules.recipes.gemm_packed``, the blocked
  default), the reference of the ratios (the AVX2 rows: of the AVX2 float32 row);
* onnxruntime MatMulInteger (u8 x s8, B an initializer) and MatMul (float32);
* PyTorch (``--torch-python``, default $TVMLITE_TORCH_PYTHON, else /work/peers/torch):
  ``torch._int_mm`` (s8 x s8 -> s32), bf16 and float32 ``matmul``; skipped when absent.

Every tvmlite kernel is checked against numpy's integer (or float64) product on the
first rows before it is timed. The table names the instruction each kernel used;
GOP/s counts a multiply-add as two operations. ``--quick`` is a smoke run (size 128,
3 repeats). Results: ``<out>/lowp-gemm[-quick]-<cpu>.md`` + ``.json``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from bench import peers, results
from tvmlite.testing.onnx_reference import INEXACT_REASON

TORCH_PYTHON = Path("/work/peers/torch/bin/python")

_TVMLITE = """
import numpy as np, tvmlite
from bench.model_worker import median_time
from tvmlite import ops
from tvmlite.schedule.dot_block import block_sizes, gemm_dot, tile_block
from tvmlite.schedules.dot import lowp_matmul
from tvmlite.schedules.recipes import gemm_packed
from tvmlite.search.template_free.priors import register_block_rows
from tvmlite.target.intrinsics import best_intrinsic
from tvmlite.target.target import Target
n, kind = payload["size"], payload["kind"]
target = Target.from_name("x86_64-avx2") if kind.endswith("-avx2") else Target.host()
rng = np.random.default_rng(0)
if kind.startswith("fp32"):
    lanes = target.vector_lanes("float32")
    # the register block blocking.py derives: 2 vectors wide, as many rows as fit
    s, tensors = gemm_packed(n, n, n, block_cols=2 * lanes,
                             block_rows=register_block_rows(target.vector_registers, 2))
    a, b = (rng.standard_normal((n, n)).astype("float32") for _ in range(2))
    used = "FMA (vector extensions, no intrinsic)"
else:
    bf16 = kind.startswith("bf16")
    dts = ("bfloat16", "bfloat16", "float32") if bf16 else ("uint8", "int8", "int32")
    vector_only = kind.endswith("-vector") or kind.endswith("-avx2")
    intr = best_intrinsic(target.arch, target.features, *dts,
                          shape=None if vector_only else (n, n, n))
    if intr is None:
        raise SystemExit(f"this CPU has no intrinsic for {dts}")
    if not vector_only and not intr.is_tile:
        raise SystemExit(f"this CPU has no tile intrinsic (AMX) for {dts}")
    tensors = lowp_matmul(n, n, n) if bf16 else ops.qmatmul(n, n, n)
    rows, vecs = tile_block(n, n, intr) if intr.is_tile else \
        block_sizes(n, n, intr.lanes, target.vector_registers,
                    rows_first=not intr.broadcast_in_registers)
    s = gemm_dot(tensors, intr.name, rows, vecs)
    used = f"{intr.name} ({rows}x{vecs} block): {intr.instruction}"
    if bf16:
        a, b = (rng.standard_normal((n, n)).astype("bfloat16") for _ in range(2))
    else:
        a = rng.integers(0, 256, (n, n)).astype("uint8")
        b = rng.integers(-128, 128, (n, n)).astype("int8")
mod = tvmlite.build(s, tensors, target=target)
a, b = tvmlite.asaligned(a), tvmlite.asaligned(b)
c = tvmlite.empty((n, n), tensors[2].dtype)
mod(a, b, c)
want = a[:4].astype(np.float64) @ b.astype(np.float64)
got = np.asarray(c)[:4].astype(np.float64)
if kind.startswith("int8"):
    ok = bool((got == want).all())
else:
    ok = bool(np.allclose(got, want, rtol=1e-2, atol=1e-2 * np.sqrt(n)))
timer = mod.time_evaluator(number=1, repeat=payload["repeat"], min_repeat_ms=20)
print(json.dumps({"seconds": timer(a, b, c).median, "instruction": used, "correct": ok}))
"""

_ORT = """
import numpy as np, onnx, onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from bench.model_worker import median_time
n, kind = payload["size"], payload["kind"]
rng = np.random.default_rng(0)
if kind == "int8":
    a = rng.integers(0, 256, (n, n)).astype(np.uint8)
    b = rng.integers(-128, 128, (n, n)).astype(np.int8)
    node = helper.make_node("MatMulInteger", ["A", "B"], ["C"])
    ta, tc = TensorProto.UINT8, TensorProto.INT32
else:
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    node = helper.make_node("MatMul", ["A", "B"], ["C"])
    ta = tc = TensorProto.FLOAT
graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("A", ta, [n, n])],
                          [helper.make_tensor_value_info("C", tc, [n, n])],
                          [numpy_helper.from_array(b, "B")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
opts = ort.SessionOptions()
opts.intra_op_num_threads = payload["threads"]
opts.inter_op_num_threads = 1
sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
fn = lambda: sess.run(None, {"A": a})
# its products on the first rows against numpy's: exact integers where MLAS has VNNI (or
# dotprod); without it, vpmaddubsw saturates each pair's sum in int16 (Zen 3)
got = sess.run(None, {"A": a})[0][:4].astype(np.float64) if kind == "int8" else None
err = float(np.abs(got - a[:4].astype(np.float64) @ b.astype(np.float64)).max()) \
    if got is not None else None
print(json.dumps({"seconds": median_time(fn, payload["repeat"]), "version": ort.__version__,
                  "max_error": err}))
"""

_TORCH = """
import torch
from bench.model_worker import median_time
torch.set_num_threads(payload["threads"])
n, kind = payload["size"], payload["kind"]
g = torch.Generator().manual_seed(0)
if kind == "int8":
    a = torch.randint(-128, 128, (n, n), dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (n, n), dtype=torch.int8, generator=g)
    fn = lambda: torch._int_mm(a, b)
else:
    dt = torch.bfloat16 if kind == "bf16" else torch.float32
    a, b = (torch.randn(n, n, generator=g).to(dt) for _ in range(2))
    fn = lambda: torch.matmul(a, b)
with torch.no_grad():
    print(json.dumps({"seconds": median_time(fn, payload["repeat"]),
                      "version": torch.__version__}))
"""

# (label, worker, kind, dtypes) in the order they run: ours first, the peers (whose
# thread pools spin after a call) in processes of their own after
CONTENDERS = (
    ("tvmlite int8 AMX", "tvmlite", "int8", "u8 x s8 -> s32"),
    ("tvmlite int8 vector (best dot intrinsic)", "tvmlite", "int8-vector", "u8 x s8 -> s32"),
    ("tvmlite bf16 AMX", "tvmlite", "bf16", "bf16 x bf16 -> f32"),
    ("tvmlite bf16 vector (vdpbf16ps)", "tvmlite", "bf16-vector", "bf16 x bf16 -> f32"),
    ("tvmlite fp32 (blocked recipe)", "tvmlite", "fp32", "f32"),
    ("tvmlite int8, AVX2 target (Zen 3 code)", "tvmlite", "int8-avx2", "u8 x s8 -> s32"),
    ("tvmlite fp32, AVX2 target (Zen 3 code)", "tvmlite", "fp32-avx2", "f32"),
    ("onnxruntime MatMulInteger", "ort", "int8", "u8 x s8 -> s32"),
    ("onnxruntime MatMul", "ort", "fp32", "f32"),
    ("PyTorch torch._int_mm", "torch", "int8", "s8 x s8 -> s32"),
    ("PyTorch matmul bf16", "torch", "bf16", "bf16 x bf16 -> bf16"),
    ("PyTorch matmul fp32", "torch", "fp32", "f32"),
)


def torch_python(arg: str | None) -> str | None:
    """The python of a venv with torch: the flag, $TVMLITE_TORCH_PYTHON, the peers' venv."""
    for p in (arg, os.environ.get("TVMLITE_TORCH_PYTHON"), str(TORCH_PYTHON)):
        if p and Path(p).exists():
            return p
    return None


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench lowp-gemm", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=peers.REPEAT)
    p.add_argument("--rounds", type=int, default=1,
                   help="run every contender this many times, in turn (ratios per round)")
    p.add_argument("--torch-python", default=None)
    p.add_argument("--quick", action="store_true", help="smoke run: size 128, 3 repeats")
    p.add_argument("--only", default=None,
                   help="run only the contenders whose kind is one of these, comma-separated "
                        "(int8, int8-vector, bf16, bf16-vector, fp32, int8-avx2, fp32-avx2)")
    p.add_argument("--out", type=Path, default=results.ROOT / "bench" / "results")
    a = p.parse_args(argv)
    if a.quick:
        a.size, a.repeat = 128, 3
    return a


# the onnxruntime row each kind's per-round ratio is taken against
ORT_OF = {"int8": "onnxruntime MatMulInteger", "int8-vector": "onnxruntime MatMulInteger",
          "fp32": "onnxruntime MatMul"}


def run_once(label: str, worker: str, kind: str, payload: dict, threads: int,
             torch_py: str | None) -> dict:
    """One contender in its fresh process: {"seconds", ...} or {"error"}."""
    if worker == "torch" and torch_py is None:
        return {"error": "skipped: no torch venv"}
    python = torch_py if worker == "torch" else sys.executable
    code = {"tvmlite": _TVMLITE, "ort": _ORT, "torch": _TORCH}[worker]
    env = peers.kernel_env(threads) | ({"OMP_PROC_BIND": "false"}
                                       if worker != "tvmlite" else {})
    r = peers.run_worker(python, code, dict(payload, kind=kind), env)
    if "error" in r:
        print(f"{label}: {r['error']}", file=sys.stderr)
    else:
        gops = 2 * payload["size"] ** 3 / r["seconds"] / 1e9
        print(f"{label}: {r['seconds'] * 1e3:.3f} ms, {gops:.1f} GOP/s", file=sys.stderr)
    return r


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    torch_py = torch_python(a.torch_python)
    payload = {"size": a.size, "threads": a.threads, "repeat": a.repeat}
    only = set(a.only.split(",")) if a.only else None
    chosen = [c for c in CONTENDERS if only is None or c[2] in only]
    # every round runs each contender once, in turn: the host's speed drifts between
    # minutes (a shared VM), so a ratio is taken within a round, then the median of them
    runs: dict[str, list[dict]] = {c[0]: [] for c in chosen}
    for _ in range(a.rounds):
        for label, worker, kind, _dt in chosen:
            runs[label].append(run_once(label, worker, kind, payload, a.threads, torch_py))
    def seconds(label: str) -> float | None:
        ok = [r["seconds"] for r in runs.get(label, []) if "error" not in r]
        return statistics.median(ok) if ok else None
    def per_round(label: str, ref: str) -> float | None:
        pairs = [q["seconds"] / r["seconds"] for r, q in zip(runs[label], runs.get(ref, []))
                 if "error" not in r and "error" not in q]
        return round(statistics.median(pairs), 2) if pairs else None
    gops = {c[0]: 2 * a.size ** 3 / t / 1e9 for c in chosen if (t := seconds(c[0]))}
    fp32 = gops.get("tvmlite fp32 (blocked recipe)")
    fp32_avx2 = gops.get("tvmlite fp32, AVX2 target (Zen 3 code)")
    rows = []
    for label, worker, kind, dtypes in chosen:
        first = next((r for r in runs[label] if "error" not in r), None)
        if first is None:
            rows.append((label, dtypes, "", None, None, None, None,
                         runs[label][0]["error"][:120]))
            continue
        note = first.get("version", "") if worker != "tvmlite" else \
            ("correct" if all(r.get("correct") for r in runs[label] if "error" not in r)
             else "WRONG RESULT")
        if first.get("max_error"):
            note += (f"; inexact on this CPU: max error {first['max_error']:.0f} against "
                     f"numpy ({INEXACT_REASON})")
        ref = fp32_avx2 if "AVX2 target" in label else fp32
        vs_ort = per_round(label, ORT_OF[kind]) if worker == "tvmlite" and kind in ORT_OF \
            and ORT_OF[kind] in runs else None
        rows.append((label, dtypes, first.get("instruction", ""),
                     round(seconds(label) * 1e3, 3),  # type: ignore[operator]
                     round(gops[label], 1), round(gops[label] / ref, 2) if ref else None,
                     vs_ort, note))
    table = results.Table(
        ("kernel", "dtypes", "instruction", "ms", "GOP/s", "x tvmlite fp32 (same target)",
         "x onnxruntime (per round)", "note"),
        tuple(rows),
        notes=(f"C = A @ B, {a.size}^3, {a.threads} threads, {a.rounds} round(s) of every "
               f"contender in turn, each in a fresh process, the median of {a.repeat} "
               f"samples, then the median over the rounds (ms, GOP/s); 'x onnxruntime' is "
               f"the median of the per-round ratios against onnxruntime's kernel of the "
               f"dtype, run in the same round; a multiply-add counts 2 operations; B "
               f"pre-packed (tvmlite) or an initializer (onnxruntime); the AVX2-target rows are "
               f"the named target x86_64-avx2 (-march=haswell: Zen 3's ISA) run on this "
               f"CPU, their ratio against float32 on that target",))
    part = f"-{a.only.replace(',', '+')}" if a.only else ""
    part += f"-{a.threads}t" if a.threads != 2 else ""
    stem = f"lowp-gemm{'-quick' if a.quick else ''}{part}-{peers.cpu_slug()}"
    md, _ = results.write(a.out / stem, "Low-precision GEMM against float32", [table],
                          name="lowp_gemm", argv=sys.argv[1:] if argv is None else argv)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
