"""Command-line arguments the commands share: errors, KEY=VALUE operator arguments,
validated number types, and the TuningOptions the flags describe.

Exit codes (``tvmlite --help`` says the same): 0 done; 2 the command line is wrong --
an unknown command, option or KEY, a missing one, or a bad value (``--trials 0``,
``M=0``, ``dtype=float16``: the operator is called with the values once, here, so its
own ValueError/TypeError is a usage error like argparse's); 1 the work itself failed
(a build, a measurement, a file); 130 interrupted."""
from __future__ import annotations

import argparse
import inspect
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tvmlite import te
from tvmlite.checks import is_number
from tvmlite.codegen_c import CompileError
from tvmlite.errors import TvmliteError
from tvmlite.search.options import TuningOptions
from tvmlite.target.load import machine_busy_warning
from tvmlite.target.target import TARGET_NAMES, CompilerNotFoundError, Target

LIBRARY_ERRORS = (ValueError, TypeError, LookupError, OSError, CompileError,
                  CompilerNotFoundError)
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")   # a KEY of KEY=VALUE, a function name
_RANGE = re.compile(r"^(\d+)\.\.(\d+)$")


class UsageError(TvmliteError):
    """The command line is wrong; the message says how to fix it (exit 2)."""


# -- KEY=VALUE -------------------------------------------------------------------------------

