"""The `/series` groups of a results file (Note [Repetitions], results layout 1.5): the
`series` table of Results, each series labelled by its repetition-0 cell, and the series id
of every cell.

A series is every repetition of one cell; the C++ run stores its figures in
`/series/<series_id>` (series_id = the cell id of repetition 0): the median over the
repetitions of their median step/batch time and throughput, each with a 95 % percentile
bootstrap interval over the repetitions, the spread and the `disagree` flag. Nothing here
recomputes them: the analysis reads the file's figures (tests/analysis/rawdata.py holds the
independent reference the tests check them against). tables/repetitions.py makes the
Repetitions table of them and judges repeated cells between two files.
"""

from __future__ import annotations

import json
import math

import h5py
import pandas as pd

from .h5text import text
from .keys import IDENTITY_COLUMNS

#: Columns of `Results.series`: the `/series` attributes (`cells` and
#: `repetition_median_s` as lists, `disagree` as bool), then the labelling columns of the
#: series' repetition-0 cell (load(); NaN / "" when none of its cells is in the file).
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
    "repetition_median_s",
    "max_spread_rel",
    "confidence",
    "bootstrap_resamples",
    "bootstrap_seed",
]
#: The labelling columns `attach_labels` adds (from the series' repetition-0 cell).
LABEL_COLUMNS = ["label", *IDENTITY_COLUMNS]
_FLOATS = (
    "median_s",
    "median_s_ci_low",
    "median_s_ci_high",
    "throughput_samples_per_s",
    "throughput_ci_low",
    "throughput_ci_high",
    "spread_rel",
    "max_spread_rel",
    "confidence",
)


def _series_row(series_id: str, group: h5py.Group) -> dict:
    """One row of COLUMNS from a `/series/<id>` group; ValueError / KeyError / TypeError
    naming what is wrong when it does not follow the layout."""
    a = group.attrs
    cells = json.loads(text(a.get("cells", "[]")))
    if not isinstance(cells, list) or not all(isinstance(c, str) for c in cells):
        raise ValueError("attribute 'cells' is not a JSON list of cell ids")
    medians = json.loads(text(a.get("repetition_median_s", "[]")))
    if not isinstance(medians, list):
        raise ValueError("attribute 'repetition_median_s' is not a JSON list")
    row = {
        "series_id": series_id,
        "metric": text(a.get("metric", "")),
        "repetitions": int(a.get("repetitions", 0)),
        "completed": int(a.get("completed", 0)),
        "cells": cells,
        "disagree": bool(int(a.get("disagree", 0))),
        "repetition_median_s": [math.nan if m is None else float(m) for m in medians],
        "bootstrap_resamples": int(a.get("bootstrap_resamples", 0)),
        "bootstrap_seed": text(a.get("bootstrap_seed", "")),
    }
    row.update((name, float(a.get(name, math.nan))) for name in _FLOATS)
    return row


def read_series_checked(f: h5py.File) -> tuple[pd.DataFrame, dict]:
    """(the `/series` table, {series id: why its group was left out}) of an open results
    file; an empty table (COLUMNS) without `/series`."""
    rows, problems = [], {}
    group = f.get("series")
    for series_id in group if isinstance(group, h5py.Group) else []:
        try:
            rows.append(_series_row(series_id, group[series_id]))
        except (OSError, KeyError, ValueError, TypeError) as error:
            problems[series_id] = f"series group unreadable: {str(error).splitlines()[0]}"
    return pd.DataFrame(rows, columns=COLUMNS), problems


def read_series(f: h5py.File) -> pd.DataFrame:
    """The `/series` groups of an open results file (an empty frame without them; a
    damaged group is left out, see read_series_checked)."""
    return read_series_checked(f)[0]


def series_of_cells(series: pd.DataFrame) -> dict:
    """cell id -> series id for every repetition listed in `series`."""
    return {cell: row.series_id for row in series.itertuples() for cell in row.cells}


def _unlisted_key(spec: dict) -> str:
    """The spec of a repetition without its `repetition`: equal for every run of a cell."""
    return json.dumps(
        {k: v for k, v in spec.items() if k not in ("repetition", "cell_id", "source")},
        sort_keys=True,
    )


def cell_series_ids(cells: pd.DataFrame, series: pd.DataFrame) -> list:
    """Per row of `cells`: the id of its series (the cell id of its repetition 0). A cell
    listed by a `/series` group gets that group's id; a cell that is not repeated
    (`repetitions` 1) its own id; a repeated cell no group lists (a run interrupted before
    it wrote `/series`) its stored `series_id` (layout 1.9), else the id of the repetition-0
    cell of the same spec in the file, None when that cell is not in the file."""
    listed = series_of_cells(series)
    unlisted = [
        i
        for i, (c, n) in enumerate(zip(cells.cell_id, cells.repetitions))
        if c not in listed and n > 1
    ]
    firsts = {}
    for i in unlisted:
        if cells.repetition.iat[i] == 0:
            firsts[_unlisted_key(cells.spec.iat[i])] = cells.cell_id.iat[i]
    out = [listed.get(c, c) for c in cells.cell_id]
    # Layout 1.9 stores each repetition's series id (`series_id`): the stored spec may lack
    # env values, so specs are compared only for older files.
    stored = cells["series_id"] if "series_id" in cells else None
    for i in unlisted:
        own = stored.iat[i] if stored is not None else None
        out[i] = (
            own if isinstance(own, str) and own else firsts.get(_unlisted_key(cells.spec.iat[i]))
        )
    return out


def reference_cell(row, by_id: pd.DataFrame):
    """The cells row that labels a series: its repetition 0, else its first listed cell in
    the file; None when none is."""
    for cell_id in [row.series_id, *row.cells]:
        if cell_id in by_id.index:
            return by_id.loc[cell_id]
    return None


def attach_labels(series: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """`series` with LABEL_COLUMNS from each series' reference cell (reference_cell): its
    label without the " rep k/N" suffix, branch, experiment, mode, precision, setting,
    batch and world size."""
    out = series.copy()
    if out.empty:
        for name in LABEL_COLUMNS:
            out[name] = pd.Series(dtype=object)
        return out
    by_id = cells.set_index("cell_id") if len(cells) else pd.DataFrame()
    values = {name: [] for name in LABEL_COLUMNS}
    for row in out.itertuples():
        cell = reference_cell(row, by_id)
        for name in LABEL_COLUMNS:
            if cell is None:
                values[name].append(row.series_id if name == "label" else None)
            elif name == "label":
                values[name].append(str(cell["label"]).split(" rep ")[0])
            else:
                values[name].append(cell[name])
    for name in LABEL_COLUMNS:
        out[name] = values[name]
    return out
