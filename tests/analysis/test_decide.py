"""`scalebench decide` (tables/decide.py, Note [Deciding a series]; the sequential test of
tables/sequential.py): the look the orchestrator asks before each round r >= 3 of a
`repetitions: auto` sweep. Synthetic files of this module's own (make_results.py's cell
writer): `repetitions_auto` series of 20 runs a cap, of which the first rounds were run,
each run's steps scaled by its own draw (the spread between runs) and by the branch's
change."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

import scalebench_analysis as sa
from scalebench_analysis.tables import decide, sequential

from conftest import run_cli
from make_results import _root_attrs, _write_cell, fix_strings
from synthetic_cells import MEASURED, WARMUP, make_spec, train_timings

CAP = 20


def _write(path, branches: dict, rounds: int = 3, run_sd: float = 0.01, seed: int = 5) -> dict:
    """A results file of one `repetitions: auto` series per branch (training, batch 16, one
    rank), its first `rounds` runs; `branches`: branch -> factor on its per-sample time.
    Returns branch -> series id."""
    rng = np.random.default_rng(seed)
    series = {}
    with h5py.File(path, "w", libver=("v110", "v110")) as f:
        _root_attrs(f, path)
        f.attrs["matrix_text"] = f"branches: [{', '.join(branches)}]\nrepetitions: auto\n"
        cells = f.create_group("cells")
        for k in range(rounds):
            for branch, factor in branches.items():
                extra = {"repetitions": CAP, "repetitions_auto": True}
                if k:
                    extra["repetition"] = k
                spec = make_spec(branch, "train", 16, 1, experiment="mlp-auto-reps", **extra)
                per_sample = 0.001 * factor * np.exp(rng.normal(0.0, run_sd))
                timings = train_timings(rng, 16, 1, per_sample, sigma=0.01)
                _write_cell(cells, spec, "ok", rng, timings, [WARMUP + MEASURED])
                series.setdefault(branch, spec["cell_id"])
                cells[spec["cell_id"]].attrs["series_id"] = series[branch]
        f.attrs["cell_count"] = np.int64(len(cells))
        fix_strings(f)
    return series


def _answer(path, look: int = 3) -> dict:
    done = run_cli("decide", str(path), "--look", str(look), "--format", "json", check_rc=0)
    return json.loads(done.stdout)


def test_a_clear_regression_is_decided_at_the_first_look(tmp_path):
    series = _write(tmp_path / "r.h5", {"main": 1.0, "feature": 1.2})
    answer = _answer(tmp_path / "r.h5")
    assert answer["undecided"] == []
    looked = decide.look_at(sa.load(tmp_path / "r.h5"), 3)
    assert {s.series_id for s in looked} == set(series.values())
    assert all(s.decided and s.runs == 3 for s in looked)
    assert all("regression" in s.why[0] for s in looked), [s.why for s in looked]


def test_an_aa_pair_with_spread_is_undecided_at_look_3(tmp_path):
    series = _write(tmp_path / "aa.h5", {"main": 1.0, "feature": 1.0}, run_sd=0.05)
    answer = _answer(tmp_path / "aa.h5")
    assert sorted(answer["undecided"]) == sorted(series.values())
    assert "0 of 2 series decided after 3 runs" in answer["summary"]


def test_the_answer_is_one_json_object_with_the_undecided_and_one_summary_line(tmp_path):
    _write(tmp_path / "j.h5", {"main": 1.0, "feature": 1.0}, run_sd=0.05)
    done = run_cli("decide", str(tmp_path / "j.h5"), "--look", "3", "--format", "json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert set(answer) == {"undecided", "summary"}
    assert all(isinstance(s, str) and len(s) == 16 for s in answer["undecided"])
    assert isinstance(answer["summary"], str) and "\n" not in answer["summary"]
    assert done.stdout.count("\n") == 1


def test_a_look_sees_only_the_runs_of_the_rounds_before_it(tmp_path):
    _write(tmp_path / "five.h5", {"main": 1.0}, rounds=5, run_sd=0.002)
    (looked,) = decide.look_at(sa.load(tmp_path / "five.h5"), 3)
    assert looked.runs == 3


def test_a_single_branch_series_is_decided_by_its_resolution(tmp_path):
    (quiet,) = _write(tmp_path / "quiet.h5", {"main": 1.0}, run_sd=0.002).values()
    (noisy,) = _write(tmp_path / "noisy.h5", {"main": 1.0}, run_sd=0.10, seed=6).values()
    assert _answer(tmp_path / "quiet.h5")["undecided"] == []
    assert _answer(tmp_path / "noisy.h5")["undecided"] == [noisy]
    (looked,) = decide.look_at(sa.load(tmp_path / "quiet.h5"), 3)
    assert looked.decided and looked.why[0].startswith("resolution +-")
    assert quiet == looked.series_id


@pytest.mark.parametrize("content", [None, b"not an HDF5 file\n"])
def test_an_unreadable_file_exits_non_zero_with_a_clear_message(tmp_path, content):
    path = tmp_path / "broken.h5"
    if content is not None:
        path.write_bytes(content)
    done = run_cli("decide", str(path), "--look", "3", "--format", "json")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "scalebench decide: error:" in done.stderr and str(path) in done.stderr


def test_the_baseline_branch_is_the_matrix_one_else_the_first_listed(tmp_path):
    _write(tmp_path / "b.h5", {"main": 1.0, "feature": 1.2})
    loaded = sa.load(tmp_path / "b.h5")
    texts = {
        "baseline: {branch: feature, metrics: [loss]}\n": "feature",
        "baseline:\n  metrics: [loss]\n  branch: feature\n": "feature",
        "branches: [feature, main]\n": "feature",
        "branches:\n  - feature\n  - main\n": "feature",
        "# no baseline\n": "feature",  # the branch of the first cell (cells sorted by label)
    }
    for text, expected in texts.items():
        loaded.meta["matrix_text"] = text
        assert decide.baseline_branch(loaded) == expected, text


def test_the_look_alpha_keeps_the_aa_rate_over_every_look():
    """The boundary's own claim, on fresh draws (not its seed): an A/A series of normal
    log differences is significant at some look 3..20 in 5 % of series (+-0.6 %)."""
    alpha = sequential.look_alpha(CAP)
    assert 0.006 < alpha < 0.0095
    rng = np.random.default_rng(2026)
    d = rng.standard_normal((20000, CAP))
    hit = np.zeros(len(d), bool)
    from scipy import stats

    for n in range(sequential.FIRST_LOOK, CAP + 1):
        hit |= stats.ttest_1samp(d[:, :n], 0.0, axis=1).pvalue < alpha
    assert abs(hit.mean() - 0.05) < 0.006
    assert sequential.look_alpha(3) == 0.05
