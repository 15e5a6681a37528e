"""`analyze` of a sweep of 10,000 cells (issue 53): the console is the summary, the shape of
the sweep and a table per experiment, not a row per cell (Note [Console at scale] in
output/sweep_console.py); experiments in natural order, in the console and in CSV.

The file is make_sweep.py's summary-only sweep (100 experiments x batch sizes 1..100): the
cell attributes and summaries the console is made of, written as HDF5 copies of one cell
per experiment (a few seconds; reading it is most of this test's time)."""

from __future__ import annotations

import pytest

import make_sweep

from conftest import run_cli

EXPERIMENTS, BATCHES = 100, 100


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("sweep") / "sweep.h5"
    return make_sweep.write_sweep(path, EXPERIMENTS, BATCHES, complete=False)


@pytest.fixture(scope="module")
def console(sweep_file) -> list[str]:
    # The default console width (conftest's _console_width is per test, set after a module's
    # fixture): narrower, the experiments table's constant columns move to a note under it.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", "120")
        return run_cli("analyze", sweep_file, check_rc=0).stdout.splitlines()


def test_the_summary_comes_first_and_counts_every_cell(console):
    summary = console.index("== Summary ==")
    assert summary < console.index("== Sweep: 10,000 cells ==")
    assert (
        console[summary + 1].strip() == "10000 cells: 10000 ok (10000 trusted), 0 failed, 0 skipped"
    )
    fastest = [line.strip() for line in console if " infer: fastest " in line]
    # The first ten experiments in natural order (e2 before e10), then how many more.
    assert [line.split()[0] for line in fastest] == [f"e{k}" for k in range(1, 11)]
    assert "... and 90 more experiments: the Experiments table below" in console[summary + 12]


def test_the_console_is_bounded_and_has_no_row_per_cell(console):
    assert len(console) < 100, "\n".join(console)
    assert not any("/infer/b" in line and "fastest" not in line for line in console)
    assert "== Cells ==" not in console


def test_the_sweep_names_the_axes_and_what_they_explain(console):
    start = console.index("== Sweep: 10,000 cells ==")
    axes = {line.split()[0]: line for line in console[start + 2 : start + 4]}
    assert set(axes) == {"batch_size", "experiment"}
    assert "100 values (1 .. 100)" in axes["batch_size"]
    assert "100 values (e1 .. e100)" in axes["experiment"]


def test_the_experiments_table_is_cut_to_a_screen_in_natural_order(console):
    start = console.index("== Experiments: the best cell of each (100; natural order) ==")
    rows = console[start + 2 : start + 32]
    assert [row.split()[0] for row in rows] == [f"e{k}" for k in range(1, 31)]
    assert console[start + 32].strip().startswith("... and 70 more experiments")


def test_a_small_sweep_keeps_a_row_per_cell_and_csv_natural_order(tmp_path):
    """Below a screen of cells the console is as before (summary last); CSV, at any size,
    lists every cell, experiments in natural order."""
    path = make_sweep.write_sweep(tmp_path / "small.h5", 12, 2, complete=False)
    console = run_cli("analyze", path, check_rc=0).stdout.splitlines()
    assert "== Cells ==" in console and "== Sweep: 24 cells ==" not in console
    assert console.index("== Cells ==") < console.index("== Summary ==")
    lines = run_cli("analyze", path, "--format", "csv", check_rc=0).stdout.splitlines()
    experiments = [line.split(",")[0].split("/")[1] for line in lines[1:]]
    assert len(experiments) == 24
    assert list(dict.fromkeys(experiments)) == [f"e{k}" for k in range(1, 13)]
