"""Fixtures of the analysis tests.

`results_file`: the file under test. SCALEBENCH_RESULTS_FILE names a file from a real
`scalebench run` when set; otherwise a synthetic file is written by make_results.py, which
writes the layout as the C++ store does (checked against its golden listing) and plants
what a short quickstart run lacks: two branches, a bf16 setting, oom / failed / skipped
cells, a straggler, a noisy and a drifting cell, and two repeated cells with their `/series`
(one whose repetitions disagree). tests/run_all.sh runs the suite on both.

Each test runs once per file it reads, and once only if it reads none: with a real file
given, the run is limited to the tests that use a fixture of that file (FILE_FIXTURES);
the run on the synthetic file runs every test.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_results  # noqa: E402
import rawdata  # noqa: E402

# The environment variable naming a real file -> the fixtures whose value depends on it.
FILE_FIXTURES = {
    "SCALEBENCH_RESULTS_FILE": {"results_file", "raw", "synthetic"},
    "SCALEBENCH_REPETITIONS_FILE": {"repeated_file"},  # test_series.py
    "SCALEBENCH_PROGRAMS_FILE": {"program_file"},  # test_program_cells.py
    "SCALEBENCH_LIGHTNING_FILE": {"lightning_file"},  # test_framework_programs.py
    "SCALEBENCH_LIGHTNING_TASKS_FILE": {"lightning_tasks_file"},
    "SCALEBENCH_JAX_FILE": {"jax_file"},
    "SCALEBENCH_KERAS_FILE": {"keras_file"},
    "SCALEBENCH_CYTODL_TRAIN_FILE": {"cytodl_train_file"},  # test_cytodl_example.py
    "SCALEBENCH_CYTODL_INFER_FILE": {"cytodl_infer_file"},
    "SCALEBENCH_CYTODL_SHADOWED_FILE": {"cytodl_shadowed_file"},
    "SCALEBENCH_AOTI_FILE": {"aoti_file"},  # test_aoti_cells.py
    "SCALEBENCH_COMPILE_FILE": {"compile_file"},  # test_compile_axis.py
    "SCALEBENCH_BATCH_AUTO_FILE": {"batch_auto_file"},  # test_batch_auto_example.py
}


def real_file(variable: str) -> str:
    """The results file of a real run that `variable` names (tests/run_all.sh sets it), or a
    skip saying so."""
    path = os.environ.get(variable)
    if not path:
        pytest.skip(f"needs a real run: {variable} (tests/run_all.sh)")
    assert os.path.isfile(path), path
    return path


def run_scalebench(matrix: dict, work: Path, ranks: int = 2, timeout: int = 900) -> Path:
    """Writes `matrix` to WORK/matrix.yaml, runs `mpirun -np RANKS scalebench run` of the build
    in SCALEBENCH_BUILD_DIR on it (the caller skips without one) and returns the results file;
    a non-zero exit fails with scalebench's output."""
    (work / "matrix.yaml").write_text(json.dumps(matrix))
    build = os.environ["SCALEBENCH_BUILD_DIR"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    command = ["mpirun", "-np", str(ranks), "--oversubscribe", f"{build}/bin/scalebench", "run"]
    command += [str(work / "matrix.yaml"), "-o", str(work / "results.h5"), "--force", "-q"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return work / "results.h5"


def pytest_collection_modifyitems(config, items):
    """With real files given, deselects the tests that read none of them: they do not
    depend on the file and run in the synthetic run (tests/run_all.sh)."""
    given = set().union(*(names for var, names in FILE_FIXTURES.items() if os.environ.get(var)))
    if not given:
        return
    keep, dropped = [], []
    for item in items:
        (keep if given & set(getattr(item, "fixturenames", ())) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(autouse=True)
def _console_width(monkeypatch):
    """Console tables are fitted to COLUMNS (output/fit.py Note [Console width]): the same
    120 columns for every test, whatever terminal runs the suite; a test of the width sets
    its own."""
    monkeypatch.setenv("COLUMNS", "120")


@pytest.fixture(scope="session")
def synthetic() -> bool:
    """True when the tests run on the synthetic file (its planted features can be checked)."""
    return not os.environ.get("SCALEBENCH_RESULTS_FILE")


@pytest.fixture(scope="session")
def results_file(tmp_path_factory) -> str:
    given = os.environ.get("SCALEBENCH_RESULTS_FILE")
    if given:
        if not os.path.isfile(given):
            pytest.fail(f"SCALEBENCH_RESULTS_FILE={given} is not a file")
        return given
    path = tmp_path_factory.mktemp("results") / "synthetic.h5"
    return make_results.write_results(path, repetitions=True)


@pytest.fixture(scope="session")
def raw(results_file) -> rawdata.RawFile:
    """The file read with h5py only, for recomputing every checked number."""
    return rawdata.read(results_file)


def run_cli(*args: str, check_rc: int | None = None, subprocess_run: bool = False):
    """Runs the CLI with ARGS and returns (returncode, stdout, stderr) as a
    CompletedProcess. In-process (cli.main) unless `subprocess_run`, which starts
    `python -m scalebench_analysis` (slower: a fresh interpreter imports pandas and scipy)."""
    if subprocess_run:
        done = subprocess.run(
            [sys.executable, "-m", "scalebench_analysis", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
    else:
        from scalebench_analysis.cli import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(args))
            except SystemExit as stop:  # argparse usage errors
                rc = stop.code
        done = subprocess.CompletedProcess(args, rc, out.getvalue(), err.getvalue())
    if check_rc is not None:
        assert done.returncode == check_rc, (done.returncode, done.stdout, done.stderr)
    return done
