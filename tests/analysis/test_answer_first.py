"""The answer first (tables/summary.py): analyze ends with a short summary, the JSON and
Markdown outputs carry it, the HTML report opens with it; its facts are the analysis' own
(fastest ok cell per experiment and mode, failures, untrusted cells with a remedy)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from scalebench_analysis.tables.analysis import AnalysisOptions, analyze
from scalebench_analysis.tables.summary import summary_lines

from conftest import run_cli


def test_the_summary_names_the_fastest_cell_of_every_experiment(results_file):
    analysis = analyze(results_file, AnalysisOptions())
    lines = summary_lines(analysis)
    cells = analysis.sections["cells"]
    ok = cells[cells.status == "ok"]
    assert lines[0].startswith(f"{len(cells)} cells: {len(ok)} ok")
    repeated = analysis.sections.get("repetitions")
    series = {} if repeated is None else dict(zip(repeated.series_id, repeated.itertuples()))
    for (experiment, mode), group in ok.groupby(["experiment", "mode"]):
        line = next(x for x in lines if x.startswith(f"{experiment} {mode}: fastest "))
        # a repeated cell is one compared cell (issue 54 row 4): its label without "rep k/N",
        # its throughput the Repetitions table's median, trusted when every repetition is
        units = {}
        for row in group.itertuples():
            one = series.get(row.series_id) if isinstance(row.series_id, str) else None
            key = row.series_id if one is not None else row.cell_id
            label = one.label if one is not None else row.label
            throughput = one.throughput_samples_per_s if one is not None else None
            unit = units.setdefault(key, [label, throughput, True])
            unit[1] = row.throughput_samples_per_s if throughput is None else throughput
            unit[2] = unit[2] and row.trusted == True  # noqa: E712
        trusted = [u for u in units.values() if u[2]]
        pool = trusted if trusted else list(units.values())
        best = max(pool, key=lambda u: u[1])
        assert f"fastest {best[0]}," in line, (line, best[0])
        assert " rep " not in line
    failed = cells[~cells.status.isin(["ok", "skipped"])]
    for status in set(failed.status):
        assert any(x.startswith(f"{(failed.status == status).sum()} {status}: ") for x in lines)
    if (ok.trusted != True).any():  # noqa: E712
        assert any("untrusted cells: " in x for x in lines), lines
    # One name for the command (issue 38: the console said scalebench-analysis report here and
    # scalebench report elsewhere).
    assert lines[-1] == (
        f"plots and every table: scalebench report {analysis.results.path} -o report.html"
    )
    assert not any("scalebench-analysis" in line for line in lines), lines


def test_analyze_ends_with_the_summary_and_every_format_carries_it(results_file, tmp_path):
    console = run_cli("analyze", results_file, check_rc=0).stdout.rstrip("\n").splitlines()
    start = console.index("== Summary ==")
    assert all(line.startswith("  ") for line in console[start + 1 :]), "nothing after it"
    assert all(len(line) <= 120 for line in console), "COLUMNS=120 (conftest): long lines wrap"
    # The summary wraps at 100 (output/fit.py SUMMARY_WIDTH) even on a wider console: `run`
    # prints it after its own sentences, which wrap at 100 (orchestrator/console_text.h).
    assert all(len(line) <= 100 for line in console[start:]), console[start:]
    lines = []  # the summary's lines, those wrapped (continued with 4 spaces) joined
    for line in console[start + 1 :]:
        if line.startswith("    "):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line.strip())
    document = json.loads(run_cli("analyze", results_file, "--format", "json").stdout)
    assert document["summary"] == lines
    markdown = run_cli("analyze", results_file, "--format", "markdown").stdout
    assert markdown.index("## Summary") < markdown.index("\n| "), "before the first table"
    report = tmp_path / "report.html"
    run_cli("report", results_file, "-o", str(report), check_rc=0)
    html = report.read_text()
    assert html.index("<h2>Summary</h2>") < html.index("<img"), "the report opens with it"
    # The report is the plots: its summary does not tell the reader to make them.
    shown = html.split('<ul class="summary">')[1].split("</ul>")[0]
    assert shown.count("<li>") == len(lines) - 1, shown
    assert "plots and every table" not in html


def test_summary_alone_is_the_last_block_of_analyze(results_file):
    """`analyze --summary` (what `scalebench run` ends with) prints the same block and
    nothing else."""
    full = run_cli("analyze", results_file, check_rc=0).stdout.rstrip("\n").splitlines()
    alone = run_cli("analyze", results_file, "--summary", check_rc=0).stdout.rstrip("\n")
    assert alone.splitlines() == full[full.index("== Summary ==") :]


@pytest.mark.skipif(
    not os.environ.get("SCALEBENCH_RUN_OUTPUT"), reason="needs a real run's console (run_all.sh)"
)
def test_the_run_ends_with_the_summary(results_file):
    """`scalebench run` (SCALEBENCH_RUN_SUMMARY=1 overrides the suite's 0): its table of
    cells, then the summary `analyze --summary` prints for its file, last."""
    printed = Path(os.environ["SCALEBENCH_RUN_OUTPUT"]).read_text().rstrip("\n").splitlines()
    summary = run_cli("analyze", results_file, "--summary", check_rc=0).stdout.rstrip("\n")
    assert "== Summary ==" in printed
    assert printed[printed.index("== Summary ==") :] == summary.splitlines()
    assert any(line.startswith("#  branch") for line in printed), "the table of cells first"
