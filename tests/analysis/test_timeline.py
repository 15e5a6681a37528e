"""`scalebench trace` (analysis/scalebench_analysis/output/timeline.py): the slices of a
world-size-2 training cell add up to its stored phase times, the JSON follows the Trace
Event Format (checked by a validator written here), and bad requests are clear errors."""

from __future__ import annotations

import json
import math
from collections import defaultdict

import h5py
import numpy as np
import pytest

from scalebench_analysis.output import timeline

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
            lanes[(event["pid"], event["tid"])].append((event["ts"], event["dur"]))
    for lane, slices in lanes.items():
        _check_nesting(lane, [(ts, ts + dur) for ts, dur in slices], tolerance=1e-3)
        # As Perfetto imports them: ts and dur each truncated to whole nanoseconds.
        in_ns = [(int(ts * 1000.0), int(ts * 1000.0) + int(dur * 1000.0)) for ts, dur in slices]
        _check_nesting(lane, in_ns, tolerance=0)


def _check_nesting(lane, slices, tolerance) -> None:
    """Slices (begin, end) of one thread nest: each lies inside or after the open ones."""
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
    with pytest.raises(AssertionError, match="overlaps"):
        validate_trace_events({"traceEvents": _touching_in_floats()})


def _touching_in_floats() -> list[dict]:
    """Two slices where the second begins at the float sum of the first's ts and dur; once
    truncated to nanoseconds as Perfetto reads them, the first ends 1 ns after the second
    begins (int(ts*1000) + int(dur*1000) > int((ts+dur)*1000) for these values)."""
    ts, dur = 241779919.612, 3326.952
    return [
        {"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}},
        {"name": "b", "ph": "X", "pid": 1, "tid": 1, "ts": ts + dur, "dur": 1.0, "args": {}},
    ]


def test_separating_overlaps_keeps_durations_and_survives_nanosecond_truncation():
    events = _touching_in_floats() + [
        {"name": "c", "ph": "X", "pid": 1, "tid": 1, "ts": 241783247.0, "dur": 2.0, "args": {}},
    ]
    begin_c = events[1]["ts"] + events[1]["dur"]  # c began 0.564 us before b ended
    shifts = timeline.separate_overlaps(events)
    validate_trace_events({"traceEvents": events})
    assert [e["dur"] for e in events] == [3326.952, 1.0, 2.0]
    assert events[1]["ts"] - (241779919.612 + 3326.952) < 1e-3  # below a nanosecond
    assert "shifted_us" not in events[1]["args"]
    assert events[2]["ts"] >= begin_c and events[2]["args"]["shifted_us"] > 0.5
    assert shifts["count"] == 1 and shifts["max_us"] == events[2]["args"]["shifted_us"]


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


def _timeline_cells(path) -> list[str]:
    with h5py.File(path, "r") as f:
        return [c for c, g in f["cells"].items() if "phase_starts" in g]


def test_a_single_cell_trace_starts_at_zero_with_the_commits_of_its_span(results_file):
    cells = _timeline_cells(results_file)
    if not cells:
        pytest.skip("the file has no cell with a timeline (layout < 1.5)")
    cell_id = cells[-1]  # the latest: far from the run's first commits
    trace = timeline.build_trace(results_file, [cell_id])
    timed = [e for e in trace["traceEvents"] if e["ph"] != "M"]
    assert min(e["ts"] for e in timed) == pytest.approx(0.0, abs=1e-6)
    spans = [e for e in timed if e.get("cat") == "cell"]
    for write in (e for e in timed if e.get("cat") == "results"):
        assert any(
            write["ts"] <= s["ts"] + s["dur"] and write["ts"] + write["dur"] >= s["ts"]
            for s in spans
        ), write


def test_a_cell_asked_for_twice_is_exported_once(results_file):
    cells = _timeline_cells(results_file)
    if not cells:
        pytest.skip("the file has no cell with a timeline (layout < 1.5)")
    once = timeline.build_trace(results_file, [cells[0]])
    twice = timeline.build_trace(results_file, [cells[0], cells[0]])
    assert len(twice["traceEvents"]) == len(once["traceEvents"])


def test_gpu_clock_rounding_moves_starts_but_keeps_durations(results_file, tmp_path):
    """On GPUs `phase_starts` are float32 milliseconds since the origin: 100 s into a loop
    their resolution is ~8 us, so back-to-back phases overlap on the phases thread. The
    trace moves such starts (never the durations) so that every thread still nests."""
    cell_id = _two_rank_training_cell(results_file)
    rounded = tmp_path / "gpu.h5"
    rounded.write_bytes(open(results_file, "rb").read())
    with h5py.File(rounded, "r+") as f:
        group = f["cells"][cell_id]
        starts = group["phase_starts"][()] + 100.0
        starts = (starts * 1e3).astype(np.float32).astype(np.float64) / 1e3
        group["phase_starts"][...] = starts
        timings = group["timings"][()]
        phases = json.loads(group["timings"].attrs["phases"])
        ranks = json.loads(group.attrs["ranks"])
    inner = len(phases) - 1  # phases before the whole-iteration one run back to back
    ends = starts[:, :, : inner - 1] + timings[:, :, : inner - 1]
    assert np.nanmax(ends - starts[:, :, 1:inner]) > 0  # the rounding made overlaps
    trace = timeline.build_trace(rounded, [cell_id])
    validate_trace_events(trace)
    shifts = trace["otherData"]["start_shifts"]
    ulp_us = float(np.spacing(np.float32(1e5))) * 1e3  # float32 ms at 100 s, in us
    assert shifts["count"] > 0 and 0 < shifts["max_us"] <= 2 * ulp_us
    slices = [e for e in trace["traceEvents"] if e.get("cat") in ("warmup", "measured")]
    assert len(slices) == np.isfinite(timings).sum()
    for event in slices:
        g = ranks.index(event["pid"])
        expected = timings[g, event["args"]["iteration"], phases.index(event["name"])]
        assert event["dur"] == pytest.approx(expected * 1e6, rel=1e-9)
