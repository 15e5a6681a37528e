"""Preflight of program cells on a real Hydra app (issue 39 item 7, Note [Program preflight]
in program/preflight/program_preflight.h): `scalebench validate --preflight` and `scalebench run`
compose each distinct configuration of a CytoDL-style task file once (`preflight: hydra`:
the command with `--cfg job`) before any cell; a typo'd override and a missing experiment
fail at their CSV rows with Hydra's own message, a good file passes, and nothing trains.

The app is docs/examples/programs/lightning_hydra's train.py and configs, in a git repository
of one branch, run by the frameworks' environment (.venv-frameworks, `./setup.sh test`;
SCALEBENCH_FRAMEWORKS_PYTHON names another). Needs a build: SCALEBENCH_BUILD_DIR
(tests/run_all.sh sets it). Skipped without either. The times are printed (pytest -s), never
asserted: the goal is one composition per distinct configuration, not a training start."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

BUILD = os.environ.get("SCALEBENCH_BUILD_DIR")
ROOT = Path(__file__).resolve().parents[2]
CLIENT = str(ROOT / "program" / "client")
EXAMPLE = ROOT / "docs" / "examples" / "programs" / "lightning_hydra"
FRAMEWORKS_PYTHON = os.environ.get(
    "SCALEBENCH_FRAMEWORKS_PYTHON", str(ROOT / ".venv-frameworks" / "bin" / "python")
)

pytestmark = [
    pytest.mark.skipif(not BUILD, reason="needs SCALEBENCH_BUILD_DIR (a build)"),
    pytest.mark.skipif(
        not os.access(FRAMEWORKS_PYTHON, os.X_OK),
        reason=f"needs the frameworks' environment ({FRAMEWORKS_PYTHON}): ./setup.sh test",
    ),
]

HEADER = "branch,experiment,trainer,max_epochs,batch_size,overrides\n"
# Two repetitions: two cells of one configuration.
GOOD = "main,cnn,cpu,1,16,model.width=8 scalebench.repetitions=2\n"
# A key the trainer config lacks (plain `trainer.` instead of `++trainer.`).
TYPO = "main,cnn,cpu,1,16,trainer.max_stepz=5\n"
# The same command line in another cell (its timeout is not on the command line).
TYPO_AGAIN = "main,cnn,cpu,1,16,trainer.max_stepz=5 scalebench.timeout_s=500\n"
# An experiment config that does not exist.
MISSING = "main,cnnx,cpu,1,16,\n"

TEMPLATE = {
    "python": FRAMEWORKS_PYTHON,
    "command": [
        "python", "train.py", "experiment={experiment}", "trainer={trainer}",
        "trainer.max_epochs={max_epochs}", "data.batch_size={batch_size}",
        "++trainer.max_steps={steps}", "trainer.devices={local_world_size}",
        "++trainer.num_nodes={num_nodes}", "hydra.run.dir={output_dir}/hydra", "{overrides}",
    ],
    "env": {"PYTHONPATH": f".:{CLIENT}"},
    "preflight": "hydra",
}  # fmt: skip


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _project(tmp_path: Path, rows: str) -> Path:
    """A repository (branch main) with the example's app, tasks.csv with `rows` and its
    program template; returns the task file."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(EXAMPLE / "train.py", repo / "train.py")
    shutil.copytree(EXAMPLE / "configs", repo / "configs")
    # JSON is YAML: the template as scalebench reads it.
    (repo / "tasks.program.yaml").write_text(__import__("json").dumps(TEMPLATE))
    (repo / "tasks.csv").write_text(HEADER + rows)
    _git("init", "-q", "-b", "main", cwd=repo)
    _git("add", ".", cwd=repo)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "app", cwd=repo)
    return repo / "tasks.csv"


def _scalebench(*args: str, ranks: int = 0, timeout: int = 600):
    env = dict(
        os.environ,
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        SCALEBENCH_RUN_SUMMARY="0",
    )
    command = [f"{BUILD}/bin/scalebench", *args]
    if ranks:
        command = ["mpirun", "-np", str(ranks), "--oversubscribe", *command]
    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - started


def test_validate_preflight_names_the_rows_whose_configuration_does_not_compose(tmp_path):
    tasks = _project(tmp_path, GOOD + TYPO + MISSING + TYPO_AGAIN)
    done, wall_s = _scalebench("validate", "--preflight", str(tasks))
    print(f"\nvalidate --preflight of 3 configurations (4 rows, 5 cells): {wall_s:.1f} s")
    print(done.stderr)
    assert done.returncode == 2, done.stdout + done.stderr
    failure = "preflight: 2 of 3 program configurations failed its check; no cell has run"
    assert failure in done.stderr, done.stderr
    err = done.stderr[done.stderr.index(failure) :]  # after the progress lines
    # The typo, at both rows that use it, with Hydra's own message naming the key.
    assert re.search(
        r"tasks\.csv:3, \S*tasks\.csv:5 \(experiment cnn, branch main, 2 cells\): exit status 1",
        err,
    ), err
    assert "Key 'max_stepz' is not in struct" in err
    assert "trainer.max_stepz=5 --cfg job" in err
    # The missing experiment, at its row.
    assert re.search(r"tasks\.csv:4 \(experiment cnnx, branch main\): exit status 1", err), err
    assert "Could not find 'experiment/cnnx'" in err
    # Row 2's configuration (two cells) passed: it is not named.
    assert not re.search(r"tasks\.csv:2\b", err), err
    assert "What to change: correct the row or experiment named above" in err
    assert "--no-preflight" in err
    # The temporary worktree is gone, and the repository keeps no record of it.
    listed = subprocess.run(
        ["git", "worktree", "list", "--porcelain"],
        cwd=tasks.parent,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert listed.count("worktree ") == 1, listed


def test_a_good_file_passes_with_one_composition_per_distinct_configuration(tmp_path):
    tasks = _project(tmp_path, GOOD + GOOD.replace("model.width=8", "model.width=16"))
    done, wall_s = _scalebench("validate", "--preflight", str(tasks))
    assert done.returncode == 0, done.stdout + done.stderr
    summary = re.search(
        r"preflight: 2 of 2 configurations of 4 program cells passed in .*", done.stdout
    )
    assert summary, done.stdout
    # One composition by hand, for the printed comparison.
    started = time.monotonic()
    alone = subprocess.run(
        [FRAMEWORKS_PYTHON, "train.py", "experiment=cnn", "model.width=8", "--cfg", "job"],
        cwd=tasks.parent,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=f".:{CLIENT}"),
    )
    one_s = time.monotonic() - started
    assert alone.returncode == 0, alone.stderr
    print(f"\n{summary.group(0)}; validate --preflight {wall_s:.1f} s in all;"
          f" one `train.py --cfg job` by hand {one_s:.1f} s")  # fmt: skip


def test_run_stops_before_any_cell_and_writes_no_results_file(tmp_path):
    tasks = _project(tmp_path, TYPO)  # one check: the run's path, not the matching again
    results = tmp_path / "r.h5"
    done, wall_s = _scalebench("run", str(tasks), "-o", str(results), "-q", ranks=2)
    print(f"\nrun stopped by the preflight after {wall_s:.1f} s")
    assert done.returncode == 2, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert "tasks.csv:2 (experiment cnn, branch main): exit status 1" in out, out
    assert "Key 'max_stepz' is not in struct" in out, out
    assert not results.exists()
    log = (tmp_path / "r.h5.logs" / "preflight.log").read_text()
    assert "==== preflight of" in log and "Key 'max_stepz' is not in struct" in log, log
