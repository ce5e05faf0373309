"""``tvmlite compile`` and ``tvmlite run``: a model in, one library out, in the shape of
TVM's ``tvmc``.

    tvmlite compile MODEL.onnx [--log L] [--shape NAME=1,3,224,224] [--target T]
                    [--layout auto|nchw|nhwc] [--split auto|off] [--precision fp32|bf16]
                    --out DIR [--name NAME]
    tvmlite run DIR --input NAME=FILE.npy ... [--output FILE.npz] [--repeat N] [--profile]

``compile`` imports the model (``frontend.from_onnx``), makes the whole-graph decisions
(``graph.decisions``: the activation layout measured or given, heavy fusions split back
when measured slower than their parts), builds it under the log's best records when
``--log`` is given (``search.apply_history_best``; the measurements use them too), writes
the library (``GraphModule.export_library``) and prints what was decided; with
``--precision bf16`` (``graph.passes.precision``) also the error of the bf16 build against
the fp32 one (``graph.accuracy``) on seeded random inputs. ``run`` loads
the library (``graph.library``), runs it on the inputs, prints the median latency of
``--repeat`` runs and, with ``--profile``, the time of each fused kernel. Argument
parsing and printing only.
"""
from __future__ import annotations

import argparse
import contextlib
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tvmlite.cli.args import UsageError, existing_log, positive_int, resolve_target, target_args
from tvmlite.frontend import from_onnx
from tvmlite.graph.accuracy import error_against_fp32
from tvmlite.graph.build import GraphModule, build_graph
from tvmlite.graph.decisions import (
    GraphDecisions,
    decide_layout,
    decide_splits,
    prepacked_weights,
)
from tvmlite.graph.ir import Graph
from tvmlite.graph.library import ModelLibrary
from tvmlite.graph.passes.precision import PRECISIONS
from tvmlite.search.templated.task import apply_history_best
from tvmlite.target.intrinsics import best_intrinsic
from tvmlite.target.target import Target

__all__ = ["add_model_commands", "add_layout_arg", "add_precision_arg", "precision_lines",
           "cmd_compile", "cmd_run", "parse_shape", "parse_input", "LAYOUT_CHOICES"]

LAYOUT_CHOICES = ("auto", "nchw", "nhwc")

_DIM = r"\d+(?:\.\.\d+)?"
_SHAPE = re.compile(rf"^([^=]+)=({_DIM}(?:,{_DIM})*)$")


def parse_shape(text: str) -> tuple[str, tuple]:
    """``NAME=1,3,224,224`` as (name, shape); a dimension ``LO..HI`` is a symbolic size
    over that range (``NAME=1,1..512``: ``from_onnx`` makes it symbolic for the graph)."""
    m = _SHAPE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"--shape {text!r}: use NAME=D0,D1,... "
                                         f"(e.g. data=1,3,224,224; a range LO..HI makes a "
                                         f"dimension symbolic: input_ids=1,1..512)")
    dims: list = []
    for d in m.group(2).split(","):
        lo, _, hi = d.partition("..")
        dims.append((int(lo), int(hi)) if hi else int(lo))
    return m.group(1), tuple(dims)


def format_shape(dims: tuple) -> str:
    """The ``--shape`` text of a parsed shape (``1,1..512``)."""
    return ",".join(f"{d[0]}..{d[1]}" if isinstance(d, tuple) else str(d) for d in dims)


