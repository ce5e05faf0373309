"""``tvmlite tune``: build the task (an operator of the library, or a compute from a
user's file), tune it with a progress display, and print the summary (best time,
GFLOP/s, share of the measured peak, speedup over the unscheduled program, the replay
command)."""
from __future__ import annotations

import argparse
import importlib.util
import inspect
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tvmlite.cli.args import _KEY, UsageError, _options, parse_params

# -- tune --------------------------------------------------------------------------------------

def _load_function(spec: str) -> Callable[..., Any]:
    """FUNCTION of FILE.py, imported from its path (the file runs: it is the user's)."""
    path, colon, name = spec.rpartition(":")
    if not colon or not path or not _KEY.match(name):
        raise UsageError(f"--workload {spec!r}: write FILE.py:FUNCTION, e.g. "
                         "my_ops.py:my_conv")
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"--workload: file {path!r} does not exist")
    mod_name = f"tvmlite_user_{re.sub(r'[^A-Za-z0-9_]', '_', file.stem)}"
    loader = importlib.util.spec_from_file_location(mod_name, file)
    if loader is None or loader.loader is None:
        raise UsageError(f"--workload: {path!r} is not a Python file")
    module = importlib.util.module_from_spec(loader)
    sys.modules[mod_name] = module
    try:
        loader.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 -- the user's file: report it, whatever it is
        raise ValueError(f"--workload: importing {path} failed: "
                         f"{type(err).__name__}: {err}") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        found = [n for n, v in vars(module).items() if inspect.isfunction(v)
                 and v.__module__ == mod_name]
        raise UsageError(f"--workload: {path} has no function {name!r} (functions: "
                         f"{', '.join(found) or 'none'})")
    return fn


def _task(args: argparse.Namespace) -> tuple[Any, Any]:
    """(task, templated tuner or None) from the command line."""
    from tvmlite.ops import OPS
    from tvmlite.search.template_free.task import SearchTask

    from tvmlite.cli.compare import make_tuner, templated_task
    params = list(args.params)
    if args.workload:
        if args.op is not None:
            params.insert(0, args.op)
        if args.search == "templated":
            raise UsageError("--workload tunes with --search template-free only: templates "
                             "exist for the operators of tvmlite.ops")
        fn = _load_function(args.workload)
        kwargs = parse_params(params, fn, fn.__name__)
        return SearchTask(func=fn, kwargs=kwargs), None
    if args.op is None:
        raise UsageError("name an operator (e.g. `tvmlite tune matmul M=512 N=512 K=512 "
                         "...`) or pass --workload FILE.py:FUNCTION")
    if args.op not in OPS:
        raise UsageError(f"unknown operator {args.op!r}; operators: {', '.join(OPS)} (or "
                         "--workload FILE.py:FUNCTION for your own compute)")
    if args.search == "template-free":
        if args.tuner:
            raise UsageError("--tuner chooses a templated tuner: add --search templated, or "
                             "drop --tuner")
        return SearchTask(func=args.op, kwargs=parse_params(params, OPS[args.op], args.op)), None
    import tvmlite.schedules  # noqa: F401 -- registers the templates
    from tvmlite.search.templated.task import TEMPLATES
    if args.op not in TEMPLATES:
        raise UsageError(f"operator {args.op!r} has no template (templates: "
                         f"{', '.join(sorted(TEMPLATES))}); use --search template-free")
    task = templated_task(args.op, parse_params(params, OPS[args.op], args.op))
    return task, make_tuner(args.tuner or "xgb", task, args.seed, args.population)


def _check_log(log: str, workload: Any, resume: bool) -> None:
    """Without --resume, a log already holding this workload is a mistake: the new run
    would silently count the old records toward its budget."""
    from tvmlite.search.records.record import load_records
    path = Path(log)
    if path.is_dir():
        raise UsageError(f"--log {log!r} is a directory: pass a file path, e.g. "
                         f"{path / (workload.name + '.jsonl')}")
    if resume or not path.is_file():
        return
    n = sum(r.workload.key == workload.key for r in load_records(path))
    if n:
        raise UsageError(f"--log {log} already holds {n} record(s) of {workload.name} (key "
                         f"{workload.key[:8]}): add --resume to continue that tuning (they "
                         "count toward --trials), or pass another --log")


