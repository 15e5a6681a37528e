"""`scalebench trace` (analysis/scalebench_analysis/timeline.py): the slices of a
world-size-2 training cell add up to its stored phase times, the JSON follows the Trace
Event Format (checked by a validator written here), and bad requests are clear errors."""

from __future__ import annotations

import json
import math
from collections import defaultdict

import h5py
import numpy as np
import pytest

from scalebench_analysis import timeline

from conftest import run_cli

ALLOWED_PHASES = {"X", "M", "i", "I", "B", "E"}


def validate_trace_events(trace: dict) -> None:
    """The Trace Event Format (JSON object form) as Perfetto and chrome://tracing read it:
    every event has a phase, a name and integer pid/tid; timed events a non-negative `ts`;
    complete events a non-negative `dur`; metadata events an args.name (or sort index);
    complete events on one (pid, tid) nest properly."""
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    lanes = defaultdict(list)
    for event in trace["traceEvents"]:
        assert event["ph"] in ALLOWED_PHASES, event
        assert isinstance(event["name"], str) and event["name"], event
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int), event
        if event["ph"] == "M":
            assert "name" in event["args"] or "sort_index" in event["args"], event
            continue
        assert isinstance(event["ts"], (int, float)) and event["ts"] >= 0, event
        assert math.isfinite(event["ts"])
        if event["ph"] == "X":
            assert isinstance(event["dur"], (int, float)) and event["dur"] >= 0, event
            lanes[(event["pid"], event["tid"])].append((event["ts"], event["ts"] + event["dur"]))
    tolerance = 1e-3  # microseconds: float rounding of the conversion
    for lane, slices in lanes.items():
        stack: list[float] = []
        for begin, end in sorted(slices, key=lambda s: (s[0], -s[1])):
            while stack and begin >= stack[-1] - tolerance:
                stack.pop()
            if stack:
                assert end <= stack[-1] + tolerance, f"slice [{begin}, {end}] overlaps on {lane}"
            stack.append(end)


def _two_rank_training_cell(path) -> str:
    with h5py.File(path, "r") as f:
        for cell_id, group in f["cells"].items():
            attrs = group.attrs
            if (
                attrs["mode"] in (b"train", "train")
                and int(attrs["world_size"]) == 2
                and "phase_starts" in group
            ):
                return cell_id
    pytest.skip("the file has no world-size-2 training cell with a timeline (layout < 1.5)")


def test_slices_per_rank_and_iteration_sum_to_the_stored_phase_times(results_file):
    cell_id = _two_rank_training_cell(results_file)
    trace = timeline.build_trace(results_file, [cell_id])
    with h5py.File(results_file, "r") as f:
        group = f["cells"][cell_id]
        timings = group["timings"][()]
        phases = json.loads(group["timings"].attrs["phases"])
        ranks = json.loads(group.attrs["ranks"])
        has_buckets = "bucket_times" in group
    sums = defaultdict(float)
    pids = set()
    for event in trace["traceEvents"]:
        if event["ph"] != "X" or event.get("cat") not in ("warmup", "measured"):
            continue
        pids.add(event["pid"])
        sums[(event["pid"], event["args"]["iteration"], event["name"])] += event["dur"] / 1e6
    assert pids == set(ranks) and len(pids) == 2  # one track per rank
    for g, rank in enumerate(ranks):
        for i in range(timings.shape[1]):
            for p, phase in enumerate(phases):
                expected = timings[g, i, p]
                if np.isnan(expected):
                    assert (rank, i, phase) not in sums
                    continue
                assert sums[(rank, i, phase)] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    buckets = [e for e in trace["traceEvents"] if e.get("cat") == "allreduce"]
    assert bool(buckets) == has_buckets
    validate_trace_events(trace)


def test_the_whole_run_is_a_valid_trace_with_the_orchestrator_track(results_file, tmp_path):
    out = tmp_path / "trace.json"
    run_cli("trace", results_file, "-o", str(out), check_rc=0)
    trace = json.loads(out.read_text())  # strict JSON: no NaN or Infinity
    validate_trace_events(trace)
    names = {
        (e["pid"], e["args"]["name"])
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    assert (0, "rank 0 (orchestrator)") in names
    cells = [e for e in trace["traceEvents"] if e["pid"] == 0 and e.get("cat") == "cell"]
    assert len(cells) == len(trace["otherData"]["cells"])
    with h5py.File(results_file, "r") as f:
        commits = json.loads(f.attrs["commit_log"]) if "commit_log" in f.attrs else []
    writes = [e for e in trace["traceEvents"] if e.get("cat") == "results"]
    assert len(writes) == len(commits)
    assert min(e["ts"] for e in trace["traceEvents"] if e["ph"] != "M") == pytest.approx(0.0)


def test_the_validator_catches_broken_nesting():
    bad = {
        "traceEvents": [
            {"name": "a", "ph": "X", "pid": 1, "tid": 0, "ts": 0, "dur": 10},
            {"name": "b", "ph": "X", "pid": 1, "tid": 0, "ts": 5, "dur": 10},
        ]
    }
    with pytest.raises(AssertionError, match="overlaps"):
        validate_trace_events(bad)


def test_an_unknown_cell_is_a_clear_error(results_file, tmp_path):
    done = run_cli("trace", results_file, "--cell", "00000000deadbeef", "-o", str(tmp_path / "t"))
    assert done.returncode == 2
    assert "00000000deadbeef is not in" in done.stderr


def test_a_cell_without_a_timeline_names_the_layout(results_file, tmp_path):
    cell_id = _two_rank_training_cell(results_file)
    old = tmp_path / "old.h5"
    old.write_bytes(open(results_file, "rb").read())
    with h5py.File(old, "r+") as f:
        del f["cells"][cell_id]["phase_starts"]
    done = run_cli("trace", str(old), "--cell", cell_id, "-o", str(tmp_path / "t.json"))
    assert done.returncode == 2
    assert "has no phase_starts" in done.stderr and "layout 1.5" in done.stderr
