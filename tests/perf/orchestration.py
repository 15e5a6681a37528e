"""Orchestration overhead: many tiny cells under mpirun, 2 workers.

Each cell: zoo `mlp` (input 784, 10 classes), training, batch 1, world 1, warmup 0,
iterations 1, cpu_threads 1; the cells differ only in `seed` (a swept setting). The sweep
runs with `scheduling: exclusive` (one cell at a time) and `packed` (one cell per free
worker, so 2 at once), plus a 1-cell run of the same kind for the fixed start-up cost.

What is compared (started_at / finished_at have a resolution of 1 s, too coarse for cells
this short, so the cells' own times come from rank_metrics):

* wall: the `mpirun ... scalebench run` process, from spawn to exit (includes mpirun's
  launch, MPI_Init, process start-up with LibTorch loaded, results file creation).
* cell time: per cell, model_init_s + loop_wall_s of its rank (building the model and
  optimizer, and the measured loop of one training step); summed over cells, divided by
  the cells running at once (1 exclusive, 2 packed) = the wall time if nothing else cost.
* overhead fraction = (wall - cell time) / wall.
* dispatch cost per cell = the marginal wall time of a cell beyond its own time:
  ((wall_N - wall_1) - (cell time_N - cell time_1)) / (N - 1), with the 1-cell run taken
  as the fixed start-up; it covers everything rank 0 and the worker do per cell besides
  the model and the loop: the results file updates (mark running, complete), the
  assignment and result messages, the cell's communicator and agreement, the summary.

Where the time of a cell goes, from the logs' microsecond timestamps (exclusive run,
medians over cells; rank 0 logs `start` after recording the cell running and sending the
assignment, `done` after recording its results; the worker logs when it receives the
assignment and when its result is ready):

* send: rank 0's `start` -> the worker's `cell ...` (message, the worker's poll wake-up)
* worker: the worker's `cell ...` -> `cell finished` (group communicator, model, loop,
  metrics incl. param_checksum, group agreement); minus model_init_s + loop_wall_s = the
  worker's own per-cell overhead
* record: `cell finished` -> rank 0's `done` (result message, summary, results file update)
* next: rank 0's `done` -> the next `start` (scheduling, results file update "running",
  the assignment sent)

Usage: orchestration.py BUILD_DIR [--cells N]
"""

from __future__ import annotations

import argparse
import re
import tempfile
from datetime import datetime
from pathlib import Path

import numpy as np
from perf_common import fmt_us, read_cells, run_scalebench, table_line


def matrix(cells: int, scheduling: str) -> dict:
    return {
        "name": f"perf-orchestration-{scheduling}-{cells}",
        "scheduling": scheduling,
        "defaults": {
            "device": "cpu",
            "cpu_threads": 1,
            "warmup": 0,
            "iterations": 1,
            "timeout_s": 60,
        },
        "sweep": {
            "modes": ["train"],
            "batch_sizes": [1],
            "world_sizes": [1],
            "seed": list(range(cells)) if cells > 1 else 0,
        },
        "experiments": [{"name": "mlp", "model": "mlp", "input_shape": [784], "num_classes": 10}],
    }


def _stamps(log: Path, pattern: str) -> list[tuple[float, str]]:
    """(seconds of day, first group) of each line of `log` matching `pattern`."""
    out = []
    for line in log.read_text().splitlines():
        found = re.match(r"(\d\d:\d\d:\d\d\.\d+) " + pattern, line)
        if found:
            t = datetime.strptime(found.group(1), "%H:%M:%S.%f")
            out.append(
                (t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6, found.group(2))
            )
    return out


