"""``tvmlite explain LOG [--workload NAME] [--record N]``: what bounds the best kernel
of a log (or the record on line N) and what to change in its schedule.

With ``TVMLITE_LOG=fallbacks`` in the environment (read by ``commands.main`` only), the
scalar fallbacks and spill warning of the kernel are printed to stderr as it is built.
Argument parsing and printing only: the explaining is ``tvmlite.explain.record``'s.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from tvmlite.cli.args import UsageError, existing_log, positive_int
from tvmlite.explain.record import explain_record, record_warnings
from tvmlite.search.records import logs
from tvmlite.target.target import Target


def add_explain_command(sub: Any, command: Any) -> None:
    """Register the subcommand on the parser's subparsers (``command`` is the helper of
    ``commands.build_parser``)."""
    c = command(sub, "explain", cmd_explain, "why a tuned kernel is as fast as it is: its "
                "roofline (bound, attainable and measured GFLOP/s), scalar fallbacks, "
                "register pressure and spills, parallel work, unrolling, recomputation, "
                "and what to try")
    c.add_argument("log", metavar="LOG")
    c.add_argument("--workload", metavar="NAME", help="the best record of this workload (a "
                   "name or a key prefix); needed when the log holds several")
    c.add_argument("--record", type=positive_int, metavar="N", help="the record on line N "
                   "(as `tvmlite log show` numbers them) instead of the best")


def cmd_explain(args: argparse.Namespace) -> int:
    try:
        line, rec = logs.pick_record(existing_log(args.log), args.workload, args.record)
    except logs.RecordChoiceError as e:
        raise UsageError(str(e)) from None
    target = Target.host()
    if getattr(args, "log_fallbacks", False):
        for text in record_warnings(rec, target):
            print(f"tvmlite: fallback: {text}", file=sys.stderr)
    print(f"# line {line} of {args.log}")
    print(explain_record(rec, target))
    return 0