def parse_value(text: str) -> Any:
    """An operator argument from the command line: True/False/None, an int, a float, a
    tuple when there is a comma (``kernel=3,3``), else the string itself (``float32``)."""
    if "," in text:
        return tuple(parse_value(p) for p in text.split(",") if p != "")
    if text in ("True", "true", "False", "false", "None"):
        return {"True": True, "true": True, "False": False, "false": False}.get(text)
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_params(pairs: Sequence[str], fn: Callable[..., Any], what: str,
                 ranges: bool = False) -> dict:
    """``["M=16", "dtype=float32"]`` -> keyword arguments of ``fn``, checked against its
    signature (unknown or missing names are a UsageError showing the signature). With
    ``ranges``, a size range ``M=1..2048`` stays the string "1..2048" (``dynamic_params``
    makes it a te.var) and is checked as a symbolic size; without, it is a UsageError."""
    sig = signature(fn)
    kwargs: dict = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not IDENTIFIER.match(key) or value == "":
            raise UsageError(f"bad argument {pair!r}: write the arguments of {what} as "
                             f"KEY=VALUE, e.g. {_example(sig)}; the signature is {what}{sig}")
        if key in kwargs:
            raise UsageError(f"{key} is given twice; the signature is {what}{sig}")
        kwargs[key] = parse_value(value)
    params = sig.parameters
    unknown = [k for k in kwargs if k not in params]
    missing = [n for n, p in params.items() if p.default is p.empty and n not in kwargs
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        unknown = []
    if unknown or missing:
        problems = ([f"unknown argument(s) {', '.join(unknown)}"] if unknown else []) + \
            ([f"missing {', '.join(missing)}"] if missing else [])
        raise UsageError(f"{what}: {'; '.join(problems)}; the signature is {what}{sig}")
    try:
        sig.bind(**kwargs)
    except TypeError as err:
        raise UsageError(f"{what}: {err}; the signature is {what}{sig}") from None
    spans = [f"{k}={v}" for k, v in kwargs.items() if isinstance(v, str) and _RANGE.match(v)]
    if spans and not ranges:
        raise UsageError(f"{what}: a size range ({', '.join(spans)}) is tuned by `tvmlite "
                         f"tune` with the template-free search; give a number here")
    check_values(fn, dynamic_params(kwargs)[0], what, sig)
    return kwargs


def dynamic_params(kwargs: dict) -> tuple[dict, dict | None]:
    """``M=1..2048`` makes M a symbolic size (te.var) tuned over that range: returns the
    operator's arguments with te.var("M") in its place, and the shapes for SearchTask."""
    shapes: dict = {}
    out = dict(kwargs)
    for k, v in kwargs.items():
        m = _RANGE.match(v) if isinstance(v, str) else None
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if not 1 <= lo <= hi:
                raise UsageError(f"{k}={v}: a size range LO..HI needs 1 <= LO <= HI")
            out[k], shapes[k] = te.var(k), (lo, hi)
    return out, shapes or None


def check_values(fn: Callable[..., Any], kwargs: dict, what: str,
                 sig: inspect.Signature) -> None:
    """Call ``fn`` with the user's values: the operator's own checks (a ValueError or
    TypeError naming the argument) become a UsageError, exit 2 like an unknown KEY,
    before any work starts. Operators only declare computes, so the call is cheap."""
    try:
        fn(**kwargs)
    except (ValueError, TypeError) as err:
        raise UsageError(f"{what}: {err}; the signature is {what}{sig}") from None


def signature(fn: Callable[..., Any]) -> inspect.Signature:
    """``fn``'s signature without annotations: ``matmul(M, N, K, dtype='float32')``."""
    sig = inspect.signature(fn)
    return sig.replace(parameters=[p.replace(annotation=p.empty)
                                   for p in sig.parameters.values()],
                       return_annotation=inspect.Signature.empty)


def _example(sig: inspect.Signature) -> str:
    names = [p.name for p in sig.parameters.values() if p.default is p.empty][:3]
    return " ".join(f"{n}=16" for n in names) or "KEY=VALUE"


def _number(convert: Callable[[str], Any], what: str, lo: float, lo_open: bool = False):
    """An argparse type: ``convert(text)`` when it is at least ``lo`` (above it with
    ``lo_open``), as ``tvmlite.checks.is_number`` decides, else a message naming ``what``."""
    def parse(text: str):
        try:
            v = convert(text)
        except ValueError:
            v = None
        if v is None or not is_number(v, lo, lo_open=lo_open):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return v
    return parse


# argparse types of the commands' options (trials, seeds, timeouts): a bad value is a
# usage error naming what was expected
positive_int = _number(int, "a positive integer (e.g. 200)", 1)
non_negative_int = _number(int, "a non-negative integer", 0)
positive_seconds = _number(float, "a positive number of seconds", 0, lo_open=True)


def existing_log(path: str) -> str:
    """``path`` when it is a file; else a UsageError saying how to get a tuning log."""
    if not Path(path).is_file():
        raise UsageError(f"log {path!r} does not exist: pass the path of a tuning log "
                         "(`tvmlite tune ... --log FILE` writes one)")
    return path



def target_args(c: argparse.ArgumentParser, runner: bool = True) -> None:
    """--target NAME (what to compile for) and --runner (where to measure): separate."""
    c.add_argument("--target", default="host", metavar="NAME", help="the CPU to compile "
                   f"for: {', '.join(TARGET_NAMES)} (default host: this machine)")
    if runner:
        c.add_argument("--runner", type=_runner_spec, default=None, metavar="RUNNER",
                       help="where candidates run: local (this machine, the default), qemu "
                       "(user-mode emulation of the target: checked for correctness, timings "
                       "emulated) or dask://HOST:PORT (the workers of a Dask cluster; see "
                       "docs/dask.md)")
        c.add_argument("--compile-on", choices=("auto", "worker", "client"), default="client",
                       help="with --runner dask://...: where candidates are compiled (client, "
                       "the default: all here; auto: on each worker whose compiler is this "
                       "machine's, here for the others -- for workers on other machines; "
                       "worker: measure only on those)")


def resolve_target(args: argparse.Namespace) -> Any:
    """The --target as a Target; an unknown name is a usage error listing the names."""
    name = getattr(args, "target", "host") or "host"
    if name not in TARGET_NAMES:
        raise UsageError(f"--target {name!r} is unknown: use one of {', '.join(TARGET_NAMES)}"
                         + (" ('llvm' is TVM's code generator; tvmlite generates C for a "
                            "named CPU)" if name == "llvm" else ""))
    return Target.from_name(name)


def _runner_spec(text: str) -> str:
    """``--runner``: ``local``, ``qemu`` or ``dask://HOST:PORT`` (a Dask scheduler)."""
    if text in ("local", "qemu"):
        return text
    if not text.startswith("dask://"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a runner: use local, qemu or "
                                         "dask://HOST:PORT (a Dask scheduler)")
    try:
        from tvmlite.search.measure.dask_runner import parse_address
    except ImportError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    try:
        parse_address(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def warn_if_busy(args: argparse.Namespace) -> None:
    """Before a tuning measures on this machine (no --runner, or local): say on stderr
    when it is busy (``target.load``: its timings favour serial schedules)."""
    if getattr(args, "runner", None) in (None, "local"):
        warning = machine_busy_warning()
        if warning:
            print(warning, file=sys.stderr)


def make_runner(spec: str | None, compile_on: str = "client", **measuring: Any) -> Any:
    """The Runner of a ``dask://`` --runner, with these measuring arguments (LocalRunner's)
    and --compile-on; None for the others (local, qemu, no flag): TuningOptions.make_runner
    builds those."""
    if spec is None or not spec.startswith("dask://"):
        return None
    # here, not at the top: Dask distributed is an optional extra (tvmlite[dask])
    from tvmlite.search.measure.dask_runner import DaskRunner
    return DaskRunner(spec, compile_on=compile_on, **measuring)


def tuning_options(args: argparse.Namespace, seed: int = 0) -> Any:
    """The TuningOptions of a tune or compare command's arguments, with its runner."""
    from dataclasses import replace
    options = _plain_options(args, seed)
    runner = make_runner(getattr(args, "runner", None),
                         compile_on=getattr(args, "compile_on", "auto"), number=options.number,
                         repeat=options.repeat, min_repeat_ms=options.min_repeat_ms,
                         timeout=options.run_timeout, flush_cache=options.flush_cache,
                         cold_weights=options.cold_weights,
                         check_correctness=options.check_correctness,
                         n_threads=options.n_threads, seed=options.seed)
    return options if runner is None else replace(options, runner=runner)


def _plain_options(args: argparse.Namespace, seed: int = 0) -> Any:
    opts: dict = {"seed": seed}
    if getattr(args, "runner", None) in ("local", "qemu"):
        opts["runner"] = args.runner
    if args.population:
        opts["population"] = args.population
    if args.batch:
        opts["measures_per_round"] = args.batch
    if args.timeout:
        opts["build_timeout"] = opts["run_timeout"] = args.timeout
    if getattr(args, "no_pretrained", False):
        opts["pretrained"] = False
    if getattr(args, "cold_weights", False):
        opts["cold_weights"] = True
    return TuningOptions(**opts)