def parse_input(text: str) -> tuple[str, str]:
    """``NAME=FILE.npy`` as (name, path)."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--input {text!r}: use NAME=FILE.npy")
    return name, path


def add_layout_arg(parser: Any, default: str, cost: str) -> None:
    """``--layout auto|nchw|nhwc`` on ``parser``; ``cost`` says what auto costs there."""
    parser.add_argument("--layout", choices=LAYOUT_CHOICES, default=default,
                        help="the activation layout of the convs and pools: auto builds the "
                        "model's kernels in NCHW and NHWC, times whole runs and keeps the "
                        f"faster ({cost}); nchw/nhwc take it as given (default {default})")


def add_split_arg(parser: Any, cost: str) -> None:
    """``--split auto|off`` on ``parser``; ``cost`` says what auto costs there."""
    parser.add_argument("--split", choices=("auto", "off"), default="off", help="auto: time "
                        "each fused kernel with a heavy epilogue or prologue against its "
                        "unfused parts and split back those slower fused (" + cost + "; "
                        "under a log that tuned one side only, that side); default off: "
                        "every fusion kept")


def add_precision_arg(parser: Any) -> None:
    """``--precision fp32|bf16`` on ``parser`` (argparse refuses any other value)."""
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32",
                        help="what the convs and matmuls store their weights and "
                        "activations in: bf16 rounds them to bfloat16 and sums in float32 "
                        "(vdpbf16ps where the target has AVX512-BF16; elsewhere bf16 "
                        "loads and float32 arithmetic); the model's inputs and outputs "
                        "stay float32, and the summary gives the error against the fp32 "
                        "build (default fp32)")


def precision_lines(graph: Graph, mod: GraphModule) -> list[str]:
    """The summary's error line of a model built (``mod``) below fp32 from ``graph`` (as
    imported): measured against the fp32 build where the target runs here."""
    if mod.graph.precision == "fp32":
        return []
    t = mod.target
    note = [] if best_intrinsic(t.arch, t.features, "bfloat16", "bfloat16", "float32") else [
        f"note:     {t.name} has no bf16 dot product (AVX512-BF16): bf16 here halves the "
        f"bytes of weights and activations but converts each to float32 for the "
        f"arithmetic, which on Zen 3 ran ResNet-50 2.3x slower than fp32; time both"]
    host = Target.host()
    if t.arch != host.arch or not set(t.features) <= set(host.features):
        return note + [f"error:    {mod.graph.precision} against fp32 not measured: the "
                       f"target is not this CPU"]
    return note + [error_against_fp32(graph, mod).line()]


TUNE_LAYOUT_COST = ("off by default: a second build of the model's default kernels, "
                    "~10 s of CPU for SqueezeNet on 2 cores")


def add_model_commands(sub: Any, command: Any) -> None:
    """Register ``compile`` and ``run`` (``command`` is ``commands.build_parser``'s
    helper), and give ``tune``, when registered already, the model's ``--layout``."""
    if "tune" in sub.choices:
        add_layout_arg(sub.choices["tune"], "nhwc", f"MODEL.onnx, before the tasks are "
                       f"extracted; {TUNE_LAYOUT_COST}")
        add_precision_arg(sub.choices["tune"])
        add_split_arg(sub.choices["tune"], "MODEL.onnx, before the tasks are extracted: "
                      "two builds of default kernels")
    c = command(sub, "compile", cmd_compile, "import an ONNX model, fuse and build it (with "
                "the best records of --log, else default schedules) into one C library")
    c.add_argument("model", metavar="MODEL.onnx")
    c.add_argument("--log", metavar="FILE", help="tuning log whose best records the "
                   "kernels use")
    c.add_argument("--shape", type=parse_shape, action="append", default=[],
                   metavar="NAME=D0,D1,...", help="an input's shape (for symbolic dims)")
    c.add_argument("--out", required=True, metavar="DIR")
    c.add_argument("--name", default="model", help="the library's name (a C identifier)")
    add_layout_arg(c, "auto", "a second build, cached, and about a second of timing")
    add_split_arg(c, "a third build")
    add_precision_arg(c)
    target_args(c, runner=False)

    c = command(sub, "run", cmd_run, "run a compiled model library on .npy inputs; prints "
                "the median latency (and, with --profile, the time of each fused kernel)")
    c.add_argument("dir", metavar="DIR")
    c.add_argument("--input", type=parse_input, action="append", default=[],
                   metavar="NAME=FILE.npy")
    c.add_argument("--output", metavar="FILE.npz", help="write the outputs here")
    c.add_argument("--repeat", type=positive_int, default=10, help="timed runs (default 10)")
    c.add_argument("--profile", action="store_true",
                   help="time each fused kernel, as the run reaches it and hot in cache")


def cmd_compile(args: argparse.Namespace) -> int:
    target = resolve_target(args)
    if not args.name.isidentifier():
        raise UsageError(f"--name {args.name!r}: must be a C identifier")
    graph = from_onnx(Path(args.model), shapes=dict(args.shape))
    if args.precision != "fp32":
        if graph.sizes:
            raise UsageError(f"--precision {args.precision}: a model with a symbolic size "
                             f"(a range in --shape) is built in fp32 only; give fixed sizes")
        graph = graph.replace(precision=args.precision)
    ctx = apply_history_best(existing_log(args.log)) if args.log else contextlib.nullcontext()
    with ctx:   # the measurements build under the log's records, as the library does
        if graph.sizes:   # fused at the probe sizes already: no one size to measure
            fused, decisions = graph, GraphDecisions(graph.layout, "default (symbolic size)")
        else:
            fused, decisions = decide_layout(graph, target, args.layout)
            fused, decisions = decide_splits(fused, target, decisions,
                                             measure=args.split == "auto")
        mod = build_graph(fused, target)
        errors = precision_lines(graph, mod)
    lib = mod.export_library(Path(args.out), name=args.name)
    kernels = len(mod.kernels)
    print(f"{args.model}: {len(graph.nodes)} nodes -> {kernels} fused kernels "
          f"({len({k.key for k in mod.kernels})} distinct, {mod.kernels_without_record} "
          f"without a record); wrote {lib}")
    print("\n".join(prepacked_weights(mod, decisions).lines() + errors))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    feeds = {}
    for name, path in args.input:
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise UsageError(f"--input {name}={path}: cannot read a .npy array: {err}") from None
    lib = ModelLibrary(args.dir)
    outs = lib.run(feeds)
    times = lib.time_run(feeds, args.repeat)
    times.sort()
    median = times[len(times) // 2]
    print(f"{lib.name}: median {median * 1e3:.3f} ms over {args.repeat} runs "
          f"(min {times[0] * 1e3:.3f} ms)")
    if args.profile:
        # in the run and hot in cache: the gap is what a kernel loses to the ones before it
        # (inputs and weights evicted), which a tuner timing it alone never sees
        prof, hot = lib.profile(feeds), lib.profile(feeds, hot=True)
        total = sum(t for _, t in prof) or 1.0
        print(f"  {'kernel':<32} {'in the run':>12}  {'share':>7} {'hot in cache':>14}")
        for (name, t), (_, h) in zip(prof, hot):
            print(f"  {name:<32} {t * 1e3:9.3f} ms  {100 * t / total:5.1f} % "
                  f"{h * 1e3:11.3f} ms")
        print(f"  {'sum':<32} {total * 1e3:9.3f} ms  {100.0:5.1f} % "
              f"{sum(h for _, h in hot) * 1e3:11.3f} ms")
    if args.output:
        names = [o["name"] for o in lib.manifest["outputs"]]
        np.savez(args.output, **dict(zip(names, outs)))
        print(f"wrote {args.output}", file=sys.stderr)
    return 0
