"""Start-up figures per cell: what a run costs before its measured steps, which the users of
the seed scripts read first (model init, data setup, checkpoint load, compilation, the first
iteration). One row per ok cell that has any, each figure the median over the cell's ranks
(NaN where the cell has none):

* ``model_init_s``, ``data_open_s``, ``checkpoint_load_s``: built-in cells (rank metrics);
* ``startup_s``: program cells, from the launch of the program to the begin of its first
  step (interpreter, imports, model building, data setup: ``program_startup_s``);
* ``compile_s``: a program's own compilation report (``program_compile_s``, the JAX
  adapter's);
* ``first_iteration_s``: the first (warm-up) iteration's time: the built-in loop's metric,
  else a program's first step as stored in ``timings``;
* ``steady_step_s``: the cell's median measured step (or batch), for scale.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..read.loader import Results

#: Output column <- rank metric.
_METRICS = {
    "model_init_s": "model_init_s",
    "data_open_s": "data_open_s",
    "checkpoint_load_s": "checkpoint_load_s",
    "startup_s": "program_startup_s",
    "compile_s": "program_compile_s",
    "first_iteration_s": "first_iteration_s",
}
#: The start-up figures (seconds), as columns of this table and of the cells table.
FIGURES = tuple(_METRICS)
COLUMNS = ["label", "cell_id", "model", *FIGURES, "steady_step_s"]


def _first_iteration(results: Results, cell_id: str, mode: str) -> float:
    """Median over ranks of row 0 (the first warm-up iteration) of the step/batch column."""
    phase = "step" if mode == "train" else "batch"
    values = results.timing_array(cell_id, phase, measured_only=False)
    if values.size == 0 or values.shape[1] == 0 or np.all(np.isnan(values[:, 0])):
        return float("nan")
    return float(np.nanmedian(values[:, 0]))


def rank_median(mine: pd.DataFrame, metric: str) -> float:
    """The median over a cell's ranks (its rows of `rank_metrics`) of `metric`, the ranks
    without it left out; NaN when none has it."""
    values = mine[metric].dropna() if metric in mine else pd.Series(dtype=float)
    return float(values.median()) if len(values) else float("nan")


def rank_medians(results: Results, metrics) -> pd.DataFrame:
    """rank_median of each of `metrics` for every cell with rank rows, in one groupby: a row
    per cell id (the index), a column per metric (NaN for one the file lacks)."""
    ranks = results.rank_metrics
    if not len(ranks):
        return pd.DataFrame(columns=list(metrics), dtype=float)
    present = [m for m in metrics if m in ranks]
    medians = ranks.groupby("cell_id", sort=False)[present].median()
    return medians.reindex(columns=list(metrics))


def ok_cells_with_ranks(results: Results, having=None):
    """(cell row, its rows of `rank_metrics`, empty when it has none) of every ok cell, in the
    cells table's order: what the per-cell tables built from rank metrics iterate over. With
    `having` (metric names), only the cells that have a value of one of them on some rank:
    a table of program cells then splits the rank rows of those alone, not of every cell of
    a sweep (issue 53)."""
    ranks = results.rank_metrics
    cells = results.cells[results.cells.status == "ok"]
    if having is not None:
        present = [m for m in having if m in ranks]
        if not present:
            return
        ranks = ranks[ranks[present].notna().any(axis=1).to_numpy()]
        cells = cells[cells.cell_id.isin(ranks.cell_id).to_numpy()]
    by_cell = dict(tuple(ranks.groupby("cell_id"))) if len(ranks) else {}
    for cell in cells.itertuples():
        yield cell, by_cell.get(cell.cell_id, ranks.iloc[0:0])


def startup_table(results: Results) -> pd.DataFrame:
    """One row per ok cell with at least one start-up figure (see the module's doc)."""
    cells = results.cells[results.cells.status == "ok"]
    medians = rank_medians(results, list(_METRICS.values()))
    table = pd.DataFrame(
        {
            "label": cells.label,
            "cell_id": cells.cell_id,
            "model": cells.model if "model" in cells else "",
        }
    )
    for column, metric in _METRICS.items():
        table[column] = cells.cell_id.map(medians[metric]).astype(float)
    missing = table.first_iteration_s.isna().to_numpy()
    table.loc[missing, "first_iteration_s"] = [
        _first_iteration(results, cell_id, mode)
        for cell_id, mode in zip(cells.cell_id[missing], cells["mode"][missing])
    ]
    table["steady_step_s"] = cells.median_s.astype(float) if "median_s" in cells else np.nan
    kept = table[list(FIGURES)].notna().any(axis=1)
    return table[kept].reset_index(drop=True).reindex(columns=COLUMNS)
