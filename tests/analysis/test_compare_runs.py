"""compare, the speedup tables and the report judge runs, not iterations (issue 40, Note
[Runs are the unit of evidence] in tables/verdict.py), on synthetic files whose difference
is known: a repeated cell is one row, its repetitions its runs; a known delay in one phase
is a regression carried by that phase; one run per side is inconclusive; an untrusted side
too. The files are this module's own (make_results.py), whatever file the suite reads."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import scalebench_analysis as sa

import make_results
import results_edits
from conftest import run_cli

DELAY_S = 0.0005  # +0.5 ms of the inference series' ~4 ms forward (about +9 % of the batch)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(base, new, the inference series' id and its repetition cells): new adds DELAY_S to
    the forward phase of every repetition of the repeated inference cell, nothing else."""
    work = tmp_path_factory.mktemp("runs")
    base = make_results.write_results(work / "base.h5", repetitions=True)
    series_id = results_edits.repeated_series_ids()[1]
    loaded = sa.load(base)
    (cells,) = [r.cells for r in loaded.series.itertuples() if r.series_id == series_id]
    new = results_edits.copy_with_phase_delay(base, work / "new.h5", cells, "forward", DELAY_S)
    return base, new, series_id, cells


def _rows(done_path) -> dict:
    return json.loads(done_path.read_text())["sections"]


def test_a_phase_delay_in_a_repeated_cell_is_a_regression_carried_by_that_phase(
    files, tmp_path, monkeypatch
):
    base, new, series_id, cells = files
    out = tmp_path / "gate.json"
    done = run_cli("compare", base, new, "--format", "json", "-o", str(out), check_rc=1)
    assert done.stderr.startswith("REGRESSION: 1 regression")
    sections = _rows(out)
    rows = sections["regressions"]
    assert not [r for r in rows if " rep " in r["label"]], "one row per compared cell"
    (row,) = [r for r in rows if r["new_cell_id"] == series_id]
    assert row["verdict"] == "regression" and row["carried_by"] == "forward"
    assert row["n_base"] == row["n_new"] == len(cells)
    assert row["p_value"] < 0.05 and row["ci_low"] > 1.0
    assert row["phases"].startswith("forward +0.500 ms [")
    flagged = [r for r in rows if r["verdict"] in ("regression", "improvement", "broke")]
    assert [r["new_cell_id"] for r in flagged] == [series_id]
    phases = [p for p in sections["phases"] if p["new_cell_id"] == series_id]
    assert {p["phase"] for p in phases} == {"load", "h2d", "forward", "d2h"}
    (forward,) = [p for p in phases if p["phase"] == "forward"]
    assert forward["changed"] and forward["carries"]
    assert forward["delta_ms"] == pytest.approx(DELAY_S * 1e3, rel=1e-6)
    assert forward["ci_low_ms"] < DELAY_S * 1e3 < forward["ci_high_ms"]
    assert not [p for p in phases if p["phase"] != "forward" and p["changed"]]
    monkeypatch.setenv("COLUMNS", "400")  # the verdict line unwrapped
    console = run_cli("compare", base, new, check_rc=1).stdout
    (line,) = [x for x in console.splitlines() if x.strip().startswith("* regression:")]
    assert "carried by forward +0.500 ms [" in line and f"over {len(cells)} + " in line
    csv = run_cli("compare", base, new, "--format", "csv", "--table", "phases", check_rc=1)
    assert csv.stdout.splitlines()[0].startswith("label,phase,changed,carries,")
    markdown = run_cli("compare", base, new, "--format", "markdown", check_rc=1).stdout
    assert "## Phases that changed" in markdown and "forward +0.500 ms [" in markdown


def test_single_runs_are_inconclusive_never_an_improvement(files, tmp_path):
    """Every cell run once on each side: however large the difference (here 20 % faster),
    no verdict, the reason and the remedy instead; the gate passes."""
    base, _, _, _ = files
    loaded = sa.load(base)
    single = loaded.cells[(loaded.cells.status == "ok") & (loaded.cells.repetitions == 1)]
    victim = single.cell_id.iloc[0]
    fast = results_edits.copy_with_slowdown(base, tmp_path / "fast.h5", victim, 0.8)
    out = tmp_path / "gate.json"
    run_cli("compare", base, fast, "--format", "json", "-o", str(out), check_rc=0)
    (row,) = [r for r in _rows(out)["regressions"] if r["new_cell_id"] == victim]
    assert row["verdict"] == "inconclusive"
    assert row["ratio"] == pytest.approx(0.8, rel=1e-9)
    assert row["reason"] == "one run per side, run-to-run variation unknown"
    assert "repetitions: 3" in row["remedy"] and row["p_value"] is None
    console = run_cli("compare", base, fast, check_rc=0).stdout
    assert "inconclusive: " in console and "one run per side" in console


