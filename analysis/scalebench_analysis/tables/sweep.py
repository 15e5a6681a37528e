"""The shape of a sweep (issue 53): which settings were swept, how much of the spread of
throughput each one explains, and per experiment its best and worst cell. What a person
reads of a matrix of thousands of cells instead of a row per cell (output/sweep_console.py,
the HTML report's sweep section).

* swept axes: the identity columns (read/keys.py IDENTITY_COLUMNS) with more than one value
  among the ok cells;
* ``explained``: per swept axis, the share of the variance of log throughput over the ok
  cells that the axis alone explains (eta squared of a one-way analysis of variance: the
  variance of the group means, weighted by group size, over the total variance). Log,
  because settings act as factors (twice the batch, 1.6x the throughput), not as sums.
  It answers "which axis matters" as Optuna's and W&B's parameter importance do, without a
  model: 1.0 when throughput is a function of that axis alone, about 0 when the axis does
  not change it. Axes are not independent of each other in a matrix with exclusions, so
  the shares need not sum to 1;
* the experiments table: one row per (experiment, mode), in natural order: its cells, ok
  and trusted counts, the best ok cell (trusted ones first, as the summary picks it) with
  its batch size, world size, precision and setting, the worst ok cell's throughput, the
  ratio best / worst, and the axis that explains most of the spread within the experiment.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..read.keys import IDENTITY_COLUMNS
from ..read.natural_order import natural_column

EXPERIMENT_COLUMNS = [
    "experiment",
    "mode",
    "cells",
    "ok",
    "trusted",
    "best_label",
    "best_batch_size",
    "best_world_size",
    "best_precision",
    "best_setting",
    "best_throughput_samples_per_s",
    "worst_throughput_samples_per_s",
    "best_over_worst",
    "depends_most_on",
]


def _ok_with_rate(cells: pd.DataFrame) -> pd.DataFrame:
    """The ok cells with a positive finite throughput, and its log as `log_rate`."""
    ok = cells[cells.status == "ok"]
    rate = pd.to_numeric(ok.get("throughput_samples_per_s"), errors="coerce")
    ok = ok[(rate > 0) & np.isfinite(rate)]
    return ok.assign(log_rate=np.log(ok.throughput_samples_per_s.astype(float)))


def swept_axes(cells: pd.DataFrame) -> list[str]:
    """The identity columns with two or more values among the ok cells, in label order."""
    ok = cells[cells.status == "ok"]
    return [c for c in IDENTITY_COLUMNS if c in ok and ok[c].nunique(dropna=False) > 1]


def explained(ok: pd.DataFrame, axes: list[str]) -> dict:
    """axis -> the share of the variance of `ok.log_rate` it explains alone (module doc);
    {} when the rates do not vary."""
    y = ok.log_rate.to_numpy()
    total = float(np.sum((y - y.mean()) ** 2)) if len(y) else 0.0
    if total <= 0:
        return {}
    out = {}
    for axis in axes:
        means = ok.groupby(axis, sort=False, dropna=False).log_rate.transform("mean")
        out[axis] = float(np.sum((means.to_numpy() - y.mean()) ** 2) / total)
    return out


def axis_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per swept axis: its number of values, the smallest and largest (natural
    order), and `explained`; the axes by share, largest first."""
    ok = _ok_with_rate(cells)
    axes = swept_axes(cells)
    shares = explained(ok, axes)
    rows = []
    for axis in axes:
        values = cells[cells.status == "ok"][axis].dropna().drop_duplicates()
        ordered = values.iloc[np.argsort(natural_column(values).to_numpy(), kind="stable")]
        rows.append(
            {
                "axis": axis,
                "values": int(len(values)),
                "first": ordered.iloc[0] if len(ordered) else "",
                "last": ordered.iloc[-1] if len(ordered) else "",
                "explained": shares.get(axis, np.nan),
            }
        )
    table = pd.DataFrame(rows, columns=["axis", "values", "first", "last", "explained"])
    return table.sort_values("explained", ascending=False, kind="stable").reset_index(drop=True)


def _depends_most_on(rated: pd.DataFrame) -> dict:
    """(experiment, mode) -> 'batch_size 91%': the axis that explains most of the spread of
    log throughput within the experiment (`explained` per experiment, for every experiment
    at once: one groupby per axis, not one per experiment)."""
    keys = ["experiment", "mode"]
    if not len(rated):
        return {}
    y = rated.log_rate
    centre = y.groupby([rated[k] for k in keys], sort=False).transform("mean")
    total = ((y - centre) ** 2).groupby([rated[k] for k in keys], sort=False).sum()
    shares = {}
    for axis in (c for c in IDENTITY_COLUMNS if c not in keys and c in rated):
        by = [rated[k] for k in keys] + [rated[axis]]
        means = y.groupby(by, sort=False, dropna=False).transform("mean")
        between = ((means - centre) ** 2).groupby([rated[k] for k in keys], sort=False).sum()
        shares[axis] = between
    out = {}
    for key, whole in total.items():
        if not whole > 0:
            continue
        axis, share = max(
            ((a, float(s[key]) / whole) for a, s in shares.items()), key=lambda p: p[1]
        )
        out[key] = f"{axis} {share:.0%}"
    return out


def experiments_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per (experiment, mode) of `cells` (the analysis' cells table, with
    `trusted`), in natural order (module doc)."""
    rated = _ok_with_rate(cells)
    trusted = rated.trusted.eq(True) if "trusted" in rated else pd.Series(False, rated.index)
    # The best cell: the trusted ones first, then by throughput (the summary's pick).
    ranked = rated.assign(_trusted=trusted).sort_values(
        ["_trusted", "throughput_samples_per_s"], ascending=False, kind="stable"
    )
    best = ranked.groupby(["experiment", "mode"], sort=False).head(1)
    best = best.set_index(["experiment", "mode"])
    worst = rated.groupby(["experiment", "mode"], sort=False).throughput_samples_per_s.min()
    counts = cells.groupby(["experiment", "mode"], sort=False).agg(
        cells=("status", "size"),
        ok=("status", lambda s: int((s == "ok").sum())),
    )
    if "trusted" in cells:
        counts["trusted"] = (
            cells.assign(_t=cells.trusted.eq(True))
            .groupby(["experiment", "mode"], sort=False)
            ._t.sum()
        )
    else:
        counts["trusted"] = 0
    depends = _depends_most_on(rated)
    rows = []
    for key, count in counts.iterrows():
        row = {"experiment": key[0], "mode": key[1], **count.to_dict()}
        if key in best.index:
            cell = best.loc[key]
            top = float(cell.throughput_samples_per_s)
            row.update(
                best_label=cell.label,
                best_batch_size=cell.batch_size,
                best_world_size=cell.world_size,
                best_precision=cell.precision,
                best_setting=cell.setting,
                best_throughput_samples_per_s=top,
                worst_throughput_samples_per_s=float(worst[key]),
                best_over_worst=top / float(worst[key]),
                depends_most_on=depends.get(key, ""),
            )
        rows.append(row)
    table = pd.DataFrame(rows, columns=EXPERIMENT_COLUMNS)
    return table.sort_values(["experiment", "mode"], kind="stable", key=natural_column).reset_index(
        drop=True
    )


def extreme_cells(cells: pd.DataFrame, count: int, best: bool = True) -> pd.DataFrame:
    """The `count` ok cells of the highest (best) or lowest throughput, in that order."""
    rated = _ok_with_rate(cells)
    ordered = rated.sort_values("throughput_samples_per_s", ascending=not best, kind="stable")
    return ordered.head(count).drop(columns="log_rate")
