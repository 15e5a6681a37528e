"""The summary of a run with branches (issue 54 rows 4 and 5; tables/summary.py and
summary_comparison.py): `analyze --baseline-branch main --summary` opens with the branch's
verdicts and the phase carrying the change, names a repeated cell once (never one of its
repetitions), advises settings the run does not already have, and names cells by their
labels. On this module's own file: a DDP training cell at world 1 and 2, repeated 3 times,
on `main` and on `opt`, whose backward phase is 2 ms slower (make_results' building blocks)."""

from __future__ import annotations

import json
import re

import h5py
import numpy as np
import pytest

import scalebench_analysis as sa
from scalebench_analysis.tables import summary
from scalebench_analysis.tables.analysis import AnalysisOptions, analyze

import results_edits
from conftest import run_cli
from make_results import _root_attrs, _write_cell, fix_strings
from synthetic_cells import MEASURED, WARMUP, make_spec, train_timings

REPETITIONS = 3
DELAY_S = 0.002  # backward of `opt`: about +20 % of a ~10 ms step
HEX_ID = re.compile(r"\b[0-9a-f]{16}\b")


def _write_branches(path) -> dict:
    """Both branches at world 1 and 2, REPETITIONS each, with their `/series`; returns
    branch -> the cell ids of its repetitions."""
    rng = np.random.default_rng(5)
    ids = {"main": [], "feature": []}
    with h5py.File(path, "w", libver=("v110", "v110")) as f:
        _root_attrs(f, path)
        cells = f.create_group("cells")
        series = f.create_group("series")
        for branch in ids:
            for world in (1, 2):
                members = []
                for k in range(REPETITIONS):
                    extra = {"repetitions": REPETITIONS, **({"repetition": k} if k else {})}
                    spec = make_spec(branch, "train", 16, world, **extra)
                    timings = train_timings(rng, 16, world, 0.0005, sigma=0.01)
                    _write_cell(cells, spec, "ok", rng, timings, [WARMUP + MEASURED] * world)
                    members.append(spec["cell_id"])
                group = series.create_group(members[0])
                group.attrs["metric"] = "step"
                group.attrs["repetitions"] = np.int64(REPETITIONS)
                group.attrs["cells"] = json.dumps(members)
                group.attrs["max_spread_rel"] = 0.10
                group.attrs["confidence"] = 0.95
                group.attrs["bootstrap_resamples"] = np.int64(10000)
                group.attrs["bootstrap_seed"] = "1"
                ids[branch] += members
        f.attrs["cell_count"] = np.int64(len(cells))
        fix_strings(f)
    results_edits.rewrite_series(path)
    return ids


@pytest.fixture(scope="module")
def branches_file(tmp_path_factory):
    """`feature` stands for the issue's `opt`: make_spec knows the commits of main and
    feature. Its backward phase is DELAY_S slower in every repetition."""
    work = tmp_path_factory.mktemp("branches")
    ids = _write_branches(work / "same.h5")
    return results_edits.copy_with_phase_delay(
        work / "same.h5", work / "branches.h5", ids["feature"], "backward", DELAY_S
    )


def _summary(path) -> list[str]:
    return summary.summary_lines(analyze(path, AnalysisOptions(baseline=("branch", "main"))))


def test_the_branch_verdicts_come_first(branches_file):
    lines = _summary(branches_file)
    speedup = analyze(branches_file, AnalysisOptions(baseline=("branch", "main"))).sections[
        "speedup"
    ]
    counts = speedup.verdict.value_counts()
    assert lines[0].startswith("feature against main: "), lines
    assert f"({len(speedup)} compared cells)" in lines[0]
    for verdict, count in counts.items():
        assert f"{count} {verdict}" in lines[0]
    judged = [line for line in lines if line.startswith(("regression: ", "improvement: "))]
    assert len(judged) == (speedup.verdict.isin(["regression", "improvement"])).sum()
    for line in judged:  # the time went to backward: the phase carrying the change
        assert line.startswith("regression: feature/") and "carried by backward +" in line
    assert judged, "a 2 ms slower backward over 3 + 3 runs is decided"
    first_other = next(i for i, line in enumerate(lines) if re.match(r"\d+ cells: ", line))
    kinds = ("regression", "improvement", "within threshold", "not significant", "inconclusive")
    for line in lines[1:first_other]:
        assert line.split(":", 1)[0] in kinds or line.startswith("... and "), line


