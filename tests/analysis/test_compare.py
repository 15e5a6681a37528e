"""The regression gate (compare) and speedups against a baseline."""

import json

import numpy as np
import pytest

import scalebench_analysis as sa

import results_edits
from conftest import run_cli


def _victim(raw):
    """An ok cell run once (repeated cells: test_compare_runs.py)."""
    single = [c for c in raw.ok_cells() if int(c.spec.get("repetitions", 1)) <= 1]
    if not single:
        pytest.skip("every ok cell is repeated: test_compare_runs.py covers repeated cells")
    return single[0]


def test_file_against_itself_has_no_regression(results_file, tmp_path):
    out = tmp_path / "self.json"
    done = run_cli(
        "compare", results_file, results_file, "--format", "json", "-o", str(out), check_rc=0
    )
    assert done.stderr.startswith("OK")
    rows = json.loads(out.read_text())["sections"]["regressions"]
    assert not [r for r in rows if r["verdict"] in ("regression", "broke", "improvement")]
    for r in rows:
        if r["ratio"] is None:
            continue
        assert r["ratio"] == pytest.approx(1.0)
        if r["n_base"] >= 2 and r["n_new"] >= 2:  # the runs of a repeated cell
            assert r["p_value"] == 1.0
        else:  # one run per side (issue 40): no test, no verdict
            assert r["verdict"] == "inconclusive" and r["p_value"] is None


def test_slowdown_of_a_single_run_is_inconclusive(results_file, raw, tmp_path):
    """10 % slower in every iteration, but one run per side: the iterations of a run share
    the machine's state, so they cannot tell the code from the machine (issue 40). The row
    gives the ratio of the medians, no verdict, the reason and the remedy; the gate passes."""
    victim = _victim(raw)
    slow = results_edits.copy_with_slowdown(
        results_file, tmp_path / "slow.h5", victim.cell_id, 1.10
    )
    out = tmp_path / "slow.json"
    done = run_cli(
        "compare",
        results_file,
        slow,
        "--format",
        "json",
        "-o",
        str(out),
        check_rc=0,
        subprocess_run=True,
    )
    assert done.stderr.startswith("OK: 0 regression")
    rows = json.loads(out.read_text())["sections"]["regressions"]
    (row,) = [r for r in rows if r["new_cell_id"] == victim.cell_id]
    base, new = victim.samples(), victim.samples() * 1.10
    assert row["ratio"] == pytest.approx(np.median(new) / np.median(base), rel=1e-9)
    assert row["verdict"] == "inconclusive" and row["p_value"] is None
    # The reason is the single run first; a real run made on a busy machine may be untrusted
    # too (its cv above max_cv), which the reason then adds after it (issue 43: the test must
    # not fail because the machine that made the file was busy).
    assert row["reason"].split("; ")[0] == "one run per side, run-to-run variation unknown"
    assert "repetitions: 3" in row["remedy"]


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
        if min(row.n_base, row.n_new) == 1:  # one run per side: no verdict (issue 40)
            assert row.verdict == "inconclusive"


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