def cmd_tune(args: argparse.Namespace) -> int:
    from tvmlite.cli.progress import Progress
    task, tuner = _task(args)
    workload = task.workload
    _check_log(args.log, workload, args.resume)
    options = _options(args, args.seed)
    Path(args.log).parent.mkdir(parents=True, exist_ok=True)
    progress = Progress(args.trials, sys.stderr, "quiet" if args.quiet else None,
                        label=workload.name)
    try:
        if tuner is not None:
            res = tuner.tune(args.trials, args.log, options, progress)
        else:
            res = task.tune(args.trials, args.log, options, progress)
    except KeyboardInterrupt:
        progress.close()
        again = list(args.argv) + ([] if args.resume else ["--resume"])
        print(f"\ninterrupted after {progress.measured} new trial(s); every measured record "
              f"is in {args.log}. Resume with:\n  {shlex.join(['tvmlite', *again])}",
              file=sys.stderr)
        return 130
    finally:
        progress.close()
    print(tune_summary(res, workload, task.target, args.log, options))
    return 0 if res.best is not None else 1


def _time_unscheduled(workload: Any, target: Any, options: Any) -> Any:
    """The unscheduled program (no Steps) timed by a runner like the tuning's; it is the
    reference itself, so nothing to check, and it may be slow: one call per repeat."""
    from tvmlite.search.measure.builder import LocalBuilder
    from tvmlite.search.measure.inputs import MeasureInput
    from tvmlite.search.measure.runner import LocalRunner
    inp = MeasureInput(workload, ())
    builder = LocalBuilder(target, timeout=options.build_timeout)
    with LocalRunner(number=1, repeat=options.repeat, timeout=max(options.run_timeout, 60.0),
                     flush_cache=options.flush_cache, check_correctness=False,
                     seed=options.seed) as runner:
        return runner.run([inp], builder.build([inp]))[0]


def tune_summary(res: Any, workload: Any, target: Any, log: str, options: Any) -> str:
    """Best time and GFLOP/s, share of this CPU's peak, speedup over the unscheduled
    program (timed now), and the command that replays the log."""
    from tvmlite.target import peak as peaks
    args = ", ".join(f"{k}={v}" for k, v in workload.args.items())
    errors = sum(v for k, v in res.errors.items() if k != "NO_ERROR")
    total = f"{res.trials[-1].index} trial(s) in the log, " if res.trials else ""
    lines = [f"{workload.name}({args}): {total}{res.measured} new ({errors} error(s)): "
             f"{res.search_seconds:.1f}s searching + {res.measure_seconds:.1f}s measuring"]
    if res.measured == 0:
        lines.append("nothing new measured: the log already holds --trials records of this "
                     "workload (raise --trials to tune longer), or the search ran out of "
                     "candidates")
    best = res.best
    if best is None:
        lines.append(f"no valid schedule in {log}: every trial failed (`tvmlite log show "
                     f"{shlex.quote(log)}` lists the errors)")
        return "\n".join(lines)
    lines.append(f"best:     {best.mean_cost * 1e3:.4g} ms, {_gf(best.gflops)} GFLOP/s")
    dtype = workload.outputs[-1].dtype
    if dtype in ("float32", "float64"):
        measured = peaks.cached_peak(target)
        if measured is None:   # once per machine (cached): a spec-sheet guess misleads
            try:
                measured = peaks.measure_peak(target, seconds=0.5, runs=3)
            except (OSError, RuntimeError, ValueError):
                measured = None
        scale = 1.0 if dtype == "float32" else 0.5
        if measured is not None:
            peak, how = measured.gflops * scale, "measured"
        else:
            peak, how = target.peak_gflops_estimate(dtype), \
                "estimated; `tvmlite target --peak` measures it"
        lines.append(f"peak:     {_gf(100 * best.gflops / peak)}% of this CPU's {dtype} peak "
                     f"({peak:.1f} GFLOP/s, {how})")
    from tvmlite.search.records.explain import bound_line
    lines.append(f"bound:    {bound_line(best, target)} (`tvmlite explain {shlex.quote(log)}`)")
    base = _time_unscheduled(workload, target, options)
    if base.ok:
        lines.append(f"speedup:  {_gf(base.mean_cost / best.mean_cost)}x over the unscheduled "
                     f"program ({base.mean_cost * 1e3:.4g} ms)")
    else:
        lines.append(f"speedup:  unknown: the unscheduled program gave {base.error_no.name}")
    lines.append(f"replay:   tvmlite replay {shlex.quote(log)} --out dist")
    return "\n".join(lines)


def _gf(x: float) -> str:
    """Two decimals, or three significant digits below 1 (a slow kernel is not 0.00)."""
    return f"{x:.2f}" if x >= 1 else f"{x:.3g}"
