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

from programfiles import measured, measured_starts, read_program_cells, record_gaps, step_gaps

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
    this oversubscribed runner (an orchestrator, two workers and two programs on two cores),
    and more on a busy machine (issue 43), the scheduler preempts a program in one of those
    gaps in some iterations: that is the machine, not the client. So the records are checked
    exactly where the load cannot move them (every phase of every iteration, one after
    another inside its step), and the time between them by gap: each gap's median over the
    iterations, and each iteration less its one longest gap (where a preemption lands)."""
    for key, cell in cells.items():
        step = measured(cell, "step")
        phases = sum(measured(cell, p) for p in PHASES)
        share = phases / step
        assert np.all(np.isfinite(share)), key
        assert np.all(share <= 1.0 + 1e-9), (key, share.max())  # no time counted twice
        for rank in range(step.shape[0]):
            gaps = record_gaps(cell, rank, PHASES)
            # Guards against a phase recorded at the wrong moment or not at all in any
            # iteration: exact.
            assert np.all(np.isfinite(gaps)) and np.all(gaps >= -1e-9), (key, rank, gaps)
            # Guards against time the client loses in most iterations (its own cost grown,
            # a phase cut short): the gaps' medians within 1 % of the median step.
            typical = np.median(step[rank])
            assert np.median(gaps, axis=0).sum() <= 0.01 * typical, (key, rank, gaps)
            # Guards against time lost in some iterations only: in 95 % of the iterations,
            # and in every one to 5 %, the gaps but the longest within 1 % of the step.
            rest = (gaps.sum(axis=1) - gaps.max(axis=1)) / step[rank]
            assert np.mean(rest <= 0.01) >= 0.95, (key, rank, rest)
            assert rest.max() <= 0.05, (key, rank, rest)


def test_the_steps_add_up_to_the_scripts_own_clock_within_2_percent(cells):
    """train_ddp.py keeps its own monotonic clock around the measured steps (not the
    client's), reported as the metric outside_measured_s. Guards against step records that
    miss part of their step or count another's: the records lie inside the script's clock,
    one after another (exact), the gaps between them (the loop's own code) have a median
    within 2 % of the step, and the script's clock passes the records' span by under 2 %. A
    busy machine preempting the program between a few steps moved the sum of the gaps past
    2 % (issue 43); it does not move their median."""
    for key, cell in cells.items():
        step = measured(cell, "step")
        begin = measured_starts(cell, "step")
        for rank, metrics in enumerate(cell["metrics"]):
            outside = metrics["program_outside_measured_s"]
            assert step[rank].sum() <= outside + 1e-6, (key, rank, step[rank].sum(), outside)
            gaps = step_gaps(cell, rank)
            assert np.all(gaps >= -1e-9), (key, rank, gaps)
            assert np.median(gaps) < 0.02 * np.median(step[rank]), (key, rank, gaps)
            span = begin[rank, -1] + step[rank, -1] - begin[rank, 0]
            assert outside - span < 0.02 * outside, (key, rank, span, outside)


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