def test_a_repeated_cell_is_named_once_with_its_median(branches_file):
    analysis = analyze(branches_file, AnalysisOptions(baseline=("branch", "main")))
    lines = summary.summary_lines(analysis)
    assert not [line for line in lines if " rep " in line], lines
    (fastest,) = [line for line in lines if line.startswith("mlp-train train: fastest ")]
    repeated = analysis.sections["repetitions"]
    best = repeated.loc[repeated.throughput_samples_per_s.idxmax()]
    assert f"fastest {best.label}, {best.throughput_samples_per_s:,.0f} samples/s" in fastest
    assert f"(median of {REPETITIONS} runs)" in fastest


def test_no_hex_cell_id_in_the_summary(branches_file):
    lines = _summary(branches_file)
    assert not [line for line in lines if HEX_ID.search(line)], lines


def test_the_cli_summary_opens_with_the_branches(branches_file, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    out = run_cli(
        "analyze", branches_file, "--baseline-branch", "main", "--summary", check_rc=0
    ).stdout.splitlines()
    assert out[0] == "== Summary ==" and out[1].startswith("  feature against main: "), out


# --- advice that fits the run as configured ------------------------------------------------


def _spec(**settings) -> dict:
    return make_spec("main", "train", 16, 1, **settings)


def test_a_noisy_repeated_cell_is_not_told_to_repeat_as_often_as_it_did():
    advice = summary._remedy("cv 30.9% > 10%", _spec(repetitions=3))
    assert "`repetitions: 3`" not in advice and "`repetitions: 4`" in advice
    assert "`repetitions: 3`" in summary._remedy("cv 30.9% > 10%", _spec())


def test_a_program_cell_is_offered_numbers_not_auto():
    spec = _spec(program={"command": ["python3", "train.py", "--steps", "{steps}"]})
    for because in ("cv 30.9% > 10%", "warm-up drift +13.0% (|drift| > 10%)", "only 3 samples"):
        advice = summary._remedy(because, spec)
        assert "auto" not in advice, advice
        assert re.search(r"`(iterations|warmup): \d+`", advice), advice


def test_a_built_in_cell_may_be_offered_auto():
    advice = summary._remedy("cv 30.9% > 10%; warm-up drift +13.0%", _spec())
    assert "`iterations: auto`" in advice and "`warmup: auto`" in advice


def test_untrusted_repetitions_are_named_by_the_repeated_cells_label(tmp_path):
    """A repetition of one cell untrusted (planted noise): its line names the repeated cell
    by its label with how many of its runs, never a hex id nor "rep k/N"."""
    ids = _write_branches(tmp_path / "same.h5")
    noisy = results_edits.copy_with_slowdown(
        tmp_path / "same.h5", tmp_path / "noisy.h5", ids["main"][0], 1.0
    )
    with h5py.File(noisy, "r+") as f:
        timings = f["cells"][ids["main"][0]]["timings"]
        data = timings[()]
        data[:, WARMUP:, -1] *= np.linspace(0.5, 1.6, data.shape[1] - WARMUP)[None, :]
        timings[...] = data
        from make_results import write_summary

        write_summary(f["cells"][ids["main"][0]])
    results_edits.rewrite_series(noisy)
    lines = summary.summary_lines(analyze(noisy, AnalysisOptions()))
    (line,) = [x for x in lines if "untrusted cell" in x]
    label = sa.load(noisy).cell(ids["main"][0]).label.rsplit(" rep ", 1)[0]
    assert f"{label} (1 of {REPETITIONS} runs): " in line, line
    assert "`repetitions: 3`" not in line and not HEX_ID.search(line), line
