"""The start-up table (analysis/scalebench_analysis/tables/startup.py): each figure is the
median over the cell's ranks of the stored rank metric, and the first iteration falls back
to the stored row 0 of `timings`, recomputed here with h5py alone (rawdata)."""

from __future__ import annotations

import numpy as np

import scalebench_analysis as sa
from scalebench_analysis.tables import startup

from conftest import run_cli


def test_each_figure_is_the_median_over_ranks_of_its_rank_metric(results_file, raw):
    table = startup.startup_table(sa.load(results_file)).set_index("cell_id")
    assert len(table), "the file's ok cells have start-up figures"
    for cell_id, row in table.iterrows():
        cell = raw.cells[cell_id]
        for column, metric in (
            ("model_init_s", "model_init_s"),
            ("compile_s", "program_compile_s"),
        ):
            values = cell.rank_metrics.get(metric, np.array([np.nan]))
            expected = float(np.nanmedian(values)) if not np.all(np.isnan(values)) else np.nan
            assert np.isclose(row[column], expected, equal_nan=True), (cell_id, column)
        ranks_first = cell.rank_metrics.get("first_iteration_s", np.array([np.nan]))
        if not np.all(np.isnan(ranks_first)):
            assert np.isclose(row.first_iteration_s, np.nanmedian(ranks_first))
        else:
            step = cell.phases.index("step" if cell.mode == "train" else "batch")
            assert np.isclose(row.first_iteration_s, np.nanmedian(cell.timings[:, 0, step]))


def test_analyze_prints_the_start_up_table(results_file):
    done = run_cli("analyze", results_file, "--details", check_rc=0)
    assert "== Start-up" in done.stdout
    brief = run_cli("analyze", results_file, check_rc=0).stdout
    assert "== Start-up" not in brief and "startup" in brief.split("Other tables: ")[1]
