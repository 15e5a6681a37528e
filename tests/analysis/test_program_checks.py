"""Program cells checked on a real run (docs/programs.md): repetitions of a program cell form
one series (issue 39 item 3), a program that runs fewer steps than asked is untrusted with
both counts (Note [Program steps asked and run]), a branch package imported from outside the
branch's tree is untrusted naming it (Note [Program code identity]), `env` paths are stored
and other values are not (Note [Stored program environment]), and `analyze` warns when two
branches ran byte-identical code.

One small matrix of plain-Python programs (no torch: a step is a 2 ms sleep) on two branches
of one commit, under `mpirun -np 2`; a Lightning program stopped by max_epochs where the
frameworks' environment exists (.venv-frameworks, `./setup.sh test`). Needs a build:
SCALEBENCH_BUILD_DIR (tests/run_all.sh sets it); skipped otherwise."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import h5py
import pandas as pd
import pytest

from conftest import run_cli, run_scalebench

BUILD = os.environ.get("SCALEBENCH_BUILD_DIR")
pytestmark = pytest.mark.skipif(not BUILD, reason="needs SCALEBENCH_BUILD_DIR (a build)")

ROOT = Path(__file__).resolve().parents[2]
CLIENT = str(ROOT / "program" / "client")

STEPS_PY = '''"""N steps of 2 ms, optionally after importing a module (test_program_checks.py)."""
import sys
import time

import scalebench_client as sb

if len(sys.argv) > 2:
    __import__(sys.argv[2])
for _ in range(int(sys.argv[1])):
    with sb.step():
        with sb.phase("work"):
            time.sleep(0.002)
'''


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _cells(path: Path) -> dict:
    """{experiment: [attrs of each cell, with `metrics` (rank 0's) and `spec` parsed]}."""
    out: dict = {}
    with h5py.File(path, "r") as f:
        for cell_id, cell in f["cells"].items():
            attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in cell.attrs.items()}
            attrs["cell_id"] = cell_id
            assert attrs["status"] == "ok", attrs.get("reason")
            names = json.loads(cell["rank_metrics"].attrs["names"])
            attrs["metrics"] = dict(zip(names, cell["rank_metrics"][0]))
            attrs["spec"] = json.loads(attrs["spec"])
            out.setdefault(attrs["experiment"], []).append(attrs)
    return out


@pytest.fixture(scope="module")
def checks_run(tmp_path_factory):
    """(results file, cells by experiment, the `site` folder shadowing the tree's package)."""
    work = tmp_path_factory.mktemp("program_checks")
    repo, site = work / "repo", work / "site"
    # The script inside the package, as cyto_dl/train.py: `python shadowpkg/steps.py` puts
    # shadowpkg/ first on sys.path, not the tree, so PYTHONPATH decides where
    # `import shadowpkg` comes from.
    (repo / "shadowpkg").mkdir(parents=True)
    (repo / "shadowpkg" / "steps.py").write_text(STEPS_PY)
    (repo / "shadowpkg" / "__init__.py").write_text('WHERE = "tree"\n')
    (site / "shadowpkg").mkdir(parents=True)
    (site / "shadowpkg" / "__init__.py").write_text('WHERE = "site"\n')
    _git("init", "-q", "-b", "main", cwd=repo)
    _git("add", ".", cwd=repo)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "steps", cwd=repo)
    _git("branch", "same", cwd=repo)  # the same code on a second branch

    def experiment(name: str, args: list, pythonpath: str, **extra) -> dict:
        command = ["python3", "shadowpkg/steps.py", *args]
        env = {"PYTHONPATH": pythonpath, "SB_TEST_TOKEN": "not-a-path"}
        return {"name": name, "program": {"command": command, "env": env}, **extra}

    matrix = {
        "name": "program-checks",
        "repo": str(repo),
        "branches": ["main", "same"],
        "defaults": {"device": "cpu", "warmup": 1, "iterations": 5, "timeout_s": 60},
        "sweep": {"modes": ["train"], "batch_sizes": [1], "world_sizes": [1]},
        "experiments": [
            experiment("reps", ["{steps}"], CLIENT, repetitions=3),
            experiment("short", ["3"], CLIENT),
            experiment("shadowed", ["{steps}", "shadowpkg"], f"{site}:{CLIENT}"),
            experiment("intree", ["{steps}", "shadowpkg"], f".:{CLIENT}"),
        ],
    }
    path = run_scalebench(matrix, work)
    return path, _cells(path), site


def test_repetitions_of_a_program_cell_form_one_series(checks_run):
    """Issue 39 item 3: an env value that is not stored (SB_TEST_TOKEN) made the series id of
    repetitions 1 and 2, computed again from the stored spec, differ from repetition 0's."""
    path, cells, _ = checks_run
    reps = cells["reps"]
    assert len(reps) == 6  # 3 repetitions x 2 branches
    assert len({c["series_id"] for c in reps}) == 2
    with h5py.File(path, "r") as f:
        series = {sid: json.loads(g.attrs["cells"]) for sid, g in f["series"].items()}
        completed = {sid: int(g.attrs["completed"]) for sid, g in f["series"].items()}
    assert len(series) == 2, series
    assert all(len(ids) == 3 for ids in series.values()), series
    assert set(completed.values()) == {3}, completed
    for cell in reps:
        assert cell["series_id"] in series
    done = run_cli("analyze", str(path), "--format", "csv", "--table", "repetitions", check_rc=0)
    table = pd.read_csv(io.StringIO(done.stdout))
    assert sorted(table.reps) == ["3/3", "3/3"], done.stdout


def test_a_program_that_ran_fewer_steps_is_untrusted_with_both_counts(checks_run):
    path, cells, _ = checks_run
    for cell in cells["short"]:
        reasons = json.loads(cell["untrusted_reasons"])
        assert any(
            "the program ran 3 steps, 6 were asked (1 warm-up + 5 measured), so 2 were "
            "measured" in r
            for r in reasons
        ), reasons
        assert any("max_epochs" in r and "EarlyStopping" in r for r in reasons), reasons
        assert cell["metrics"]["program_steps_run"] == 3
        assert cell["metrics"]["program_steps_asked"] == 6
    for name in ("reps", "intree"):  # as asked: nothing said
        assert all("untrusted_reasons" not in c for c in cells[name]), name
    from scalebench_analysis.read.loader import load
    from scalebench_analysis.tables.quality import trust_table

    trust = trust_table(load(str(path))).set_index("cell_id")
    for cell in cells["short"]:
        row = trust.loc[cell["cell_id"]]
        assert not row.trusted and "ran 3 steps" in row.untrusted_because, row


def test_a_tree_package_imported_from_elsewhere_is_untrusted_naming_it(checks_run):
    _, cells, site = checks_run
    origin = os.path.realpath(site / "shadowpkg" / "__init__.py")
    for cell in cells["shadowed"]:
        reasons = json.loads(cell["untrusted_reasons"])
        assert any(
            f"'shadowpkg' was imported from {origin}" in r
            and 'PYTHONPATH: "."' in r
            and "prepare" in r
            for r in reasons
        ), reasons
        assert cell["effective_program_code_packages"] == f"shadowpkg={origin}"


def test_the_tree_package_imported_from_the_tree_is_its_digest(checks_run):
    _, cells, _ = checks_run
    digests = set()
    for cell in cells["intree"]:
        assert cell["effective_program_code_packages"] == "shadowpkg=tree"
        assert cell["effective_program_code_digest"].startswith("sha256:")
        assert cell["metrics"]["program_code_files"] == 2  # shadowpkg/steps.py, __init__.py
        digests.add(cell["effective_program_code_digest"])
    assert len(digests) == 1  # the branches ran the same bytes


def test_env_paths_are_stored_and_other_values_are_not(checks_run):
    _, cells, site = checks_run
    env = cells["intree"][0]["spec"]["program"]["env"]
    assert env["PYTHONPATH"] == f".:{CLIENT}"
    assert env["SB_TEST_TOKEN"] == "<not stored>"
    assert cells["shadowed"][0]["spec"]["program"]["env"]["PYTHONPATH"] == f"{site}:{CLIENT}"


def test_analyze_and_compare_warn_that_the_branches_ran_the_same_code(checks_run):
    path = str(checks_run[0])
    for args in (("analyze", path), ("compare", path, "--branches", "main", "same")):
        done = run_cli(*args)
        assert "intree (train): the code that ran is the same on both branches main and same" in (
            done.stderr
        ), done.stderr


FRAMEWORKS_PYTHON = os.environ.get(
    "SCALEBENCH_FRAMEWORKS_PYTHON", str(ROOT / ".venv-frameworks" / "bin" / "python")
)


def test_a_lightning_fit_stopped_by_max_epochs_names_it(tmp_path):
    """The Lightning adapter's `ended` record: 4 batches an epoch and max_epochs=1 end the
    fit after 4 of the 9 steps asked."""
    if not os.access(FRAMEWORKS_PYTHON, os.X_OK):
        pytest.skip(f"needs the frameworks' environment ({FRAMEWORKS_PYTHON}): ./setup.sh test")
    example = ROOT / "docs" / "examples" / "programs" / "lightning_hydra"
    shutil.copy(example / "train.py", tmp_path / "train.py")
    shutil.copytree(example / "configs", tmp_path / "configs")
    command = [
        "python", "train.py", "experiment=cnn", "data.batch_size={batch_size}",
        "data.samples=256", "trainer.max_epochs=1", "++trainer.max_steps={steps}",
        "trainer.devices={local_world_size}", "++trainer.num_nodes={num_nodes}",
        "hydra.run.dir={output_dir}/hydra",
    ]  # fmt: skip
    matrix = {
        "name": "lightning-short",
        "defaults": {"device": "cpu", "warmup": 1, "iterations": 8, "timeout_s": 120},
        "sweep": {"modes": ["train"], "batch_sizes": [64], "world_sizes": [1]},
        "experiments": [
            {
                "name": "cnn",
                "program": {
                    "python": FRAMEWORKS_PYTHON,
                    "command": command,
                    "env": {"PYTHONPATH": f".:{CLIENT}"},
                },
            }
        ],
    }
    (cell,) = _cells(run_scalebench(matrix, tmp_path))["cnn"]
    assert cell["effective_program_ended_by"] == "max_epochs"
    reasons = json.loads(cell["untrusted_reasons"])
    assert any(
        "ran 4 steps, 9 were asked" in r
        and "ended by max_epochs" in r
        and "4 batches an epoch" in r
        for r in reasons
    ), reasons
