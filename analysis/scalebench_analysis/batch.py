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

from .loader import Results, config_key

KNEE_TOLERANCE = 0.05
CURVE_COLUMNS = ["branch", "experiment", "mode", "precision", "setting", "world_size"]


def curve_key(spec: dict) -> str:
    """Configuration + world size: the spec without batch size and dataset size."""
    return config_key(spec, drop=("batch_size", "samples"))


def batch_points(results: Results, trust: pd.DataFrame) -> pd.DataFrame:
    """One row per cell (any status) with its curve key, throughput, latency and trust."""
    cells = results.cells.copy()
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
