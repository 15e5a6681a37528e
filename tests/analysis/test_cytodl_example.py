"""The real CytoDL (cyto-dl 0.6.2 from PyPI) on two branches: the results files of
docs/examples/cytodl/run_example.sh, run by tests/run_all.sh with CytoDL's own environment
(SCALEBENCH_CYTODL_VENV) and named in SCALEBENCH_CYTODL_TRAIN_FILE, SCALEBENCH_CYTODL_INFER_FILE and
SCALEBENCH_CYTODL_SHADOWED_FILE and SCALEBENCH_CYTODL_AUTO_FILE (cytodl_auto.csv:
`repetitions: auto`); each test is skipped without its file.

The branch `slow-forward` sleeps SLOW_FORWARD_S in `MultiTaskIm2Im._train_forward`
(docs/examples/cytodl/make_project.py) and changes nothing else: every check below is one the
measurement controls (where the time went, which code ran, what was stored), none a share of
the machine's speed (issue 43).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import scalebench_analysis as sa
from programfiles import measured, read_program_cells, shares

from conftest import run_cli

SLOW_FORWARD_S = 0.05  # make_project.py
LIGHTNING_PHASES = ("data", "hooks", "h2d", "forward", "zero_grad", "backward", "optimizer")
INFERENCE_PHASES = ("data", "hooks", "h2d", "forward", "post")


def _file(variable: str) -> str:
    path = os.environ.get(variable)
    if not path:
        pytest.skip(f"needs the CytoDL example's run with CytoDL's environment: {variable}")
    assert os.path.isfile(path), path
    return path


@pytest.fixture(scope="module")
def cytodl_train_file() -> str:
    return _file("SCALEBENCH_CYTODL_TRAIN_FILE")


@pytest.fixture(scope="module")
def cytodl_infer_file() -> str:
    return _file("SCALEBENCH_CYTODL_INFER_FILE")


@pytest.fixture(scope="module")
def cytodl_shadowed_file() -> str:
    return _file("SCALEBENCH_CYTODL_SHADOWED_FILE")


@pytest.fixture(scope="module")
def cytodl_auto_file() -> str:
    return _file("SCALEBENCH_CYTODL_AUTO_FILE")


def _by_branch_and_world(cells: dict) -> dict:
    return {(c["attrs"]["branch"], int(c["attrs"]["world_size"])): c for c in cells.values()}


def test_training_rows_report_every_phase_on_every_rank_of_both_branches(cytodl_train_file):
    cells = _by_branch_and_world(read_program_cells(cytodl_train_file))
    assert set(cells) == {("main", 1), ("main", 2), ("slow-forward", 1), ("slow-forward", 2)}
    for (branch, world), cell in cells.items():
        attrs = cell["attrs"]
        assert attrs["effective_program_framework"] == "lightning", attrs
        assert cell["timings"].shape[0] == world
        assert set(cell["phases"]) == {*LIGHTNING_PHASES, "step"}, cell["phases"]
        # CytoDL's own script ran, with the template's Hydra overrides and the cell's layout.
        for argv in cell["argv"]:
            assert argv[1] == "cyto_dl/train.py", argv
            assert f"trainer.devices={world}" in argv and "++trainer.max_steps=15" in argv, argv
        # Every rank ran the steps asked (2 warm-up + 10 measured), then the 3 profiled ones
        # (max_steps 15 ended the fit); the timings hold the warm-up and measured ones only.
        for rank in cell["metrics"]:
            assert rank["program_steps_asked"] == rank["program_steps_run"] == 12, rank
            assert rank["profile_steps"] == 3, rank
        assert cell["timings"].shape[1] == 12, cell["timings"].shape
        assert attrs["effective_program_ended_by"] == "max_steps", attrs
        # No time counted twice; the phases lie within their step.
        assert np.all(shares(cell, LIGHTNING_PHASES) <= 1 + 1e-9), (branch, world)
        assert np.all(measured(cell, "forward") > 0)


def test_the_branchs_change_lands_in_the_forward_phase(cytodl_train_file):
    """The sleep is inside `_train_forward`, which Lightning's training_step runs: every
    measured forward of slow-forward holds it (a lower bound the load cannot lower), and the
    forward's fastest step grows by about it where the other model phases' do not. The
    fastest step, not the median: the two cells run one after the other, and a load that
    comes and goes between them moved main's forward median by 0.27 s (issue 43; a rerun
    beside a finishing test suite), five times the sleep, while a step's fastest time is
    what no load can lower and a switching load leaves some steps of each cell untouched."""
    cells = _by_branch_and_world(read_program_cells(cytodl_train_file))
    for world in (1, 2):
        main, slow = cells[("main", world)], cells[("slow-forward", world)]
        assert np.all(measured(slow, "forward") >= SLOW_FORWARD_S), measured(slow, "forward")
        delta = {
            phase: float(np.min(measured(slow, phase)) - np.min(measured(main, phase)))
            for phase in ("forward", "backward", "optimizer", "zero_grad", "h2d", "hooks")
        }
        assert delta["forward"] >= 0.5 * SLOW_FORWARD_S, (world, delta)
        others = max(abs(v) for k, v in delta.items() if k != "forward")
        assert delta["forward"] > others, (world, delta)


def test_operator_profiles_place_cytodls_operators_in_their_phases(cytodl_train_file):
    """`scalebench.profile_steps=3` (issue 42 item 5): the adapter's phases are the profiler's
    scopes, so the 3-D convolutions of CytoDL's DynUNet are in `forward`, their gradients in
    `backward`, Adam's update in `optimizer`, on both branches and world sizes."""
    done = run_cli(
        "analyze", cytodl_train_file, "--ops", "--ops-limit", "50", "--format", "json", check_rc=0
    )
    cells = json.loads(done.stdout)
    assert len(cells) == 4, [c["cell_id"] for c in cells]
    for cell in cells:
        assert cell["steps"] == 3
        by_phase: dict = {}
        for op in cell["ops"]:
            by_phase.setdefault(op["phase"], []).append(op["name"])
        assert any("conv" in name for name in by_phase["forward"]), by_phase["forward"]
        assert "aten::convolution_backward" in by_phase["backward"], by_phase["backward"]
        assert any("Adam" in name for name in by_phase["optimizer"]), by_phase["optimizer"]
    gate = run_cli("compare", cytodl_train_file, "--branches", "main", "slow-forward", "--ops")
    assert "operators by their share of the step's change" in gate.stdout, gate.stdout[-2000:]


