"""Matplotlib figures of an Analysis: the plots of the HTML report (PLOTS, REPETITION_PLOTS;
those of the batch study, BATCH_PLOTS, are in batch_plots.py). Each function returns a Figure
or None when the file has nothing to plot for it. `figure_png(fig)` (figures.py) gives PNG
bytes (Agg backend, no display)."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..read.keys import GROUP_COLUMNS  # noqa: E402
from ..tables.analysis import Analysis  # noqa: E402
from ..tables.quality import busy_times, iteration_samples  # noqa: E402
from .batch_plots import BATCH_PLOTS  # noqa: E402
from .figures import STYLE, figure_png, panel_grid  # noqa: E402
from .panels import legend_beside, say_empty  # noqa: E402


def _series_name(row) -> str:
    """A line's name: branch (when the cell has one), precision, the setting when not
    default; no placeholder for what a cell lacks."""
    name = " ".join(str(p) for p in (row.branch, row.precision) if isinstance(p, str) and p)
    return name if row.setting == "default" else f"{name} [{row.setting}]"


def throughput_vs_batch(analysis: Analysis):
    """Throughput against per-rank batch, one panel per experiment/mode/world size, one line
    per branch + precision + setting. Hollow markers: untrusted; x at the axis: oom."""
    points = analysis.batch_points
    if points is None or points.empty or not (points.status == "ok").any():
        return None
    keys = list(points.groupby(["experiment", "mode", "world_size"], sort=True).groups)
    with plt.rc_context(STYLE):
        fig, axes = panel_grid(len(keys))
        for ax, key in zip(axes, keys):
            panel = points[
                (points.experiment == key[0])
                & (points["mode"] == key[1])
                & (points.world_size == key[2])
            ]
            for i, (_, line) in enumerate(panel.groupby(["branch", "precision", "setting"])):
                ok = line[line.status == "ok"]
                color = f"C{i % 10}"
                ax.plot(
                    ok.batch_size,
                    ok.throughput_samples_per_s,
                    "-",
                    color=color,
                    label=_series_name(line.iloc[0]),
                )
                for trusted, face in ((True, color), (False, "white")):
                    sel = ok[ok.trusted == trusted]
                    ax.plot(
                        sel.batch_size,
                        sel.throughput_samples_per_s,
                        "o",
                        color=color,
                        markerfacecolor=face,
                    )
                oom = line[line.status == "oom"]
                if not oom.empty:
                    ax.plot(
                        oom.batch_size,
                        np.zeros(len(oom)),
                        "x",
                        color=color,
                        markersize=9,
                        clip_on=False,
                    )
            ax.set_xscale("log", base=2)
            ax.set_xticks(
                sorted(panel.batch_size.unique()),
                [str(b) for b in sorted(panel.batch_size.unique())],
            )
            ax.minorticks_off()
            # A panel whose cells all failed has no throughput: its axis keeps matplotlib's
            # default and says why (a NaN limit would end the whole report).
            top = panel.throughput_samples_per_s[panel.status == "ok"].max()
            if np.isfinite(top) and top > 0:
                ax.set_ylim(0, 1.1 * float(top))
            else:
                ax.text(0.5, 0.5, "no cell ran ok", transform=ax.transAxes, ha="center")
            ax.set_title(f"{key[0]} · {key[1]} · {key[2]} worker(s)")
            ax.set_xlabel("per-rank batch size")
            ax.set_ylabel("samples / s")
            legend_beside(ax)
    return fig


def scaling_efficiency(analysis: Analysis):
    """Weak and strong scaling efficiency against world size, with the ideal line at 1."""
    scale = analysis.sections.get("scaling")
    if scale is None or scale.empty or scale.world_size.nunique() < 2:
        return None
    with plt.rc_context(STYLE):
        fig, axes = panel_grid(2, width=5.0)
        for ax, (column, curve, title, letter, empty) in zip(axes, _SCALING_PANELS):
            data = scale[np.isfinite(scale[column].astype(float))]
            worlds = sorted(scale.world_size.unique())
            ax.plot(worlds, [1.0] * len(worlds), "k--", linewidth=1, label="ideal")
            groups = data.groupby([*GROUP_COLUMNS, curve])
            drawn = 0
            for i, (key, line) in enumerate(groups):
                if len(line) < 2:
                    continue
                line = line.sort_values("world_size")
                parts = [str(k) for k in key[:4] if isinstance(k, str) and k and k != "default"]
                ax.plot(
                    line.world_size,
                    line[column],
                    "o-",
                    color=f"C{i % 10}",
                    label=f"{' '.join(parts)} {letter}={key[5]}",
                )
                drawn += 1
            if not drawn:
                say_empty(ax, empty)
            ax.set_xticks(worlds)
            ax.set_ylim(0, max(1.15, float(np.nanmax(data[column])) * 1.05 if len(data) else 1.15))
            ax.set_title(title)
            ax.set_xlabel("workers (GPUs or CPU ranks)")
            ax.set_ylabel("efficiency")
            legend_beside(ax)
    return fig


#: The two panels of scaling_efficiency: (column, the figure a curve keeps, title, its letter,
#: why the panel is empty: no two world sizes share that figure).
_SCALING_PANELS = (
    (
        "weak_efficiency",
        "batch_size",
        "weak scaling (fixed per-rank batch b)",
        "b",
        "no curve: no per-rank batch b ran ok at two world sizes\n"
        "(weak scaling needs the same b at w and w0)",
    ),
    (
        "strong_efficiency",
        "global_batch",
        "strong scaling (fixed global batch G)",
        "G",
        "no curve: no global batch G = b x w is shared\nby two world sizes (e.g. b 32 at "
        "w 1 and b 16 at w 2)",
    ),
)


def _phase_columns(analysis: Analysis, cells: pd.DataFrame, total: str) -> list[str]:
    """phase_median_s_* columns of `cells` but the total, in the order of the timings."""
    order = []
    for cell_id in cells.cell_id:
        order += [p for p in analysis.results.phases(cell_id) if p not in order]
    present = [
        c.removeprefix("phase_median_s_")
        for c in cells.columns
        if c.startswith("phase_median_s_") and cells[c].notna().any()
    ]
    ordered = [p for p in order if p in present] + sorted(set(present) - set(order))
    return [f"phase_median_s_{p}" for p in ordered if p != total]


def phase_breakdown(analysis: Analysis):
    """Stacked horizontal bars of the median time per phase of every ok cell, one panel per
    mode and experiment, each on its own axis: a 1 ms MLP beside a 100 ms ResNet on one
    axis would show no bar at all (issue 54 row 11). A panel whose cells have no phase
    figure says so."""
    cells = analysis.results.cells
    cells = cells[cells.status == "ok"]
    groups = [
        (mode, experiment, part)
        for mode in ("train", "infer")
        for experiment, part in cells[cells["mode"] == mode].groupby("experiment", sort=True)
    ]
    if not groups:
        return None
    heights = [max(1.6, 0.3 * len(part) + 1.0) for _, _, part in groups]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            len(groups),
            1,
            figsize=(10, sum(heights)),
            squeeze=False,
            gridspec_kw={"height_ratios": heights},
            layout="constrained",
        )
        for ax, (mode, experiment, part) in zip(axes.ravel(), groups):
            part = part.iloc[::-1]
            columns = _phase_columns(analysis, part, "step" if mode == "train" else "batch")
            left = np.zeros(len(part))
            for i, column in enumerate(columns):
                values = part[column].fillna(0).to_numpy() * 1e3
                ax.barh(
                    part.label,
                    values,
                    left=left,
                    color=f"C{i % 10}",
                    label=column.removeprefix("phase_median_s_"),
                )
                left += values
            if not columns:
                ax.set_yticks(range(len(part)), part.label)
                say_empty(ax, "no phase times recorded for these cells")
            ax.set_xlabel(
                "median time per iteration (ms), rank mean"
                if mode == "train"
                else "median time per batch (ms), rank mean"
            )
            ax.set_title(f"{experiment} · {mode}: phase breakdown")
            legend_beside(ax)
            ax.tick_params(axis="y", labelsize=8)
    return fig


def rank_heatmap(analysis: Analysis):
    """Busy time (train: step - comm_wait; inference: batch) per rank and measured
    iteration of every multi-rank ok cell, divided by that cell's median."""
    results = analysis.results
    cells = results.cells[(results.cells.status == "ok") & (results.cells.world_size > 1)]
    rows, labels = [], []
    for _, cell in cells.iterrows():
        busy = busy_times(results, cell.cell_id, cell["mode"])
        if busy.size == 0:
            continue
        median = np.nanmedian(busy)
        for rank, series in enumerate(busy):
            rows.append(series / median)
            labels.append(f"{cell.label} r{rank}")
    if not rows:
        return None
    width = max(len(r) for r in rows)
    grid = np.full((len(rows), width), np.nan)
    for i, series in enumerate(rows):
        grid[i, : len(series)] = series
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(9, 1.0 + 0.22 * len(rows)), layout="constrained")
        image = ax.imshow(
            grid, aspect="auto", cmap="RdBu_r", vmin=0.7, vmax=1.3, interpolation="nearest"
        )
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.set_xlabel("measured iteration")
        ax.set_title("per-rank busy time / cell median (red: slower)")
        ax.grid(False)
        fig.colorbar(image, ax=ax, fraction=0.03)
    return fig


