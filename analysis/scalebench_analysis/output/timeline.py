"""`scalebench trace`: a cell's or a run's per-rank timeline as a Chrome/Perfetto trace.

Input (results layout 1.5, schemas/results-layout.md): per cell `phase_starts` (when each
phase of each iteration began on each rank, seconds since the group's common origin),
`timings` (how long it took), the rank metric `loop_origin_epoch_s` (the origin on the
rank's system clock), `bucket_times` (DDP gradient buckets: launched / completed, host
clock), the cell attributes `ranks`, `started_at` / `finished_at`, and the root
`commit_log` (rank 0's writer commits).

Output: the Trace Event Format's JSON object form ({"traceEvents": [...]}), which
ui.perfetto.dev and chrome://tracing open. Tracks:

* one process per worker (pid = its MPI_COMM_WORLD rank, named "rank N (host)"), with
  thread 0 "iterations" (one complete event per iteration: the whole-iteration phase,
  `step` or `batch`, category `warmup` or `measured`), thread 1 "phases" (one complete
  event per phase per iteration) and, for DDP training, threads 2 "allreduce bucket 0"
  and up (one thread per bucket, since the allreduces of consecutive buckets overlap:
  launch to completion; completion unknown with NCCL: an instant event at the launch).
  The whole-iteration slices and the phases sit on two threads because their begin times
  are separate clock reads: a phase may start or end a few nanoseconds outside its
  iteration, which would break the nesting the viewers require on one thread. Durations
  are never altered.
  Consecutive slices of one thread can still touch: on GPUs the phases run back to back on
  the stream and `phase_starts` are CUDA event times since the origin in float32
  milliseconds (about 1 us resolution 10 s after the origin, 8 us after 100 s), so a slice
  may begin up to that much before the previous one on its thread ends. Such a slice is
  moved later to where the previous one ends, keeping its duration, since the viewers
  need the slices of one thread to nest (Perfetto drops overlapping ones); also by the
  float rounding of the microseconds, to whole nanoseconds as Perfetto reads them. A move
  of 1 ns or more is in the slice's args `shifted_us`, otherData `start_shifts` has the
  count and the largest.
* process 0 "rank 0 (orchestrator)": one slice per cell from its dispatch to the arrival of
  its last result (a lane per concurrently running cell), and thread 100 "writer" with one
  slice per commit of the results file (with --cell: the commits while those cells ran).

Time zero is the earliest event exported; `ts` and `dur` are microseconds (floats). Ranks of
one cell share the origin through a barrier (microseconds apart within a node); cells and
nodes are placed by the system clock, which agrees across nodes as far as NTP makes it.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from ..errors import ResultsFileError, UsageError
from ..read.h5text import epoch_seconds, open_results, text

US = 1e6
ORCHESTRATOR_PID = 0
WRITER_TID = 100
ITERATION_TID, PHASE_TID, BUCKET_TID = 0, 1, 2


@dataclass
class CellTrack:
    """What the trace needs of one cell."""

    cell_id: str
    label: str
    ranks: list[int]
    hosts: list[str]
    phases: list[str]
    warmup: int
    timings: np.ndarray  # (world, rows, phases)
    starts: np.ndarray  # (world, rows, phases)
    origins: np.ndarray  # (world,) Unix seconds
    started_at: float | None
    finished_at: float | None
    buckets: np.ndarray | None = None  # (world, rows, buckets, 2)
    bucket_bytes: list[int] = field(default_factory=list)


def cell_label(attrs) -> str:
    """branch/experiment/mode/b<batch>/w<world>/<precision>, as scalebench's logs write it."""
    branch = text(attrs.get("branch", "")) or "-"
    batch = int(attrs.get("batch_size", 0))
    return (
        f"{branch}/{text(attrs.get('experiment', ''))}/{text(attrs.get('mode', ''))}"
        f"/b{batch if batch else 'auto'}/w{int(attrs.get('world_size', 0))}"
        f"/{text(attrs.get('precision', ''))}"
    )