def test_each_branch_ran_its_own_code_and_the_digests_differ(cytodl_train_file):
    cells = _by_branch_and_world(read_program_cells(cytodl_train_file))
    digests = {}
    for (branch, _world), cell in cells.items():
        attrs = cell["attrs"]
        assert attrs["effective_program_code_packages"] == "cyto_dl=tree", attrs
        assert "untrusted_reasons" not in attrs or "code identity" not in attrs["untrusted_reasons"]
        digests.setdefault(branch, set()).add(attrs["effective_program_code_digest"])
    assert len(digests["main"]) == len(digests["slow-forward"]) == 1, digests
    assert digests["main"] != digests["slow-forward"]


def test_the_accuracy_check_passes_against_main_without_editing_cytodl(cytodl_train_file):
    """`scalebench.validate=true scalebench.baseline.branch=main` in the CSV: the Lightning
    adapter took the outputs of a fixed validation batch itself (CytoDL never calls the
    client); the branch changes only time, so its outputs equal main's."""
    cells = _by_branch_and_world(read_program_cells(cytodl_train_file))
    for world in (1, 2):
        main, slow = cells[("main", world)], cells[("slow-forward", world)]
        assert main["validation_outputs"], "main stored no outputs"
        accuracy = slow["accuracy"]
        assert accuracy is not None, slow["output"][0][-2000:]
        assert accuracy["verdict"] == "passed", accuracy
        assert accuracy["reference_cell"] == main["cell_id"], accuracy
        assert int(accuracy["validation_samples"]) >= 1
        assert float(accuracy["mae_rel"]) <= float(accuracy["tolerance"])


