"""The ``tvmlite`` command line: target, tune, replay, compare, log, show, explain.

Everything here is argument handling and printing; the work is done by the library
(search, replay, compare, peak), so the command line adds nothing a script cannot do.
Three kinds of failure, three exit codes, never a traceback for a user's mistake:

- a bad command line (unknown operator, bad KEY=VALUE, missing log, bad --trials) is a
  usage error: the command's usage and what to do, exit 2;
- a library error (ValueError, TypeError, LookupError, OSError, compile errors) is
  ``tvmlite: error: <message>``, exit 1: the library's messages already name the fix;
- Ctrl-C stops cleanly (every measured record is already in the log), exit 130.

Map: the parser · commands (target, replay, compare, log, show) · main. Shared argument
handling is in ``cli_args.py``, the tune command and its summary in ``cli_tune.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from tvmlite.cli.args import (
    LIBRARY_ERRORS,
    UsageError,
    existing_log,
    make_runner,
    non_negative_int,
    parse_params,
    parse_value,
    positive_int,
    positive_seconds,
    resolve_target,
    signature,
    target_args,
    tuning_options,
)
from tvmlite.cli.compare import compare
from tvmlite.cli.explain import add_explain_command
from tvmlite.cli.model import add_model_commands, parse_shape
from tvmlite.cli.model_tune import cmd_tune_any
from tvmlite.cli.progress import Progress
from tvmlite.cli.tune import tune_summary
from tvmlite.ops import OPS
from tvmlite.runtime.module import generate_c
from tvmlite.schedule.schedule import Schedule
from tvmlite.search.records import logs
from tvmlite.search.records.deploy import replay
from tvmlite.search.templated.task import TEMPLATES
from tvmlite.target import bandwidth as bandwidths
from tvmlite.target import peak as peaks
from tvmlite.target.detect import describe_cpu
from tvmlite.target.target import CompilerNotFoundError, Target, describe_cpu_text

__all__ = ["UsageError", "build_parser", "main", "parse_params", "parse_value",
           "signature", "tune_summary"]

# -- the parser --------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tvmlite", description="A TVM-style compute/schedule "
                                "autotuner for CPUs that generates C.",
                                epilog="exit status: 0 done; 2 the command line is wrong "
                                "(unknown or missing arguments, or a bad value: --trials 0, "
                                "M=0, a line --index that holds no record); 1 the work failed "
                                "(a build, a measurement, a file); 130 interrupted")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def command(parent: Any, name: str, func: Callable | None,
                text: str) -> argparse.ArgumentParser:
        c = parent.add_parser(name, help=text, description=text)
        c.set_defaults(func=func, parser=c)
        return c

    c = command(sub, "target", cmd_target, "describe this CPU: ISA, vector width, cores, "
                "caches, compiler and flags")
    c.add_argument("--json", action="store_true", help="print the target as JSON (as stored "
                   "in tuning records; with --peak, plus a 'peak' entry)")
    c.add_argument("--peak", action="store_true", help="measure the fp32 FMA peak of this "
                   "CPU (takes seconds) and cache it for tuning summaries")
    c.add_argument("--peak-seconds", type=positive_seconds,
                   default=0.25, help="seconds per peak run")
    c.add_argument("--peak-runs", type=positive_int, default=8, help="peak runs (the best "
                   "is the peak)")
    target_args(c, runner=False)
    c.add_argument("--bandwidth", action="store_true", help="measure the read bandwidth of "
                   "each cache level and memory (codegen_c/stream.c) and cache it for explain")

    c = command(sub, "tune", cmd_tune_any, "tune one operator (or your own compute, or "
                "every kernel of an ONNX model under one budget) and log every measurement")
    c.add_argument("op", nargs="?", metavar="OP", help="an operator of tvmlite.ops, or a "
                   "model file MODEL.onnx")
    c.add_argument("params", nargs="*", metavar="KEY=VALUE", help="the operator's arguments")
    c.add_argument("--workload", metavar="FILE.py:FUNCTION", help="tune a compute you wrote: "
                   "FUNCTION(KEY=VALUE...) returns [inputs..., output]")
    _tuning_args(c)
    c.add_argument("--verbose", action="store_true", help="print each round's seconds by "
                   "phase (sampling, lowering, features, model, compiling, measuring)")
    c.add_argument("--log", required=True, metavar="FILE", help="the tuning log (JSON lines)")
    c.add_argument("--search", choices=("template-free", "templated"), default="template-free",
                   help="sketches + evolution (default) or the operator's template")
    c.add_argument("--tuner", choices=("xgb", "ga", "random", "grid"),
                   help="templated tuner (default xgb)")
    c.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default 0)")
    c.add_argument("--resume", action="store_true", help="continue a tuning already in "
                   "--log: its records count toward --trials and are not measured again")
    c.add_argument("--shape", type=parse_shape, action="append", default=[],
                   metavar="NAME=D0,D1,...", help="MODEL.onnx: an input's shape (for "
                   "symbolic dims)")
    c.add_argument("--const", action="append", default=[], metavar="INPUT",
                   help="an input that is constant in deployment (weights; repeat or "
                   "comma-separate): the search may pre-pack it once, outside the kernel")
    target_args(c)

    c = command(sub, "replay", cmd_replay, "export the best record of every workload of a "
                "log as deployable kernels (.c .h .so + manifest.json)")
    c.add_argument("log", metavar="LOG")
    c.add_argument("--out", required=True, metavar="DIR")
    target_args(c)

    c = command(sub, "compare", cmd_compare, "templated against template-free search: same "
                "operator, budget and seeds; writes curves.csv, curves.png, report.md")
    c.add_argument("op", metavar="OP", help="an operator with a template")
    c.add_argument("params", nargs="*", metavar="KEY=VALUE")
    _tuning_args(c)
    c.add_argument("--seeds", type=positive_int, default=3, help="runs per method (default 3)")
    c.add_argument("--out", required=True, metavar="DIR")
    c.add_argument("--tuner", choices=("xgb", "ga", "random", "grid"), default="xgb",
                   help="templated tuner (default xgb)")
    target_args(c)

    log = command(sub, "log", None, "inspect and combine tuning logs")
    logsub = log.add_subparsers(dest="log_command", metavar="SUBCOMMAND", required=True)
    c = command(logsub, "show", cmd_log_show, "a table of a log's records")
    c.add_argument("log", metavar="LOG")
    c.add_argument("--limit", type=positive_int, metavar="N")
    c = command(logsub, "best", cmd_log_best, "the fastest record per workload and CPU")
    c.add_argument("log", metavar="LOG")
    c = command(logsub, "merge", cmd_log_merge, "append the records of logs to OUT (no "
                "duplicates)")
    c.add_argument("out", metavar="OUT")
    c.add_argument("inputs", nargs="+", metavar="IN")
    c = command(logsub, "distill", cmd_log_distill, "keep only the best records")
    c.add_argument("log", metavar="LOG")
    c.add_argument("--out", required=True, metavar="OUT")

    c = command(sub, "show", cmd_show, "a record's loop nest (default: the best) or its C")
    c.add_argument("log", metavar="LOG")
    which = c.add_mutually_exclusive_group()
    which.add_argument("--index", type=positive_int, metavar="N",
                       help="the record on line N (as `tvmlite log show` numbers them)")
    which.add_argument("--workload", metavar="KEY", help="the best record of this workload "
                       "(a key prefix or a workload name)")
    c.add_argument("--c", action="store_true", help="print the C source instead")
    target_args(c, runner=False)
    add_explain_command(sub, command)
    add_model_commands(sub, command)
    return p


def _tuning_args(c: argparse.ArgumentParser) -> None:
    c.add_argument("--trials", type=positive_int, required=True, metavar="N",
                   help="measurements per run (a resumed log's records count)")
    c.add_argument("--timeout", type=positive_seconds, metavar="SECONDS", help="per candidate: "
                   "limit of its build and of its run (default 30 s build, 10 s run)")
    c.add_argument("--quiet", action="store_true", help="no progress, only the summary")
    c.add_argument("--population", type=positive_int, metavar="P", help="advanced: "
                   "candidates per round (evolution population; GA population / XGB plan "
                   "size); small values make quick test runs")
    c.add_argument("--batch", type=positive_int, metavar="B", help="advanced: "
                   "measurements per round (default 64)")
    c.add_argument("--no-pretrained", action="store_true", help="start the cost model cold "
                   "instead of from the shipped pretrained one")
    c.add_argument("--cold-weights", action="store_true", help="time each candidate as a "
                   "model's run calls it: caches flushed, activations read back, the "
                   "constant inputs (weights) from memory; one call per timing")


# -- target ------------------------------------------------------------------------------------

def cmd_target(args: argparse.Namespace) -> int:
    try:
        target = resolve_target(args)
        host = Target.host()
    except CompilerNotFoundError as err:
        return _target_without_compiler(args, err)
    runs_here = target.arch == host.arch and set(target.features) <= set(host.features)
    if args.peak and not runs_here:
        raise UsageError(f"--peak measures on this machine ({host.arch}), which cannot run "
                         f"code for --target {args.target}: drop --peak")
    measured = peaks.measure_peak(target, seconds=args.peak_seconds, runs=args.peak_runs) \
        if args.peak else peaks.cached_peak(target)
    bw = bandwidths.measure_bandwidth(target) if args.bandwidth else \
        bandwidths.cached_bandwidth(target)
    if args.json:
        d = target.to_json()
        if args.bandwidth and bw is not None:     # measured: never None
            d["bandwidth"] = bw.to_json()
        if args.peak and measured is not None:
            d["peak"] = measured.to_json()
        print(json.dumps(d, indent=2))
        return 0
    print(target.describe())
    if measured is not None:
        gemm = (f", a numpy GEMM {measured.gemm_gflops:.1f}"
                if measured.gemm_gflops is not None else "")
        print(f"peak:      {measured.gflops:.1f} GFLOP/s fp32 FMA (measured, {measured.threads} "
              f"bound threads; FMA loop {measured.fma_gflops:.1f} with {measured.chains} "
              f"chains{gemm}; runs {', '.join(f'{r:.1f}' for r in measured.runs)})")
        for note in measured.notes():
            print(f"           warning: {note}")
    else:
        print(f"peak:      ~{target.peak_gflops_estimate():.1f} GFLOP/s fp32 (estimated; "
              "`tvmlite target --peak` measures it)")
    if bw is not None:
        print(f"bandwidth: {bw.describe()}")
    return 0


def _target_without_compiler(args: argparse.Namespace, err: Exception) -> int:
    """Describe the CPU anyway and say what is missing (exit 0; 1 if --peak was asked)."""
    cpu = describe_cpu()
    if args.json:
        print(json.dumps({**cpu, "compiler": None, "missing": str(err)}, indent=2))
    else:
        print(describe_cpu_text(cpu))
        print(f"compiler:  none: {err}")
        print("           nothing can be built or tuned until a C compiler is installed "
              "(e.g. `apt-get install gcc`)")
    if args.peak:
        print("tvmlite: error: --peak needs a C compiler to build the peak loop",
              file=sys.stderr)
        return 1
    return 0


# -- replay and compare ------------------------------------------------------------------------

def cmd_replay(args: argparse.Namespace) -> int:
    target = resolve_target(args)
    log = existing_log(args.log)
    runner = make_runner(args.runner, compile_on=args.compile_on, number=1, repeat=1,
                         timeout=60.0)
    if runner is None and args.runner == "qemu":
        from tvmlite.search.options import TuningOptions
        runner = TuningOptions(runner="qemu").make_runner()
    try:
        report = replay(log, args.out, target=target, runner=runner,
                        check=None if runner is None else True)
    finally:
        if runner is not None:
            runner.close()
    print(report)
    if not report.kernels:
        print(f"tvmlite: error: nothing exported from {args.log}: no record was valid here",
              file=sys.stderr)
        return 1
    return 0


def cmd_compare(args: argparse.Namespace) -> int:

    if args.op not in OPS:
        raise UsageError(f"unknown operator {args.op!r}; operators: {', '.join(OPS)}")
    import tvmlite.schedules  # noqa: F401 -- registers the templates
    if args.op not in TEMPLATES:
        raise UsageError(f"operator {args.op!r} has no template to compare with (templates: "
                         f"{', '.join(sorted(TEMPLATES))}); `tvmlite tune {args.op} ...` "
                         "tunes it template-free")
    kwargs = parse_params(args.params, OPS[args.op], args.op)
    bars: dict = {}

    def on_trial(method: str, seed: int, trial: Any) -> None:
        if (method, seed) not in bars:
            bars[method, seed] = Progress(args.trials, sys.stderr,
                                          "quiet" if args.quiet else None,
                                          label=f"{method} seed {seed}")
        bars[method, seed](trial)

    def on_run(run: Any) -> None:
        bar = bars.pop((run.method, run.seed), None)
        if bar is not None:
            bar.close()
        if not args.quiet:
            print(f"{run.method} seed {run.seed}: best {run.final_gflops:.2f} GFLOP/s after "
                  f"{len(run.trials)} trial(s) in {run.seconds:.1f}s", file=sys.stderr)
    try:
        result = compare(args.op, kwargs, args.trials, args.seeds, args.out, args.tuner,
                         tuning_options(args), args.population, on_trial, on_run,
                         target=resolve_target(args))
    except KeyboardInterrupt:
        print(f"\ninterrupted: the runs so far are logged in {args.out}; compare starts "
              "from empty logs, so run it again with another --out", file=sys.stderr)
        return 130
    finally:
        for bar in bars.values():
            bar.close()
    print(result.table)
    print(f"wrote {result.csv}, {result.png}, {result.report}")
    return 0


# -- log and show ------------------------------------------------------------------------------

def cmd_log_show(args: argparse.Namespace) -> int:
    print(logs.show(existing_log(args.log), args.limit))
    return 0


def cmd_log_best(args: argparse.Namespace) -> int:
    records = logs.best(existing_log(args.log))
    print(f"{'workload':<28} {'GFLOP/s':>10} {'mean ms':>11}  {'tuner':<14} target")
    for r in records:
        print(f"{r.workload.name + ' ' + r.workload.key[:8]:<28} {r.gflops:10.3f} "
              f"{r.mean_cost * 1e3:11.4f}  {r.tuner or '-':<14} {r.target.arch} "
              f"{' '.join(r.target.features)}")
    if not records:
        print("(no valid records)")
    return 0


def cmd_log_merge(args: argparse.Namespace) -> int:
    n = logs.merge([existing_log(p) for p in args.inputs], args.out)
    print(f"appended {n} new record(s) to {args.out}")
    return 0


def cmd_log_distill(args: argparse.Namespace) -> int:
    n = logs.distill(existing_log(args.log), args.out)
    print(f"wrote {n} best record(s) (one per workload and CPU) to {args.out}")
    return 0


def _pick_record(log: str, index: int | None, workload: str | None) -> tuple[int, Any]:
    """(line, record) as ``logs.pick_record`` picks it; a choice the log cannot satisfy
    is the user's mistake (exit 2)."""
    try:
        return logs.pick_record(log, workload, index)
    except logs.RecordChoiceError as e:
        raise UsageError(str(e)) from None


