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


def ok_cells_with_ranks(results: Results):
    """(cell row, its rows of `rank_metrics`, empty when it has none) of every ok cell, in the
    cells table's order: what the per-cell tables built from rank metrics iterate over."""
    ranks = results.rank_metrics
    by_cell = dict(tuple(ranks.groupby("cell_id"))) if len(ranks) else {}
    for cell in results.cells.itertuples():
        if cell.status == "ok":
            yield cell, by_cell.get(cell.cell_id, ranks.iloc[0:0])


def startup_table(results: Results) -> pd.DataFrame:
    """One row per ok cell with at least one start-up figure (see the module's doc)."""
    rows = []
    for cell, mine in ok_cells_with_ranks(results):
        row = {"label": cell.label, "cell_id": cell.cell_id, "model": getattr(cell, "model", "")}
        for column, metric in _METRICS.items():
            row[column] = rank_median(mine, metric)
        if np.isnan(row["first_iteration_s"]):
            row["first_iteration_s"] = _first_iteration(results, cell.cell_id, cell.mode)
        row["steady_step_s"] = float(getattr(cell, "median_s", float("nan")))
        figures = [row[c] for c in _METRICS if c != "first_iteration_s"]
        if all(np.isnan(figures)) and np.isnan(row["first_iteration_s"]):
            continue
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)
