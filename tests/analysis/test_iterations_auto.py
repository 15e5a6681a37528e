"""`iterations: auto` cells (docs/measurement.md, Note [Iterations auto]): judged by the
interval of their median instead of their cv, and an unreached interval names its remedy.

The file is a real run when CI provides one (SCALEBENCH_RESULTS_FILE: the quickstart, whose
cells are auto), else the synthetic file with stop reasons written into its summaries."""

import os

import h5py
import numpy as np
import pytest

import scalebench_analysis as sa
from scalebench_analysis.tables import quality
from scalebench_analysis.tables.summary import summary_lines

import make_results


def _ok_train_cells(path):
    cells = sa.load(path).cells
    return cells[(cells.status == "ok") & (cells["mode"] == "train")]


def _set_stop(path, cell_id, reason, cv=None):
    with h5py.File(path, "r+") as f:
        summary = f["cells"][cell_id]["summary"]
        summary.attrs["stop_reason"] = make_results._fixed_string(reason)
        if cv is not None:
            summary.attrs["cv"] = np.float64(cv)
            summary.attrs["valid_cv"] = np.int8(cv <= summary.attrs["max_valid_cv"])


@pytest.fixture
def synthetic(tmp_path):
    return make_results.write_results(tmp_path / "auto.h5")


def test_a_precise_auto_cell_is_trusted_however_noisy(synthetic):
    cell_id = _ok_train_cells(synthetic).cell_id.iloc[0]
    _set_stop(synthetic, cell_id, "precise", cv=0.35)
    trust = quality.trust_table(sa.load(synthetic)).set_index("cell_id")
    assert "cv" not in trust.loc[cell_id, "untrusted_because"]


def test_a_fixed_cell_keeps_the_cv_rule(synthetic):
    cell_id = _ok_train_cells(synthetic).cell_id.iloc[0]
    _set_stop(synthetic, cell_id, "fixed", cv=0.35)
    trust = quality.trust_table(sa.load(synthetic)).set_index("cell_id")
    assert not trust.loc[cell_id, "trusted"]
    assert "cv 35.0%" in trust.loc[cell_id, "untrusted_because"]


@pytest.mark.parametrize(
    ("reason", "remedy"),
    [("budget", "raise max_seconds"), ("cap", "raise max_iterations")],
)
def test_an_auto_cell_short_of_its_interval_says_what_fixes_it(synthetic, reason, remedy):
    cell_id = _ok_train_cells(synthetic).cell_id.iloc[0]
    _set_stop(synthetic, cell_id, reason)
    results = sa.load(synthetic)
    trust = quality.trust_table(results).set_index("cell_id")
    because = trust.loc[cell_id, "untrusted_because"]
    assert not trust.loc[cell_id, "trusted"]
    assert "short of ci_width +-2.0%" in because and remedy in because, because
    cell = results.cells.set_index("cell_id").loc[cell_id]
    assert f"+-{quality.interval_rel(cell):.1%}" in because
    text = "\n".join(summary_lines(sa.analyze(results)))
    assert "interval not reached: raise max_seconds" in text


@pytest.mark.skipif(
    not os.environ.get("SCALEBENCH_RESULTS_FILE"), reason="needs a real run (tests/run_all.sh)"
)
def test_the_quickstart_cells_chose_their_iterations():
    """The real quickstart run: every ok cell stopped for a stated reason, its interval is
    stored, and the cells that stopped `precise` reached their ci_width."""
    path = os.environ["SCALEBENCH_RESULTS_FILE"]
    cells = sa.load(path).cells
    ok = cells[cells.status == "ok"]
    assert len(ok)
    for _, cell in ok.iterrows():
        assert cell.stop_reason in quality.AUTO_STOP_REASONS, cell.cell_id
        assert cell.warmup_reason in ("steady", "cap", "time"), cell.cell_id
        if cell.stop_reason == "precise" and cell["mode"] == "train":
            # The rule judged the slowest rank's step per iteration: the samples of a
            # training cell's summary (inference summaries pool every rank's batches).
            assert quality.interval_rel(cell) <= cell.spec["ci_width"] + 1e-12, cell.cell_id