def latency_cdf(analysis: Analysis):
    """Empirical CDF of the iteration samples (train: slowest-rank step; inference: batch
    latency) of every ok cell, one panel per mode."""
    results = analysis.results
    cells = results.cells[results.cells.status == "ok"]
    modes = [m for m in ("train", "infer") if (cells["mode"] == m).any()]
    if not modes:
        return None
    with plt.rc_context(STYLE):
        fig, axes = panel_grid(len(modes), width=5.0, height=3.6)
        for ax, mode in zip(axes, modes):
            drawn = 0
            for i, (_, cell) in enumerate(cells[cells["mode"] == mode].iterrows()):
                samples = np.sort(iteration_samples(results, cell.cell_id, mode)) * 1e3
                if samples.size == 0:
                    continue
                drawn += 1
                ax.step(
                    samples,
                    np.arange(1, samples.size + 1) / samples.size,
                    where="post",
                    color=f"C{i % 10}",
                    linewidth=1,
                    label=cell.label if i < 12 else None,
                )
            if not drawn:
                say_empty(ax, "no iteration samples in the file for these cells")
            ax.set_xlabel("step time (ms)" if mode == "train" else "batch latency (ms)")
            ax.set_ylabel("fraction of iterations")
            ax.set_title(f"{mode}: latency CDF")
            legend_beside(ax)
    return fig


