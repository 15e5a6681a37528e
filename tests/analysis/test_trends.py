"""`scalebench history` (analysis/scalebench_analysis/trends.py): a step planted in one cell
of a series of synthetic runs is flagged at that run and nowhere else; order, formats, the
HTML page, directories and bad inputs."""

from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import pytest

from scalebench_analysis import trends

import make_results
from conftest import run_cli

SEEDS = (11, 12, 13, 14, 15)


def _set_start(path, iso: str) -> None:
    with h5py.File(path, "r+") as f:
        f.attrs["start_time"] = make_results._fixed_string(iso)
        for group in f["cells"].values():  # commit_date wins over start_time: clear it
            group.attrs["commit_date"] = make_results._fixed_string("")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Five synthetic runs one day apart (independent noise: other seeds); from the 4th on,
    the main/mlp-train/b16/w1 cell runs 25 % slower."""
    root = tmp_path_factory.mktemp("history")
    base = make_results.write_results(root / "seed.h5")
    with h5py.File(base, "r") as f:
        target = next(
            cell_id for cell_id, g in f["cells"].items() if _is_target(json.loads(g.attrs["spec"]))
        )
    paths = []
    for day, seed in enumerate(SEEDS):
        plain = make_results.write_results(root / f"plain{day}.h5", seed=seed)
        path = root / f"run{day}.h5"
        if day >= 3:
            make_results.copy_with_slowdown(plain, path, target, 1.25)
        else:
            shutil.copyfile(plain, path)
        _set_start(path, f"2026-02-0{day + 1}T00:00:00.000Z")
        paths.append(str(path))
    return paths, target


def _is_target(spec) -> bool:
    return (
        spec["branch"] == "main"
        and spec["experiment"] == "mlp-train"
        and spec["batch_size"] == 16
        and spec["world_size"] == 1
        and spec["precision"] == "fp32"
    )


def test_the_planted_step_is_flagged_at_its_run_and_nothing_else(runs):
    paths, _ = runs
    lines = trends.build_history(list(reversed(paths)), "time", 0.05, "date")
    flagged = [line for line in lines if line.steps]
    assert [line.label for line in flagged] == ["main/mlp-train/train/b16/w1/fp32"]
    (step,) = flagged[0].steps
    assert step["direction"] == "slower" and step["to"] == paths[3] and step["from"] == paths[2]
    assert step["change"] == pytest.approx(0.25, abs=0.05)
    # Ordered by date although given newest first; every line has a point per run.
    for line in lines:
        assert [p.file for p in line.points] == paths
        for p in line.points:
            assert p.low <= p.value <= p.high


def test_throughput_sees_the_same_step_as_slower(runs):
    paths, _ = runs
    lines = trends.build_history(paths, "throughput", 0.05, "date")
    flagged = [(line.label, s["direction"]) for line in lines for s in line.steps]
    assert flagged == [("main/mlp-train/train/b16/w1/fp32", "slower")]


def test_the_interval_of_a_single_run_is_a_bootstrap_of_its_iterations():
    values = np.array([1.0, 2.0, 3.0, 4.0, 100.0])
    low, high = trends.median_interval(values)
    assert values.min() <= low <= np.median(values) <= high <= values.max()
    assert trends.median_interval(values) == (low, high)  # seeded
    assert trends.median_interval(np.full(9, 2.0)) == (2.0, 2.0)


def test_cli_formats_html_plots_and_the_gate(runs, tmp_path):
    paths, _ = runs
    html, plots = tmp_path / "h.html", tmp_path / "plots"
    done = run_cli("history", *paths, "--html", str(html), "--plots", str(plots), "--fail-on-step")
    assert done.returncode == 1  # a slower step with --fail-on-step
    assert "slower +" in done.stdout and "with a step beyond noise" in done.stdout
    page = html.read_text()
    experiments = {json.loads(line)["experiment"] for line in _specs(paths[0])}
    assert page.count("<img") == len(experiments)
    assert len(list(plots.glob("history-*.png"))) == len(experiments)
    data = json.loads(run_cli("history", *paths, "--format", "json", check_rc=0).stdout)
    assert set(data) == {"metric", "threshold", "order", "files", "lines"}
    line = next(entry for entry in data["lines"] if entry["steps"])
    assert set(line["points"][0]) == {"file", "commit", "date", "value", "low", "high", "repeated"}
    assert "| cell |" in run_cli("history", *paths, "--format", "markdown", check_rc=0).stdout


def _specs(path):
    with h5py.File(path, "r") as f:
        return [g.attrs["spec"] for g in f["cells"].values() if g.attrs["status"] in (b"ok",)]


def test_order_file_keeps_the_given_order(runs):
    paths, _ = runs
    given = [paths[4], paths[0], paths[2]]
    lines = trends.build_history(given, "time", 0.05, "file")
    assert [p.file for p in lines[0].points] == given


def test_directories_and_files_that_are_not_results(runs, tmp_path):
    paths, _ = runs
    for path in paths[:3]:
        shutil.copy(path, tmp_path)
    (tmp_path / "notes.h5").write_text("not hdf5")
    done = run_cli("history", str(tmp_path), check_rc=0)
    assert "skipped" in done.stderr and "notes.h5" in done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "x.h5").write_text("nope")
    done = run_cli("history", str(empty))
    assert done.returncode == 2 and "none of the given paths" in done.stderr
    done = run_cli("history", str(tmp_path / "absent"))
    assert done.returncode == 2 and "does not exist" in done.stderr


def test_three_copies_of_the_file_under_test_show_no_step(results_file, tmp_path):
    """The CI runs this on a real quickstart file: every ok cell is one line of 3 points."""
    copies = []
    for k in range(3):
        copy = tmp_path / f"copy{k}.h5"
        shutil.copyfile(results_file, copy)
        _set_start(copy, f"2026-03-0{k + 1}T00:00:00.000Z")
        copies.append(str(copy))
    lines = trends.build_history(copies, "time", 0.05, "date")
    with h5py.File(results_file, "r") as f:
        ok = {
            trends.line_key(json.loads(g.attrs["spec"]))
            for g in f["cells"].values()
            if g.attrs["status"] in (b"ok", "ok") and "summary" in g
        }
    assert {line.key for line in lines} == ok
    assert all(len(line.points) == 3 and not line.steps for line in lines)
    assert "0 with a step beyond noise" in run_cli("history", *copies, check_rc=0).stdout
