"""Throughput and latency against batch size, per configuration and world size.

Definitions (docs/analysis-guide.md#batch-size). A curve is every cell of one configuration
and world size (all spec fields but the per-rank batch size and the inference dataset
size), ordered by batch. Latency is the file's `p99_s` / `median_s` of the iteration
samples (train: one step of the slowest rank; inference: one batch). Picks use only
trusted ok cells (see quality.py); untrusted cells are listed but not picked.

* best_batch: the batch with the highest throughput.
* knee_batch: the smallest batch whose throughput is >= (1 - knee_tolerance) * best
  (knee_tolerance 5%).
* slo_batch: the largest batch whose p99 latency is <= the SLO (only with --slo-p99-ms).
* max_ok_batch: the largest batch with status ok (trusted or not); oom_batch: the smallest
  batch with status oom (the OOM boundary lies between the two).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..read.cells import BATCH_FIGURES
from ..read.keys import GROUP_COLUMNS, config_key
from ..read.loader import Results

KNEE_TOLERANCE = 0.05
CURVE_COLUMNS = [*GROUP_COLUMNS, "world_size"]


def curve_key(spec: dict) -> str:
    """Configuration + world size: the spec without batch size and dataset size."""
    return config_key(spec, drop=("batch_size", "samples"))


def batch_points(results: Results, trust: pd.DataFrame) -> pd.DataFrame:
    """One row per cell (any status) with its curve key, throughput, latency and trust."""
    cells = results.cells[results.cells.batch_size > 0].copy()  # not auto cells left unrun
    if cells.empty:
        return pd.DataFrame(columns=CURVE_COLUMNS + ["curve", "batch_size", "status"])
    cells["curve"] = [curve_key(s) for s in cells.spec]
    trusted = dict(zip(trust.cell_id, trust.trusted))
    cells["trusted"] = [bool(trusted.get(c, False)) for c in cells.cell_id]
    for column in ("throughput_samples_per_s", "median_s", "p99_s"):
        if column not in cells:
            cells[column] = np.nan
    cells["median_ms"] = cells.median_s * 1e3
    cells["p99_ms"] = cells.p99_s * 1e3
    keep = CURVE_COLUMNS + [
        "curve",
        "cell_id",
        "batch_size",
        "status",
        "trusted",
        "throughput_samples_per_s",
        "median_ms",
        "p99_ms",
    ]
    return cells[keep].sort_values(CURVE_COLUMNS + ["batch_size"]).reset_index(drop=True)


def _picks(points: pd.DataFrame, slo_p99_ms: float | None) -> dict:
    ok = points[points.status == "ok"]
    good = ok[ok.trusted]
    oom = points[points.status == "oom"]
    out = {
        "batches": ",".join(str(b) for b in points.batch_size),
        "max_ok_batch": ok.batch_size.max() if not ok.empty else np.nan,
        "oom_batch": oom.batch_size.min() if not oom.empty else np.nan,
        "untrusted_ok_cells": int((~ok.trusted).sum()),
    }
    if good.empty:
        out.update(best_batch=np.nan, best_throughput=np.nan, knee_batch=np.nan)
    else:
        best = good.loc[good.throughput_samples_per_s.idxmax()]
        near = good[
            good.throughput_samples_per_s >= (1.0 - KNEE_TOLERANCE) * best.throughput_samples_per_s
        ]
        out.update(
            best_batch=best.batch_size,
            best_throughput=best.throughput_samples_per_s,
            knee_batch=near.batch_size.min(),
        )
    if slo_p99_ms is not None:
        meeting = good[good.p99_ms <= slo_p99_ms]
        out["slo_p99_ms"] = slo_p99_ms
        out["slo_batch"] = meeting.batch_size.max() if not meeting.empty else np.nan
    return out


def batch_table(points: pd.DataFrame, slo_p99_ms: float | None = None) -> pd.DataFrame:
    """One row per curve: best batch, knee, SLO batch, max ok batch, OOM boundary."""
    rows = []
    for _, curve in points.groupby("curve", sort=False):
        row = {c: curve.iloc[0][c] for c in CURVE_COLUMNS}
        row.update(_picks(curve, slo_p99_ms))
        rows.append(row)
    columns = CURVE_COLUMNS + ["batches", "best_batch", "best_throughput", "knee_batch"]
    columns += ["slo_p99_ms", "slo_batch"] if slo_p99_ms is not None else []
    columns += ["max_ok_batch", "oom_batch", "untrusted_ok_cells"]
    return pd.DataFrame(rows, columns=columns)


# Note [Batch study]
# The "throughput plan" of docs/analysis-guide.md#batch-study: per study, throughput,
# speedup, per-sample latency and memory efficiency against batch, and the batch figures.
# A study is either the batch search of one `batch_size: auto` cell (its `probes`, layout
# 1.4) or a listed-batch group: the ordinary cells of one curve (curve_key: they differ only
# in batch size) with at least two batches that ran ok. An auto cell's figures
# (max_batch_ok, oom_batch, best, knee, slo, recommended) are the file's: scalebench
# computed them from the same probes (common/cell/batch_search.cc) and they are never recomputed
# here. A listed group's best / knee / SLO batch are _picks' (the `batch` table's:
# trusted ok cells), its recommended batch the best, or with --slo-p99-ms the SLO batch.
# Only figures that follow from one probe or cell are computed here:
#   speedup            = throughput / throughput of the smallest batch that ran ok
#   per-sample latency = median_s / batch  (per-rank batch; one step or one batch)
#   memory efficiency  = throughput / (peak_memory_bytes / 2^30)  (samples/s per GiB)
# Probes that did not fit have no throughput, speedup or efficiency (the file's 0 is "none").

GIB = float(1 << 30)
MIB = float(1 << 20)
#: Bottlenecks of a study (batch_study's `bottleneck`).
PLATEAU, MEMORY, NOTHING_FIT = "throughput plateau", "memory", "nothing fit"
#: The best batch is the largest that ran and none failed: auto: up to max_batch; listed:
#: the largest batch of the list.
MAX_BATCH = {"auto": "max_batch", "listed": "largest batch listed"}
STUDY_COLUMNS = [
    "study",
    "kind",
    "cell_id",
    *CURVE_COLUMNS,
    "batches",
    *BATCH_FIGURES,
    "smallest_batch",
    "recommended_throughput",
    "recommended_speedup",
    "recommended_memory_mib",
    "memory_budget_mib",
    "memory_per_sample_mib",
    "bottleneck",
]
POINT_COLUMNS = [
    "study",
    "kind",
    "cell_id",
    "batch",
    "status",
    "throughput_samples_per_s",
    "speedup",
    "per_sample_latency_s",
    "median_s",
    "p99_s",
    "peak_memory_mib",
    "samples_per_s_per_gib",
]


def _figure(value) -> int:
    """A stored batch figure as int (0 for NA: "none", as the file writes it)."""
    return 0 if value is None or pd.isna(value) else int(value)


def _bottleneck(kind: str, max_ok: int, oom: int, best: int) -> str:
    """memory: the best batch is the largest that fit and a larger one did not (throughput
    still rising at the boundary); max_batch: the same without a batch that did not fit
    (auto: up to max_batch; listed: the largest batch listed); throughput plateau: a batch
    below the boundary is the best (and the knee, <= best, is too: larger batches buy < 5 %)."""
    if not max_ok or not best:
        return NOTHING_FIT
    if best >= max_ok:
        return MEMORY if oom else MAX_BATCH[kind]
    return PLATEAU


def _derived(points: pd.DataFrame) -> pd.DataFrame:
    """Adds speedup, per-sample latency, memory and memory efficiency (Note [Batch study])
    to the points of one study; `fits` marks the points that ran ok."""
    fits = points.status == "ok"
    throughput = points.throughput_samples_per_s.where(fits)
    base = points[fits].sort_values("batch", kind="stable")
    reference = float(base.throughput_samples_per_s.iloc[0]) if len(base) else np.nan
    points = points.assign(throughput_samples_per_s=throughput)
    points["speedup"] = throughput / reference
    median = points.median_s.where(points.median_s > 0)
    points["per_sample_latency_s"] = median / points.batch
    points["median_s"] = median
    points["p99_s"] = points.p99_s.where(points.p99_s > 0)
    points["peak_memory_mib"] = points.peak_memory_bytes / MIB
    points["samples_per_s_per_gib"] = throughput / (points.peak_memory_bytes / GIB)
    return points


def _auto_studies(results: Results) -> tuple[list[dict], list[pd.DataFrame]]:
    rows, frames = [], []
    if results.probes.empty:
        return rows, frames
    cells = results.cells.set_index("cell_id")
    for cell_id, probes in results.probes.groupby("cell_id", sort=False):
        if cell_id not in cells.index:
            continue
        cell = cells.loc[cell_id]
        study = cell.label
        points = _derived(probes.assign(study=study, kind="auto"))
        frames.append(points)
        figures = {name: _figure(cell.get(name)) for name in BATCH_FIGURES}
        ok = points[points.status == "ok"]
        at = ok[ok.batch == figures["recommended_batch"]]
        row = {"study": study, "kind": "auto", "cell_id": cell_id}
        row.update({c: cell[c] for c in CURVE_COLUMNS})
        row["batches"] = ",".join(str(b) for b in probes.batch)
        row.update(figures)
        row["smallest_batch"] = int(ok.batch.min()) if len(ok) else np.nan
        row["recommended_throughput"] = (
            float(at.throughput_samples_per_s.iloc[0]) if len(at) else np.nan
        )
        row["recommended_speedup"] = float(at.speedup.iloc[0]) if len(at) else np.nan
        row["recommended_memory_mib"] = float(at.peak_memory_mib.iloc[0]) if len(at) else np.nan
        row["memory_budget_mib"] = cell.get("memory_budget_bytes", np.nan) / MIB
        row["memory_per_sample_mib"] = cell.get("memory_per_sample_bytes", np.nan) / MIB
        row["bottleneck"] = _bottleneck(
            "auto", figures["max_batch_ok"], figures["oom_batch"], figures["best_batch"]
        )
        rows.append(row)
    return rows, frames


def _listed_studies(
    points: pd.DataFrame, results: Results, slo_p99_ms: float | None
) -> tuple[list[dict], list[pd.DataFrame]]:
    rows, frames = [], []
    if points.empty:
        return rows, frames
    every = results.cells
    labels = dict(zip(every.cell_id, every.label))
    peaks = dict(zip(every.cell_id, every.get("peak_memory_bytes", pd.Series(np.nan, every.index))))
    medians = dict(zip(every.cell_id, every.get("median_s", pd.Series(np.nan, every.index))))
    auto = set(every.cell_id[every.batch_auto])
    listed = points[~points.cell_id.isin(auto) & points.status.isin(["ok", "oom"])]
    for _, curve in listed.groupby("curve", sort=False):
        ok = curve[curve.status == "ok"]
        if ok.batch_size.nunique() < 2:
            continue
        first = curve.iloc[0]
        # The label's batch part ("b16") by its value, not its position: a label has a branch
        # part only when the cell has a branch (read/cells.py).
        label = labels[first.cell_id].split("/")
        batch_part = f"b{int(first.batch_size)}"
        at = label.index(batch_part, 1) if batch_part in label[1:] else len(label)
        study = "/".join(label[:at] + ["b*"] + label[at + 1 :])
        peak = [peaks[c] for c in curve.cell_id]
        median = [medians[c] for c in curve.cell_id]
        frame = pd.DataFrame(
            {
                "study": study,
                "kind": "listed",
                "cell_id": curve.cell_id.to_numpy(),
                "batch": curve.batch_size.to_numpy().astype(np.int64),
                "status": curve.status.to_numpy(),
                "median_s": np.asarray(median, dtype=float),
                "p99_s": curve.p99_ms.to_numpy() / 1e3,
                "throughput_samples_per_s": curve.throughput_samples_per_s.to_numpy(),
                "peak_memory_bytes": np.asarray(peak, dtype=float),
            }
        )
        frame = _derived(frame)
        frames.append(frame)
        picks = _picks(curve, slo_p99_ms)
        best = _figure(picks["best_batch"])
        recommended = best
        if slo_p99_ms is not None:
            good = curve[(curve.status == "ok") & curve.trusted & (curve.p99_ms <= slo_p99_ms)]
            recommended = (
                int(good.loc[good.throughput_samples_per_s.idxmax()].batch_size) if len(good) else 0
            )
        max_ok, oom = _figure(picks["max_ok_batch"]), _figure(picks["oom_batch"])
        at = frame[(frame.batch == recommended) & (frame.status == "ok")]
        row = {"study": study, "kind": "listed", "cell_id": ""}
        row.update({c: first[c] for c in CURVE_COLUMNS})
        row.update(
            batches=",".join(str(b) for b in sorted(curve.batch_size)),
            max_batch_ok=max_ok,
            oom_batch=oom,
            best_batch=best,
            knee_batch=_figure(picks["knee_batch"]),
            slo_batch=_figure(picks.get("slo_batch")),
            recommended_batch=recommended,
            smallest_batch=int(ok.batch_size.min()),
            recommended_throughput=float(at.throughput_samples_per_s.iloc[0])
            if len(at)
            else np.nan,
            recommended_speedup=float(at.speedup.iloc[0]) if len(at) else np.nan,
            recommended_memory_mib=float(at.peak_memory_mib.iloc[0]) if len(at) else np.nan,
            memory_budget_mib=np.nan,
            memory_per_sample_mib=np.nan,
            bottleneck=_bottleneck("listed", max_ok, oom, best),
        )
        rows.append(row)
    return rows, frames


def batch_study(
    results: Results, points: pd.DataFrame, slo_p99_ms: float | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(studies, points) of Note [Batch study]: one row per study (auto cells first, in
    file order, then the listed-batch groups), and one per probe / cell of each study with
    throughput, speedup, per-sample latency, peak memory and memory efficiency. Batch
    figures are ints, 0 for none (as the file stores them)."""
    auto_rows, auto_frames = _auto_studies(results)
    listed_rows, listed_frames = _listed_studies(points, results, slo_p99_ms)
    studies = pd.DataFrame(auto_rows + listed_rows, columns=STUDY_COLUMNS)
    frames = [f[POINT_COLUMNS] for f in auto_frames + listed_frames]
    curve = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=POINT_COLUMNS)
    return studies, curve


