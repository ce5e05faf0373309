"""Progress of a tuning run, as the ``callback`` a tuner calls after every trial.

A person at a terminal wants a live bar (trials, best GFLOP/s so far, errors, time
left); a log file or CI output wants a few plain lines it can grep; ``--quiet`` wants
nothing until the summary. ``Progress`` is the one callback for all three, chosen once
from where stderr goes, so the tuners never know how they are displayed.

Tuners call it once per measured candidate, the moment its record is in the log, so the
bar moves (and the time left is known) from the first candidate on. Trial indices count
the records of the workload in the log (a resumed run starts part-full; another process
tuning into the same log moves the bar too), and the time left is estimated from the
pace of this run's own trials.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from tvmlite.checks import check_int

__all__ = ["Progress", "format_seconds"]


def format_seconds(seconds: float) -> str:
    """``42s``, ``3m05s`` or ``2h03m``: short enough for a progress line."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """Shows trials as they finish: a tqdm bar, plain lines every ``every`` trials, or
    nothing (``mode`` "bar", "lines" or "quiet"; ``None`` picks "bar" when ``stream`` is
    a terminal, else "lines").

    Call it with each ``search.task.Trial``; call ``close()`` when the tuning ends
    (also after an interruption, so the bar leaves the terminal clean). ``status``, when
    given, says what the run has reached instead of the trial's best GFLOP/s (a whole
    model's tuning shows its task and the model's estimated latency)."""

    MODES = ("bar", "lines", "quiet")

    def __init__(self, total: int, stream: TextIO | None = None, mode: str | None = None,
                 every: int | None = None, label: str = "tuning",
                 status: Callable[[], str] | None = None):
        check_int(total, "Progress(total=...), the trial budget,", 1)
        self.stream = stream if stream is not None else sys.stderr
        if mode is None:
            mode = "bar" if _is_terminal(self.stream) else "lines"
        if mode not in self.MODES:
            raise ValueError(f"Progress(mode={mode!r}): use one of {', '.join(self.MODES)}")
        check_int(every, "Progress(every=...), trials per line,", 1, allow_none=True)
        self.total, self.mode, self.label, self.status = total, mode, label, status
        self.every = every or max(1, total // 10)
        self.first: int | None = None     # index of the first trial of this run
        self.last = None                  # the latest Trial
        self.count = 0                    # trials reported in this run
        self.errors = 0
        self._bar: Any = None

    def __call__(self, trial: Any) -> None:
        if self.first is None:
            self.first = trial.index
        self.last = trial
        self.count += 1
        self.errors += trial.error != "NO_ERROR"
        if self.mode == "bar":
            self._update_bar(trial)
        elif self.mode == "lines":
            if self.count % self.every == 0 or trial.index >= self.total:
                print(self.line(), file=self.stream, flush=True)

    @property
    def measured(self) -> int:
        """Trials reported in this run (not the log's earlier ones, nor other writers')."""
        return self.count

    def eta(self) -> float | None:
        """Seconds left at this run's pace (``Trial.elapsed`` counts from the start of
        the tuning call); None before the first trial."""
        if self.last is None:
            return None
        return self.last.elapsed / max(1, self.measured) * max(0, self.total - self.last.index)

    def line(self) -> str:
        """One plain status line: where the run is, its best, its errors, time left."""
        t = self.last
        if t is None:
            return f"{self.label}: no trial yet"
        width = len(str(self.total))
        return (f"{self.label} [{t.index:>{width}}/{self.total}] {self._reached(t)}  "
                f"errors {self.errors}  elapsed {format_seconds(t.elapsed)}  "
                f"left ~{format_seconds(self.eta() or 0.0)}")

    def _update_bar(self, trial: Any) -> None:
        if self._bar is None:
            from tqdm import tqdm
            self._bar = tqdm(total=self.total, initial=trial.index - 1, desc=self.label,
                             unit="trial", file=self.stream, dynamic_ncols=True)
        self._bar.set_postfix_str(f"{self._reached(trial)}, errors {self.errors}",
                                  refresh=False)
        self._bar.update(max(0, min(trial.index, self.total) - self._bar.n))

    def _reached(self, trial: Any) -> str:
        return self.status() if self.status is not None else \
            f"best {trial.best_gflops:.2f} GFLOP/s"

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _is_terminal(stream: TextIO) -> bool:
    """A terminal wide enough for a bar (a pty of zero columns, as some job runners
    give, would show nothing at all)."""
    try:
        return stream.isatty() and os.get_terminal_size(stream.fileno()).columns >= 40
    except (AttributeError, ValueError, OSError):
        return False