def test_run_level_segments_hold_the_figures_of_cytodls_benchmark_scripts(cytodl_train_file):
    """Every figure CytoDL's benchmark scripts report has a stored one (issue 39 item 5): the
    whole program, model init, data setup, the sanity check, the fit and its validation loops,
    checkpoint saving, the test after fit, the first batch (the timings' first step)."""
    cells = read_program_cells(cytodl_train_file)
    wanted = {
        "data_setup",
        "model_setup",
        "sanity_check",
        "fit",
        "train",
        "validation",
        "checkpoint_save",
        "test",
    }
    for cell in cells.values():
        for rank in cell["metrics"]:
            for segment in wanted:
                assert rank[f"segment_{segment}_count"] >= 1, (segment, rank)
                assert rank[f"segment_{segment}_s"] > 0, (segment, rank)
            assert rank["program_startup_s"] > 0 and rank["program_after_steps_s"] > 0
            # The steps lie inside the fit, the fit inside the program.
            assert rank["program_steps_span_s"] <= rank["segment_fit_s"]
        assert cell["timings"][:, 0, cell["phases"].index("step")].min() > 0  # the first batch
    done = run_cli("analyze", cytodl_train_file, "--format", "json", check_rc=0)
    segments = json.loads(done.stdout)["sections"]["segments"]
    assert {row["segment"] for row in segments} >= wanted | {"wall", "launch_to_first_step"}


def test_inference_rows_have_per_batch_figures(cytodl_infer_file):
    """CytoDL's eval.py (trainer.predict) is an inference cell with a timed batch each, not
    one wall time (issue 39 item 4)."""
    cells = _by_branch_and_world(read_program_cells(cytodl_infer_file))
    assert set(cells) == {("main", 1), ("slow-forward", 1)}
    for cell in cells.values():
        assert cell["attrs"]["mode"] == "infer"
        assert set(cell["phases"]) == {*INFERENCE_PHASES, "batch"}, cell["phases"]
        batch = measured(cell, "batch")
        assert batch.shape[1] >= 6 and np.all(batch > 0), batch
        assert np.all(measured(cell, "forward") <= batch + 1e-9)
        assert cell["argv"][0][1] == "cyto_dl/eval.py"
        assert any(a.startswith("checkpoint.ckpt_path=") for a in cell["argv"][0])
        assert cell["metrics"][0]["segment_predict_count"] == 1
    done = run_cli("analyze", cytodl_infer_file, "--format", "json", check_rc=0)
    rows = json.loads(done.stdout)["sections"]["cells"]
    for row in rows:
        assert row["p99_ms"] >= row["median_ms"] > 0, row


def test_the_shadowed_branch_is_flagged_with_its_remedy(cytodl_shadowed_file):
    """Without PYTHONPATH, `python cyto_dl/train.py` imports the cyto_dl installed in the
    environment: the cell measured that code, and says so (issue 39 item 1)."""
    (cell,) = read_program_cells(cytodl_shadowed_file).values()
    attrs = cell["attrs"]
    assert "site-packages/cyto_dl/__init__.py" in attrs["effective_program_code_packages"]
    reasons = json.loads(attrs["untrusted_reasons"])
    (reason,) = [r for r in reasons if r.startswith("code identity")]
    assert "'cyto_dl'" in reason and "installed in the environment" in reason, reason
    assert 'PYTHONPATH: "."' in reason, reason
    done = run_cli("analyze", cytodl_shadowed_file, check_rc=0)
    assert "trusted no" in done.stdout or "untrusted" in done.stdout, done.stdout


def test_repetitions_auto_decides_the_slower_branch(cytodl_auto_file, monkeypatch):
    """cytodl_auto.csv: both branches at world 1, `repetitions: auto` up to 6 rounds (issue
    52's done-when). `slow-forward` is never called an improvement; decided, it is a
    regression carried by forward, judged at the looks' alpha, and the run stopped at the
    round that decided it (every cell of a round after it recorded skipped); undecided, the
    console says the budget ran out (its resolution line) rather than giving a verdict."""
    monkeypatch.setenv("COLUMNS", "400")
    done = run_cli("compare", cytodl_auto_file, "--branches", "main", "slow-forward", check_rc=None)
    out = run_cli(
        "compare",
        cytodl_auto_file,
        "--branches",
        "main",
        "slow-forward",
        "--format",
        "json",
        check_rc=None,
    )
    (row,) = json.loads(out.stdout)["sections"]["regressions"]
    assert row["verdict"] != "improvement", row
    cells = sa.load(cytodl_auto_file).cells
    rounds = set(cells[cells.status == "ok"].repetition.astype(int))
    if row["verdict"] == "regression":
        assert row["carried_by"] == "forward", row
        assert row["sequential"] is True and row["alpha"] < 0.05, row
        assert "at the looks' alpha" in done.stdout, done.stdout
        assert len(rounds) == row["n_base"] == row["n_new"] <= 6, (rounds, row)
    else:
        assert row["verdict"] in ("inconclusive", "not significant"), row
        assert f"resolution: {row['label']}:" in done.stdout, done.stdout
