"""Stopping a model's tuning: Ctrl-C and SIGTERM end it the same way.

Both ``tvmlite tune MODEL.onnx`` paths (a fixed-size model and one with a symbolic size)
run their tuning under ``sigterm_as_interrupt``, so a kill raises ``Terminated`` (a
``KeyboardInterrupt``) and the runner's workers and temporary folders are cleaned up as
for Ctrl-C; the log keeps every record measured (at most the candidate being timed is
lost), and the command prints what the log holds and how to resume. ``stopped_how`` and
``exit_code`` tell the two apart in what is printed and returned (130, 143).
"""
from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

__all__ = ["Terminated", "sigterm_as_interrupt", "stopped_how", "exit_code"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C (the runner's worker and temp folders are cleaned up)."""


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` inside the block; the previous handler after it."""
    def raise_terminated(signum: int, frame: Any) -> None:
        raise Terminated
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stopped_how(stop: BaseException) -> str:
    """``terminated`` (SIGTERM) or ``interrupted`` (Ctrl-C), for the stop message."""
    return "terminated" if isinstance(stop, Terminated) else "interrupted"


def exit_code(stop: BaseException) -> int:
    """The shell's code for the signal that stopped the tuning: 143 or 130."""
    return 128 + signal.SIGTERM if isinstance(stop, Terminated) else 128 + signal.SIGINT
