"""`repetitions: auto` on a real run (issue 52 deliver item 2; Note [Adaptive repetitions] in
orchestrator/adaptive_rounds.h): a plain Python program on two branches of a repository made
here, `slow` adding DELAY_S of sleep to every forward, `repetitions: auto` with
max_repetitions MAX_REPETITIONS, run by `scalebench run` under mpirun. Rounds 0-2 always run;
before round 3 rank 0 asks `python -m scalebench_analysis decide` (the same judging as
compare); a slowdown this large is decided there, so rounds 3.. are recorded `skipped` with
the reason, and `compare --branches main slow` calls it a regression carried by forward,
never an improvement. Needs a build: SCALEBENCH_BUILD_DIR (tests/run_all.sh sets it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import h5py
import pytest

from programfiles import program_repository, python_program_matrix, text
from scalebench_analysis.tables.sequential import look_alpha
from test_verdict_real_run import PROGRAM

from conftest import run_cli, run_scalebench

BUILD = os.environ.get("SCALEBENCH_BUILD_DIR")
DELAY_S = 0.03
MAX_REPETITIONS = 6


@pytest.fixture(scope="module")
def auto_run(tmp_path_factory) -> Path:
    if not BUILD:
        pytest.skip("needs SCALEBENCH_BUILD_DIR (a build)")
    work = tmp_path_factory.mktemp("repetitions-auto")
    slow = PROGRAM.replace("DELAY_S = 0.0", f"DELAY_S = {DELAY_S}")
    repo = program_repository(work, "train.py", PROGRAM, {"slow": slow})
    matrix = python_program_matrix(
        "repetitions-auto",
        repo,
        ["main", "slow"],
        {
            "warmup": 3,
            "iterations": 20,
            "repetitions": "auto",
            "max_repetitions": MAX_REPETITIONS,
            "cpu_threads": 1,
        },
    )
    (work / "run").mkdir()
    return run_scalebench(matrix, work / "run")


def _cells(path: Path) -> list:
    out = []
    with h5py.File(path, "r") as f:
        for cell_id, group in f["cells"].items():
            spec = json.loads(text(group.attrs["spec"]))
            out.append(
                {
                    "id": cell_id,
                    "branch": spec["branch"],
                    "repetition": spec.get("repetition", 0),
                    "auto": spec.get("repetitions_auto", False),
                    "status": text(group.attrs["status"]),
                    "reason": text(group.attrs.get("reason", "")),
                }
            )
    return out


def test_a_decided_pair_stops_after_three_rounds(auto_run):
    cells = _cells(auto_run)
    assert len(cells) == 2 * MAX_REPETITIONS, cells
    assert all(c["auto"] for c in cells)
    for cell in cells:
        if cell["repetition"] < 3:
            assert cell["status"] == "ok", cell
        else:
            assert cell["status"] == "skipped", cell
            assert (
                "repetitions auto: every comparison of the series was decided after 3 runs"
                in (cell["reason"])
            ), cell


def test_the_decision_is_a_regression_carried_by_forward(auto_run, tmp_path, monkeypatch):
    out = tmp_path / "compare.json"
    run_cli(
        "compare",
        str(auto_run),
        "--branches",
        "main",
        "slow",
        "--format",
        "json",
        "-o",
        str(out),
        check_rc=None,
    )
    (row,) = json.loads(out.read_text())["sections"]["regressions"]
    assert row["verdict"] == "regression", row
    assert row["carried_by"] == "forward", row
    assert row["n_base"] == row["n_new"] == 3, row
    # Held to the sequential test that stopped it (pairs.judged_alpha): judged at the looks'
    # alpha of its cap, and the verdict line says so.
    monkeypatch.setenv("COLUMNS", "400")  # the lines unwrapped
    console = run_cli("compare", str(auto_run), "--branches", "main", "slow", check_rc=None)
    alpha = look_alpha(MAX_REPETITIONS)
    assert f"at the looks' alpha {alpha:.2g} (repetitions: auto)" in console.stdout
