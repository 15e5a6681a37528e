"""Run-level segments of a program cell (issue 39 item 5, Note [Run-level segments] in
program/program_report.h): a plain Python program names two segments with
scalebench_client.segment around its steps (a 0.3 s "data_setup" before them, a 0.05 s
"evaluation" after every 5 steps, the last one after the last step, then a 0.2 s sleep), run
by `scalebench run`; `analyze` shows each part with its count, and the parts every program
has (launch to the first segment and to the first step, the steps' span, after the last step,
the wall time) add up as the program ran them. Needs a build: SCALEBENCH_BUILD_DIR; skipped
otherwise."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from programfiles import program_repository, python_program_matrix

from conftest import run_cli, run_scalebench

BUILD = os.environ.get("SCALEBENCH_BUILD_DIR")

PROGRAM = """
import argparse
import time

import scalebench_client as sb

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int)
args = parser.parse_args()
with sb.segment("data_setup"):
    time.sleep(0.3)
for index in range(args.steps):
    with sb.step():
        with sb.phase("forward"):
            time.sleep(0.002)
    if index % 5 == 4:
        with sb.segment("evaluation"):
            time.sleep(0.05)
time.sleep(0.2)
"""


@pytest.fixture(scope="module")
def segments_file(tmp_path_factory) -> Path:
    if not BUILD:
        pytest.skip("needs SCALEBENCH_BUILD_DIR (a build)")
    work = tmp_path_factory.mktemp("segments")
    repo = program_repository(work, "train.py", PROGRAM, {})
    matrix = python_program_matrix("segments", repo, ["main"], {"warmup": 2, "iterations": 8})
    return run_scalebench(matrix, work)


def test_analyze_shows_each_segment_and_where_the_wall_time_went(segments_file):
    done = run_cli("analyze", str(segments_file), "--format", "json", check_rc=0)
    rows = json.loads(done.stdout)["sections"]["segments"]
    parts = {row["segment"]: row for row in rows}
    assert [row["segment"] for row in rows] == [
        "launch_to_first_segment",
        "launch_to_first_step",
        "data_setup",
        "evaluation",
        "steps",
        "after_last_step",
        "wall",
    ]
    assert [parts[n]["kind"] for n in ("data_setup", "evaluation")] == ["segment"] * 2
    assert parts["data_setup"]["count"] == 1 and parts["evaluation"]["count"] == 2  # 10 steps
    # The sleeps, with slack above for a busy machine (a sleep is never shorter).
    assert 0.3 <= parts["data_setup"]["total_s"] < 3.0
    assert 0.1 <= parts["evaluation"]["total_s"] < 2.0
    # The last evaluation and the sleep (0.25 s) less the program's exec after the spawn
    # (the wall time runs from the exec under the supervisor): at least the sleep. Stop 47's
    # fresh clone measured 0.2493 s against 0.25 when the exit was placed from the cell's
    # origin (before the spawn) instead of the spawn.
    assert parts["after_last_step"]["total_s"] >= 0.2
    # The first step follows the data set-up; the first evaluation lies inside the steps'
    # span, the second after the last step.
    first_step = parts["launch_to_first_step"]["total_s"]
    assert first_step >= parts["launch_to_first_segment"]["total_s"] + 0.3
    assert parts["steps"]["total_s"] >= 0.05 + 10 * 0.002
    # Launch to the first step, the steps and what followed are the program's run: nothing
    # is counted twice and at most the launch's own bookkeeping is missing.
    whole = first_step + parts["steps"]["total_s"] + parts["after_last_step"]["total_s"]
    assert whole == pytest.approx(parts["wall"]["total_s"], abs=0.05)
    assert parts["wall"]["share_of_wall"] == pytest.approx(1.0)


def test_the_console_table_names_the_segments(segments_file):
    text = run_cli("analyze", str(segments_file), "--details", check_rc=0).stdout
    section = text[text.index("Run-level segments") :]
    assert "data_setup" in section and "evaluation" in section and "after_last_step" in section


def test_the_report_has_the_segments_table(segments_file, tmp_path):
    report = tmp_path / "segments.html"
    run_cli("report", str(segments_file), "-o", str(report), check_rc=0)
    page = report.read_text()
    section = page[page.index("Run-level segments") :]
    assert "data_setup" in section and "after_last_step" in section


def test_info_shows_the_program_cells_wall_time_and_longest_segments(segments_file):
    import subprocess

    done = subprocess.run(
        [str(Path(BUILD) / "bin" / "scalebench"), "info", str(segments_file)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    section = done.stdout[done.stdout.index("# Program cells: where the wall time went") :]
    line = next(row for row in section.splitlines() if row.lstrip().startswith("main"))
    assert "data_setup 0." in line and "evaluation 0." in line, section