def cmd_show(args: argparse.Namespace) -> int:
    import tvmlite
    line, rec = _pick_record(existing_log(args.log), args.index, args.workload)
    wl, target = rec.workload, resolve_target(args)
    s = Schedule.from_steps(wl.outputs, rec.steps)
    outcome = f"{rec.gflops:.2f} GFLOP/s, {rec.mean_cost * 1e3:.4g} ms" if rec.result.ok \
        else rec.result.error_no.name
    comment = "//" if args.c else "#"
    print(f"{comment} {wl!r}, line {line} of {args.log}: {outcome}, tuner "
          f"{rec.tuner or '-'}, tuned on {rec.target.arch}")
    for step in rec.steps:
        print(f"{comment} {step}")
    if args.log_fallbacks:
        tvmlite.build(s, list(wl.tensors), target, wl.name, explain=True)
    if args.c:
        print(generate_c(s, list(wl.tensors), target, wl.name)[1])
    else:
        print(tvmlite.lower(s, list(wl.tensors), wl.name,
                            vector_bytes=target.vector_bits // 8))
    return 0


# -- main --------------------------------------------------------------------------------------

def _show_warning(message: Any, category: type, filename: str, lineno: int,
                  file: Any = None, line: Any = None) -> None:
    print(f"tvmlite: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (0 ok, 1 error, 2 usage, 130 Ctrl-C)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        # KEY=VALUE after an option (`tune matmul --trials 8 M=64`) still counts
        pairs = [e for e in extra if "=" in e and not e.startswith("-")]
        if extra and (not hasattr(args, "params") or len(pairs) != len(extra)):
            args.parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if pairs:
            args.params = list(args.params) + pairs
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 2
    args.argv = argv
    # TVMLITE_LOG=fallbacks: print scalar fallbacks and spills of kernels built here
    args.log_fallbacks = "fallbacks" in os.environ.get("TVMLITE_LOG", "").split(",")
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return args.func(args)
        except UsageError as err:
            args.parser.print_usage(sys.stderr)
            print(f"{args.parser.prog}: error: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("\ntvmlite: interrupted", file=sys.stderr)
            return 130
        except LIBRARY_ERRORS as err:
            print(f"tvmlite: error: {err}", file=sys.stderr)
            return 1
