"""``tvmlite tune``: build the task (an operator of the library, or a compute from a
user's file), tune it with a progress display, and print the summary (best time,
GFLOP/s, share of the measured peak, speedup over the unscheduled program, the replay
command). The best is the one best on the end's re-timing when there was one (its
median, with the spread), and the summary adds where the seconds went, by phase
(``--verbose``: per round too)."""
from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tvmlite.cli.args import (
    IDENTIFIER,
    UsageError,
    dynamic_params,
    parse_params,
    resolve_target,
    tuning_options,
    warn_if_busy,
)
from tvmlite.cli.interrupt import Terminated, exit_code, sigterm_as_interrupt
from tvmlite.cli.progress import Progress
from tvmlite.ops import OPS
from tvmlite.search.compare import make_tuner, templated_task
from tvmlite.search.measure.builder import LocalBuilder
from tvmlite.search.measure.inputs import MeasureInput
from tvmlite.search.measure.measurer import check_log_path
from tvmlite.search.records.best import cost, is_retiming
from tvmlite.search.records.explain import bound_line
from tvmlite.search.records.record import iter_records, load_records
from tvmlite.search.records.workload import Workload
from tvmlite.search.result import PHASES
from tvmlite.search.template_free.task import SearchTask
from tvmlite.search.templated.task import TEMPLATES
from tvmlite.target import peak as peaks
from tvmlite.target.target import Target

# -- tune --------------------------------------------------------------------------------------

def _load_function(spec: str) -> Callable[..., Any]:
    """FUNCTION of FILE.py, imported from its path (the file runs: it is the user's)."""
    path, colon, name = spec.rpartition(":")
    if not colon or not path or not IDENTIFIER.match(name):
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

    params = list(args.params)
    target = resolve_target(args)
    if args.workload:
        if args.op is not None:
            params.insert(0, args.op)
        if args.search == "templated":
            raise UsageError("--workload tunes with --search template-free only: templates "
                             "exist for the operators of tvmlite.ops")
        fn = _load_function(args.workload)
        kwargs, shapes = dynamic_params(parse_params(params, fn, fn.__name__, ranges=True))
        return SearchTask(func=fn, kwargs=kwargs, shapes=shapes, target=target,
                          constants=_constants(args)), None
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
        kwargs, shapes = dynamic_params(parse_params(params, OPS[args.op], args.op,
                                                     ranges=True))
        return SearchTask(func=args.op, kwargs=kwargs, shapes=shapes, target=target,
                          constants=_constants(args)), None
    import tvmlite.schedules  # noqa: F401 -- registers the templates
    if args.op not in TEMPLATES:
        raise UsageError(f"operator {args.op!r} has no template (templates: "
                         f"{', '.join(sorted(TEMPLATES))}); use --search template-free")
    task = templated_task(args.op, parse_params(params, OPS[args.op], args.op), target,
                          _constants(args))
    return task, make_tuner(args.tuner or "xgb", task, args.seed, args.population)


def _constants(args: argparse.Namespace) -> list:
    """The inputs named by ``--const`` (repeated or comma-separated)."""
    return [c.strip() for v in getattr(args, "const", None) or () for c in v.split(",")
            if c.strip()]


def dynamic_summary(res: Any, workload: Workload, log: str) -> str:
    """Per tuned size: the variant that serves it and its time; the dispatch ranges."""
    table = getattr(res, "dispatch", None)
    lines = [f"{workload.name}: {res.measured} new trial(s) over the sizes "
             f"({res.search_seconds:.1f}s searching + {res.measure_seconds:.1f}s measuring)"]
    if table is None:
        lines.append(f"no dispatch table: no valid schedule at any size in {log}")
        return "\n".join(lines)
    for m, (v, t) in sorted(table.tuned.items()):
        gf = workload.at({table.size: m}).flops / t / 1e9
        lines.append(f"  {table.size}={m:<7} variant {v}  {t * 1e3:10.4g} ms  {_gf(gf)} GFLOP/s")
    ranges = ", ".join(f"{lo}..{'' if hi is None else hi} -> v{v}" for lo, hi, v in table.ranges)
    lines.append(f"dispatch: {len(table.variants)} variant(s): {ranges}")
    lines.append(f"replay:   tvmlite replay {shlex.quote(log)} --out dist")
    return "\n".join(lines)


