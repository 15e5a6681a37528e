"""`scalebench watch`: follow a running sweep from another terminal or a login node.

Rank 0 replaces the whole results file atomically (a fsynced temporary copy renamed over it,
Note [Results durability]) at most every ~5 s (Note [Group commit]), so the file is always
complete and closed between updates. Each refresh opens it afresh, read-only and without
HDF5's file locking, reads the attributes it shows and closes it: the watcher never writes,
never locks, and never holds the writer up (a rename does not wait for readers).

One refresh shows: the run (matrix, start time, hosts), the cells done / running / failed /
skipped / pending (pending = the root `cell_count` minus the cells in the file; a cell
enters the file when it is dispatched), the elapsed time and an ETA (elapsed / finished
cells x cells left: the rate of this run so far), each running cell with its ranks, since
when it runs and where its timed loop is (`progress_*` attributes, Note [Cell progress]),
the last finished cells with their status, median and throughput, and the failures with
reasons.
It refreshes every --interval seconds until the root `end_time` is set, prints the final
state and exits 0. --once prints one refresh. On a terminal the screen is redrawn; otherwise
refreshes are separated by a blank line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ResultsFileError, UsageError
from ..read.h5text import epoch_seconds, open_results, text
from .timeline import cell_label

FAILED = ("failed", "oom", "timeout", "interrupted")
LATEST = 5


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


@dataclass
class CellState:
    """One cell as the watcher shows it."""

    cell_id: str
    label: str
    status: str
    ranks: list
    started_at: float | None
    finished_at: float | None
    reason: str = ""
    progress: str = ""
    progress_at: float | None = None
    median_s: float = float("nan")
    throughput: float = float("nan")


@dataclass
class Snapshot:
    """The committed state of the results file at one refresh."""

    matrix: str
    start_time: float | None
    start_text: str
    end_time: str
    hosts: list
    cell_count: int | None
    cells: list[CellState] = field(default_factory=list)

    def count(self, *statuses: str) -> int:
        return sum(1 for c in self.cells if c.status in statuses)

    @property
    def finished(self) -> bool:
        return bool(self.end_time)


def _label(attrs) -> str:
    """timeline.cell_label, and "/rep<k>" for a repeated cell (as scalebench's logs)."""
    label = cell_label(attrs)
    spec = json.loads(text(attrs.get("spec", "{}")) or "{}")
    if int(spec.get("repetitions", 1)) > 1:
        label += f"/rep{int(spec.get('repetition', 0))}"
    return label


def read_snapshot(path: Path) -> Snapshot:
    """The file's committed state. ResultsFileError when it is not a results file."""
    with open_results(path) as f:
        root = f.attrs
        snapshot = Snapshot(
            matrix=text(root.get("matrix_path", "")),
            start_time=epoch_seconds(text(root.get("start_time", ""))),
            start_text=text(root.get("start_time", "")),
            end_time=text(root.get("end_time", "")),
            hosts=json.loads(text(root.get("hosts", "[]")) or "[]"),
            cell_count=int(root["cell_count"]) if "cell_count" in root else None,
        )
        for cell_id, group in f["cells"].items():
            a = group.attrs
            state = CellState(
                cell_id=cell_id,
                label=_label(a),
                status=text(a.get("status", "")),
                ranks=json.loads(text(a.get("ranks", "[]")) or "[]"),
                started_at=epoch_seconds(text(a.get("started_at", ""))),
                finished_at=epoch_seconds(text(a.get("finished_at", ""))),
                reason=text(a.get("reason", "")),
            )
            if "progress_stage" in a:
                state.progress = (
                    f"{text(a['progress_stage'])} {int(a['progress_done'])}/"
                    f"{int(a['progress_total'])}"
                )
                state.progress_at = epoch_seconds(text(a.get("progress_at", "")))
            if "summary" in group:
                summary = group["summary"].attrs
                state.median_s = float(summary.get("median_s", np.nan))
                state.throughput = float(summary.get("throughput_samples_per_s", np.nan))
            snapshot.cells.append(state)
    return snapshot


def eta_seconds(snapshot: Snapshot, now: float) -> float | None:
    """Elapsed / finished x left (the run's own rate); None before the first finished cell
    or without `cell_count`."""
    if snapshot.start_time is None or snapshot.cell_count is None:
        return None
    done = sum(1 for c in snapshot.cells if c.status not in ("running",))
    left = snapshot.cell_count - done
    if done == 0 or left <= 0:
        return 0.0 if left <= 0 else None
    return (now - snapshot.start_time) / done * left


def _figures(cell: CellState) -> str:
    """Status, median and throughput ("ok, 12.345 ms, 1234.5 samples/s"); the status alone
    when the cell has no summary median (failed without results, oom)."""
    if not np.isfinite(cell.median_s):
        return cell.status
    return f"{cell.status}, {cell.median_s * 1e3:.3f} ms, {cell.throughput:.1f} samples/s"


def render(snapshot: Snapshot, path: Path, now: float) -> str:
    """One refresh as text."""
    lines = []
    state = "finished" if snapshot.finished else "running"
    lines.append(
        f"scalebench watch {path}  ({state}; matrix {snapshot.matrix or '?'}; "
        f"started {snapshot.start_text or '?'})"
    )
    end = epoch_seconds(snapshot.end_time) if snapshot.finished else now
    elapsed = end - snapshot.start_time if snapshot.start_time else None
    hosts = ", ".join(snapshot.hosts)
    in_file = len(snapshot.cells)
    pending = snapshot.cell_count - in_file if snapshot.cell_count is not None else None
    counts = (
        f"cells: {snapshot.count('ok')} ok, {snapshot.count('running')} running, "
        f"{snapshot.count(*FAILED)} failed, {snapshot.count('skipped')} skipped, "
        + (f"{pending} pending" if pending is not None else "pending unknown")
        + (f" (of {snapshot.cell_count})" if snapshot.cell_count is not None else "")
    )
    lines.append(counts)
    timing = f"elapsed {_duration(elapsed)}" if elapsed is not None else "elapsed ?"
    if not snapshot.finished:
        eta = eta_seconds(snapshot, now)
        timing += f", ETA {_duration(eta)}" if eta is not None else ", ETA ?"
    lines.append(timing + (f"; hosts {hosts}" if hosts else ""))
    running = [c for c in snapshot.cells if c.status == "running"]
    if running:
        lines.append("running:")
        for c in sorted(running, key=lambda c: c.started_at or 0):
            since = f"for {_duration(now - c.started_at)}" if c.started_at else ""
            progress = ""
            if c.progress:
                age = f", {_duration(now - c.progress_at)} ago" if c.progress_at else ""
                progress = f"  {c.progress}{age}"
            ranks = ",".join(str(r) for r in c.ranks)
            lines.append(f"  {c.label} [{c.cell_id}] on ranks {ranks} {since}{progress}")
    finished = sorted(
        (c for c in snapshot.cells if c.finished_at and c.status != "running"),
        key=lambda c: c.finished_at,
    )[-LATEST:]
    if finished:
        lines.append("latest:")
        for c in finished:
            lines.append(f"  {c.label}: {_figures(c)}")
    failures = [c for c in snapshot.cells if c.status in FAILED]
    if failures:
        lines.append("failed:")
        for c in failures:
            lines.append(f"  {c.label} [{c.cell_id}] {c.status}: {c.reason}")
    return "\n".join(lines) + "\n"


def _read_retrying(path: Path) -> Snapshot:
    """read_snapshot, once more after a short pause when the first try fails (a reader that
    opens the path in the instant of a rename sees the old or the new file; an NFS client
    may briefly see neither)."""
    try:
        return read_snapshot(path)
    except (ResultsFileError, OSError):
        time.sleep(0.2)
        return read_snapshot(path)


def watch(path: Path, interval: float, once: bool, timeout: float | None, out=None) -> int:
    """Prints refreshes until the run ends (0), or 1 when the file did not appear within
    `timeout` (default 60) seconds or, once there, did not change for `timeout` seconds."""
    out = out or sys.stdout  # looked up per call: callers may redirect sys.stdout
    tty = out.isatty()
    wait_s = timeout if timeout is not None else 60.0
    deadline = time.monotonic() + wait_s
    if not once and not path.exists():
        # On stderr, once: watch is up and following the path (a watch started before its
        # run prints nothing else until the file appears; tests/faults/watch_live.py starts
        # the run on this line, so that a slow first start of the interpreter, which
        # compiles the analysis' bytecode in a fresh environment, cannot miss the run).
        print(f"scalebench watch: waiting for {path} (up to {wait_s:g} s)", file=sys.stderr)
        sys.stderr.flush()
    while not path.exists():
        if once or time.monotonic() > deadline:
            print(f"scalebench watch: error: {path} does not exist", file=sys.stderr)
            return 1
        time.sleep(min(interval, 1.0))
    last_change = time.monotonic()
    last_mtime = None
    first = True
    while True:
        snapshot = _read_retrying(path)
        mtime = os.stat(path).st_mtime_ns
        if mtime != last_mtime:
            last_mtime, last_change = mtime, time.monotonic()
        shown = render(snapshot, path, time.time())
        if tty:
            out.write("\033[H\033[2J" + shown)
        else:
            out.write(("" if first else "\n") + shown)
        out.flush()
        first = False
        if once or snapshot.finished:
            return 0
        if timeout is not None and time.monotonic() - last_change > timeout:
            print(
                f"scalebench watch: error: {path} has not changed for {timeout:g} s "
                "(is the run still alive?)",
                file=sys.stderr,
            )
            return 1
        time.sleep(interval)


def add_parser(sub) -> None:
    """The `watch` subcommand."""
    w = sub.add_parser("watch", help="follow a running sweep until it ends")
    w.add_argument("results", help="results .h5 file of a running (or finished) `scalebench run`")
    w.add_argument(
        "--interval", type=float, default=2.0, metavar="S", help="seconds between refreshes"
    )
    w.add_argument("--once", action="store_true", help="print the state once and exit")
    w.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="give up (exit 1) when the file does not appear or does not change for S seconds "
        "(default: wait 60 s for it to appear, then as long as the run goes on)",
    )


def run(args) -> int:
    if not args.interval > 0:
        raise UsageError("--interval must be positive")
    return watch(Path(args.results), args.interval, args.once, args.timeout)
