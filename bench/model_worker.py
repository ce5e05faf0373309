"""The child side of ``bench/models.py``: one whole model timed by one contender, in this
fresh process, on the input the parent saved (``.npy``), its output saved for the parent
to compare.

    python -m bench.model_worker ort|openvino|tvmlite JSON

* ``ort``: onnxruntime, CPU provider, ``threads`` intra-op threads, all graph
  optimizations (``tvmlite.cli.model_times.ort_timer``, as ``tvmlite tune`` times it).
* ``openvino``: OpenVINO reads the ONNX file; ``threads`` inference threads, the latency
  hint, and ``INFERENCE_PRECISION_HINT`` f32 unless ``"precision": "default"``; the
  precision it ran is in the answer (on a CPU with AVX-512 BF16 its default is bf16).
* ``tvmlite``: the model built (from ``log`` when given, else untuned), exported as the
  C library ``tvmlite compile`` writes and timed as ``tvmlite run`` does; ``"precision":
  "bf16"`` builds it as ``tvmlite compile --precision bf16`` does.

Only the standard library is imported at the top: the module runs in the OpenVINO and
torch venvs too (``bench/torch_models.py`` takes ``median_time`` from here). The answer
is one line on stdout prefixed ``RESULT``.
"""
from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULT = "MODEL_WORKER_RESULT "   # bench/peers.run_answering looks for this prefix
WARMUP = 5
SAMPLE_SECONDS = 0.02


def median_time(fn: Callable[[], Any], repeat: int, warmup: int = WARMUP) -> float:
    """Median seconds per call of ``fn`` over ``repeat`` samples, each as many calls as
    make ~20 ms (one call for anything slower), after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 >= SAMPLE_SECONDS or n >= 1 << 16:
            break
        n *= 2
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


def _input(p: dict) -> Any:
    import numpy as np
    return np.load(p["input"])


def _save(p: dict, y: Any) -> None:
    import numpy as np
    np.save(p["output"], np.ascontiguousarray(np.asarray(y, dtype=np.float32)))


def time_ort(p: dict) -> dict:
    import onnxruntime

    from tvmlite.cli.model_times import ort_timer
    feeds = {p["input_name"]: _input(p)}
    timed, why = ort_timer(Path(p["model"]), feeds, p["threads"])
    if timed is None:
        raise SystemExit(why)
    timed(WARMUP)
    seconds = statistics.median(timed(p["repeat"]))
    sess = onnxruntime.InferenceSession(p["model"], providers=["CPUExecutionProvider"])
    _save(p, sess.run(None, feeds)[0])
    return {"seconds": seconds, "version": onnxruntime.__version__}


def time_openvino(p: dict) -> dict:
    import openvino as ov
    config: dict[str, Any] = {"INFERENCE_NUM_THREADS": p["threads"],
                              "PERFORMANCE_HINT": "LATENCY"}
    if p.get("precision", "f32") != "default":
        config["INFERENCE_PRECISION_HINT"] = "f32"
    compiled = ov.Core().compile_model(p["model"], "CPU", config)
    request = compiled.create_infer_request()
    x = _input(p)
    seconds = median_time(lambda: request.infer({0: x}), p["repeat"])
    _save(p, request.infer({0: x})[compiled.output(0)])
    ran = compiled.get_property("INFERENCE_PRECISION_HINT")   # an ov.Type: "bf16", "f32"
    return {"seconds": seconds, "precision": getattr(ran, "to_string", lambda: str(ran))(),
            "version": ov.get_version()}


def time_tvmlite(p: dict) -> dict:
    import contextlib

    from tvmlite.frontend import from_onnx
    from tvmlite.graph.build import build_graph
    from tvmlite.graph.library import ModelLibrary
    from tvmlite.search.templated.task import apply_history_best
    graph = from_onnx(Path(p["model"]))
    t0 = time.perf_counter()
    with apply_history_best(p["log"]) if p.get("log") else contextlib.nullcontext():
        mod = build_graph(graph, quiet=True, precision=p.get("precision"))
    with tempfile.TemporaryDirectory(prefix="bench-models-") as tmp:
        mod.export_library(Path(tmp), name="model")
        build_s = time.perf_counter() - t0
        lib = ModelLibrary(tmp)
        lib.set_num_threads(p["threads"])
        feeds = {graph.inputs[0]: _input(p)}
        _save(p, lib.run(feeds)[0])
        lib.time_run(feeds, WARMUP)
        seconds = statistics.median(lib.time_run(feeds, p["repeat"]))
    return {"seconds": seconds, "build_seconds": build_s, "kernels": len(mod.kernels),
            "distinct": len({k.key for k in mod.kernels})}


MODES = {"ort": time_ort, "openvino": time_openvino, "tvmlite": time_tvmlite}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in MODES:
        print(f"usage: python -m bench.model_worker {'|'.join(MODES)} JSON", file=sys.stderr)
        return 2
    answer = MODES[argv[0]](json.loads(argv[1]))
    print(RESULT + json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