def _check_log(log: str, workload: Workload, resume: bool) -> None:
    """Before any work: the log must be writable (not a folder, not under a regular
    file, permitted), and without --resume, a log already holding this workload is a
    mistake: the new run would silently count the old records toward its budget."""
    path = Path(log)
    if path.is_dir():
        raise UsageError(f"--log {log!r} is a directory: pass a file path, e.g. "
                         f"{path / (workload.name + '.jsonl')}")
    try:
        check_log_path(path)
    except ValueError as err:
        raise UsageError(f"--log: {err}") from None
    if resume or not path.is_file():
        return
    n = sum(getattr(r.workload, "base_key", r.workload.key) == workload.key
            for r in load_records(path))
    if n:
        raise UsageError(f"--log {log} already holds {n} record(s) of {workload.name} (key "
                         f"{workload.key[:8]}): add --resume to continue that tuning (they "
                         "count toward --trials), or pass another --log")


def logged_count(log: str, workload: Workload, target: Target) -> int | None:
    """Records of ``workload`` for this CPU that are really in the file now (None: no
    file): what the budget counts, so what every message about the log reports."""
    import warnings
    if not Path(log).is_file():
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # bad lines were reported when the run started
        return sum(r.workload.key == workload.key and r.target.same_cpu(target)
                   and not is_retiming(r) for _, r in iter_records(log))


def _trace_trials(progress: Any) -> Any:
    """``TVMLITE_TRACE_TRIALS=1``: one ``trial <index> <error>`` line on stderr per
    measured candidate, after its record is in the log (for tests and scripts that watch
    a tuning from outside)."""
    if os.environ.get("TVMLITE_TRACE_TRIALS") != "1":
        return progress

    def traced(trial: Any) -> None:
        progress(trial)
        print(f"trial {trial.index} {trial.error}", file=sys.stderr, flush=True)
    return traced


def cmd_tune(args: argparse.Namespace) -> int:
    task, tuner = _task(args)
    workload = task.workload
    _check_log(args.log, workload, args.resume)
    options = tuning_options(args, args.seed)
    with options.make_runner() as runner:   # a runner that cannot run the target stops here
        runner.check_target(task.target)
    warn_if_busy(args)
    progress = Progress(args.trials, sys.stderr, "quiet" if args.quiet else None,
                        label=workload.name)
    callback = _trace_trials(progress)
    try:
        with sigterm_as_interrupt():
            if tuner is not None:
                res = tuner.tune(args.trials, args.log, options, callback)
            else:
                res = task.tune(args.trials, args.log, options, callback)
    except KeyboardInterrupt as stop:
        progress.close()
        print(interrupt_message(args, workload, task.target, progress.measured,
                                isinstance(stop, Terminated)), file=sys.stderr)
        return exit_code(stop)
    finally:
        progress.close()
    if workload.is_dynamic:
        print(dynamic_summary(res, workload, args.log))
        return 0 if getattr(res, "dispatch", None) is not None else 1
    if getattr(args, "verbose", False):
        print("\n".join(r.line() for r in res.rounds))
    print(tune_summary(res, workload, task.target, args.log, options))
    return 0 if res.best is not None else 1


def interrupt_message(args: argparse.Namespace, workload: Workload, target: Target, measured: int,
                      terminated: bool = False) -> str:
    """What an interrupted tuning left: the records really in the log (counted in the
    file), and the command that finishes the budget."""
    how = "terminated" if terminated else "interrupted"
    n = logged_count(args.log, workload, target)
    if n is None:
        return (f"\n{how} after {measured} new trial(s); nothing was logged ({args.log} "
                f"does not exist). Start again with:\n  {shlex.join(['tvmlite', *args.argv])}")
    again = list(args.argv) + ([] if args.resume else ["--resume"])
    return (f"\n{how} after {measured} new trial(s); {args.log} holds {n} record(s) of "
            f"{workload.name} (at most the candidate being timed was lost). Resume with:\n"
            f"  {shlex.join(['tvmlite', *again])}")


