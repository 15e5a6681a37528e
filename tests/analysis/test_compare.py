"""The regression gate (compare) and speedups against a baseline."""

import json

import numpy as np
import pytest
from scipy import stats

import scalebench_analysis as sa

import make_results
from conftest import run_cli


def _victim(raw):
    """The least noisy ok cell among those with at least 8 iteration samples: a 10% slowdown
    of it must be detected. (On a loaded 2-core machine sub-millisecond cells have CVs far
    above 10%, where no test with 8 samples can honestly call a 10% shift significant.)
    Repeated cells are judged by their series instead (test_repetitions.py)."""
    single = [c for c in raw.ok_cells() if int(c.spec.get("repetitions", 1)) <= 1]
    if not single:
        pytest.skip("every ok cell is repeated: test_repetitions.py covers the series gate")
    candidates = [c for c in single if c.samples().size >= 8] or single
    return min(candidates, key=lambda c: np.std(c.samples()) / np.mean(c.samples()))


def test_file_against_itself_has_no_regression(results_file, tmp_path):
    out = tmp_path / "self.json"
    done = run_cli(
        "compare", results_file, results_file, "--format", "json", "-o", str(out), check_rc=0
    )
    assert done.stderr.startswith("OK")
    rows = json.loads(out.read_text())["sections"]["regressions"]
    assert not [r for r in rows if r["verdict"] in ("regression", "broke", "improvement")]
    for r in rows:
        if r["ratio"] is not None:
            assert r["ratio"] == 1.0 and r["p_value"] == 1.0


def test_slowdown_of_one_cell_is_reported_and_fails_the_gate(results_file, raw, tmp_path):
    victim = _victim(raw)
    slow = make_results.copy_with_slowdown(results_file, tmp_path / "slow.h5", victim.cell_id, 1.10)
    out = tmp_path / "slow.json"
    done = run_cli(
        "compare",
        results_file,
        slow,
        "--threshold",
        "5%",
        "--format",
        "json",
        "-o",
        str(out),
        check_rc=1,
        subprocess_run=True,
    )
    assert done.stderr.startswith("REGRESSION: 1 regression")
    rows = json.loads(out.read_text())["sections"]["regressions"]
    flagged = [r for r in rows if r["verdict"] in ("regression", "broke", "improvement")]
    assert [r["new_cell_id"] for r in flagged] == [victim.cell_id]
    row = flagged[0]
    base, new = victim.samples(), victim.samples() * 1.10
    assert row["ratio"] == pytest.approx(np.median(new) / np.median(base), rel=1e-9)
    want_p = stats.mannwhitneyu(new, base, alternative="two-sided").pvalue
    assert row["p_value"] == pytest.approx(want_p, rel=1e-9)
    assert row["ci_low"] > 1.0 and row["ci_low"] <= row["ratio"] <= row["ci_high"]
    # Console output names exactly that cell as a regression.
    table = run_cli("compare", results_file, slow, check_rc=1).stdout
    assert sum(" regression " in line for line in table.splitlines()) == 1


def test_bootstrap_interval_is_seeded(results_file, raw, tmp_path):
    victim = _victim(raw)
    slow = make_results.copy_with_slowdown(results_file, tmp_path / "slow.h5", victim.cell_id, 1.10)
    options = sa.GateOptions()
    first = sa.regression_table(sa.load(results_file), sa.load(slow), options)
    second = sa.regression_table(sa.load(results_file), sa.load(slow), options)
    assert first.ci_low.equals(second.ci_low) and first.ci_high.equals(second.ci_high)


def test_threshold_above_the_slowdown_passes(results_file, raw, tmp_path):
    victim = _victim(raw)
    slow = make_results.copy_with_slowdown(results_file, tmp_path / "slow.h5", victim.cell_id, 1.10)
    done = run_cli("compare", results_file, slow, "--threshold", "20%", check_rc=0)
    assert "1 within threshold" in done.stdout


def test_speedup_against_baseline_branch(results_file, raw, synthetic):
    branches = {c.spec["branch"] for c in raw.ok_cells()}
    if len(branches) < 2:
        pytest.skip("the results file has a single branch")
    base_branch = sorted(branches)[-1] if not synthetic else "main"
    table = sa.analyze(results_file, sa.AnalysisOptions(baseline=("branch", base_branch))).sections[
        "speedup"
    ]
    by_key = {
        c.key("branch", "commit"): c for c in raw.ok_cells() if c.spec["branch"] == base_branch
    }
    expected = {}
    for cell in raw.ok_cells():
        base = by_key.get(cell.key("branch", "commit"))
        if cell.spec["branch"] != base_branch and base is not None:
            expected[cell.cell_id] = cell.throughput() / base.throughput()
    assert len(table) == len(expected) > 0
    for row in table.itertuples():
        assert row.speedup == pytest.approx(expected[row.cell_id], rel=1e-6)


def test_speedup_against_a_setting(results_file, raw, synthetic):
    if not synthetic:
        pytest.skip("needs the synthetic file's bf16 cells")
    table = sa.analyze(results_file, sa.AnalysisOptions(baseline=("precision", "fp32"))).sections[
        "speedup"
    ]
    assert len(table) == 2
    for row in table.itertuples():
        cell = raw.cells[row.cell_id]
        base = raw.cells[row.baseline_cell_id]
        assert base.spec["precision"] == "fp32" and cell.spec["precision"] == "bf16"
        assert row.speedup == pytest.approx(cell.throughput() / base.throughput(), rel=1e-6)


def test_unknown_baseline_branch_exits_2(results_file):
    done = run_cli("analyze", results_file, "--baseline-branch", "no-such-branch", check_rc=2)
    assert "no ok cell has branch=no-such-branch" in done.stderr
