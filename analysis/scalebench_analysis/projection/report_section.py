"""The report's projection section (issue 51): for the trained curves of a results file, the
step and the weak scaling efficiency that `scalebench project` predicts at more workers
than measured (a line), beside the measured cells (markers), with the projected rows as a
table and what the projection lacked. When nothing can be drawn, the section says why.
The model is Note [Projection model] in projection/__init__.py; the numbers are the ones
`scalebench project FILE --workers <report_workers(...)>` prints. The report command
(cli.run_report) builds it and hands it to output/report.py, which only renders it: the
output layer does not import the projection's."""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..errors import UsageError
from ..output.figures import STYLE, figure_png
from ..output.panels import legend_beside, say_empty
from .inputs import curve_label
from .model import ProjectionOptions
from .project import project

#: Default reach of the report's projection: up to this many times the largest measured world.
REACH = 4
#: Curves drawn at most (one row of two panels each); the table holds every curve.
MAX_CURVES = 6
CAPTION = (
    "Lines: the step (median over iterations of the slowest rank) and the weak scaling "
    "efficiency that `scalebench project` predicts from this file's own cells (every "
    "measured world as input; no probe file: the link is fitted to the cells' comm_wait; "
    "`scalebench project FILE --probe probe.h5` uses one). Markers: the measured cells. "
    "Efficiency is against the curve's smallest measured world. The model and where it "
    "fails: docs/projection.md."
)


@dataclass(frozen=True)
class ProjectionSection:
    """What the report shows: `plot` (base64 PNG) and `table` (the projected rows) when a
    trained curve has a projected step, else `why` says what is missing; `notes` are the
    projection's missing inputs, each with what to run."""

    workers: tuple
    plot: str | None = None
    table: pd.DataFrame | None = None
    why: str | None = None
    notes: list = field(default_factory=list)
    caption: str = CAPTION


def report_workers(measured_worlds) -> tuple:
    """The worker counts a report projects to: every measured world, the powers of two up
    to REACH times the largest one, and that count itself."""
    worlds = sorted({int(w) for w in measured_worlds if w >= 1}) or [1]
    largest = REACH * worlds[-1]
    powers = [2**k for k in range(int(math.log2(largest)) + 1)]
    return tuple(sorted(set(worlds) | set(powers) | {largest}))


def _measured_points(cells: pd.DataFrame) -> pd.DataFrame:
    """The ok trained cells with their curve label (as the projection names its curves)
    and their weak efficiency against the curve's smallest world at the same batch."""
    ok = cells[(cells.status == "ok") & (cells["mode"] == "train")].copy()
    if ok.empty:
        return ok
    ok["curve"] = [curve_label(c) for c in ok.itertuples()]
    per_worker = ok.throughput_samples_per_s / ok.world_size
    ok["per_worker"] = per_worker
    reference = ok.sort_values("world_size").groupby(["curve", "batch_size"]).per_worker.first()
    ok["weak_efficiency"] = [
        p / reference[(c, b)] for p, c, b in zip(ok.per_worker, ok.curve, ok.batch_size)
    ]
    return ok


def _figure(rows: pd.DataFrame, measured: pd.DataFrame, curves: list):
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            len(curves),
            2,
            figsize=(10.0, 3.0 * len(curves)),
            squeeze=False,
            layout="constrained",
        )
        for (step_ax, eff_ax), curve in zip(axes, curves):
            projected = rows[rows.curve == curve]
            points = measured[measured.curve == curve] if not measured.empty else measured
            for i, (batch, line) in enumerate(projected.groupby("batch_size")):
                line = line.sort_values("workers")
                color = f"C{i % 10}"
                step_ax.plot(
                    line.workers, line.step_s * 1e3, "-", color=color, label=f"b{batch} projected"
                )
                eff_ax.plot(
                    line.workers,
                    line.weak_efficiency,
                    "-",
                    color=color,
                    label=f"b{batch} projected",
                )
                seen = points[points.batch_size == batch] if len(points) else points
                if len(seen):
                    step_ax.plot(
                        seen.world_size,
                        seen.median_s * 1e3,
                        "o",
                        color=color,
                        label=f"b{batch} measured",
                    )
                    eff_ax.plot(
                        seen.world_size,
                        seen.weak_efficiency,
                        "o",
                        color=color,
                        label=f"b{batch} measured",
                    )
            if not np.isfinite(projected.step_s.to_numpy(float)).any():
                say_empty(step_ax, "no projected step (see the notes below)")
            workers = sorted(projected.workers.unique())
            for ax in (step_ax, eff_ax):
                ax.set_xscale("log", base=2)
                ax.set_xticks(workers, [str(w) for w in workers])
                ax.set_xlabel("workers")
            eff_ax.axhline(1.0, color="k", linestyle="--", linewidth=1)
            eff_ax.set_ylim(bottom=0)
            step_ax.set_ylim(bottom=0)
            step_ax.set_ylabel("step (ms)")
            eff_ax.set_ylabel("weak efficiency")
            step_ax.set_title(f"{curve}: step", fontsize=9)
            eff_ax.set_title(f"{curve}: weak scaling efficiency", fontsize=9)
            legend_beside(eff_ax)
    return fig


def _table(rows: pd.DataFrame) -> pd.DataFrame:
    def ms(v):
        return "-" if not math.isfinite(v) else f"{v * 1e3:.3f}"

    def pct(v, signed=False):
        return "-" if not math.isfinite(v) else (f"{v:+.1%}" if signed else f"{v:.0%}")

    return pd.DataFrame(
        {
            "curve": rows.curve,
            "batch": rows.batch_size,
            "workers": rows.workers,
            "step_ms": rows.step_s.map(ms),
            "weak_eff": rows.weak_efficiency.map(pct),
            "bottleneck": rows.bottleneck,
            "measured_ms": rows.measured.map(ms),
            "error": rows.error.map(lambda v: pct(v, signed=True)),
        }
    )


def projection_section(analysis) -> ProjectionSection | None:
    """The section of `analysis`'s file; None when it has no trained cell (nothing to
    project: the report then leaves the section out)."""
    cells = analysis.results.cells
    if cells.empty or not ((cells["mode"] == "train") & (cells.status == "ok")).any():
        return None
    trained = cells[(cells["mode"] == "train") & (cells.status == "ok")]
    workers = report_workers(trained.world_size)
    try:
        found = project(analysis.results.path, [], ProjectionOptions(workers))
    except UsageError as error:
        return ProjectionSection(workers, why=f"nothing to project: {error}")
    rows = found.rows
    rows = rows[rows["mode"] == "train"] if not rows.empty else rows
    if rows.empty:
        return ProjectionSection(workers, why="no trained cell to project", notes=found.missing)
    beyond_one = rows[rows.workers > 1].step_s.to_numpy(float)
    if not np.isfinite(beyond_one).any():
        return ProjectionSection(
            workers,
            why="no projected step beyond one worker: the communication could not be fitted",
            notes=found.missing,
        )
    curves = list(dict.fromkeys(rows.curve))
    notes = list(found.missing)
    if len(curves) > MAX_CURVES:
        notes.insert(
            0, f"drawn: the first {MAX_CURVES} of {len(curves)} curves; the table has every one"
        )
    fig = _figure(rows, _measured_points(cells), curves[:MAX_CURVES])
    return ProjectionSection(
        workers,
        plot=base64.b64encode(figure_png(fig)).decode("ascii"),
        table=_table(rows),
        notes=notes,
    )
