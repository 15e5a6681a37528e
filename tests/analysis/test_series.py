"""Repetitions (Note [Repetitions], results layout 1.5): the stored series intervals against
an independent reference computation, the Repetitions table, and `compare` judging repeated
cells as series.

The file under test: SCALEBENCH_REPETITIONS_FILE when set (tests/run_all.sh sets it to a real
`scalebench run` of docs/examples/repetitions.yaml, so the C++ figures are checked), else the
synthetic file of make_results.py with its repeated cells (add_repetitions)."""

from __future__ import annotations

import json
import os
import shutil

import h5py
import numpy as np
import pytest

import scalebench_analysis as sa
from scalebench_analysis.read import series

import make_results
import rawdata
import reference_figures
import results_edits
from conftest import run_cli


@pytest.fixture(scope="module")
def repeated_file(tmp_path_factory) -> str:
    given = os.environ.get("SCALEBENCH_REPETITIONS_FILE")
    if given:
        return given
    path = make_results.write_results(tmp_path_factory.mktemp("series") / "repeated.h5")
    results_edits.add_repetitions(path)
    return path


def _stored(path):
    """series id -> (attrs, [(status, median_s, throughput) of each listed cell])."""
    out = {}
    with h5py.File(path, "r") as f:
        for series_id, group in f["series"].items():
            attrs = {k: group.attrs[k] for k in group.attrs}
            cells = []
            for cell_id in json.loads(attrs["cells"]):
                cell = f["cells"][cell_id]
                status = cell.attrs["status"]
                status = status.decode() if isinstance(status, bytes) else status
                summary = cell["summary"].attrs if "summary" in cell else {}
                cells.append(
                    (
                        status,
                        float(summary.get("median_s", np.nan)),
                        float(summary.get("throughput_samples_per_s", np.nan)),
                    )
                )
            out[series_id] = (attrs, cells)
    return out


def test_stored_intervals_equal_the_reference_computation(repeated_file):
    stored = _stored(repeated_file)
    assert stored, "the file has no /series"
    for series_id, (attrs, cells) in stored.items():
        ok = [(m, t) for status, m, t in cells if status == "ok" and np.isfinite(m)]
        medians = np.array([m for m, _ in ok])
        rates = np.array([t for _, t in ok])
        seed = make_results.fnv1a64(series_id)
        bootstrap_seed = attrs["bootstrap_seed"]
        bootstrap_seed = (
            bootstrap_seed.decode() if isinstance(bootstrap_seed, bytes) else bootstrap_seed
        )
        assert int(bootstrap_seed) == seed
        low, high = rawdata.bootstrap_median_interval(medians, seed)
        t_low, t_high = rawdata.bootstrap_median_interval(rates, seed)
        assert attrs["completed"] == len(ok)
        assert attrs["median_s"] == pytest.approx(np.median(medians), rel=1e-12)
        assert attrs["median_s_ci_low"] == pytest.approx(low, rel=1e-12)
        assert attrs["median_s_ci_high"] == pytest.approx(high, rel=1e-12)
        assert attrs["throughput_ci_low"] == pytest.approx(t_low, rel=1e-12)
        assert attrs["throughput_ci_high"] == pytest.approx(t_high, rel=1e-12)
        spread = (medians.max() - medians.min()) / np.median(medians)
        assert attrs["spread_rel"] == pytest.approx(spread, rel=1e-12)
        assert bool(attrs["disagree"]) == (spread > 0.10)


def test_the_reference_bootstrap_against_an_exact_enumeration():
    """For 4 values the 4^4 resamples can be enumerated: the Monte Carlo bounds must be
    the exact percentiles or their neighbouring support points."""
    values = np.array([1.0, 2.0, 4.0, 8.0])
    codes = np.indices((4, 4, 4, 4)).reshape(4, -1).T
    exact = np.median(values[codes], axis=1)
    support = np.unique(exact)
    low, high = rawdata.bootstrap_median_interval(values, seed=5)
    for found, q in ((low, 2.5), (high, 97.5)):
        target = np.percentile(exact, q)
        k = np.searchsorted(support, target)
        neighbours = support[max(0, k - 1) : k + 2]
        assert neighbours.min() - 1e-12 <= found <= neighbours.max() + 1e-12
    assert rawdata.bootstrap_median_interval([3.0, 3.0, 3.0], seed=1) == (3.0, 3.0)
    assert all(np.isnan(rawdata.bootstrap_median_interval([1.0], seed=1)))


