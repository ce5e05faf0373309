"""Command-line arguments the commands share: errors, KEY=VALUE operator arguments,
validated number types, and the TuningOptions the flags describe."""
from __future__ import annotations

import argparse
import inspect
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tvmlite.codegen_c import CompileError
from tvmlite.target.target import CompilerNotFoundError

LIBRARY_ERRORS = (ValueError, TypeError, LookupError, OSError, CompileError,
                  CompilerNotFoundError)
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class UsageError(Exception):
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


def parse_params(pairs: Sequence[str], fn: Callable[..., Any], what: str) -> dict:
    """``["M=16", "dtype=float32"]`` -> keyword arguments of ``fn``, checked against its
    signature (unknown or missing names are a UsageError showing the signature)."""
    sig = signature(fn)
    kwargs: dict = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not _KEY.match(key) or value == "":
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
    return kwargs


def signature(fn: Callable[..., Any]) -> inspect.Signature:
    """``fn``'s signature without annotations: ``matmul(M, N, K, dtype='float32')``."""
    sig = inspect.signature(fn)
    return sig.replace(parameters=[p.replace(annotation=p.empty)
                                   for p in sig.parameters.values()],
                       return_annotation=inspect.Signature.empty)


def _example(sig: inspect.Signature) -> str:
    names = [p.name for p in sig.parameters.values() if p.default is p.empty][:3]
    return " ".join(f"{n}=16" for n in names) or "KEY=VALUE"


def _number(convert: Callable[[str], Any], ok: Callable[[Any], bool], what: str):
    """An argparse type: ``convert(text)`` when ``ok`` of it, else a message naming ``what``."""
    def parse(text: str):
        try:
            v = convert(text)
        except ValueError:
            v = None
        if v is None or not ok(v):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return v
    return parse


_positive_int = _number(int, lambda v: v >= 1, "a positive integer (e.g. 200)")
_seed = _number(int, lambda v: v >= 0, "a non-negative integer")
_seconds = _number(float, lambda v: v > 0, "a positive number of seconds")


def _existing_log(path: str) -> str:
    if not Path(path).is_file():
        raise UsageError(f"log {path!r} does not exist: pass the path of a tuning log "
                         "(`tvmlite tune ... --log FILE` writes one)")
    return path



def _runner_spec(text: str) -> str:
    """``--runner``: ``local`` or ``dask://HOST:PORT`` (a Dask scheduler)."""
    if text == "local":
        return text
    if not text.startswith("dask://"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a runner: use local or "
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


def make_runner(spec: str | None, **measuring: Any) -> Any:
    """The Runner ``--runner`` names, with these measuring arguments (LocalRunner's);
    None for ``local`` or no flag: the tuning then builds its own LocalRunner."""
    if spec is None or spec == "local":
        return None
    from tvmlite.search.measure.dask_runner import DaskRunner
    return DaskRunner(spec, **measuring)


def _options(args: argparse.Namespace, seed: int = 0) -> Any:
    from dataclasses import replace
    options = _plain_options(args, seed)
    runner = make_runner(getattr(args, "runner", None), number=options.number,
                         repeat=options.repeat, min_repeat_ms=options.min_repeat_ms,
                         timeout=options.run_timeout, flush_cache=options.flush_cache,
                         check_correctness=options.check_correctness,
                         n_threads=options.n_threads, seed=options.seed)
    return options if runner is None else replace(options, runner=runner)


def _plain_options(args: argparse.Namespace, seed: int = 0) -> Any:
    from tvmlite.search.options import TuningOptions
    opts: dict = {"seed": seed}
    if args.population:
        opts["population"] = args.population
    if args.batch:
        opts["measures_per_round"] = args.batch
    if args.timeout:
        opts["build_timeout"] = opts["run_timeout"] = args.timeout
    return TuningOptions(**opts)
