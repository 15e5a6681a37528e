"""Program cells (docs/programs.md): the client's cost per step, and scalebench's launch
cost per program cell.

* client overhead: the report channel open on a pipe drained by another process (as the
  worker drains it). A step is 4 phases of 0.25 ms of busy work (spin on perf_counter), 1 ms
  in all. Blocks of `--steps` steps alternate bare, instrumented (`with sb.step()` and a
  `with sb.phase()` per phase) and the instrumentation alone (the same with no work in the
  phases), `--blocks` of each. The figure is the median time per step of the last: the
  client's own cost, as a share of a 1 ms step (goal, issue 26: below 1 %). The difference
  of the first two medians is printed too; on a busy 2-core machine it is within the noise
  of the spin loop.
* launch cost: `--cells` program cells of `python -c pass` (world 1) in one run, against
  a 1-cell run: the marginal wall time per cell beyond `python -c pass` itself (timed here
  `--cells` times): what a program cell adds (assignment, torchrun layout and port, spawn,
  report pipe, group stop exchange, results). No goal; it bounds how short a program cell
  can usefully be.

Usage: program_client.py BUILD_DIR [--steps N] [--blocks N] [--cells N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perf_common import REPO, fmt_ms, fmt_us, run_scalebench, table_line

PHASES = ("data", "forward", "backward", "optimizer")
PHASE_S = 0.25e-3


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def client_overhead(steps: int, blocks: int) -> None:
    # The reader is another process, as the worker is (`wc -c` drains the pipe and counts).
    reader = subprocess.Popen(
        ["wc", "-c"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    os.environ["SCALEBENCH_REPORT_FD"] = str(os.dup(reader.stdin.fileno()))
    sys.path.insert(0, str(REPO / "program" / "client"))
    import scalebench_client as sb

    def bare() -> float:
        start = time.perf_counter()
        for _ in range(steps):
            for _ in PHASES:
                spin(PHASE_S)
        return (time.perf_counter() - start) / steps

    def instrumented() -> float:
        start = time.perf_counter()
        for _ in range(steps):
            with sb.step():
                for name in PHASES:
                    with sb.phase(name):
                        spin(PHASE_S)
        return (time.perf_counter() - start) / steps

    def empty() -> float:
        start = time.perf_counter()
        for _ in range(steps):
            with sb.step():
                for name in PHASES:
                    with sb.phase(name):
                        pass
        return (time.perf_counter() - start) / steps

    bare_s, instrumented_s, empty_s = [], [], []
    for _ in range(blocks):
        bare_s.append(bare())
        instrumented_s.append(instrumented())
        empty_s.append(empty())
    sb.finish()  # closes the client's copy of the pipe
    reader.stdin.close()
    received = int(reader.stdout.read())
    reader.wait()
    base = statistics.median(bare_s)
    extra = statistics.median(instrumented_s) - base
    own = statistics.median(empty_s)
    print(
        f"bare step {fmt_ms(base)}, instrumented {fmt_us(extra)} more (difference of medians, "
        f"as noisy as the machine); the client alone: {fmt_us(own)} per step of 4 phases "
        f"({received} bytes of records read)"
    )
    table_line(
        "program_client",
        "instrumented - bare 1 ms step",
        "< 1 %",
        f"{100 * extra / base:.2f} %",
        extra / base < 0.01,
    )
    table_line(
        "program_client",
        "client cost per step (4 phases)",
        "< 1 % of 1 ms",
        f"{fmt_us(own)} = {100 * own / 1e-3:.2f} %",
        own < 1e-5,
    )


def matrix(cells: int) -> dict:
    return {
        "name": f"perf-program-{cells}",
        "defaults": {"device": "cpu", "cpu_threads": 1, "timeout_s": 60},
        "sweep": {
            "modes": ["train"],
            "batch_sizes": [1],
            "world_sizes": [1],
            "seed": list(range(cells)) if cells > 1 else 0,
        },
        "experiments": [
            {"name": "pass", "program": {"command": [sys.executable, "-c", "pass"]}}
        ],
    }


def launch_cost(build: Path, cells: int) -> None:
    start = time.perf_counter()
    for _ in range(cells):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    python_s = (time.perf_counter() - start) / cells
    with tempfile.TemporaryDirectory() as work:
        _, wall_1 = run_scalebench(build, matrix(1), Path(work), "one", workers=1)
        _, wall_n = run_scalebench(build, matrix(cells), Path(work), "many", workers=1)
    per_cell = (wall_n - wall_1) / (cells - 1)
    print(
        f"python -c pass {fmt_ms(python_s)}; run of 1 cell {wall_1:.2f} s, of {cells} "
        f"cells {wall_n:.2f} s: {fmt_ms(per_cell)} per cell"
    )
    table_line(
        "program_client",
        "launch cost per program cell",
        "-",
        fmt_ms(per_cell - python_s),
        None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build", type=Path)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--blocks", type=int, default=7)
    parser.add_argument("--cells", type=int, default=30)
    args = parser.parse_args()
    client_overhead(args.steps, args.blocks)
    launch_cost(args.build, args.cells)


if __name__ == "__main__":
    main()