def read_cell(group: h5py.Group, cell_id: str) -> CellTrack:
    """The track data of one cell; ResultsFileError when it has no per-rank timeline."""
    if "timings" not in group:
        raise ResultsFileError(
            f"cell {cell_id} has no timings (status {text(group.attrs.get('status', '?'))})"
        )
    if "phase_starts" not in group:
        raise ResultsFileError(
            f"cell {cell_id} has no phase_starts: it was written by a scalebench older than "
            "results layout 1.5; run it again to get its timeline"
        )
    timings_set = group["timings"]
    phases = json.loads(text(timings_set.attrs["phases"]))
    metrics = group["rank_metrics"]
    names = json.loads(text(metrics.attrs["names"]))
    if "loop_origin_epoch_s" not in names:
        raise ResultsFileError(f"cell {cell_id} has phase_starts but no loop_origin_epoch_s metric")
    origins = np.asarray(metrics[()])[:, names.index("loop_origin_epoch_s")]
    ranks = json.loads(text(group.attrs.get("ranks", "[]")))
    hosts = [text(h) for h in group["rank_hosts"][()]] if "rank_hosts" in group else []
    track = CellTrack(
        cell_id=cell_id,
        label=cell_label(group.attrs),
        ranks=[int(r) for r in ranks] or list(range(1, timings_set.shape[0] + 1)),
        hosts=hosts,
        phases=phases,
        warmup=int(timings_set.attrs.get("warmup_iterations", 0)),
        timings=np.asarray(timings_set[()], dtype=float),
        starts=np.asarray(group["phase_starts"][()], dtype=float),
        origins=np.asarray(origins, dtype=float),
        started_at=epoch_seconds(text(group.attrs.get("started_at", ""))),
        finished_at=epoch_seconds(text(group.attrs.get("finished_at", ""))),
    )
    if "bucket_times" in group:
        dataset = group["bucket_times"]
        track.buckets = np.asarray(dataset[()], dtype=float)
        track.bucket_bytes = [int(b) for b in json.loads(text(dataset.attrs["bucket_bytes"]))]
    return track


def _complete(name, cat, pid, tid, start_s, dur_s, args) -> dict:
    """A complete event; `start_s` is seconds since time zero (subtract the zero from the
    origin first: Unix seconds near 1.7e9 carry only ~0.2 us of precision in a double)."""
    return {
        "name": name,
        "cat": cat,
        "ph": "X",
        "pid": pid,
        "tid": tid,
        "ts": start_s * US,
        "dur": max(dur_s, 0.0) * US,
        "args": args,
    }


def _metadata(name, pid, tid, value) -> dict:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": {"name": value}}


def worker_events(track: CellTrack, zero: float) -> list[dict]:
    """Iteration, phase and bucket slices of every rank of one cell."""
    events = []
    whole = len(track.phases) - 1
    world, rows, _ = track.timings.shape
    for g in range(world):
        pid = track.ranks[g] if g < len(track.ranks) else g + 1
        if not math.isfinite(track.origins[g]):
            continue
        origin = track.origins[g] - zero  # seconds since time zero
        for i in range(rows):
            cat = "warmup" if i < track.warmup else "measured"
            base = {"cell_id": track.cell_id, "cell": track.label, "iteration": i}
            for p, phase in enumerate(track.phases):
                begin, dur = track.starts[g, i, p], track.timings[g, i, p]
                if not (math.isfinite(begin) and math.isfinite(dur)):
                    continue
                tid = ITERATION_TID if p == whole else PHASE_TID
                events.append(_complete(phase, cat, pid, tid, origin + begin, dur, dict(base)))
            if track.buckets is None or i >= track.buckets.shape[1]:
                continue
            for b, (launched, completed) in enumerate(track.buckets[g, i]):
                if not math.isfinite(launched):
                    continue
                args = dict(base, bucket=b, bytes=track.bucket_bytes[b])
                name = f"allreduce bucket {b} ({track.bucket_bytes[b] / 2**20:.2f} MiB)"
                if math.isfinite(completed):
                    events.append(
                        _complete(
                            name,
                            "allreduce",
                            pid,
                            BUCKET_TID + b,
                            origin + launched,
                            completed - launched,
                            args,
                        )
                    )
                else:  # NCCL: the host does not see the completion
                    events.append(
                        {
                            "name": name,
                            "cat": "allreduce",
                            "ph": "i",
                            "s": "t",
                            "pid": pid,
                            "tid": BUCKET_TID + b,
                            "ts": (origin + launched) * US,
                            "args": args,
                        }
                    )
    return events