def test_a_file_against_itself(files, tmp_path):
    base, _, series_id, _ = files
    out = tmp_path / "self.json"
    run_cli("compare", base, base, "--format", "json", "-o", str(out), check_rc=0)
    rows = _rows(out)["regressions"]
    (row,) = [r for r in rows if r["new_cell_id"] == series_id]
    # No difference, and its interval (a point) inside the threshold: equivalent.
    assert row["verdict"] == "within threshold" and row["p_value"] == 1.0
    assert row["ratio"] == pytest.approx(1.0) and row["phases"] == ""
    assert {r["verdict"] for r in rows if r["n_base"] == 1} <= {"inconclusive"}


def test_noisy_runs_are_weighed_against_the_change(files, tmp_path):
    """--max-cv 0.1 % makes every run noisy: the +9 % change is weighed against the runs'
    own p20 intervals (Note [Noise weighed against the change]), decided when it clears
    them, else inconclusive with the reason and a remedy; the test is shown either way."""
    base, new, series_id, _ = files
    out = tmp_path / "gate.json"
    options = ("--max-cv", "0.1%", "--format", "json", "-o", str(out))
    run_cli("compare", base, new, *options, check_rc=None)
    (row,) = [r for r in _rows(out)["regressions"] if r["new_cell_id"] == series_id]
    assert "base untrusted (3 of 3 runs): cv " in row["reason"] and "(--max-cv)" in row["reason"]
    assert row["p_value"] < 0.05, "the test is still shown"
    if row["verdict"] == "inconclusive":
        assert "does not clear those runs' own p20 interval" in row["reason"]
        assert "`repetitions: " in row["remedy"] or "`iterations: " in row["remedy"]
    else:
        assert row["verdict"] == "regression" and "weighed" in row["reason"]


def test_a_program_cells_own_phase_names(files, tmp_path):
    base, new, series_id, cells = files
    names = {"forward": "model_fwd", "load": "fetch_batch"}
    renamed = []
    for path in (base, new):
        copy = tmp_path / ("renamed-" + path.rsplit("/", 1)[-1])
        copy.write_bytes(open(path, "rb").read())
        results_edits.rename_phases(copy, cells, names)
        renamed.append(str(copy))
    table, phases = sa.compare_tables(sa.load(renamed[0]), sa.load(renamed[1]), sa.GateOptions())
    (row,) = table[table.new_cell_id == series_id].to_dict("records")
    assert row["verdict"] == "regression" and row["carried_by"] == "model_fwd"
    assert {"model_fwd", "fetch_batch"} <= set(phases[phases.new_cell_id == series_id].phase)


def test_speedup_tables_judge_the_same_way(files, tmp_path):
    base, new, series_id, _ = files
    analysis = sa.analyze(new, sa.AnalysisOptions(baseline_file=base))
    speedup = analysis.sections["speedup_vs_file"]
    (row,) = speedup[speedup.cell_id == series_id].to_dict("records")
    gate = analysis.sections["regressions"]
    (gate_row,) = gate[gate.new_cell_id == series_id].to_dict("records")
    assert row["verdict"] == gate_row["verdict"] == "regression"
    assert row["time_ratio"] == gate_row["ratio"] and row["p_value"] == gate_row["p_value"]
    assert row["carried_by"] == "forward" and row["speedup"] < 1.0
    assert not speedup.label.str.contains(" rep ").any()
    report = tmp_path / "report.html"
    run_cli("report", new, "--baseline-file", base, "-o", str(report), check_rc=0)
    html = report.read_text()
    assert "Phases that changed" in html and "forward +0.500 ms [" in html


def test_verdict_lines_share_one_line_per_reason():
    from scalebench_analysis.tables import pairs

    rows = [
        {"label": f"cell{k}", "verdict": "inconclusive", "reason": "r", "remedy": "m"}
        for k in range(4)
    ]
    rows.append({"label": "odd", "verdict": "inconclusive", "reason": "s", "remedy": "n"})
    lines = pairs.verdict_notes(pd.DataFrame(rows))
    assert lines == [
        "inconclusive: 4 cells (cell0, cell1, cell2, ...): r; remedy: m",
        "inconclusive: odd: s; remedy: n",
        "resolution: 5 cells (cell0, cell1, cell2, ...): unknown (one run on a side: no "
        "spread between runs)",
    ]
