"""`scalebench_analysis.load()` of a results file holding one million timing rows.

The file is written by the synthetic writer of the analysis tests
(tests/analysis/make_results.py: the C++ writer's layout, summaries computed by its rules):
100 training cells x 2 ranks x 5000 iterations (2 warm-up) x 7 phases, i.e. 1,000,000
(rank, iteration) rows of 7 phase times, which load() turns into a long table of 7,000,000
(cell, rank, iteration, phase) rows. Timed: load() alone, best and median of --repeat runs
in this process (the file is in the page cache after writing it; h5py and pandas imported
before). Goal: <= 1 s.

`timings` are stored as that writer stores them (h5py's automatic chunks, gzip), or with
--layout cpp as the C++ writer does (one chunk per rank, shuffle + gzip 4), the layout whose
decompression load() runs in a worker thread (Note [Timings decompressed in a thread] in
analysis/scalebench_analysis/read/timings.py).

Usage: analysis_load.py [--cells N] [--iterations N] [--repeat N] [--layout h5py|cpp]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
from perf_common import REPO, table_line

sys.path.insert(0, str(REPO / "analysis"))
sys.path.insert(0, str(REPO / "tests" / "analysis"))
from scalebench_analysis.read.loader import load  # noqa: E402

import make_results  # noqa: E402

WORLD = 2


def write_file(path: Path, cells: int, iterations: int, layout: str = "h5py") -> None:
    rng = np.random.default_rng(0)
    with h5py.File(path, "w", libver=("v110", "v110")) as f:
        make_results._root_attrs(f, path)
        group = f.create_group("cells")
        for index in range(cells):
            spec = make_results.make_spec("main", "train", 16, WORLD)
            spec["seed"] = index  # a distinct cell: recompute its id as make_spec does
            del spec["source"], spec["cell_id"]
            canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"))
            spec["source"] = "perf.yaml:1"
            spec["cell_id"] = f"{make_results.fnv1a64(canonical):016x}"
            spec["measured_iterations"] = iterations - make_results.WARMUP
            step = 0.01 * rng.lognormal(0.0, 0.05, size=(WORLD, iterations))
            shares = np.array([0.05, 0.01, 0.3, 0.4, 0.1, 0.14])
            timings = np.concatenate(
                [step[:, :, None] * shares[None, None, :], step[:, :, None]], axis=2
            )
            stored = make_results.cpp_timings_layout(timings.shape) if layout == "cpp" else None
            make_results._write_cell(
                group, spec, "ok", rng, timings, [iterations] * WORLD, layout=stored
            )
        make_results.fix_strings(f)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--layout", choices=("h5py", "cpp"), default="h5py")
    args = parser.parse_args()
    path = Path(tempfile.mkdtemp(prefix="scalebench-perf-load-")) / "million.h5"
    start = time.perf_counter()
    write_file(path, args.cells, args.iterations, args.layout)
    written = time.perf_counter() - start
    rows = args.cells * WORLD * args.iterations
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        results = load(path)
        times.append(time.perf_counter() - start)
    long_rows = len(results.timings)
    best, median = min(times), float(np.median(times))
    print(
        f"analysis_load: {args.cells} cells x {WORLD} ranks x {args.iterations} iterations = "
        f"{rows:,} timing rows ({long_rows:,} rows of the long table), {args.layout} layout, "
        f"{path.stat().st_size / 1e6:.1f} MB, written in {written:.1f} s"
    )
    print(
        f"  load(): best {best:.3f} s, median {median:.3f} s of {args.repeat} "
        f"({rows / median:,.0f} timing rows/s, {long_rows / median:,.0f} long rows/s)"
    )
    table_line(
        "analysis_load",
        f"load() of {rows / 1e6:g}M timing rows",
        "<= 1 s",
        f"{median:.2f} s",
        median <= 1.0,
    )


if __name__ == "__main__":
    main()
