"""`scalebench history` (analysis/scalebench_analysis/history/): a step planted in one cell
of a series of synthetic runs is flagged at that run and nowhere else; order, metrics,
repetitions, formats, the HTML page and PNGs, directories and files that are not results
files."""

from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import pytest

from scalebench_analysis.history.lines import file_series, history
from scalebench_analysis.history.model import EXIT_STEP, HistoryOptions, line_key
from scalebench_analysis.history.statistics import (
    bootstrap_medians,
    intervals_apart,
    within_run_interval,
)
from scalebench_analysis.read.loader import load

import make_results
import results_edits
from conftest import run_cli

SEEDS = (101, 102, 103, 104, 105)
STEP_AT = 3  # the 4th run and the later ones run the target 25 % slower
#: make_results' repeated inference cell (3 repetitions): a step is judged over runs, and a
#: cell run once has no run-to-run variation to judge by (issue 40).
TARGET = "main/mlp-repeated-infer/infer/b16/w1/fp32"
REPEATED = (TARGET, "main/mlp-repeated-train/train/b16/w2/fp32")
NOISY = "feature/mlp-train/train/b32/w1/fp32"  # make_results' noisy cell (sigma 0.25)


def _stamp(path, start_time: str, commit: str | None = None, commit_date: str | None = None):
    """Sets the file's root start_time and, when given, every cell's commit (attribute and
    spec) and commit_date."""
    with h5py.File(path, "r+") as f:
        f.attrs["start_time"] = make_results._fixed_string(start_time)
        for group in f["cells"].values():
            if commit is not None:
                spec = json.loads(group.attrs["spec"])
                spec["commit"] = commit
                group.attrs["spec"] = make_results._fixed_string(json.dumps(spec))
                group.attrs["commit"] = make_results._fixed_string(commit)
            if commit_date is not None:
                group.attrs["commit_date"] = make_results._fixed_string(commit_date)


