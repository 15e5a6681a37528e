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


def _reference_rows(cells: pd.DataFrame, key: str) -> tuple[pd.DataFrame, np.ndarray]:
    """Per cell, the row of its reference: the smallest-world cell of its configuration with
    the same `key` (the first such cell in table order when several share that world), and
    whether any other cell shares that value (a cell alone on its curve has no scaling
    figure: NaN). One groupby for all cells rather than a filter per cell (issue 53)."""
    groups = cells.groupby(["config", key], sort=False)
    first = groups["world_size"].transform("idxmin")  # the first minimum, as a stable sort
    shared = groups["world_size"].transform("size").to_numpy() > 1
    return cells.loc[first.to_numpy()], shared


def scaling_table(results: Results, trust: pd.DataFrame) -> pd.DataFrame:
    """One row per ok cell with weak and strong scaling figures against its reference.
    `trusted` is True when the cell and both references are trusted. Rows in the order of
    the cells table, the cells of one configuration together (first seen first)."""
    cells = results.cells[results.cells.status == "ok"]
    if cells.empty:
        return pd.DataFrame(columns=list(keys.IDENTITY_COLUMNS))
    cells = cells.iloc[np.argsort(pd.factorize(cells.config)[0], kind="stable")]
    weak, weak_defined = _reference_rows(cells, "batch_size")
    strong, strong_defined = _reference_rows(cells, "global_batch")
    t = cells.throughput_samples_per_s.to_numpy(dtype=float)
    world = cells.world_size.to_numpy()
    weak_world = weak.world_size.to_numpy()
    strong_world = strong.world_size.to_numpy()
    weak_t = weak.throughput_samples_per_s.to_numpy(dtype=float)
    strong_t = strong.throughput_samples_per_s.to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        weak_efficiency = (t / world) / (weak_t / weak_world)
        strong_speedup = t / strong_t
    trusted = dict(zip(trust.cell_id, trust.trusted))
    is_trusted = [bool(trusted.get(c, False)) for c in cells.cell_id]
    by_id = dict(zip(cells.cell_id, is_trusted))
    table = cells[[*GROUP_COLUMNS, "cell_id", "batch_size", "world_size", "global_batch"]].copy()
    table["throughput_samples_per_s"] = t
    table["weak_reference_world"] = weak_world
    table["weak_efficiency"] = np.where(weak_defined, weak_efficiency, np.nan)
    table["strong_reference_world"] = strong_world
    table["strong_speedup"] = np.where(strong_defined, strong_speedup, np.nan)
    table["strong_efficiency"] = np.where(
        strong_defined, strong_speedup * strong_world / world, np.nan
    )
    table["comm_share"] = [comm_share(results, c) for c in cells.cell_id]
    table["trusted"] = [
        bool(own and by_id.get(w, False) and by_id.get(s, False))
        for own, w, s in zip(is_trusted, weak.cell_id, strong.cell_id)
    ]
    return table.reset_index(drop=True)
