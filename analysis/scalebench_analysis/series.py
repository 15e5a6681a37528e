"""Repeated cells (Note [Repetitions], results layout 1.5): the `/series` groups, the
Repetitions table, and the judgement of a series pair between two files.

A series is every repetition of one cell; the C++ run stores its figures in
`/series/<series_id>` (series_id = the cell id of repetition 0): the median over the
repetitions of their median step/batch time and throughput, each with a 95 % percentile
bootstrap interval over the repetitions, the spread and the `disagree` flag.

Between two files (`compare`), the repetitions of a series are not judged one by one (each
repetition's iterations share one state of the machine, so testing them alone would take
machine drift for a regression): the pair of series is. It is a regression when the new
median is slower than the base by more than the threshold AND the two intervals do not
overlap; an improvement the other way round; "within noise" otherwise. Its ratio interval
is the conservative [new low / base high, new high / base low].
"""

from __future__ import annotations

import json

import h5py
import numpy as np
import pandas as pd

COLUMNS = [
    "series_id",
    "metric",
    "repetitions",
    "completed",
    "cells",
    "median_s",
    "median_s_ci_low",
    "median_s_ci_high",
    "throughput_samples_per_s",
    "throughput_ci_low",
    "throughput_ci_high",
    "spread_rel",
    "disagree",
]
#: Verdict of a repetition cell whose series is judged instead (compare).
IN_SERIES = "judged by its series"


def _text(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray):
        return _text(value.item())
    return str(value)


def read_series(f: h5py.File) -> pd.DataFrame:
    """The `/series` groups of an open results file (an empty frame without them)."""
    rows = []
    for series_id, group in f["series"].items() if "series" in f else []:
        a = group.attrs
        rows.append(
            {
                "series_id": series_id,
                "metric": _text(a.get("metric", "")),
                "repetitions": int(a.get("repetitions", 0)),
                "completed": int(a.get("completed", 0)),
                "cells": json.loads(_text(a.get("cells", "[]"))),
                **{name: float(a.get(name, np.nan)) for name in COLUMNS[5:12]},
                "disagree": bool(int(a.get("disagree", 0))),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def repetitions_table(series: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """One row per series with the label of its repetition 0 and the figures in ms."""
    if series.empty:
        return pd.DataFrame()
    labels = cells.set_index("cell_id")["label"] if len(cells) else pd.Series(dtype=str)
    out = pd.DataFrame(
        {
            "label": [str(labels.get(s, s)).split(" rep ")[0] for s in series.series_id],
            "series_id": series.series_id,
            "reps": [f"{c}/{n}" for c, n in zip(series.completed, series.repetitions)],
            "median_ms": series.median_s * 1e3,
            "ci_low_ms": series.median_s_ci_low * 1e3,
            "ci_high_ms": series.median_s_ci_high * 1e3,
            "throughput_samples_per_s": series.throughput_samples_per_s,
            "throughput_ci_low": series.throughput_ci_low,
            "throughput_ci_high": series.throughput_ci_high,
            "spread_pct": series.spread_rel * 100,
            "disagree": ["DISAGREE" if d else "" for d in series.disagree],
        }
    )
    return out.sort_values("label", kind="stable").reset_index(drop=True)


def series_of_cells(series: pd.DataFrame) -> dict:
    """cell id -> series id for every repetition listed in `series`."""
    return {cell: row.series_id for row in series.itertuples() for cell in row.cells}


def judge(base_row, new_row, threshold: float) -> dict:
    """The compare row of a series pair (see the module docstring)."""
    ratio = new_row.median_s / base_row.median_s
    low = new_row.median_s_ci_low / base_row.median_s_ci_high
    high = new_row.median_s_ci_high / base_row.median_s_ci_low
    disjoint = (
        new_row.median_s_ci_low > base_row.median_s_ci_high
        or new_row.median_s_ci_high < base_row.median_s_ci_low
    )
    if disjoint and ratio - 1 > threshold:
        verdict = "regression"
    elif disjoint and 1 - ratio > threshold:
        verdict = "improvement"
    else:
        verdict = "within noise"
    return {
        "verdict": verdict,
        "ratio": ratio,
        "change": ratio - 1.0,
        "ci_low": low,
        "ci_high": high,
        "n_base": base_row.completed,
        "n_new": new_row.completed,
        "median_base_s": base_row.median_s,
        "median_new_s": new_row.median_s,
        "matched_by": "series",
        "base_cell_id": base_row.series_id,
        "new_cell_id": new_row.series_id,
        "base_status": f"{base_row.completed}/{base_row.repetitions} ok",
        "new_status": f"{new_row.completed}/{new_row.repetitions} ok",
        "accuracy": "",
        "accuracy_change": "",
    }


def judge_series_pairs(rows: list[dict], base: pd.DataFrame, new: pd.DataFrame, threshold):
    """Rewrites `rows` (compare's per-cell rows) in place: repetition cells of a series
    present in both files get the verdict IN_SERIES, and one row per series pair is
    appended, judged by `judge`."""
    if base.empty or new.empty:
        return
    base_of, new_of = series_of_cells(base), series_of_cells(new)
    base_rows, new_rows = base.set_index("series_id"), new.set_index("series_id")
    pairs = {}
    for row in rows:
        b, n = base_of.get(row["base_cell_id"]), new_of.get(row["new_cell_id"])
        if b is None or n is None:
            continue
        row["verdict"] = IN_SERIES
        if row["base_cell_id"] == b:  # repetition 0 names the series pair
            pairs[(b, n)] = row["label"]
    for (b, n), label in pairs.items():
        judged = judge(
            base_rows.loc[b].rename(b).to_frame().T.assign(series_id=b).iloc[0],
            new_rows.loc[n].rename(n).to_frame().T.assign(series_id=n).iloc[0],
            threshold,
        )
        rows.append({"label": f"{label} [series of {judged['n_new']}]", **judged})