def viewer_ns(us: float) -> int:
    """Nanoseconds as Perfetto's JSON importer reads a float microsecond value (it
    truncates `value * 1000`, for `ts` and `dur` separately)."""
    return int(us * 1000.0)


def separate_overlaps(events: list[dict]) -> dict:
    """Moves each complete event that begins before the previous one on its (pid, tid) ends
    to that end, keeping its duration, so that the thread's slices also follow each other
    once a viewer truncates them to whole nanoseconds. Every thread of this trace holds a
    sequence (iterations, phases, one bucket, one lane of cells, the writer), never nested
    slices. A move of a nanosecond or more is recorded in the event's args `shifted_us`;
    returns {"count": such moves, "max_us": the largest move}."""
    lanes: dict[tuple[int, int], list[dict]] = {}
    for event in events:
        if event["ph"] == "X":
            lanes.setdefault((event["pid"], event["tid"]), []).append(event)
    count, largest = 0, 0.0
    for lane in lanes.values():
        lane.sort(key=lambda e: e["ts"])
        end_us, end_ns = -math.inf, -1
        for event in lane:
            begin = max(event["ts"], end_us)
            while viewer_ns(begin) < end_ns:  # float rounding at a nanosecond boundary
                begin = math.nextafter(begin, math.inf)
            shift = begin - event["ts"]
            if shift > 0:
                event["ts"] = begin
                if shift >= 1e-3:
                    event["args"]["shifted_us"] = shift
                    count, largest = count + 1, max(largest, shift)
            end_us = event["ts"] + event["dur"]
            end_ns = viewer_ns(event["ts"]) + viewer_ns(event["dur"])
    return {"count": count, "max_us": largest}


def orchestrator_events(tracks: list[CellTrack], commits: list, zero: float) -> list[dict]:
    """Rank 0's cells (dispatch to last result), one lane per concurrent cell, and commits."""
    events = []
    lanes_end: list[float] = []
    spans = sorted(
        (t for t in tracks if t.started_at is not None and t.finished_at is not None),
        key=lambda t: t.started_at,
    )
    for track in spans:
        lane = next((k for k, end in enumerate(lanes_end) if end <= track.started_at), None)
        if lane is None:
            lane = len(lanes_end)
            lanes_end.append(0.0)
        lanes_end[lane] = track.finished_at
        events.append(
            _complete(
                f"cell {track.label}",
                "cell",
                ORCHESTRATOR_PID,
                lane,
                track.started_at - zero,
                track.finished_at - track.started_at,
                {"cell_id": track.cell_id, "ranks": track.ranks},
            )
        )
    for lane in range(len(lanes_end)):
        events.append(_metadata("thread_name", ORCHESTRATOR_PID, lane, f"cells (lane {lane})"))
    for start, duration, records in commits:
        events.append(
            _complete(
                "write",
                "results",
                ORCHESTRATOR_PID,
                WRITER_TID,
                start - zero,
                duration,
                {"records": int(records)},
            )
        )
    if commits:
        events.append(_metadata("thread_name", ORCHESTRATOR_PID, WRITER_TID, "writer"))
    return events


def _zero(tracks: list[CellTrack], commits: list) -> float:
    """Unix seconds of the earliest exported event: a rank's first phase or bucket launch,
    a cell's dispatch, a commit (0 when there is none)."""
    candidates = []
    for t in tracks:
        for g, origin in enumerate(t.origins):
            if not math.isfinite(origin):
                continue
            firsts = [t.starts[g]] + ([t.buckets[g, ..., 0]] if t.buckets is not None else [])
            finite = np.concatenate([a[np.isfinite(a)] for a in firsts])
            if finite.size:
                candidates.append(float(origin) + float(finite.min()))
        if t.started_at is not None:
            candidates.append(t.started_at)
    candidates += [c[0] for c in commits]
    return min(candidates) if candidates else 0.0


def commits_during(commits: list, tracks: list[CellTrack]) -> list:
    """The commits (`[start, duration, records]`) that overlap some track's dispatch-to-result
    span: what the writer did while the exported cells ran."""
    spans = [
        (t.started_at, t.finished_at)
        for t in tracks
        if t.started_at is not None and t.finished_at is not None
    ]
    return [c for c in commits if any(c[0] <= end and c[0] + c[1] >= start for start, end in spans)]