def breakdown(results: Path, cells: list[dict]) -> dict:
    """Median seconds per cell of send / worker / record / next (exclusive run, 1 worker
    per cell), from the per-rank logs next to the results file."""
    logs = Path(str(results) + ".logs")
    starts = dict(
        (c, t) for t, c in _stamps(logs / "rank-0.log", r"\[r0\] info: start .*\[(\w+)\]")
    )
    dones = [t for t, _ in _stamps(logs / "rank-0.log", r"\[r0\] info: (\[).* done")]
    begin, end = {}, {}
    for worker_log in logs.glob("rank-[1-9]*.log"):
        for t, c in _stamps(worker_log, r"\[r\d+\] info \{(\w+)\}: cell .* as group rank"):
            begin[c] = t
        for t, c in _stamps(worker_log, r"\[r\d+\] info \{(\w+)\}: cell finished"):
            end[c] = t
    order = sorted(starts, key=starts.get)
    own = {
        c["cell_id"]: c["metrics"]["model_init_s"].max() + c["metrics"]["loop_wall_s"].max()
        for c in cells
    }
    send = [begin[c] - starts[c] for c in order]
    worker = [end[c] - begin[c] for c in order]
    record = [d - end[c] for c, d in zip(order, sorted(dones))]
    following = [starts[b] - d for b, d in zip(order[1:], sorted(dones))]
    return {
        "send": np.median(send),
        "worker": np.median(worker),
        "worker_overhead": np.median([end[c] - begin[c] - own[c] for c in order]),
        "record": np.median(record),
        "next": np.median(following),
        "record_first_last": (np.median(record[:10]), np.median(record[-10:])),
        "next_first_last": (np.median(following[:10]), np.median(following[-10:])),
    }


def run(build: Path, work: Path, cells: int, scheduling: str) -> dict:
    path, wall = run_scalebench(build, matrix(cells, scheduling), work, f"{scheduling}-{cells}")
    read = read_cells(path)
    assert len(read) == cells, (len(read), cells)
    loop = np.array([c["metrics"]["loop_wall_s"].max() for c in read])
    init = np.array([c["metrics"]["model_init_s"].max() for c in read])
    slots = 2 if scheduling == "packed" else 1
    return {
        "cells": cells,
        "wall": wall,
        "loop": loop.sum(),
        "init": init.sum(),
        "cell_time": (loop.sum() + init.sum()) / slots,
        "bytes": path.stat().st_size,
        "breakdown": breakdown(path, read) if scheduling == "exclusive" and cells > 1 else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", type=Path)
    parser.add_argument("--cells", type=int, default=200)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="scalebench-perf-orchestration-"))
    base = run(args.build, work, 1, "exclusive")
    print(
        f"orchestration: {args.cells} tiny cells (mlp train b1 w1, warmup 0, 1 iteration), "
        "2 workers"
    )
    print(
        f"  1-cell run: wall {base['wall']:.2f} s (fixed start-up), cell time "
        f"{fmt_us(base['cell_time'])}"
    )
    for scheduling in ("exclusive", "packed"):
        r = run(args.build, work, args.cells, scheduling)
        overhead = (r["wall"] - r["cell_time"]) / r["wall"]
        per_cell = ((r["wall"] - base["wall"]) - (r["cell_time"] - base["cell_time"])) / (
            args.cells - 1
        )
        print(
            f"  {scheduling}: wall {r['wall']:.2f} s; cells' own time {r['cell_time']:.3f} s "
            f"(model_init_s sum {r['init']:.3f} s + loop_wall_s sum {r['loop']:.3f} s, "
            f"/ {2 if scheduling == 'packed' else 1} at once)"
        )
        print(
            f"    overhead {overhead:.1%} of wall; dispatch cost per cell {fmt_us(per_cell)}; "
            f"results file {r['bytes'] / 1e6:.1f} MB"
        )
        b = r["breakdown"]
        if b:
            print(
                f"    per cell (medians): send {fmt_us(b['send'])}; worker {fmt_us(b['worker'])}"
                f" of which {fmt_us(b['worker_overhead'])} besides model_init_s + "
                f"loop_wall_s; record {fmt_us(b['record'])} (first 10 cells "
                f"{fmt_us(b['record_first_last'][0])}, last 10 "
                f"{fmt_us(b['record_first_last'][1])}); next {fmt_us(b['next'])} "
                f"(first 10 {fmt_us(b['next_first_last'][0])}, last 10 "
                f"{fmt_us(b['next_first_last'][1])})"
            )
        table_line(
            "orchestration",
            f"overhead, {scheduling}",
            "<= 1 % of wall",
            f"{overhead:.1%}",
            overhead <= 0.01,
        )
        table_line(
            "orchestration",
            f"dispatch per cell, {scheduling}",
            "<= 50 us",
            fmt_us(per_cell),
            per_cell <= 50e-6,
        )


if __name__ == "__main__":
    main()
