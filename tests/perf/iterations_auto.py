"""`iterations: auto` against fixed iteration counts (issue 29, docs/measurement.md).

The quickstart's 12 cells (docs/examples/quickstart.yaml: MLP and ResNet-18 at 32 px, train
and infer, 1 and 2 workers, CPU) run once with `iterations: auto` / `warmup: auto` (the
quickstart as shipped: ci_width 0.02, max_seconds 10) and once per fixed count (warm-up 2,
iterations N). For each run:

* wall: the `mpirun ... scalebench run` process;
* measured: the sum over cells of the measured loop's `loop_wall_s` (slowest rank);
* at 2 %: the cells whose median is known to +-2 % (the stored 95 % interval of the median,
  `(median_ci_high_s - median_ci_low_s) / (2 median_s)` <= 0.02);
* trusted: the analysis package's verdict (fixed cells: cv <= 10 % and no warm-up drift;
  auto cells: stopped `precise` and no drift).

The fair comparison is auto against the smallest fixed count at which every cell reaches the
same interval: a fixed count must be set for the noisiest cell, auto spends it only there.

Usage: iterations_auto.py BUILD_DIR [--fixed 20 100 300]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import scalebench_analysis as sa
from perf_common import mpi_env, read_cells, table_line

REPO = Path(__file__).resolve().parents[2]


AUTO_LINES = "  warmup: auto\n  iterations: auto\n  ci_width: 0.02\n  max_seconds: 10\n"


def quickstart() -> str:
    text = (REPO / "docs" / "examples" / "quickstart.yaml").read_text()
    if AUTO_LINES not in text:
        raise SystemExit(
            "docs/examples/quickstart.yaml no longer has the auto lines this expects"
        )
    return text


def fixed(matrix: str, iterations: int) -> str:
    return matrix.replace(AUTO_LINES, f"  warmup: 2\n  iterations: {iterations}\n")


def run(build: Path, matrix: str, work: Path, name: str) -> tuple[Path, float]:
    """`mpirun -np 3 scalebench run` of `matrix`; (results path, wall seconds)."""
    matrix_path = work / f"{name}.yaml"
    matrix_path.write_text(matrix)
    output = work / f"{name}.h5"
    command = [
        "mpirun",
        "-np",
        "3",
        "--oversubscribe",
        str(build / "bin" / "scalebench"),
    ]
    command += ["run", str(matrix_path), "-o", str(output), "--force", "-q"]
    start = time.perf_counter()
    subprocess.run(command, env=mpi_env(), check=True, capture_output=True)
    return output, time.perf_counter() - start


def figures(path: Path, wall: float) -> dict:
    cells = read_cells(path)
    widths = []
    measured = 0.0
    for cell in cells:
        s = cell["summary"]
        widths.append(
            (s["median_ci_high_s"] - s["median_ci_low_s"]) / (2 * s["median_s"])
        )
        measured += float(np.nanmax(cell["metrics"]["loop_wall_s"]))
    trusted = sa.analyze(str(path)).sections["cells"].trusted
    return {
        "wall": wall,
        "measured": measured,
        "cells": len(cells),
        "at_2pct": int(sum(w <= 0.02 for w in widths)),
        "worst": float(np.nanmax(widths)),
        "trusted": int((trusted == True).sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build", type=Path)
    parser.add_argument("--fixed", type=int, nargs="+", default=[20, 100, 300])
    args = parser.parse_args()
    build = args.build.resolve()
    base = quickstart()
    runs = {"auto": base, **{f"fixed {n}": fixed(base, n) for n in args.fixed}}
    results = {}
    with tempfile.TemporaryDirectory() as work:
        for name, matrix in runs.items():
            path, wall = run(build, matrix, Path(work), name.replace(" ", "_"))
            results[name] = figures(path, wall)
            r = results[name]
            print(
                f"{name:>10}: wall {r['wall']:6.1f} s, measured loops {r['measured']:6.1f} s, "
                f"cells at +-2 %: {r['at_2pct']}/{r['cells']} (widest +-{r['worst']:.1%}), "
                f"trusted {r['trusted']}/{r['cells']}",
                flush=True,
            )
    auto = results["auto"]
    table_line(
        "iterations_auto",
        "auto: cells at +-2 % / trusted",
        "all",
        f"{auto['at_2pct']}/{auto['cells']} / {auto['trusted']}/{auto['cells']}",
        auto["at_2pct"] == auto["cells"],
    )
    for name, r in results.items():
        if name == "auto":
            continue
        table_line(
            "iterations_auto",
            f"{name}: wall / auto, cells at +-2 %",
            "-",
            f"{r['wall'] / auto['wall']:.2f}x, {r['at_2pct']}/{r['cells']}",
            None,
        )


if __name__ == "__main__":
    main()