def build_trace(path: str | Path, cell_ids: list[str] | None = None) -> dict:
    """The trace of `cell_ids` (every cell with a timeline when None) of results file `path`.

    ResultsFileError for an unknown id, or a requested cell (or, with none requested, every
    cell) without a timeline."""
    path = Path(path)
    if not path.exists():
        raise ResultsFileError(f"results file {path} does not exist")
    with open_results(path) as f:
        cells = f["cells"]
        tracks = []
        if cell_ids:
            for cell_id in dict.fromkeys(cell_ids):  # each once, in the order given
                if cell_id not in cells:
                    raise ResultsFileError(f"cell {cell_id} is not in {path}")
                tracks.append(read_cell(cells[cell_id], cell_id))
        else:
            skipped = []
            for cell_id in cells:
                group = cells[cell_id]
                if "timings" not in group:
                    continue
                try:
                    tracks.append(read_cell(group, cell_id))
                except ResultsFileError as error:
                    skipped.append(str(error))
            for reason in skipped:
                print(f"scalebench trace: warning: {reason}", file=sys.stderr)
            if not tracks:
                raise ResultsFileError(f"no cell of {path} has a per-rank timeline (layout 1.5)")
        commits = json.loads(text(f.attrs["commit_log"])) if "commit_log" in f.attrs else []
        version = text(f.attrs.get("scalebench_layout_version", ""))
    if cell_ids:
        commits = commits_during(commits, tracks)
    zero = _zero(tracks, commits)
    events = []
    pids = {}
    for track in tracks:
        events += worker_events(track, zero)
        for g, rank in enumerate(track.ranks):
            host = track.hosts[g] if g < len(track.hosts) else ""
            pids.setdefault(rank, host)
    events += orchestrator_events(tracks, commits, zero)
    shifts = separate_overlaps(events)
    meta = [_metadata("process_name", ORCHESTRATOR_PID, 0, "rank 0 (orchestrator)")]
    meta.append(
        {"name": "process_sort_index", "ph": "M", "pid": 0, "tid": 0, "args": {"sort_index": 0}}
    )
    for rank, host in sorted(pids.items()):
        meta.append(
            _metadata("process_name", rank, 0, f"rank {rank} ({host})" if host else f"rank {rank}")
        )
        meta.append(
            {
                "name": "process_sort_index",
                "ph": "M",
                "pid": rank,
                "tid": 0,
                "args": {"sort_index": rank},
            }
        )
        meta.append(_metadata("thread_name", rank, ITERATION_TID, "iterations"))
        meta.append(_metadata("thread_name", rank, PHASE_TID, "phases"))
        buckets = max((len(t.bucket_bytes) for t in tracks if rank in t.ranks), default=0)
        for b in range(buckets):
            meta.append(_metadata("thread_name", rank, BUCKET_TID + b, f"allreduce bucket {b}"))
    return {
        "traceEvents": meta + events,
        "displayTimeUnit": "ms",
        "otherData": {
            "file": str(path),
            "scalebench_layout_version": version,
            "cells": [t.cell_id for t in tracks],
            "time_zero_epoch_s": zero,
            "start_shifts": shifts,
            "clock": "ranks of a cell share an origin (a barrier); cells and nodes are placed "
            "by the system clock, which agrees across nodes as far as NTP makes it",
        },
    }


def write_trace(path: str | Path, output: str | Path, cell_ids: list[str] | None) -> int:
    """Writes the trace JSON (no NaN or Infinity) to `output`; returns the event count."""
    trace = build_trace(path, cell_ids)
    Path(output).write_text(json.dumps(trace, allow_nan=False))
    return len(trace["traceEvents"])


def add_parser(sub) -> None:
    """The `trace` subcommand."""
    t = sub.add_parser("trace", help="per-rank timeline as a Chrome/Perfetto trace (JSON)")
    t.add_argument("results", help="results .h5 file (layout 1.5 or later)")
    t.add_argument(
        "--cell", action="append", metavar="ID", help="a cell id (repeatable); default: every cell"
    )
    t.add_argument("-o", "--output", required=True, metavar="TRACE.json")


def run(args) -> int:
    if args.output == args.results:
        raise UsageError("-o must not be the results file")
    count = write_trace(args.results, args.output, args.cell)
    print(
        f"wrote {args.output}: {count} events; open it in https://ui.perfetto.dev or "
        "chrome://tracing",
        file=sys.stderr,
    )
    return 0
