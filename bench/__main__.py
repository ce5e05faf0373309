"""``python -m bench NAME [args]``: the one entry point of tvmlite's benchmarks.

``python -m bench`` (or ``--help``) lists them; ``python -m bench NAME --help`` shows a
benchmark's flags. Run it from the repository root, on a quiet machine: every figure is
a wall-clock timing. Results land where each benchmark's ``--out`` / ``--results`` says,
written by ``bench/results.py``; the committed ones are in ``bench/results/``
(``docs/benchmarks.md`` says which run each figure comes from).
"""
from __future__ import annotations

import importlib
import sys

# name: (module in bench/, what it measures)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "suite": ("suite", "the single-operator suite against numpy, PyTorch and TVM "
                       "MetaSchedule (--quick: a smoke run)"),
    "gemm-recipe": ("gemm_recipe", "the hand GEMM recipe (B packed, register block, "
                                   "vectorized, parallel) on 1024^3 against numpy"),
    "tune-template-free": ("tune_template_free", "the template-free search on GMM 1024^3 "
                                                 "and a ResNet 3x3 conv2d"),
    "tune-templated": ("tune_templated", "the templated search (XGBTuner) on the same "
                                         "two cases"),
    "pretrained": ("pretrained", "the search cold, with the shipped pretrained cost model, "
                                 "and with one trained without this CPU's logs"),
    "tune-for-target": ("tune_for_target", "a tuning for a named target (e.g. x86_64-avx2 "
                                           "on an AVX-512 host) beside numpy"),
    "dask-throughput": ("dask_throughput", "trials per minute with 1 and 2 Dask workers "
                                           "against LocalRunner, and Dask's overhead"),
    "dynamic": ("dynamic", "one tuning over a range of sizes against per-size tunings "
                           "with the same budget, numpy and PyTorch"),
    "kill-tune": ("kill_tune", "kill -9 of real tunings at random moments: what each lost"),
    "lowp-gemm": ("lowp_gemm", "int8 (VNNI and its fallback) and bf16 GEMM 1024^3 against "
                               "float32, onnxruntime MatMulInteger and PyTorch"),
    "peak": ("peak", "this CPU's fp32 FMA peak, as the other benchmarks measure it"),
    "models": ("models", "whole ONNX models (light zoo CNNs, MobileNet-V2, a BERT encoder), "
                         "untuned and --tuned, against onnxruntime, OpenVINO, PyTorch, TVM"),
    "models-dynamic": ("models_dynamic", "a BERT layer over lengths 1..512: one tuning for "
                                         "the range against a tuning per length"),
    "onnx_node_tests": ("onnx_node_tests", "onnx's backend node tests of the ops issue 29 "
                                           "lists, through tvmlite's backend: pass/fail"),
}


def usage() -> str:
    width = max(map(len, BENCHMARKS))
    return "\n".join(["usage: python -m bench NAME [args]   (python -m bench NAME --help)",
                      "", "benchmarks:"] +
                     [f"  {name:<{width}}  {what}" for name, (_, what) in BENCHMARKS.items()])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in BENCHMARKS:
        print(f"unknown benchmark {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"bench.{BENCHMARKS[name][0]}")
    return module.main(rest) or 0


if __name__ == "__main__":
    raise SystemExit(main())
