"""Straggler nodes: the straggler rule of quality.py applied to the hosts of a multi-node cell.

Definition (docs/analysis-guide.md#straggler-nodes): for every ok cell whose ranks ran on two
or more hosts (the file's `rank_hosts`), one row per host with

* `ranks`: the cell's ranks on it ("0-3,8");
* `median_busy_s`: the low median (of an even count, the lower of the two middle values) of
  its ranks' median busy times (quality.straggler_table: train `step - comm_wait`,
  inference `batch`);
* `slowdown`: that median / the fastest host's - 1 (0 for the fastest host);
* `excess`: that median / the median of the other hosts' medians - 1, and `straggler` when
  `excess` > the straggler threshold: the ranks' rule with the host's median in place of a
  rank's;
* `straggler_ranks`: how many of its ranks the ranks' rule flagged.

The host's figure is the low median of its ranks, so a node is flagged only when more than half
of its ranks are slow (a slow node: its CPU, memory, GPU clocks, link), never for one slow rank
among healthy ones, not even one of two (the plain median of two ranks, their mean, would flag
a node of two ranks for one rank 30 % slow); that rank is a straggler rank, counted in
`straggler_ranks`. A cell with a rank of unknown host ("" in the file) has no rows: its ranks
cannot all be placed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

COLUMNS = [
    "cell_id",
    "label",
    "host",
    "ranks",
    "median_busy_s",
    "slowdown",
    "others_median_busy_s",
    "excess",
    "straggler_ranks",
    "straggler",
]


def rank_ranges(ranks) -> str:
    """'0-3,8' for ranks 0, 1, 2, 3, 8 (sorted, runs of consecutive ranks joined)."""
    runs: list[list[int]] = []
    for rank in sorted(int(r) for r in ranks):
        if runs and rank == runs[-1][1] + 1:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _nanmedian(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else float("nan")


def low_median(values: np.ndarray) -> float:
    """The lower middle value of the finite `values` (their median for an odd count); NaN
    without one."""
    finite = np.sort(values[np.isfinite(values)])
    return float(finite[(finite.size - 1) // 2]) if finite.size else float("nan")


def _cell_rows(cell: pd.DataFrame, threshold: float) -> list[dict]:
    """The rows of one cell's ranks (rows of quality.straggler_table); [] on one host."""
    hosts = cell.host.astype(str)
    if (hosts == "").any() or hosts.nunique() < 2:
        return []
    groups = list(cell.groupby(hosts, sort=False))
    groups.sort(key=lambda item: int(item[1]["rank"].min()))  # the node of rank 0 first
    medians = np.array([low_median(g.median_busy_s.to_numpy(float)) for _, g in groups])
    finite = medians[np.isfinite(medians)]
    fastest = float(finite.min()) if finite.size else float("nan")
    rows = []
    for index, (host, group) in enumerate(groups):
        median = medians[index]
        others = _nanmedian(np.delete(medians, index))
        excess = median / others - 1.0
        rows.append(
            {
                "cell_id": group.cell_id.iloc[0],
                "label": group.label.iloc[0],
                "host": host,
                "ranks": rank_ranges(group["rank"]),
                "median_busy_s": median,
                "slowdown": median / fastest - 1.0,
                "others_median_busy_s": others,
                "excess": excess,
                "straggler_ranks": int(group.straggler.astype(bool).sum()),
                "straggler": bool(excess > threshold),
            }
        )
    return rows


def straggler_node_table(ranks: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """One row per host of every cell of `ranks` (quality.straggler_table: one row per rank
    with its host and median busy time) whose ranks ran on 2+ hosts; see the module doc.
    `threshold`: a fraction (QualityOptions.straggler_threshold)."""
    rows = []
    if len(ranks) and "host" in ranks:
        for _, cell in ranks.groupby("cell_id", sort=False):
            rows += _cell_rows(cell, threshold)
    return pd.DataFrame(rows, columns=COLUMNS)


def summary_line(table: pd.DataFrame | None) -> str:
    """'straggler nodes: nodeb (3 of 4 multi-node cells, busy +25.0 % over the other
    hosts' median)' naming every flagged host with its largest excess; '' without one."""
    if table is None or not len(table) or not table.straggler.any():
        return ""
    cells = table.cell_id.nunique()
    parts = []
    for host, group in table[table.straggler].groupby("host", sort=True):
        parts.append(
            f"{host} ({group.cell_id.nunique()} of {cells} multi-node cells, busy "
            f"{group.excess.max():+.1%} over the other hosts' median)"
        )
    return "straggler nodes: " + "; ".join(parts) + ": table straggler_nodes"