def _time_unscheduled(workload: Workload, target: Target, options: Any) -> Any:
    """The unscheduled program (no Steps) timed by a runner like the tuning's; it is the
    reference itself, so nothing to check, and it may be slow: one call per repeat."""
    from dataclasses import replace
    inp = MeasureInput(workload, ())
    builder = LocalBuilder(target, timeout=options.build_timeout)
    opts = replace(options, number=1, run_timeout=max(options.run_timeout, 60.0),
                   check_correctness=False)
    # a cluster's runner (a Runner object, not a name) times it on its own workers
    own = None if isinstance(options.runner, str) else getattr(options.runner, "replace", None)
    runner = own(number=1, repeat=options.repeat, timeout=opts.run_timeout,
                 flush_cache=options.flush_cache, check_correctness=False,
                 seed=options.seed) if own is not None else opts.make_runner()
    with runner:   # the tuning's kind of runner
        runner.check_target(target)
        return runner.run([inp], builder.build([inp]))[0]


def tune_summary(res: Any, workload: Workload, target: Target, log: str, options: Any) -> str:
    """Best time and GFLOP/s, share of this CPU's peak, speedup over the unscheduled
    program (timed now), and the command that replays the log."""
    args = ", ".join(f"{k}={v}" for k, v in workload.args.items())
    errors = sum(v for k, v in res.errors.items() if k != "NO_ERROR")
    n = logged_count(log, workload, target)
    total = f"{n} trial(s) in the log, " if n is not None else ""
    lines = [f"{workload.name}({args}): {total}{res.measured} new ({errors} error(s)): "
             f"{res.search_seconds:.1f}s searching + {res.measure_seconds:.1f}s measuring"
             + (f" + {res.retime_seconds:.1f}s re-timing" if res.retime_seconds else "")]
    phases = res.phases
    if any(phases.values()):
        lines.append("phases:   " + ", ".join(f"{p} {phases[p]:.1f}s" for p in PHASES))
    if res.measured == 0:
        lines.append("nothing new measured: the log already holds --trials records of this "
                     "workload (raise --trials to tune longer), or the search ran out of "
                     "candidates")
    best = res.best
    if best is None:
        lines.append(f"no valid schedule in {log}: every trial failed (`tvmlite log show "
                     f"{shlex.quote(log)}` lists the errors)")
        return "\n".join(lines)
    retimed = res.retimed[0] if res.retimed and res.retimed[0].record is best else None
    lines.append(f"best:     {cost(best) * 1e3:.4g} ms, {_gf(res.best_gflops)} GFLOP/s"
                 + (f" (EMULATED under {best.runner}: the schedule is checked correct, the "
                    f"figures say nothing about speed on a real {target.arch} CPU)"
                    if best.emulated else ""))
    if retimed is not None:
        lines.append(f"re-timed: the {len(res.retimed)} best re-timed, interleaved: "
                     f"{retimed.line()}")
    dtype = workload.outputs[-1].dtype
    packed = [st.stage for st in best.steps if st.kind == "prepack"]
    if packed:
        lines.append(f"packing:  {', '.join(packed)} pre-packed once outside the kernel "
                     f"(`tvmlite replay` exports the pack function); the times exclude it")
    if best.emulated:
        lines.append(f"peak:     not measurable here: {target.name or target.arch} runs only "
                     "under emulation on this machine")
    elif dtype in ("float32", "float64"):
        # at the peak within its noise; above it, the cached peak is raised to this figure
        verdict = peaks.judge_kernel(res.best_gflops, target, dtype)
        lines.append("peak:     " + verdict.text(f"this CPU's {dtype} peak"))
    lines.append(f"bound:    {bound_line(best, target)} (`tvmlite explain {shlex.quote(log)}`)")
    base = _time_unscheduled(workload, target, options)
    if base.ok:
        lines.append(f"speedup:  {_gf(base.mean_cost / cost(best))}x over the unscheduled "
                     f"program ({base.mean_cost * 1e3:.4g} ms)"
                     + (", both emulated" if best.emulated else ""))
    else:
        lines.append(f"speedup:  unknown: the unscheduled program gave {base.error_no.name}")
    flag = f" --target {target.name}" if target.name and target.name != "host" else ""
    lines.append(f"replay:   tvmlite replay {shlex.quote(log)}{flag} --out dist")
    return "\n".join(lines)


def _gf(x: float) -> str:
    """Two decimals, or three significant digits below 1 (a slow kernel is not 0.00)."""
    return f"{x:.2f}" if x >= 1 else f"{x:.3g}"
