"""`info`, `analyze`, `compare`, `history` and `report` of sweeps of 10^3, 10^4 and 10^5 cells
(issue 53): wall seconds, peak memory and output size of each command.

The files are written by the analysis tests' sweep writer (tests/analysis/make_sweep.py):
experiments e1..eN x batch sizes 1..100, inference, world 1, every cell complete as the C++
writer stores it (attributes, summary, timings, phase starts, rank metrics), each
experiment's cells HDF5 copies of its first. Each command runs as the user runs it,
`build/<preset>/bin/scalebench <command>` in a fresh process (`info` is C++; the others
forward to `python -m scalebench_analysis`), under GNU time for its wall time and peak
resident memory; its output goes to a file. `compare` compares the file with itself,
`history` reads the one file. Goals (issue 53, this 2-core VM): `info` and `analyze` <= 5 s
at 10^4 cells and <= 30 s at 10^5, peak memory <= 1 GB at 10^5; `report` <= 15 s and
<= 5 MB of HTML at 10^4.

Usage: sweep_scale.py BUILD [--sizes 1000,10000,100000] [--commands info,analyze,...]
       [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perf_common import REPO, table_line

sys.path.insert(0, str(REPO / "tests" / "analysis"))
import make_sweep

BATCHES = 100
COMMANDS = ("info", "analyze", "compare", "history", "report")
#: (command, cells) -> (seconds, bytes) of issue 53's goals.
GOALS = {
    ("info", 10_000): (5.0, None),
    ("analyze", 10_000): (5.0, None),
    ("info", 100_000): (30.0, 1 << 30),
    ("analyze", 100_000): (30.0, 1 << 30),
    ("report", 10_000): (15.0, None),
}
REPORT_BYTES_GOAL = 5 * 1000 * 1000


def arguments(command: str, path: Path, work: Path) -> list[str]:
    if command == "compare":
        return ["compare", str(path), str(path)]
    if command == "history":
        return ["history", str(path)]
    if command == "report":
        return ["report", str(path), "-o", str(work / f"{path.stem}.html")]
    return [command, str(path)]


def measure(binary: Path, command: str, path: Path, work: Path) -> dict:
    """Runs one command under GNU time: wall and CPU (user + system) seconds, peak RSS
    bytes, output lines. CPU seconds are the figure to compare on a shared machine: the
    wall time of a command that waits for a core grows with the other load, its CPU time
    far less."""
    out = work / f"{path.stem}.{command}.out"
    stats = work / f"{path.stem}.{command}.time"
    argv = ["/usr/bin/time", "-f", "%e %U %S %M", "-o", str(stats), str(binary)]
    with out.open("w") as sink:
        done = subprocess.run(
            argv + arguments(command, path, work),
            check=False,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    seconds, user, system, kib = stats.read_text().split()[-4:]
    return {
        "rc": done.returncode,
        "seconds": float(seconds),
        "cpu_seconds": float(user) + float(system),
        "peak_bytes": int(kib) * 1024,
        "lines": sum(1 for _ in out.open(errors="replace")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", type=Path)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--commands", default=",".join(COMMANDS))
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    args = parser.parse_args()
    binary = args.build / "bin" / "scalebench"
    if not shutil.which("/usr/bin/time"):
        sys.exit("needs GNU time (/usr/bin/time)")
    work = args.keep or Path(tempfile.mkdtemp(prefix="scalebench-perf-sweep-"))
    work.mkdir(parents=True, exist_ok=True)
    commands = [c for c in args.commands.split(",") if c]
    print(
        f"{'cells':>8} {'command':>8} {'wall s':>8} {'cpu s':>7} {'peak MiB':>9} {'lines':>7}"
    )
    for cells in (int(s) for s in args.sizes.split(",")):
        path = work / f"sweep{cells}.h5"
        start = time.perf_counter()
        make_sweep.write_sweep(path, max(1, cells // BATCHES), min(cells, BATCHES))
        written = time.perf_counter() - start
        size_mib = path.stat().st_size / 2**20
        print(
            f"{cells:>8} {'(write)':>8} {written:8.1f} {'':>9} {'':>7}  file {size_mib:.0f} MiB"
        )
        for command in commands:
            got = measure(binary, command, path, work)
            extra = f"  exit {got['rc']}" if got["rc"] not in (0, 1) else ""
            print(
                f"{cells:>8} {command:>8} {got['seconds']:8.1f} {got['cpu_seconds']:7.1f} "
                f"{got['peak_bytes'] / 2**20:9.0f} {got['lines']:>7}{extra}",
                flush=True,
            )
            goal = GOALS.get((command, cells))
            figure = f"{command} of {cells:,} cells"
            measured = (
                f"{got['seconds']:.1f} s (cpu {got['cpu_seconds']:.1f} s), "
                f"{got['peak_bytes'] / 2**20:.0f} MiB"
            )
            if goal is None:
                table_line("sweep_scale", figure, "-", measured, None)
                continue
            seconds, peak = goal
            met = got["seconds"] <= seconds and (
                peak is None or got["peak_bytes"] <= peak
            )
            goal_text = f"<= {seconds:g} s" + (
                f", <= {peak / 2**30:g} GiB" if peak else ""
            )
            if command == "report":
                html = work / f"{path.stem}.html"
                size = html.stat().st_size if html.exists() else 0
                measured += f", {size / 1e6:.1f} MB HTML"
                goal_text += ", <= 5 MB HTML"
                met = met and 0 < size <= REPORT_BYTES_GOAL
            table_line("sweep_scale", figure, goal_text, measured, met)
        if args.keep is None:
            for leftover in work.glob(f"{path.stem}*"):
                leftover.unlink()


if __name__ == "__main__":
    main()