def _mib(value: float) -> str:
    return f"{value:,.1f} MiB"


def study_lines(study, cells: pd.DataFrame | None = None) -> tuple[str, list[str]]:
    """The executive summary of one study (a row of batch_study) in Markdown: a title and
    its bullet lines: the recommended batch with its throughput, speedup and memory, the
    boundary, the best / knee / SLO batches, and the bottleneck in words."""
    s = study
    auto = s.kind == "auto"
    title = f"`{s.study}`" + (
        " (batch_size auto)" if auto else f" (batches {s.batches.replace(',', ', ')})"
    )
    recommended, best, knee = int(s.recommended_batch), int(s.best_batch), int(s.knee_batch)
    max_ok, oom = int(s.max_batch_ok), int(s.oom_batch)
    if s.bottleneck == NOTHING_FIT:
        what = "not even the smallest batch fit" if auto else "no trusted cell ran ok"
        return title, [f"**No recommendation**: {what} (`{s.batches}`)."]
    line = f"**Recommended batch: {recommended}**"
    if np.isfinite(s.recommended_throughput):
        line += (
            f": {s.recommended_throughput:,.1f} samples/s, {s.recommended_speedup:.2f}x the "
            f"smallest batch ({int(s.smallest_batch)})"
        )
    if np.isfinite(s.recommended_memory_mib):
        line += f"; peak memory {_mib(s.recommended_memory_mib)}"
        if np.isfinite(s.memory_budget_mib):
            line += f" of a {_mib(s.memory_budget_mib)} budget"
    lines = [line + "."]
    if oom:
        lines.append(f"**Boundary**: batch {max_ok} fits, {oom} does not.")
    elif auto:
        lines.append(f"**Boundary**: none found: every batch up to {max_ok} (max_batch) fit.")
    else:
        lines.append(f"**Boundary**: none found: every listed batch up to {max_ok} ran.")
    slo = f"; latency SLO met up to batch {int(s.slo_batch)}" if s.slo_batch else ""
    lines.append(
        f"Best throughput at batch {best}; knee at {knee} (the smallest batch within "
        f"{KNEE_TOLERANCE:.0%} of the best){slo}."
    )
    if recommended != best:
        lines.append(
            f"The best batch, {best}, is not the recommended one: it lies outside the safety "
            f"margin of the memory budget or misses the latency SLO."
            if auto
            else f"The best batch, {best}, misses the latency SLO."
        )
    if s.bottleneck == PLATEAU:
        lines.append(
            f"**Bottleneck: throughput plateau**: beyond batch {knee}, larger batches buy less "
            f"than {KNEE_TOLERANCE:.0%} more throughput (the best, {best}, is below the "
            f"largest batch that fit, {max_ok}); a batch near the knee saves memory and "
            f"latency."
        )
    elif s.bottleneck == MEMORY:
        lines.append(
            f"**Bottleneck: memory**: throughput still rises at the boundary: the best batch "
            f"({best}) is the largest that fit, and {oom} did not. More memory per worker, or "
            f"less per sample, would buy throughput."
        )
    else:
        lines.append(
            f"**Bottleneck: none found below the largest batch {'probed' if auto else 'listed'}"
            f"**: throughput still rises at batch {best}, which fit; "
            + ("raise max_batch." if auto else "list larger batches.")
        )
    return title, lines


def executive_summary(studies: pd.DataFrame) -> str:
    """Markdown: a `### title` and bullets per study (study_lines); "" without studies."""
    parts = []
    for study in studies.itertuples():
        title, lines = study_lines(study)
        parts += [f"### {title}", ""] + [f"* {line}" for line in lines] + [""]
    return "\n".join(parts)
