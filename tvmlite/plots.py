"""Plots: pictures of results computed elsewhere, drawn on a bare Agg canvas.

No pyplot: a figure made here never touches the caller's matplotlib backend or its open
figures. matplotlib is imported when a plot is drawn, not with this module: the command
line imports this module on every start, and importing matplotlib costs more than most
commands do.

Map: ``plot_compare_curves`` (the comparison experiment's best-so-far curves,
``tvmlite.search.compare.method_curves``).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["COMPARE_COLORS", "plot_compare_curves"]

COMPARE_COLORS = {"templated": "tab:blue", "template-free": "tab:orange"}


def plot_compare_curves(curves: Sequence[Any], path: str | Path, title: str = "") -> None:
    """Two panels, best-so-far against trials and against wall time: per method (a
    ``MethodCurves``) the median over seeds with a min-max band, written as PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator
    fig = Figure(figsize=(11, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    by_trial, by_time = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for c in curves:
        color = COMPARE_COLORS.get(c.method)
        label = f"{c.method} (median of {c.runs})"
        for ax, points in ((by_trial, c.by_trial), (by_time, c.by_time)):
            x = [p.x for p in points]
            ax.plot(x, [p.median for p in points], color=color, label=label,
                    drawstyle="steps-post")
            ax.fill_between(x, [p.low for p in points], [p.high for p in points],
                            color=color, alpha=0.2, linewidth=0, step="post")
    for ax, xlabel in ((by_trial, "trials"), (by_time, "wall time (s)")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel("best GFLOP/s so far")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    by_trial.xaxis.set_major_locator(MaxNLocator(integer=True))
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, format="png")