def test_the_two_reference_implementations_agree():
    """make_results' draw-by-draw splitmix64 and rawdata's vectorised stream."""
    values = [0.011, 0.012, 0.0105, 0.013, 0.0118]
    assert reference_figures.series_interval(values, seed=123, resamples=500) == pytest.approx(
        rawdata.bootstrap_median_interval(values, seed=123, resamples=500), rel=1e-15
    )


def test_loader_and_the_repetitions_table(repeated_file):
    results = sa.load(repeated_file)
    assert len(results.series) == len(_stored(repeated_file))
    mapping = series.series_of_cells(results.series)
    repeated = results.cells[results.cells.repetitions > 1]
    assert set(repeated.cell_id) == set(mapping)
    for row in repeated.itertuples():
        assert f" rep {row.repetition + 1}/{row.repetitions}" in row.label
    text = run_cli("analyze", repeated_file, check_rc=0).stdout
    assert "Repetitions: median over the ok repetitions" in text
    if not os.environ.get("SCALEBENCH_REPETITIONS_FILE"):  # the synthetic plant
        assert "DISAGREE" in text
        disagree = results.series.set_index("series_id").disagree
        assert disagree.sum() == 1


def _scaled_copy(src, dst, factors: dict) -> str:
    """`src` with every timing and summary time of the cells in `factors` scaled, and the
    /series groups recomputed as the C++ would (reference_figures.series_interval)."""
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        for cell_id, factor in factors.items():
            group = f["cells"][cell_id]
            group["timings"][...] = group["timings"][()] * factor
            make_results.write_summary(group)
        for series_id, group in f["series"].items():
            ids = json.loads(group.attrs["cells"])
            medians = [float(f["cells"][c]["summary"].attrs["median_s"]) for c in ids]
            rates = [float(f["cells"][c]["summary"].attrs["throughput_samples_per_s"]) for c in ids]
            seed = make_results.fnv1a64(series_id)
            low, high = reference_figures.series_interval(medians, seed)
            t_low, t_high = reference_figures.series_interval(rates, seed)
            group.attrs["median_s"] = float(np.median(medians))
            group.attrs["median_s_ci_low"], group.attrs["median_s_ci_high"] = low, high
            group.attrs["throughput_samples_per_s"] = float(np.median(rates))
            group.attrs["throughput_ci_low"], group.attrs["throughput_ci_high"] = t_low, t_high
        make_results.fix_strings(f)
    return str(dst)


@pytest.fixture(scope="module")
def synthetic_repeated(tmp_path_factory):
    path = make_results.write_results(tmp_path_factory.mktemp("cmp") / "base.h5")
    results_edits.add_repetitions(path)
    return path


def _infer_series(path):
    results = sa.load(path)
    row = results.series[results.series.metric == "batch"].iloc[0]
    return row.series_id, row.cells


def test_compare_flags_a_slowdown_of_every_run(synthetic_repeated, tmp_path):
    series_id, cells = _infer_series(synthetic_repeated)
    new = _scaled_copy(synthetic_repeated, tmp_path / "slow.h5", {c: 1.5 for c in cells})
    done = run_cli("compare", synthetic_repeated, new, "--format", "json")
    assert done.returncode == 1  # the gate fails on the series
    rows = json.loads(done.stdout)["sections"]["regressions"]
    judged = [r for r in rows if r["base_cell_id"] == series_id]
    assert [r["verdict"] for r in judged] == ["regression"]  # one row: its runs pooled
    assert not [r for r in rows if r["base_cell_id"] in cells[1:]]


def test_compare_keeps_a_change_within_the_threshold(synthetic_repeated, tmp_path):
    series_id, cells = _infer_series(synthetic_repeated)
    new = _scaled_copy(synthetic_repeated, tmp_path / "same.h5", {c: 1.01 for c in cells})
    done = run_cli("compare", synthetic_repeated, new, "--format", "json", check_rc=0)
    rows = json.loads(done.stdout)["sections"]["regressions"]
    judged = [r for r in rows if r["base_cell_id"] == series_id]
    assert [r["verdict"] for r in judged] in (["within threshold"], ["not significant"])
    assert judged[0]["ratio"] == pytest.approx(1.01, rel=1e-9)


def test_the_report_has_the_repetitions_section(synthetic_repeated, tmp_path):
    out = tmp_path / "r.html"
    run_cli("report", synthetic_repeated, "-o", str(out), check_rc=0)
    assert "Repetitions: median over the ok repetitions" in out.read_text()
