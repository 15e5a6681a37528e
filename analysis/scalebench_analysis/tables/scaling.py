"""Strong and weak scaling efficiency and communication share.

Definitions (docs/analysis-guide.md#scaling). T(b, w) is the throughput (samples/s, the
file's `summary.throughput_samples_per_s`) of the ok cell with per-rank batch b on w
workers, within one configuration (every spec field except batch size, world size and the
inference dataset size). w0 is the smallest world size measured for the reference.

* weak scaling (fixed per-rank batch b, work grows with w):
  weak_efficiency(b, w) = (T(b, w) / w) / (T(b, w0) / w0)     -- w0 = 1: T(b,w)/(w*T(b,1))
* strong scaling (fixed global batch G = b * w, the same work split over more ranks):
  strong_speedup(G, w) = T(G/w, w) / T(G/w0, w0)
  strong_efficiency(G, w) = strong_speedup * w0 / w            -- w0 = 1: T/(w*T(G,1))
  Both are 1.0 on the ideal line; ideal throughput is T(ref) * w / w0.
* comm_share (train): sum of `comm_wait` / sum of `step` over all measured iterations and
  ranks: the fraction of step time spent waiting on gradient communication that backward
  did not hide.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..read import keys
from ..read.loader import Results

GROUP_COLUMNS = list(keys.GROUP_COLUMNS)


def comm_share(results: Results, cell_id: str) -> float:
    """sum(comm_wait) / sum(step) over measured iterations and ranks; NaN without them."""
    wait = results.timing_array(cell_id, "comm_wait")
    step = results.timing_array(cell_id, "step")
    if wait.size == 0 or step.size == 0:
        return float("nan")
    total = np.nansum(step)
    return float(np.nansum(wait) / total) if total > 0 else float("nan")


def _reference(group: pd.DataFrame, key: str, value: int) -> tuple[pd.Series, bool]:
    """The smallest-world cell of `group` with `key` == `value`, and whether any other cell
    shares that value (a cell alone on its curve has no scaling figure: NaN)."""
    same = group[group[key] == value].sort_values("world_size")
    return same.iloc[0], len(same) > 1


def scaling_table(results: Results, trust: pd.DataFrame) -> pd.DataFrame:
    """One row per ok cell with weak and strong scaling figures against its reference.
    `trusted` is True when the cell and both references are trusted."""
    cells = results.cells[results.cells.status == "ok"].copy()
    if cells.empty:
        return pd.DataFrame(columns=list(keys.IDENTITY_COLUMNS))
    trusted = dict(zip(trust.cell_id, trust.trusted))
    rows = []
    for _, group in cells.groupby("config", sort=False):
        for _, cell in group.iterrows():
            t = cell.throughput_samples_per_s
            weak, weak_defined = _reference(group, "batch_size", cell.batch_size)
            strong, strong_defined = _reference(group, "global_batch", cell.global_batch)
            row = {c: cell[c] for c in GROUP_COLUMNS}
            row.update(
                cell_id=cell.cell_id,
                batch_size=cell.batch_size,
                world_size=cell.world_size,
                global_batch=cell.global_batch,
                throughput_samples_per_s=t,
                weak_reference_world=weak.world_size,
                weak_efficiency=(t / cell.world_size)
                / (weak.throughput_samples_per_s / weak.world_size),
                strong_reference_world=strong.world_size,
                strong_speedup=t / strong.throughput_samples_per_s,
                comm_share=comm_share(results, cell.cell_id),
            )
            row["strong_efficiency"] = row["strong_speedup"] * strong.world_size / cell.world_size
            if not weak_defined:
                row["weak_efficiency"] = np.nan
            if not strong_defined:
                row["strong_speedup"] = row["strong_efficiency"] = np.nan
            row["trusted"] = bool(
                trusted.get(cell.cell_id, False)
                and trusted.get(weak.cell_id, False)
                and trusted.get(strong.cell_id, False)
            )
            rows.append(row)
    order = [
        *GROUP_COLUMNS,
        "cell_id",
        "batch_size",
        "world_size",
        "global_batch",
        "throughput_samples_per_s",
        "weak_reference_world",
        "weak_efficiency",
        "strong_reference_world",
        "strong_speedup",
        "strong_efficiency",
        "comm_share",
        "trusted",
    ]
    return pd.DataFrame(rows)[order]
