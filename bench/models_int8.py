"""Quantized models against onnxruntime running the same quantized model (issue 32,
"Measure and report").

    python -m bench.models_int8 [--models resnet50 mobilenet_v2] [--threads 2]
        [--repeat 25] [--calibration 8] [--per-tensor] [--quick] [--out DIR]

Each model (ResNet-50 of the light zoo and MobileNet-V2, ``bench/onnx_models.py``'s
builders, seeded random weights) is quantized with onnxruntime's ``quantize_static`` in
the QDQ format (uint8 activations, int8 weights per channel unless ``--per-tensor``) on
``--calibration`` batches of seeded random inputs. tvmlite imports the QDQ model, whose
QDQ pass folds every DequantizeLinear -> Conv/MatMul -> QuantizeLinear into an integer
kernel; onnxruntime (CPU provider, all graph optimizations, which fuse the same patterns
into QLinearConv) runs the same file. Both at ``--threads`` threads, batch 1, median of
``--repeat`` runs, on the same input, each in a fresh process (``bench.model_worker``,
as ``bench/models.py`` times them: tvmlite's exported C library). The table gives the
latencies, onnxruntime's / ours, the output difference in output quantization steps
(the goal: at most 1) and how many convs/matmuls became integer kernels.

``--quick`` is a smoke run: the toy MobileNet-V2 (32x32, width 0.5), 3 repeats, 2
calibration batches. Results: ``bench/results/models-int8-<cpu>.md`` + ``.json``
(``models-int8-quick-<cpu>`` for ``--quick``).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench import model_worker, onnx_models, peers, results
from tvmlite.testing.onnx_reference import INEXACT_REASON, onnxruntime_integers_exact

MODELS = ("resnet50", "mobilenet_v2")
QUICK_MODELS = ("mobilenet_v2",)


def quantized_model(name: str, quick: bool, folder: Path, calibration: int,
                    per_channel: bool, seed: int = 0) -> Path:
    """The QDQ file of model ``name`` (made once in ``folder``): quantize_static on
    ``calibration`` seeded random batches."""
    import onnx
    from onnxruntime import quantization as q
    tag = f"{name}{'-quick' if quick else ''}-{'pc' if per_channel else 'pt'}-c{calibration}"
    out = folder / f"{tag}.qdq.onnx"
    if out.exists():
        return out
    folder.mkdir(parents=True, exist_ok=True)
    fp = folder / f"{tag}.float.onnx"
    model = onnx_models.helper_model(name, quick)
    opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if opset < 13:   # per-axis (De)QuantizeLinear needs 13; the light zoo's are at 9
        from onnx import version_converter
        model = version_converter.convert_version(model, 13)
    onnx.save(model, str(fp))
    shape, input_name = _input(model)
    rng = np.random.default_rng(seed)

    class Reader(q.CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([{input_name: rng.standard_normal(shape).astype(np.float32)}
                                 for _ in range(calibration)])

        def get_next(self) -> dict | None:
            return next(self.batches, None)
    q.quantize_static(str(fp), str(out), Reader(), quant_format=q.QuantFormat.QDQ,
                      per_channel=per_channel, activation_type=q.QuantType.QUInt8,
                      weight_type=q.QuantType.QInt8)
    return out


def _input(model: Any) -> tuple[tuple[int, ...], str]:
    inits = {t.name for t in model.graph.initializer}
    vi = next(v for v in model.graph.input if v.name not in inits)
    return tuple(d.dim_value for d in vi.type.tensor_type.shape.dim), vi.name


def _output_step(model: Any) -> float:
    """The scale of the DequantizeLinear giving the model's output (one output step);
    1.0 when the output is not dequantized."""
    from onnx import numpy_helper
    prod = {o: n for n in model.graph.node for o in n.output}
    last = prod.get(model.graph.output[0].name)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    if last is None or last.op_type != "DequantizeLinear" or last.input[1] not in inits:
        return 1.0
    return float(np.asarray(inits[last.input[1]]).reshape(-1)[0])


def measure(path: Path, threads: int, repeat: int) -> dict:
    """Latencies of tvmlite and onnxruntime on the QDQ model at ``path``, each timed in a
    fresh process (``bench.model_worker``: tvmlite's exported C library as ``tvmlite run``
    times it, onnxruntime as ``tvmlite tune`` does), the output difference in output
    steps, and the integer kernels tvmlite made."""
    import onnx

    from tvmlite.frontend import from_onnx
    from tvmlite.graph import optimize
    model = onnx.load(str(path))
    shape, input_name = _input(model)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    ops = [n.op for n in optimize(from_onnx(model)).nodes]
    feed = path.with_suffix(".input.npy")
    np.save(feed, x)
    answers = {}
    for who, env in (("tvmlite", peers.kernel_env(threads)), ("ort", peers.numpy_env(threads))):
        payload = {"model": str(path), "input": str(feed), "input_name": input_name,
                   "output": str(path.with_suffix(f".y-{who}.npy")), "threads": threads,
                   "repeat": repeat}
        answer = peers.run_answering([sys.executable, "-m", "bench.model_worker", who,
                                      json.dumps(payload)], env, model_worker.RESULT)
        if "error" in answer:
            raise SystemExit(f"models_int8: {path.name}: {who}: {answer['error']}")
        answers[who] = {**answer, "y": np.load(payload["output"])}
    ours, theirs = answers["tvmlite"], answers["ort"]
    steps = float(np.abs(ours["y"].astype(np.float64) - theirs["y"]).max() / _output_step(model))
    return {"tvmlite_ms": ours["seconds"] * 1e3, "ort_ms": theirs["seconds"] * 1e3,
            "speedup": theirs["seconds"] / ours["seconds"], "max_diff_steps": steps,
            "build_s": ours["build_seconds"],
            "integer_kernels": ops.count("conv_integer") + ops.count("matmul_integer"),
            "float_left": ops.count("conv") + ops.count("matmul")}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.models_int8", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", choices=MODELS)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=25)
    p.add_argument("--calibration", type=int, default=8)
    p.add_argument("--per-tensor", action="store_true",
                   help="weights per tensor (default: per output channel)")
    p.add_argument("--quick", action="store_true", help="smoke run: toy MobileNet-V2")
    p.add_argument("--cache", type=Path, default=None,
                   help="where the quantized models are kept (default bench/out/models-int8)")
    p.add_argument("--out", type=Path, default=results.ROOT / "bench" / "results")
    a = p.parse_args(argv)
    if a.threads < 1 or a.repeat < 1 or a.calibration < 1:
        p.error("--threads, --repeat and --calibration must be positive")
    if a.quick:
        a.models = a.models or list(QUICK_MODELS)
        a.repeat, a.calibration = min(a.repeat, 3), min(a.calibration, 2)
    a.models = a.models or list(MODELS)
    a.cache = a.cache or results.ROOT / "bench" / "out" / (
        "models-int8-quick" if a.quick else "models-int8")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    rows = []
    for name in a.models:
        path = quantized_model(name, a.quick, a.cache, a.calibration, not a.per_tensor)
        r = measure(path, a.threads, a.repeat)
        rows.append((name, round(r["tvmlite_ms"], 3), round(r["ort_ms"], 3),
                     round(r["speedup"], 2), round(r["max_diff_steps"], 2),
                     f"{r['integer_kernels']} int / {r['float_left']} float",
                     round(r["build_s"], 1)))
        print(f"{name}: tvmlite {r['tvmlite_ms']:.3f} ms, onnxruntime {r['ort_ms']:.3f} ms "
              f"({r['speedup']:.2f}x), max diff {r['max_diff_steps']:.2f} steps, "
              f"{r['integer_kernels']} integer kernels, {r['float_left']} float convs/matmuls "
              f"left", file=sys.stderr)
    # where they are not exact (x86 without VNNI), a difference from onnxruntime in
    # steps is mostly its error, not ours (docs/benchmarks.md, quantized models)
    exactness = "exact" if onnxruntime_integers_exact() else f"inexact ({INEXACT_REASON})"
    table = results.Table(("model", "tvmlite ms", "onnxruntime ms", "ort / tvmlite",
                           "max diff (steps)", "convs+matmuls", "build s"), tuple(rows),
                          notes=(f"QDQ (quantize_static, uint8 activations, int8 weights "
                                 f"{'per tensor' if a.per_tensor else 'per channel'}, "
                                 f"{a.calibration} random calibration batches), batch 1, "
                                 f"{a.threads} threads, median of {a.repeat}, each "
                                 f"contender in a fresh process; tvmlite untuned (default "
                                 f"schedules, the exported library); onnxruntime's u8 x s8 "
                                 f"products on this CPU: {exactness}",))
    stem = f"models-int8{'-quick' if a.quick else ''}-{peers.cpu_slug()}"
    md, _ = results.write(a.out / stem, "Quantized models against onnxruntime", [table],
                          name="models_int8", argv=sys.argv[1:] if argv is None else argv)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
