"""Plots of `scalebench history`: one figure per experiment, each line of the experiment a
series of its points with their intervals as error bars, flagged steps marked (a red
downward triangle on the later point of a `slower` step, a green upward one for `faster`,
with the change in percent).

The x axis is shared by the lines of a figure: one slot per distinct point position in the
history's order (model.Point.order_key), labelled with the point's label (file name or
short commit). Time is shown in ms, throughput in samples/s."""

from __future__ import annotations

import math
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..output.figures import STYLE, figure_png  # noqa: E402  (the report's look)
from .model import History, Line  # noqa: E402

_STEP_MARK = {"slower": ("v", "tab:red"), "faster": ("^", "tab:green")}
#: Tick labels shown at most; with more slots every k-th is labelled.
_MAX_TICKS = 24


def experiments(hist: History) -> list:
    """The experiments of the history's lines, in line order, each once."""
    return list(dict.fromkeys(str(line.spec.get("experiment")) for line in hist.lines))


def _slots(lines: list) -> tuple[dict, list]:
    """(order key -> x, tick labels) of the points of `lines`."""
    labels = {}
    for line in lines:
        for p in line.points:
            labels.setdefault(p.order_key, p.label)
    keys = sorted(labels)
    return {k: x for x, k in enumerate(keys)}, [labels[k] for k in keys]


def _scale(metric: str) -> tuple[float, str]:
    return (1e3, "median step/batch time (ms)") if metric == "time" else (1.0, "samples/s")


def _draw_line(ax, line: Line, slot: dict, factor: float) -> None:
    """One line: points with error bars, its flagged steps marked on the later point."""
    x = [slot[p.order_key] for p in line.points]
    y = [p.value * factor for p in line.points]
    below = [(p.value - p.ci_low) * factor if math.isfinite(p.ci_low) else 0.0 for p in line.points]
    above = [
        (p.ci_high - p.value) * factor if math.isfinite(p.ci_high) else 0.0 for p in line.points
    ]
    ax.errorbar(x, y, yerr=[below, above], marker="o", ms=4, capsize=3, label=line.label)
    for step in line.steps:
        marker, edge = _STEP_MARK[step.direction]
        px, py = x[step.after], y[step.after]
        ax.scatter([px], [py], marker=marker, s=140, facecolors="none", edgecolors=edge, zorder=4)
        ax.annotate(
            f"{step.change:+.0%}",
            (px, py),
            textcoords="offset points",
            xytext=(6, 6),
            color=edge,
            fontsize=7,
        )


def experiment_figure(hist: History, experiment: str):
    """The figure of one experiment's lines (None when it has none)."""
    lines = [ln for ln in hist.lines if str(ln.spec.get("experiment")) == experiment]
    if not lines:
        return None
    slot, ticks = _slots(lines)
    factor, ylabel = _scale(hist.options.metric)
    width = min(16.0, 5.0 + 0.45 * len(ticks))
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(width, 4.2), layout="constrained")
        for line in lines:
            _draw_line(ax, line, slot, factor)
        every = max(1, math.ceil(len(ticks) / _MAX_TICKS))
        ax.set_xticks(range(0, len(ticks), every))
        ax.set_xticklabels(ticks[::every], rotation=45, ha="right")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{experiment}: {hist.options.metric} by {hist.options.order}")
        outside = len(lines) > 6
        ax.legend(
            loc="upper left" if outside else "best",
            bbox_to_anchor=(1.01, 1.0) if outside else None,
        )
    return fig


def experiment_pngs(hist: History) -> list:
    """[(experiment, PNG bytes)], one per experiment of the history."""
    out = []
    for name in experiments(hist):
        fig = experiment_figure(hist, name)
        if fig is not None:
            out.append((name, figure_png(fig)))
    return out


def file_name(experiment: str) -> str:
    """`history_<experiment>.png` with every character outside [A-Za-z0-9._-] as `_`."""
    return "history_" + re.sub(r"[^A-Za-z0-9._-]", "_", experiment) + ".png"


def write_pngs(pngs: list, directory: str) -> list:
    """Writes each (experiment, PNG bytes) as DIR/history_<experiment>.png (DIR created);
    returns the paths written. Names that sanitise alike get `_2`, `_3`, ... appended."""
    os.makedirs(directory, exist_ok=True)
    written = []
    for name, data in pngs:
        path = os.path.join(directory, file_name(name))
        stem, count = path[:-4], 2
        while path in written:
            path, count = f"{stem}_{count}.png", count + 1
        with open(path, "wb") as out:
            out.write(data)
        written.append(path)
    return written
