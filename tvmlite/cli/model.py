"""``tvmlite compile`` and ``tvmlite run``: a model in, one library out, in the shape of
TVM's ``tvmc``.

    tvmlite compile MODEL.onnx [--log L] [--shape NAME=1,3,224,224] [--target T]
                    --out DIR [--name NAME]
    tvmlite run DIR --input NAME=FILE.npy ... [--output FILE.npz] [--repeat N] [--profile]

``compile`` imports the model (``frontend.from_onnx``), builds it under the log's best
records when ``--log`` is given (``search.apply_history_best``), and writes the library
(``GraphModule.export_library``). ``run`` loads the library (``graph.library``), runs it
on the inputs, prints the median latency of ``--repeat`` runs and, with ``--profile``,
the time of each fused kernel. Argument parsing and printing only.
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
from tvmlite.graph.build import build_graph
from tvmlite.graph.library import ModelLibrary
from tvmlite.search.templated.task import apply_history_best

__all__ = ["add_model_commands", "cmd_compile", "cmd_run", "parse_shape", "parse_input"]

_SHAPE = re.compile(r"^([^=]+)=(\d+(?:,\d+)*)$")


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME=1,3,224,224`` as (name, shape)."""
    m = _SHAPE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"--shape {text!r}: use NAME=D0,D1,... "
                                         f"(e.g. data=1,3,224,224)")
    return m.group(1), tuple(int(d) for d in m.group(2).split(","))


def parse_input(text: str) -> tuple[str, str]:
    """``NAME=FILE.npy`` as (name, path)."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--input {text!r}: use NAME=FILE.npy")
    return name, path


def add_model_commands(sub: Any, command: Any) -> None:
    """Register ``compile`` and ``run`` (``command`` is ``commands.build_parser``'s helper)."""
    c = command(sub, "compile", cmd_compile, "import an ONNX model, fuse and build it (with "
                "the best records of --log, else default schedules) into one C library")
    c.add_argument("model", metavar="MODEL.onnx")
    c.add_argument("--log", metavar="FILE", help="tuning log whose best records the "
                   "kernels use")
    c.add_argument("--shape", type=parse_shape, action="append", default=[],
                   metavar="NAME=D0,D1,...", help="an input's shape (for symbolic dims)")
    c.add_argument("--out", required=True, metavar="DIR")
    c.add_argument("--name", default="model", help="the library's name (a C identifier)")
    target_args(c, runner=False)

    c = command(sub, "run", cmd_run, "run a compiled model library on .npy inputs; prints "
                "the median latency (and, with --profile, the time of each fused kernel)")
    c.add_argument("dir", metavar="DIR")
    c.add_argument("--input", type=parse_input, action="append", default=[],
                   metavar="NAME=FILE.npy")
    c.add_argument("--output", metavar="FILE.npz", help="write the outputs here")
    c.add_argument("--repeat", type=positive_int, default=10, help="timed runs (default 10)")
    c.add_argument("--profile", action="store_true", help="time each fused kernel")


def cmd_compile(args: argparse.Namespace) -> int:
    target = resolve_target(args)
    if not args.name.isidentifier():
        raise UsageError(f"--name {args.name!r}: must be a C identifier")
    graph = from_onnx(Path(args.model), shapes=dict(args.shape))
    ctx = apply_history_best(existing_log(args.log)) if args.log else contextlib.nullcontext()
    with ctx:
        mod = build_graph(graph, target)
    lib = mod.export_library(Path(args.out), name=args.name)
    kernels = len(mod.kernels)
    print(f"{args.model}: {len(graph.nodes)} nodes -> {kernels} fused kernels "
          f"({len({k.key for k in mod.kernels})} distinct, {mod.kernels_without_record} "
          f"without a record); wrote {lib}")
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
        prof = lib.profile(feeds)
        total = sum(t for _, t in prof) or 1.0
        for name, t in prof:
            print(f"  {name:<32} {t * 1e3:9.3f} ms  {100 * t / total:5.1f} %")
    if args.output:
        names = [o["name"] for o in lib.manifest["outputs"]]
        np.savez(args.output, **dict(zip(names, outs)))
        print(f"wrote {args.output}", file=sys.stderr)
    return 0
