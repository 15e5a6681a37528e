"""Program cells on a real run (docs/programs.md): the results file of
docs/examples/programs/run_demo.sh, the user's own DDP script on four branches (two differ in
their data phase; bf16-autocast runs its forward passes in bf16; shifted-outputs has a
deliberate bug in its outputs), at world sizes 1 and 2 (tests/run_all.sh runs it and names
the file in SCALEBENCH_PROGRAMS_FILE; without it these tests are skipped).

Checked against the file's own raw datasets (h5py): every rank's phases tile each of its
steps, the steps add up to the clock the script itself kept around its measured loop, the
branches differ as their code does, each rank's command and output are stored, each branch's
handed outputs are compared with main's (Note [Accuracy across cells]), and every analysis
command reads the file (compare --branches gives a verdict).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from programfiles import measured, read_program_cells

from conftest import run_cli

#: The demo repository's branches (run_demo.sh).
BRANCHES = ("main", "batched-transform", "bf16-autocast", "shifted-outputs")

#: The phases the demo script reports inside each step.
PHASES = ("data", "forward", "backward", "optimizer")


@pytest.fixture(scope="module")
def program_file() -> str:
    path = os.environ.get("SCALEBENCH_PROGRAMS_FILE")
    if not path:
        pytest.skip("needs a real program run: SCALEBENCH_PROGRAMS_FILE (tests/run_all.sh)")
    assert os.path.isfile(path), path
    return path


@pytest.fixture(scope="module")
def cells(program_file):
    """The ok cells by (branch, world size)."""
    return {
        (c["attrs"]["branch"], int(c["attrs"]["world_size"])): c
        for c in read_program_cells(program_file).values()
    }


def test_every_branch_and_world_size_ran_the_users_program(cells):
    assert set(cells) == {(b, w) for b in BRANCHES for w in (1, 2)}
    for (_branch, world), cell in cells.items():
        assert cell["attrs"]["model"].startswith("program:"), cell["attrs"]["model"]
        assert cell["phases"] == [*PHASES, "step"]
        assert cell["timings"].shape[0] == world
        assert len(cell["argv"]) == world
        for argv in cell["argv"]:
            # python: of the matrix replaced command[0]; the placeholders were filled.
            assert argv[0].endswith("env/bin/python"), argv
            assert argv[1:5] == ["train_ddp.py", "--batch-size", "128", "--steps"], argv


def test_the_phases_of_every_iteration_sum_to_its_step_within_1_percent(cells):
    """The client times each phase inside its step; what is left is the client's own cost
    between the phases, microseconds against steps of milliseconds (99.5-99.8 % here). On
    this oversubscribed runner (an orchestrator, two workers and two programs on two cores)
    the scheduler may preempt a program in one of those gaps, so an occasional iteration
    falls further, and a busy machine shifts them all a little (a median of 99.47 % was seen
    with a build running beside the suite): 95 % of each rank's iterations and its median are
    held to 1 %, every iteration to 5 %."""
    for key, cell in cells.items():
        step = measured(cell, "step")
        phases = sum(measured(cell, p) for p in PHASES)
        share = phases / step
        assert np.all(np.isfinite(share)), key
        assert np.all(share <= 1.0 + 1e-9), (key, share.max())
        for rank, row in enumerate(share):
            assert np.median(row) >= 0.99, (key, rank, row)
            assert np.mean(row >= 0.99) >= 0.95, (key, rank, row)
            assert row.min() >= 0.95, (key, rank, row)


def test_the_steps_add_up_to_the_scripts_own_clock_within_2_percent(cells):
    """train_ddp.py keeps its own monotonic clock around the measured steps (not the
    client's), reported as the metric outside_measured_s."""
    for key, cell in cells.items():
        steps = measured(cell, "step").sum(axis=1)
        for rank, metrics in enumerate(cell["metrics"]):
            outside = metrics["program_outside_measured_s"]
            assert abs(steps[rank] / outside - 1) < 0.02, (key, rank, steps[rank], outside)


def test_the_branches_differ_as_their_code_does(cells):
    """main normalises sample by sample in Python, batched-transform the whole batch: the
    data phase, where their code differs, is many times slower on main at both world sizes,
    and so is the step at world size 1. (At world size 2 the step is not compared: two
    programs, two worker ranks and the orchestrator share this runner's two cores, and the
    gloo allreduce's waits there vary by more than the data phase's 1-2 ms.)"""
    for world in (1, 2):
        main, batched = cells[("main", world)], cells[("batched-transform", world)]
        data_ratio = np.median(measured(main, "data")) / np.median(measured(batched, "data"))
        assert data_ratio > 4, (world, data_ratio)
    main, batched = cells[("main", 1)], cells[("batched-transform", 1)]
    assert np.median(measured(main, "step")) > np.median(measured(batched, "step"))


def test_each_branch_is_compared_with_mains_outputs_and_loss(cells):
    """batched-transform (the same math) and bf16-autocast (bf16 forward passes) pass at the
    default tolerance; shifted-outputs (+0.5 on its outputs, a deliberate bug) fails naming
    mae_rel, while its loss (untouched by the bug) passes; main is the baseline itself."""
    for world in (1, 2):
        main = cells[("main", world)]
        assert main["accuracy"] is None, "the baseline is not compared with itself"
        # every rank handed its share of validation_samples 64, [share, 10] logits
        shares = [64 // world + (r < 64 % world) for r in range(world)]
        assert sorted(main["validation_outputs"]) == [f"rank{r}" for r in range(world)]
        for r, share in enumerate(shares):
            assert main["validation_outputs"][f"rank{r}"].shape == (share, 10)
        for branch, verdict in (
            ("batched-transform", "passed"),
            ("bf16-autocast", "passed"),
            ("shifted-outputs", "failed"),
        ):
            accuracy = cells[(branch, world)]["accuracy"]
            assert accuracy is not None, (branch, world)
            assert accuracy["reference_cell"] == main["cell_id"], (branch, world)
            assert accuracy["kind"] == "outputs"
            assert accuracy["verdict"] == verdict, (branch, world, accuracy["failed_checks"])
            assert accuracy["validation_samples"] == 64
            assert accuracy["metric_rel_change.loss"] < 0.01, (branch, accuracy)
            failed = json.loads(accuracy["failed_checks"])
            if verdict == "failed":
                assert failed[0].startswith("mae_rel "), failed
                assert abs(accuracy["mae"] - 0.5) < 1e-3, accuracy["mae"]
            else:
                assert failed == []
                assert accuracy["mae_rel"] < 0.01


def test_each_ranks_output_tail_is_stored(cells):
    for key, cell in cells.items():
        assert all(isinstance(o, str) for o in cell["output"]), key
        assert all(len(o) <= 4096 + 4 for o in cell["output"]), key


def test_every_analysis_command_reads_the_program_run(program_file, tmp_path):
    analyze = run_cli("analyze", program_file, "--baseline-branch", "main", "--details", check_rc=0)
    assert "Speedup against the baseline" in analyze.stdout
    assert "FAIL" in analyze.stdout and "mae_rel" in analyze.stdout, analyze.stdout
    assert "program:pytorch" in analyze.stdout, "labelled with the framework it reported"
    run_cli("analyze", program_file, "--format", "json", check_rc=0)
    gate = run_cli("compare", program_file, "--branches", "main", "batched-transform", check_rc=0)
    # One run per branch: no verdict without the run-to-run variation (issue 40).
    assert gate.stdout.count("inconclusive") >= 2, gate.stdout
    assert "one run per side" in gate.stdout and "repetitions: 3" in gate.stdout
    run_cli("report", program_file, "-o", str(tmp_path / "report.html"), check_rc=0)
    run_cli("trace", program_file, "-o", str(tmp_path / "trace.json"), check_rc=0)
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert any(e.get("name") == "data" for e in trace["traceEvents"]), "no data phase slices"
    run_cli("watch", program_file, "--once", check_rc=0)
    run_cli("history", program_file, check_rc=0)