def regression_forest(analysis: Analysis):
    """Time ratio new / base with its interval (tables/verdict.py) per compared cell."""
    table = analysis.sections.get("regressions")
    if table is None:
        return None
    tested = table[table.ratio.notna()].iloc[::-1]
    if tested.empty:
        return None
    threshold = analysis.options.gate.threshold
    colors = {"regression": "C3", "improvement": "C2"}
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(9, 1.0 + 0.25 * len(tested)), layout="constrained")
        ax.axvspan(1 - threshold, 1 + threshold, color="0.9", label=f"±{threshold:.0%}")
        ax.axvline(1.0, color="k", linewidth=0.8)
        y = np.arange(len(tested))
        c = [colors.get(v, "C0") for v in tested.verdict]
        ax.hlines(y, tested.ci_low, tested.ci_high, colors=c, linewidth=2)
        ax.scatter(tested.ratio, y, color=c, zorder=3)
        ax.set_yticks(y, tested.label, fontsize=7)
        ax.set_xlabel("time ratio new / base over the runs (> 1 slower), Welch interval")
        legend_beside(ax)
    return fig


# --- repeated cells (tables/repetitions.py, Note [Repetitions]) -------------------------


def repetition_strip(analysis: Analysis):
    """One row per series (the Repetitions section): each repetition's median as a point,
    the series median as a bar and its 95 % bootstrap interval as a line, all relative to
    the series median (so series of any speed share the axis); red: the repetitions
    disagree. None without series."""
    table = analysis.sections.get("repetitions")
    if table is None or table.empty:
        return None
    rows = table.iloc[::-1].reset_index(drop=True)
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(9, 1.2 + 0.45 * len(rows)), layout="constrained")
        ax.axvline(0.0, color="k", linewidth=0.8)
        ax.axvspan(-5.0, 5.0, color="0.93", label="±5% of the series median")
        for y, row in rows.iterrows():
            color = "C3" if row.disagree else "C0"
            median = row.median_ms
            points = np.array([m for m in row.repetition_median_ms if np.isfinite(m)])
            ax.scatter(
                100 * (points / median - 1),
                np.full(points.size, y),
                color=color,
                alpha=0.7,
                s=18,
                zorder=3,
            )
            if np.isfinite(row.ci_low_ms) and np.isfinite(row.ci_high_ms):
                ax.hlines(
                    y,
                    100 * (row.ci_low_ms / median - 1),
                    100 * (row.ci_high_ms / median - 1),
                    color=color,
                    linewidth=2.5,
                    alpha=0.6,
                )
            ax.plot([0.0], [y], "|", color="k", markersize=14, zorder=4)
        labels = [
            f"{r.label} ({r.reps}, {r.median_ms:.3f} ms)" + (" DISAGREE" if r.disagree else "")
            for r in rows.itertuples()
        ]
        ax.set_yticks(range(len(rows)), labels, fontsize=7)
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.set_xlabel("repetition median / series median - 1 (%); line: 95% bootstrap interval")
        legend_beside(ax)
    return fig


#: (key, title, function) of the plot of the report's "Repetitions" section.
REPETITION_PLOTS = (
    (
        "repetitions",
        "Repetitions: each repetition's median against the series median and its interval",
        repetition_strip,
    ),
)


def write_pngs(analysis: Analysis, directory: str) -> list[str]:
    """Writes every plot of the report (PLOTS, REPETITION_PLOTS, then BATCH_PLOTS) that has
    something to show as DIRECTORY/<key>.png, creating the directory; returns the paths
    written."""
    os.makedirs(directory, exist_ok=True)
    written = []
    for key, _title, function in PLOTS + REPETITION_PLOTS + BATCH_PLOTS:
        fig = function(analysis)
        if fig is None:
            continue
        path = os.path.join(directory, f"{key}.png")
        with open(path, "wb") as out:
            out.write(figure_png(fig))
        written.append(path)
    return written


#: (key, title, function) of every plot, in report order.
PLOTS = (
    ("throughput_vs_batch", "Throughput against batch size", throughput_vs_batch),
    ("scaling_efficiency", "Scaling efficiency against workers", scaling_efficiency),
    ("phase_breakdown", "Phase breakdown", phase_breakdown),
    ("rank_heatmap", "Per-rank busy time", rank_heatmap),
    ("latency_cdf", "Latency distribution", latency_cdf),
    ("regression_forest", "Regression test against the baseline file", regression_forest),
)