def _run_ids(path, label: str) -> list:
    """The cell ids of every run (repetition) of the cell labelled `label`."""
    cells = load(path).cells
    return list(cells[cells.label.str.split(" rep ").str[0] == label].cell_id)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Five synthetic runs one day apart (independent noise: other seeds; the repeated cells
    the same in each), each of its own commit committed an hour before the run; from run3 on
    every repetition of the TARGET cell runs 25 % slower."""
    root = tmp_path_factory.mktemp("history")
    paths = []
    for day, seed in enumerate(SEEDS):
        plain = make_results.write_results(root / f"plain{day}.h5", seed=seed, repetitions=True)
        path = root / f"run{day}.h5"
        if day >= STEP_AT:
            results_edits.copy_with_slowdown(plain, path, _run_ids(plain, TARGET), 1.25)
        else:
            shutil.copyfile(plain, path)
        _stamp(
            path,
            f"2026-02-0{day + 1}T00:00:00.000Z",
            commit=f"{day + 1:x}" * 40,
            commit_date=f"2026-02-0{day + 1}T00:00:00+01:00",
        )
        paths.append(str(path))
    return paths


def _changes(line) -> list:
    return [b.value / a.value - 1 for a, b in zip(line.points, line.points[1:])]


def test_the_planted_step_is_flagged_at_its_run_and_nowhere_else(runs):
    given = [runs[3], runs[0], runs[4], runs[1], runs[2]]  # out of order
    hist = history(given)
    flagged = [line for line in hist.lines if line.steps]
    assert [line.label for line in flagged] == [TARGET]
    (step,) = flagged[0].steps
    points = flagged[0].points
    assert step.direction == "slower"
    assert (points[step.before].file, points[step.after].file) == (runs[2], runs[3])
    assert step.change == pytest.approx(0.25, abs=0.03)
    assert intervals_apart(points[step.before], points[step.after])
    assert step.ratio == pytest.approx(1.25, rel=1e-9) and step.p_value < 0.05
    for line in hist.lines:  # ordered by date although given out of order
        assert [p.file for p in line.points] == runs
        for p in line.points:
            kind = "series" if line.label in REPEATED else "within-run"
            assert p.interval == kind and p.ci_low <= p.value <= p.ci_high


def test_the_synthetic_noise_stays_within_the_threshold(runs):
    """Between runs of independent noise every quiet cell moves less than the 5 % threshold;
    the noisy cell may move more, and its intervals then overlap: nothing is flagged."""
    hist = history(runs)
    for line in hist.lines:
        changes = _changes(line)
        if line.label == TARGET:
            del changes[STEP_AT - 1]  # the planted step
        if line.label != NOISY:
            assert max(abs(c) for c in changes) < hist.options.threshold, line.label
        else:  # single runs: beyond the threshold, but not judged (one run a side)
            assert not line.steps
            beyond = [
                a
                for a, b in zip(line.points, line.points[1:])
                if abs(b.value / a.value - 1) > hist.options.threshold
            ]
            assert line.unjudged == len(beyond) > 0


def test_throughput_sees_the_same_step_as_slower(runs):
    hist = history(runs, HistoryOptions(metric="throughput"))
    flagged = [(line.label, s.direction) for line in hist.lines for s in line.steps]
    assert flagged == [(TARGET, "slower")]
    for line in hist.lines:
        for p in line.points:
            assert p.ci_low <= p.value <= p.ci_high


def test_commit_date_orders_before_start_time(runs, tmp_path):
    """An old commit benchmarked later sorts by its commit date; without one, by start_time."""
    old, new = tmp_path / "old.h5", tmp_path / "new.h5"
    shutil.copyfile(runs[0], old)
    shutil.copyfile(runs[1], new)
    _stamp(old, "2026-03-02T00:00:00Z", commit_date="2026-01-01T00:00:00+00:00")
    _stamp(new, "2026-03-01T00:00:00Z", commit_date="2026-02-01T00:00:00+00:00")
    line = history([str(new), str(old)]).lines[0]
    assert [p.file for p in line.points] == [str(old), str(new)]
    assert line.points[0].when == "2026-01-01T00:00:00+00:00"
    _stamp(old, "2026-03-02T00:00:00Z", commit_date="")  # no commit date: the run's start
    line = history([str(new), str(old)]).lines[0]
    assert [p.file for p in line.points] == [str(new), str(old)]
    assert line.points[1].when == "2026-03-02T00:00:00Z"


def test_order_file_and_commit_labels(runs):
    backwards = list(reversed(runs))
    hist = history(backwards, HistoryOptions(order="file"))
    target = next(line for line in hist.lines if line.label == TARGET)
    assert [p.file for p in target.points] == backwards
    assert [p.label for p in target.points] == ["run4", "run3", "run2", "run1", "run0"]
    ((step),) = target.steps  # seen backwards, the step is a speed-up from run3 to run2
    assert step.direction == "faster"
    assert (target.points[step.before].label, target.points[step.after].label) == ("run3", "run2")
    hist = history(backwards, HistoryOptions(order="commit"))
    assert [p.label for p in hist.lines[0].points] == ["1111111", "2222222", "3333333"] + [
        "4444444",
        "5555555",
    ]


def test_text_markdown_and_fail_on_step(runs):
    done = run_cli("history", *runs, check_rc=0)
    row = next(line for line in done.stdout.splitlines() if line.startswith(TARGET + " "))
    assert "slower +" in row and "(run2 -> run3)" in row
    assert "1 slower step(s), 0 faster step(s)" in done.stdout
    run_cli("history", *runs, "--fail-on-step", check_rc=EXIT_STEP)
    run_cli("history", *runs[:3], "--fail-on-step", check_rc=0)
    markdown = run_cli("history", *runs, "--format", "markdown", check_rc=0).stdout
    assert markdown.startswith("| line | n | first | last | change | steps | trend |")


def test_json_keys(runs):
    done = run_cli("history", *runs, "--format", "json", "--threshold", "5%", check_rc=0)
    data = json.loads(done.stdout)
    assert set(data) == {
        "command",
        "metric",
        "unit",
        "order",
        "threshold",
        "confidence",
        "bootstrap_resamples",
        "bootstrap_seed",
        "files",
        "skipped",
        "slower_steps",
        "faster_steps",
        "unjudged_changes",
        "lines",
    }
    assert (data["metric"], data["unit"], data["threshold"]) == ("time", "s", 0.05)
    assert data["files"] == runs and data["skipped"] == [] and data["slower_steps"] == 1
    line = next(entry for entry in data["lines"] if entry["steps"])
    assert set(line) == {
        "label",
        "key",
        "branch",
        "experiment",
        "mode",
        "precision",
        "batch_size",
        "world_size",
        "device",
        "n_points",
        "first",
        "last",
        "change",
        "steps",
        "unjudged_changes",
        "points",
    }
    assert set(line["points"][0]) == {
        "label",
        "file",
        "cell_ids",
        "commit",
        "commit_date",
        "start_time",
        "when",
        "value",
        "ci_low",
        "ci_high",
        "interval",
        "repetitions",
        "disagree",
        "runs",
    }
    assert line["steps"] == [
        {
            "from": "run2",
            "to": "run3",
            "from_file": runs[2],
            "to_file": runs[3],
            "from_commit": "3" * 40,
            "to_commit": "4" * 40,
            "change": line["steps"][0]["change"],
            "direction": "slower",
            **{k: line["steps"][0][k] for k in ("ratio", "ci_low", "ci_high", "p_value")},
        }
    ]
    assert line["steps"][0]["ci_low"] > 1.0 and line["steps"][0]["p_value"] < 0.05
    assert len(line["points"][0]["runs"]) == 3
    assert "1 slower step(s)" in done.stderr


def test_html_page_and_plots(runs, tmp_path):
    page, plots = tmp_path / "history.html", tmp_path / "plots"
    run_cli("history", *runs, "--html", str(page), "--plots", str(plots), check_rc=0)
    experiments = {line.spec["experiment"] for line in history(runs).lines}
    text = page.read_text()
    assert text.count("<img") == len(experiments) == 6
    assert "<script" not in text and "http" not in text.split("</style>")[1]
    assert 'class="slower"' in text and TARGET in text
    written = sorted(plots.glob("history_*.png"))
    assert len(written) == len(experiments)
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)


def test_a_directory_and_files_that_are_not_results_files(runs, tmp_path):
    for path in runs[:3]:
        shutil.copy(path, tmp_path)
    (tmp_path / "notes.h5").write_text("not hdf5")
    (tmp_path / "readme.txt").write_text("not even .h5")
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f.attrs["something"] = "else"
    with h5py.File(tmp_path / "probe.h5", "w") as f:
        f.attrs["scalebench_probe_version"] = "1.0"
    done = run_cli("history", str(tmp_path), "--format", "json", check_rc=0)
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 3
    for name, why in (
        ("notes.h5", "not an HDF5 file"),
        ("other.h5", "no root attribute"),
        ("probe.h5", "a scalebench probe file"),
    ):
        assert any(name in w and why in w and "skipped" in w for w in warnings), name
    data = json.loads(done.stdout)
    assert len(data["skipped"]) == 3 and len(data["files"]) == 3
    assert all(line["n_points"] == 3 for line in data["lines"])


def test_no_usable_file_is_an_error(tmp_path):
    (tmp_path / "x.h5").write_text("nope")
    done = run_cli("history", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "scalebench history: error: no usable scalebench results file among the 1 file(s) "
        "given (see the warnings above)"
    )
    done = run_cli("history", str(tmp_path / "absent.h5"))
    assert done.returncode == 2 and "absent.h5: no such file or directory" in done.stderr


def test_repetitions_collapse_into_one_point(tmp_path):
    base = make_results.write_results(tmp_path / "base.h5", seed=7)
    series_ids = results_edits.add_repetitions(base)
    paths = []
    for day in range(3):
        path = tmp_path / f"rep{day}.h5"
        shutil.copyfile(base, path)
        _stamp(path, f"2026-04-0{day + 1}T00:00:00Z", commit_date="")
        paths.append(str(path))
    with h5py.File(paths[2], "r+") as f:  # the last run lacks /series: computed from its cells
        del f["series"]
    hist = history(paths)
    repeated = {
        ln.spec["experiment"]: ln for ln in hist.lines if "repeated" in ln.spec["experiment"]
    }
    assert sorted(repeated) == ["mlp-repeated-infer", "mlp-repeated-train"]
    with h5py.File(base, "r") as f:
        stored = {sid: dict(f["series"][sid].attrs) for sid in series_ids}
    for line in repeated.values():
        (figures,) = [
            s for s in stored.values() if line.points[0].cell_ids[0] in json.loads(s["cells"])
        ]
        assert len(line.points) == 3 and not line.steps
        first, last = line.points[0], line.points[2]
        assert first.interval == "series" and first.repetitions == figures["repetitions"]
        assert (first.value, first.ci_low, first.ci_high) == (
            figures["median_s"],
            figures["median_s_ci_low"],
            figures["median_s_ci_high"],
        )
        assert first.disagree == bool(figures["disagree"])
        assert last.interval == "repetitions" and last.value == figures["median_s"]
        assert last.ci_low <= last.value <= last.ci_high
    # The series figures history takes from the loader agree with the file.
    own = file_series(load(paths[0]))
    assert set(own) == set(series_ids)
    for sid, figures in own.items():
        assert figures["median_s"] == stored[sid]["median_s"]
        assert figures["cells"] == json.loads(stored[sid]["cells"])


def test_line_key_leaves_out_what_changes_over_history():
    spec = make_results.make_spec("main", "train", 16, 2)
    same = dict(spec, commit="f" * 40, seed=9, timeout_s=1.0, repetition=2, repetitions=3)
    same.update(source="other.yaml:9", cell_id="0" * 16, label_settings=["tf32"])
    assert line_key(same) == line_key(spec)
    for other in (
        dict(spec, branch="feature"),
        dict(spec, precision="bf16"),
        dict(spec, device="cuda"),
        dict(spec, tf32=True),
        dict(spec, optimizer=dict(spec["optimizer"], lr=0.1)),
    ):
        assert line_key(other) != line_key(spec)


def test_within_run_interval_is_a_seeded_bootstrap_of_the_median(runs):
    results = load(runs[0])
    options = HistoryOptions()
    for _, cell in results.cells[results.cells.status == "ok"].iterrows():
        low, high = within_run_interval(results, cell, options)
        assert low <= cell.median_s <= high and low >= cell.min_s and high <= cell.max_s
        assert within_run_interval(results, cell, options) == (low, high)
    values = np.array([1.0, 2.0, 3.0, 4.0, 100.0])
    medians = bootstrap_medians(values, 500, np.random.default_rng(0))
    assert medians.shape == (500,) and set(medians) <= set(values)


def test_three_copies_of_the_file_under_test_show_no_step(results_file, tmp_path):
    """CI runs this on a real quickstart file: one line per ok cell (repetitions of a cell
    counted once), 3 points each, no step."""
    copies = []
    for k in range(3):
        copy = tmp_path / f"copy{k}.h5"
        shutil.copyfile(results_file, copy)
        _stamp(copy, f"2026-03-0{k + 1}T00:00:00.000Z")
        copies.append(str(copy))
    cells = load(results_file).cells
    ok = cells[(cells.status == "ok") & np.isfinite(cells.median_s.astype(float))]
    bookkeeping = ("repetition", "cell_id", "source")
    expected = {
        json.dumps({k: v for k, v in spec.items() if k not in bookkeeping}, sort_keys=True)
        for spec in ok.spec
    }
    hist = history(copies)
    assert len(hist.lines) == len(expected) > 0
    assert all(len(line.points) == 3 and not line.steps for line in hist.lines)
    done = run_cli("history", *copies, check_rc=0)
    assert "0 slower step(s), 0 faster step(s)" in done.stdout
