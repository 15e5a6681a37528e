"""The plots of the batch study (tables/batch.py Note [Batch study]): one panel per study
(an auto cell's batch search, or a listed-batch group). Each function returns a Figure or
None when the file has no study."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..tables.analysis import Analysis  # noqa: E402
from ..tables.quality import iteration_samples  # noqa: E402
from .figures import STYLE, panel_grid  # noqa: E402
from .panels import legend_beside, say_empty  # noqa: E402


def _study_panels(analysis: Analysis, width: float = 4.2, height: float = 3.2):
    """(fig, [(axis, study row, its points sorted by batch)]) or None without studies."""
    studies = analysis.batch_studies
    if studies is None or studies.empty:
        return None
    curve = analysis.batch_curve
    fig, axes = panel_grid(len(studies), width, height)
    panels = []
    for ax, study in zip(axes, studies.itertuples()):
        points = curve[curve.study == study.study].sort_values("batch", kind="stable")
        panels.append((ax, study, points))
        ax.set_title(study.study, fontsize=7)
        ax.set_xlabel("per-rank batch size")
    return fig, panels


def _batch_axis(ax, points: pd.DataFrame) -> None:
    """Log2 batch axis (a linear one for a single batch), ticks at the powers of two."""
    batches = points.batch[points.batch > 0]
    if batches.nunique() < 2:
        return
    ax.set_xscale("log", base=2)
    low, high = int(batches.min()), int(batches.max())
    ticks = [b for b in (2**k for k in range(31)) if low <= b <= high] or [low, high]
    ax.set_xticks(ticks, [str(b) for b in ticks])
    ax.minorticks_off()


def _mark_boundary(ax, study) -> None:
    """Dashed green line at max_batch_ok, dashed red at oom_batch (when there are)."""
    if study.max_batch_ok:
        ax.axvline(
            study.max_batch_ok,
            color="C2",
            linestyle="--",
            linewidth=1,
            label=f"max ok {study.max_batch_ok}",
        )
    if study.oom_batch:
        ax.axvline(
            study.oom_batch,
            color="C3",
            linestyle="--",
            linewidth=1,
            label=f"does not fit {study.oom_batch}",
        )


def _failed(points: pd.DataFrame) -> pd.DataFrame:
    return points[points.status != "ok"]


def batch_throughput(analysis: Analysis):
    """Throughput against batch per study: knee, best and recommended batch marked, the
    boundary as dashed lines (max_batch_ok green, oom_batch red), probes that did not fit
    as x on the axis."""
    with plt.rc_context(STYLE):
        made = _study_panels(analysis)
        if made is None:
            return None
        fig, panels = made
        for ax, study, points in panels:
            ok = points[points.status == "ok"]
            ax.plot(ok.batch, ok.throughput_samples_per_s, "o-", color="C0", markersize=4)
            for batch, marker, color, name in (
                (study.knee_batch, "D", "C1", "knee"),
                (study.best_batch, "*", "C4", "best"),
                (study.recommended_batch, "s", "C2", "recommended"),
            ):
                at = ok[ok.batch == batch]
                if len(at):
                    ax.plot(
                        at.batch,
                        at.throughput_samples_per_s,
                        marker,
                        color=color,
                        markersize=9,
                        markerfacecolor="none",
                        markeredgewidth=1.5,
                        label=f"{name} {batch}",
                    )
            failed = _failed(points)
            if len(failed):  # (an empty line left unclipped breaks the constrained layout)
                ax.plot(
                    failed.batch,
                    np.zeros(len(failed)),
                    "x",
                    color="C3",
                    markersize=8,
                    clip_on=False,
                )
            _mark_boundary(ax, study)
            _batch_axis(ax, points)
            top = float(ok.throughput_samples_per_s.max()) if len(ok) else 1.0
            ax.set_ylim(0, 1.1 * top)
            ax.set_ylabel("samples / s")
            legend_beside(ax)
    return fig


def batch_memory(analysis: Analysis):
    """Peak memory against batch per study: probes that fit (o) and did not (x), the
    memory budget (solid red) and, for auto cells, the safety margin below it (dotted)."""
    with plt.rc_context(STYLE):
        made = _study_panels(analysis)
        if made is None:
            return None
        fig, panels = made
        cells = analysis.results.cells.set_index("cell_id")
        for ax, study, points in panels:
            ok = points[points.status == "ok"]
            ax.plot(ok.batch, ok.peak_memory_mib, "o-", color="C0", markersize=4, label="fits")
            failed = _failed(points)
            ax.plot(
                failed.batch,
                failed.peak_memory_mib,
                "x",
                color="C3",
                markersize=8,
                label="does not fit",
            )
            if np.isfinite(study.memory_budget_mib):
                ax.axhline(
                    study.memory_budget_mib,
                    color="C3",
                    linewidth=1,
                    label=f"budget {study.memory_budget_mib:,.0f} MiB",
                )
                if study.kind == "auto" and study.cell_id in cells.index:
                    margin = cells.loc[study.cell_id].spec.get("safety_margin", 0.1)
                    ax.axhline(
                        (1 - margin) * study.memory_budget_mib,
                        color="C3",
                        linestyle=":",
                        linewidth=1,
                        label=f"margin {margin:.0%}",
                    )
            _mark_boundary(ax, study)
            _batch_axis(ax, points)
            ax.set_ylim(bottom=0)
            ax.set_ylabel("peak memory (MiB)")
            legend_beside(ax)
    return fig


def _latency_samples(analysis: Analysis, study, points: pd.DataFrame) -> list:
    """(batch, seconds) per point: an auto cell's probe_times, a listed cell's iteration
    samples (train: slowest rank's step; inference: every batch)."""
    out = []
    if study.kind == "auto":
        times = analysis.results.probe_times
        times = times[times.cell_id == study.cell_id]
        for batch, group in times.groupby("batch", sort=True):
            out.append((int(batch), group.time_s.to_numpy()))
        return out
    for point in points[points.status == "ok"].itertuples():
        mode = analysis.results.cell(point.cell_id)["mode"]
        out.append((int(point.batch), iteration_samples(analysis.results, point.cell_id, mode)))
    return out


def batch_latency(analysis: Analysis):
    """Box plot of the step (train) or batch (inference) time per batch: an auto cell's
    probe iterations (probe_times), a listed group's measured iterations."""
    with plt.rc_context(STYLE):
        made = _study_panels(analysis)
        if made is None:
            return None
        fig, panels = made
        for ax, study, points in panels:
            samples = [(b, t[np.isfinite(t)]) for b, t in _latency_samples(analysis, study, points)]
            samples = [(b, t) for b, t in samples if t.size]
            if not samples:
                say_empty(ax, "no step times stored for this study's batches")
                continue
            ax.boxplot(
                [t * 1e3 for _, t in samples],
                tick_labels=[str(b) for b, _ in samples],
                widths=0.6,
                showfliers=True,
                flierprops={"markersize": 3},
            )
            ax.tick_params(axis="x", labelsize=6, rotation=90)
            ax.set_ylim(bottom=0)
            ax.set_ylabel("time per step / batch (ms)")
    return fig


def batch_speedup(analysis: Analysis):
    """Throughput speedup over the smallest batch that fit, with the ideal (linear in the
    batch) as a dashed line."""
    with plt.rc_context(STYLE):
        made = _study_panels(analysis)
        if made is None:
            return None
        fig, panels = made
        for ax, study, points in panels:
            ok = points[points.status == "ok"]
            if ok.empty:
                continue
            base = int(ok.batch.min())
            ax.plot(ok.batch, ok.batch / base, "k--", linewidth=1, label="ideal (linear)")
            ax.plot(
                ok.batch,
                ok.speedup,
                "o-",
                color="C0",
                markersize=4,
                label=f"throughput / throughput at {base}",
            )
            _mark_boundary(ax, study)
            _batch_axis(ax, points)
            ax.set_yscale("log", base=2)
            ax.set_ylabel("speedup")
            legend_beside(ax)
    return fig


def batch_efficiency(analysis: Analysis):
    """Memory efficiency: samples per second per GiB of peak memory against batch."""
    with plt.rc_context(STYLE):
        made = _study_panels(analysis)
        if made is None:
            return None
        fig, panels = made
        for ax, study, points in panels:
            ok = points[points.status == "ok"]
            ax.plot(ok.batch, ok.samples_per_s_per_gib, "o-", color="C0", markersize=4)
            _mark_boundary(ax, study)
            _batch_axis(ax, points)
            ax.set_ylim(bottom=0)
            ax.set_ylabel("samples / s per GiB of peak memory")
    return fig


#: (key, title, function) of the plots of the report's "Batch size" section.
BATCH_PLOTS = (
    (
        "batch_throughput",
        "Throughput against batch: knee, best, recommended, boundary",
        batch_throughput,
    ),
    ("batch_memory", "Peak memory against batch and the memory budget", batch_memory),
    ("batch_latency", "Time per step / batch at each batch", batch_latency),
    ("batch_speedup", "Speedup over the smallest batch", batch_speedup),
    ("batch_efficiency", "Memory efficiency: samples / s per GiB", batch_efficiency),
)
