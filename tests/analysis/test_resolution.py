"""What a comparison could resolve (tables/resolution.py, issue 52 deliver 3) against a
synthetic spread: the repeated inference cell's 3 repetitions slowed in the new file by
known factors, so that each run's judged figure (its p20) moves by exactly that factor.
compare's resolution line must be the half-width of Welch's interval on the logs of those
figures (scipy's), the runs a side it names must find a change of the threshold in about
4 trials of 5 (checked by simulation, not by the formula), and every inconclusive pair
must have its line. The files are this module's own (make_results.py)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats

import scalebench_analysis as sa
from scalebench_analysis.tables import quality, resolution

import make_results
import results_edits
from conftest import run_cli

#: Per repetition of the new file: the factor on every timing of that repetition.
FACTORS = (1.04, 0.97, 1.08)
THRESHOLD = 0.05


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    work = tmp_path_factory.mktemp("resolution")
    base = make_results.write_results(work / "base.h5", repetitions=True)
    series_id = results_edits.repeated_series_ids()[1]
    loaded = sa.load(base)
    (cells,) = [r.cells for r in loaded.series.itertuples() if r.series_id == series_id]
    new = base
    for k, (cell_id, factor) in enumerate(zip(cells, FACTORS)):
        new = results_edits.copy_with_slowdown(new, work / f"new{k}.h5", cell_id, factor)
    return base, new, series_id, cells


def _p20s(path: str, cells) -> np.ndarray:
    loaded = sa.load(path)
    return np.array(
        [np.percentile(quality.iteration_samples(loaded, c, "infer"), 20) for c in cells]
    )


def _power(n: int, spread: float, reps: int = 4000) -> float:
    """Share of simulated trials, n normal log figures a side with sd `spread` and a change
    of the threshold, that Welch's test finds at alpha 0.05 (the judged figures' test)."""
    rng = np.random.default_rng(n)
    base = rng.normal(0.0, spread, (reps, n))
    new = rng.normal(math.log1p(THRESHOLD), spread, (reps, n))
    p = stats.ttest_ind(new, base, axis=1, equal_var=False).pvalue
    return float(np.mean(p < 0.05))


def test_the_resolution_line_matches_the_spread_of_the_runs(files, monkeypatch):
    base, new, series_id, cells = files
    base_figures, new_figures = _p20s(base, cells), _p20s(new, cells)
    assert new_figures / base_figures == pytest.approx(FACTORS, rel=1e-9)
    welch = stats.ttest_ind(np.log(new_figures), np.log(base_figures), equal_var=False)
    low, high = np.exp(welch.confidence_interval(0.95))
    expected = math.sqrt(high / low) - 1.0
    assert welch.pvalue > 0.05  # the spread hides the change: undecided

    table, _ = sa.compare_tables(sa.load(base), sa.load(new), sa.GateOptions(threshold=THRESHOLD))
    (row,) = table[table.new_cell_id == series_id].to_dict("records")
    assert row["verdict"] == "not significant"
    assert row["resolution"] == pytest.approx(expected, rel=1e-9)
    spread = math.sqrt((np.log(base_figures).var(ddof=1) + np.log(new_figures).var(ddof=1)) / 2)
    needed = int(row["runs_needed"])
    assert _power(needed, spread) >= 0.75 and _power(max(needed - 2, 2), spread) < 0.8
    assert f"`repetitions: {needed}`" in row["remedy"]

    monkeypatch.setenv("COLUMNS", "400")  # the lines unwrapped
    console = run_cli("compare", base, new, "--threshold", "5%", check_rc=0).stdout
    (line,) = [x for x in console.splitlines() if f"resolution: {row['label']}:" in x]
    shown = float(re.search(r"beyond \+-([0-9.]+)%", line).group(1)) / 100
    assert shown == pytest.approx(expected, abs=0.0005)
    assert f"needs {needed} runs a side" in line


def test_every_inconclusive_pair_has_a_resolution_line(files, monkeypatch):
    """--max-cv 0.1 % makes every run noisy: pairs the change does not clear are
    inconclusive; each is named by a resolution line (one-run pairs in one shared line)."""
    base, new, _, _ = files
    monkeypatch.setenv("COLUMNS", "400")
    console = run_cli("compare", base, new, "--max-cv", "0.1%", check_rc=None).stdout
    lines = [x for x in console.splitlines() if "resolution: " in x]
    table, _ = sa.compare_tables(
        sa.load(base),
        sa.load(new),
        sa.GateOptions(),
        quality_options=quality.QualityOptions(max_cv=0.001),
    )
    undecided = table[table.verdict == "inconclusive"]
    assert len(undecided) > 1
    one_run = undecided[undecided.n_base.fillna(1).astype(int).eq(1)]
    for label in undecided.label:
        shared = label in set(one_run.label) and any("unknown" in x for x in lines)
        assert shared or any(f"resolution: {label}:" in x for x in lines), label


def test_runs_needed_and_resolution_edges():
    assert resolution.runs_needed(math.nan, 0.05, 0.05, False) == 0
    assert resolution.runs_needed(0.0, 0.05, 0.05, False) == 2
    assert resolution.runs_needed(1.0, 0.01, 0.05, False) == resolution.MAX_RUNS + 1
    # pairs: sd of the differences; Welch: the pooled sd, twice the variance in se
    assert resolution.runs_needed(0.05, 0.05, 0.05, True) < resolution.runs_needed(
        0.05, 0.05, 0.05, False
    )
    assert resolution.resolution(1.0, 1.21) == pytest.approx(0.1)
    assert math.isnan(resolution.resolution(math.nan, 1.0))
