"""Shared pieces of the tests/perf benchmarks (not a test; see tests/perf/run.sh).

* the benchmark model (an MLP 784-512-512-10) and its TorchScript export,
* an HDF5 dataset in the layout of `data: {hdf5: ...}` (docs/own-model.md),
* running `mpirun -np N scalebench run` on a matrix and reading its cells,
* scalebench's `param_checksum` (worker/workload.cc, parameter_checksum) in Python,
* the `TABLE|...` line each benchmark prints for run.sh's final table.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import warnings
from pathlib import Path

import h5py
import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
# TorchScript is deprecated in recent PyTorch; it is still what scalebench's LibTorch loads.
warnings.filterwarnings("ignore", category=FutureWarning, message=".*torch.jit.*")
INPUTS = 784
HIDDEN = 512
CLASSES = 10


class Mlp(torch.nn.Module):
    """784-512-512-10 with ReLU: the model every benchmark of this folder uses."""

    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Linear(INPUTS, HIDDEN),
            torch.nn.ReLU(),
            torch.nn.Linear(HIDDEN, HIDDEN),
            torch.nn.ReLU(),
            torch.nn.Linear(HIDDEN, CLASSES),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def export_model(path: Path, seed: int = 0) -> Mlp:
    """Writes the seeded MLP as TorchScript to `path`; returns the eager module."""
    torch.manual_seed(seed)
    model = Mlp()
    torch.jit.save(torch.jit.script(model), str(path))
    return model


def write_dataset(path: Path, rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`inputs` [rows, 784] float32 and `targets` [rows] int64 in [0, 10)."""
    rng = np.random.default_rng(seed)
    inputs = rng.standard_normal((rows, INPUTS)).astype(np.float32)
    targets = rng.integers(0, CLASSES, size=rows, dtype=np.int64)
    with h5py.File(path, "w") as f:
        f.create_dataset("inputs", data=inputs)
        f.create_dataset("targets", data=targets)
    return inputs, targets


def train_rows(iteration: int, rank: int, world: int, batch: int, rows: int) -> np.ndarray:
    """The dataset rows of `rank`'s training batch in `iteration` (warm-up counted from 0):
    global samples train_first_sample(...) = ((iteration * world) + rank) * batch onwards,
    sample i read from row i mod rows (worker/synthetic_data.h, worker/hdf5_batches.cc)."""
    first = (iteration * world + rank) * batch
    return (first + np.arange(batch)) % rows


def param_checksum(parameters) -> float:
    """scalebench's param_checksum: sum over parameters p (model order) and elements k of
    (|w| + w/2) * (1 + ((31p + k) mod 13) / 13), with the same torch ops in the same order as
    worker/workload.cc (13 column sums in double, each weighted once) so that equal weights
    give the same double."""
    checksum = 0.0
    with torch.no_grad():
        for index, parameter in enumerate(parameters):
            flat = parameter.detach().flatten()
            terms = torch.add(flat.abs(), flat, alpha=0.5)
            whole = flat.numel() // 13 * 13
            sums = terms.narrow(0, 0, whole).view(-1, 13).sum(0, dtype=torch.float64).tolist()
            tail = terms.narrow(0, whole, flat.numel() - whole).to(torch.float64).tolist()
            for j in range(13):
                column = sums[j]
                if j < len(tail):
                    column += tail[j]
                checksum += column * (1.0 + ((j + index * 31) % 13) / 13)
    return checksum


def mpi_env() -> dict:
    env = dict(os.environ)
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",
    )
    return env


def run_scalebench(build: Path, matrix: dict, workdir: Path, name: str, workers: int = 2):
    """Writes `matrix` (YAML is a superset of JSON) and runs
    `mpirun -np workers+1 --oversubscribe scalebench run <matrix> -o <name>.h5 --force -q`.
    Returns (results path, wall seconds of the mpirun process)."""
    matrix_path = workdir / f"{name}.yaml"
    matrix_path.write_text(json.dumps(matrix, indent=1))
    output = workdir / f"{name}.h5"
    command = [
        "mpirun",
        "-np",
        str(workers + 1),
        "--oversubscribe",
        str(build / "bin" / "scalebench"),
        "run",
        str(matrix_path),
        "-o",
        str(output),
        "--force",
        "-q",
    ]
    start = time.perf_counter()
    done = subprocess.run(command, env=mpi_env(), capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
    return output, wall


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_cells(path: Path) -> list[dict]:
    """Each cell of a results file: attributes, summary, rank_metrics (name -> per-rank
    array) and timings (ranks x iterations x phases) with their phase names."""
    cells = []
    with h5py.File(path, "r") as f:
        for cell_id, group in f["cells"].items():
            cell = {"cell_id": cell_id}
            cell.update(
                {k: _text(v) if isinstance(v, bytes | str) else v for k, v in group.attrs.items()}
            )
            if cell["status"] != "ok":
                raise RuntimeError(f"cell {cell_id}: {cell['status']}: {cell['reason']}")
            cell["summary"] = dict(group["summary"].attrs)
            names = json.loads(_text(group["rank_metrics"].attrs["names"]))
            values = group["rank_metrics"][()]
            cell["metrics"] = {n: values[:, i] for i, n in enumerate(names)}
            cell["timings"] = group["timings"][()]
            cell["phases"] = json.loads(_text(group["timings"].attrs["phases"]))
            cell["warmup"] = int(group["timings"].attrs["warmup_iterations"])
            cells.append(cell)
    return cells


def phase_median(cell: dict, phase: str) -> float:
    """Median over measured iterations of the rank-mean of `phase` (the summary's
    phase_median_s_<phase>)."""
    return float(cell["summary"][f"phase_median_s_{phase}"])


def table_line(benchmark: str, figure: str, goal: str, measured: str, met: bool | None) -> None:
    """One row of run.sh's final table (`met` None: no goal to judge)."""
    verdict = "-" if met is None else ("yes" if met else "no")
    print(f"TABLE|{benchmark}|{figure}|{goal}|{measured}|{verdict}", flush=True)


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us"


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"
