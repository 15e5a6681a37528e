"""Repeated cells (Note [Repetitions], results layout 1.5): the Repetitions table of analyze
and report (its text: output/repetitions_text.py).

A series is every repetition of one cell; the C++ run stores its figures in
`/series/<series_id>` (read by read/series.py into `Results.series`): the median over the
repetitions of their median step/batch time and throughput, each with a 95 % percentile
bootstrap interval over the repetitions, the spread and the `disagree` flag. Nothing here
recomputes them: the analysis reads the file's figures (tests/analysis/rawdata.py holds the
independent reference the tests check them against).

Between two cells (compare, the speedup and ablation tables, history) a repeated cell is
one compared cell whose runs are its repetitions: runs.py and verdict.py (Note [Runs are
the unit of evidence]).
"""

from __future__ import annotations

import pandas as pd

from ..read.keys import IDENTITY_COLUMNS
from ..read.series import attach_labels

# --- the Repetitions table of analyze / report -----------------------------------------

#: Columns of the Repetitions section (machine output: json, csv).
TABLE_COLUMNS = [
    "label",
    "series_id",
    "metric",
    "reps",
    "completed",
    "repetitions",
    "median_ms",
    "ci_low_ms",
    "ci_high_ms",
    "throughput_samples_per_s",
    "throughput_ci_low",
    "throughput_ci_high",
    "spread_pct",
    "disagree",
    "repetition_median_ms",
    *IDENTITY_COLUMNS,
]


def repetitions_table(series: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """One row per series (sorted by label): `reps` "completed/N", the median over the
    repetitions and its interval in ms, the throughput and its interval, the spread in
    percent, `disagree` ("DISAGREE" or ""), each repetition's median in ms (NaN: not
    completed) and the labelling columns. Empty (no columns) without series."""
    if series.empty:
        return pd.DataFrame()
    if "label" not in series:
        series = attach_labels(series, cells)
    out = pd.DataFrame(
        {
            "label": series.label,
            "series_id": series.series_id,
            "metric": series.metric,
            "reps": [f"{c}/{n}" for c, n in zip(series.completed, series.repetitions)],
            "completed": series.completed,
            "repetitions": series.repetitions,
            "median_ms": series.median_s * 1e3,
            "ci_low_ms": series.median_s_ci_low * 1e3,
            "ci_high_ms": series.median_s_ci_high * 1e3,
            "throughput_samples_per_s": series.throughput_samples_per_s,
            "throughput_ci_low": series.throughput_ci_low,
            "throughput_ci_high": series.throughput_ci_high,
            "spread_pct": series.spread_rel * 100,
            "disagree": ["DISAGREE" if d else "" for d in series.disagree],
            "repetition_median_ms": [[m * 1e3 for m in ms] for ms in series.repetition_median_s],
            **{name: series[name] for name in IDENTITY_COLUMNS},
        },
        columns=TABLE_COLUMNS,
    )
    return out.sort_values("label", kind="stable").reset_index(drop=True)
