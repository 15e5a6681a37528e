"""A comparison's answer is the last thing cut for width (issue 54, row 3; output/fit.py
Note [Console width]): at the default 120 columns and at 80, the regression gate and the
speedup tables keep the verdict, the change and its interval; the label is shortened and
the other columns leave first. On a table shaped like the issue's (program cells with long
labels, several changed phases) and on compare's console output of two synthetic files."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import scalebench_analysis as sa
from scalebench_analysis.output import fit
from scalebench_analysis.output.render import display_frame
from scalebench_analysis.tables import compare

import make_results
import results_edits
from conftest import run_cli

ANSWER = ("verdict", "change", "ci_low", "ci_high")


def _issue_table() -> pd.DataFrame:
    """The regression gate of two program cells (world 1 and 2) whose branch `opt` made
    backward slower: long labels, several phases, the same verdict (a constant column)."""
    rows = []
    for world, ratio in ((1, 2.611), (2, 2.402)):
        label = (
            f"opt/train-script/train/b64/w{world}/fp32 "
            "[program.command=python train.py --hidden 4096 --epochs 1, steps=200]"
        )
        rows.append(
            {
                "label": label,
                "verdict": "regression",
                "carried_by": "backward",
                "phases": f"backward +0.{world}12 ms [0.{world}01, 0.{world}24]; forward +0.051 ms "
                "[0.040, 0.062]; optimizer +0.020 ms [0.011, 0.029]",
                "accuracy": "not checked",
                "ratio": ratio,
                "change": ratio - 1,
                "ci_low": ratio - 0.2,
                "ci_high": ratio + 0.2,
                "p_value": 0.0004,
                "p_adjusted": np.nan,
                "n_base": 3,
                "n_new": 3,
                "paired": True,
                "base_status": "ok",
                "new_status": "ok",
                "matched_by": "spec",
                "base_cell_id": "0123456789abcdef",
                "new_cell_id": "fedcba9876543210",
            }
        )
    return pd.DataFrame(rows).reindex(columns=compare.REGRESSION_COLUMNS)


@pytest.mark.parametrize("width", [120, 80])
def test_the_verdict_change_and_interval_are_kept(width):
    shown = display_frame("regressions", _issue_table())
    fitted, notes = fit.fit_table("regressions", shown, width)
    assert fit.table_width(fitted) <= width
    assert list(fitted.columns[:1]) == ["label"]
    assert set(ANSWER) <= set(fitted.columns), (list(fitted.columns), notes)
    left_out = next(n for n in notes if n.startswith("left out for width"))
    assert not set(ANSWER) & set(left_out.split(" (")[0].split(": ")[1].split(", "))
    for full, cut in zip(shown.label, fitted.label):
        head, _, tail = cut.partition(fit._CUT)
        assert full.startswith(head) and full.endswith(tail)
    if width == 120:  # room for the phase carrying the change, not for every phase
        assert "carried_by" in fitted.columns or "carried_by backward" in notes[0]
        assert "phases" in left_out and "carried_by" not in left_out


def test_the_answer_goes_last_and_the_label_is_kept():
    shown = display_frame("regressions", _issue_table())
    fitted, notes = fit.fit_table("regressions", shown, 30)
    assert list(fitted.columns) == ["label", "verdict"] and fit.table_width(fitted) <= 30
    left_out = next(n for n in notes if n.startswith("left out for width"))
    assert left_out.split(" (")[0].endswith("ci_high, ci_low, change")  # last listed first


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(base, new): new delays the forward phase of a repeated cell's repetitions."""
    work = tmp_path_factory.mktemp("width")
    base = make_results.write_results(work / "base.h5", repetitions=True)
    series_id = results_edits.repeated_series_ids()[1]
    loaded = sa.load(base)
    (cells,) = [r.cells for r in loaded.series.itertuples() if r.series_id == series_id]
    new = results_edits.copy_with_phase_delay(base, work / "new.h5", cells, "forward", 5e-4)
    return base, new


def _header_and_notes(text: str, title: str) -> tuple[list[str], str]:
    lines = text.split(f"== {title}", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    return lines[0].split(), "\n".join(line for line in lines if line.startswith(("  ", "    ")))


@pytest.mark.parametrize("width", [120, 80])
def test_compare_keeps_the_answer_at_the_width(files, monkeypatch, width):
    base, new = files
    monkeypatch.setenv("COLUMNS", str(width))
    done = run_cli("compare", base, new, check_rc=1)
    assert max(len(line) for line in done.stdout.splitlines()) <= width
    header, _ = _header_and_notes(done.stdout, "Regression gate")
    assert header[0] == "label" and set(ANSWER) <= set(header), header
    (row,) = [x for x in done.stdout.splitlines() if " regression " in x]
    assert re.search(r" regression .*\+\d+\.\d%", row), row  # the change in the row


def test_the_speedup_table_keeps_its_verdict_and_interval(files, monkeypatch):
    base, _ = files
    monkeypatch.setenv("COLUMNS", "80")
    done = run_cli("analyze", base, "--baseline-branch", "main", check_rc=0)
    assert max(len(line) for line in done.stdout.splitlines()) <= 80
    header, notes = _header_and_notes(done.stdout, "Speedup against the baseline")
    kept = set(header) | set(notes.split("every row: ", 1)[-1].replace(",", " ").split())
    assert {"verdict", "time_ratio", "ci_low", "ci_high"} <= kept, (header, notes)
