"""Reading the program cells of a real results file with h5py alone (test_program_cells.py,
test_framework_programs.py): what scalebench stored, without the analysis package; and the
git repository of a user's program with its branches (program_repository)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np


def python_step_program(head: str, data: str, forward: str, backward: str) -> str:
    """A user's training program in pure Python (no framework: a cell starts in a fraction of
    a second), the one of the verdict tests and the run calibration: `--steps` steps through
    scalebench_client, each a `data`, a `forward` and a `backward` phase whose bodies are the
    given lines of Python (one a line); `head` is module-level source
    after the imports (extra imports, the constants a branch changes). `work(n)` is n
    multiply-adds: compute, so a load stretches it as it stretches a model's step."""

    def body(lines: str) -> str:
        return "\n".join("            " + line for line in lines.split("\n"))

    return f"""
import argparse

import scalebench_client as sb
{head}

def work(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int)
args = parser.parse_args()
for _ in range(args.steps):
    with sb.step():
        with sb.phase("data"):
{body(data)}
        with sb.phase("forward"):
{body(forward)}
        with sb.phase("backward"):
{body(backward)}
"""


def text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _git(*args: str, cwd: Path) -> None:
    identity = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", *identity, *args], cwd=cwd, check=True, capture_output=True)


def program_repository(root: Path, script: str, main: str, branches: dict) -> Path:
    """A git repository ROOT/repo whose branch `main` commits `script` (a file name) with
    the text `main`, and one branch per entry of `branches` (name -> the script's text on
    that branch, committed on top of main; None: main's commit under another name)."""
    repo = root / "repo"
    repo.mkdir()
    _git("init", "-q", "-b", "main", cwd=repo)
    (repo / script).write_text(main)
    _git("add", script, cwd=repo)
    _git("commit", "-q", "-m", "main", cwd=repo)
    for name, changed in branches.items():
        if changed is None:
            _git("branch", name, "main", cwd=repo)
            continue
        _git("checkout", "-q", "-b", name, "main", cwd=repo)
        (repo / script).write_text(changed)
        _git("commit", "-q", "-am", f"{name}: the script changed", cwd=repo)
    _git("checkout", "-q", "main", cwd=repo)
    return repo


def python_program_matrix(name: str, repo: Path, branches: list, defaults: dict) -> dict:
    """A matrix of one training experiment `loop` that runs REPO's `train.py --steps {steps}`
    with this interpreter and this tree's client on PYTHONPATH (a plain Python program: each
    cell starts in a fraction of a second), batch 1, world size 1, on `branches`."""
    client = Path(__file__).resolve().parents[2] / "program" / "client"
    return {
        "name": name,
        "repo": str(repo),
        "branches": branches,
        "defaults": {"device": "cpu", "timeout_s": 120, **defaults},
        "sweep": {"modes": ["train"], "batch_sizes": [1], "world_sizes": [1]},
        "experiments": [
            {
                "name": "loop",
                "program": {
                    "python": sys.executable,
                    "command": ["python", "train.py", "--steps", "{steps}"],
                    "env": {"PYTHONPATH": str(client)},
                },
            }
        ],
    }


def read_program_cells(path: str) -> dict:
    """{cell_id: {attrs, timings, phase_starts (None in a file without them), phases, warmup,
    metrics (one dict per rank), argv (one list per rank), output (one text per rank),
    accuracy (the `accuracy` group's attributes or None), validation_outputs ({rank<g>:
    array})}}; every cell must be ok."""
    out = {}
    with h5py.File(path, "r") as f:
        for cell_id, cell in f["cells"].items():
            attrs = {
                k: text(v) if isinstance(v, (bytes, str)) else v for k, v in cell.attrs.items()
            }
            assert attrs["status"] == "ok", (cell_id, attrs["reason"])
            timings = cell["timings"]
            names = json.loads(text(cell["rank_metrics"].attrs["names"]))
            out[cell_id] = {
                "cell_id": cell_id,
                "attrs": attrs,
                "timings": timings[()],
                "phase_starts": cell["phase_starts"][()] if "phase_starts" in cell else None,
                "phases": json.loads(text(timings.attrs["phases"])),
                "warmup": int(timings.attrs["warmup_iterations"]),
                "metrics": [dict(zip(names, row)) for row in cell["rank_metrics"][()]],
                "argv": [json.loads(text(a)) for a in cell["program_argv"][()]],
                "output": [text(o) for o in cell["program_output"][()]],
                "accuracy": (
                    {
                        k: text(v) if isinstance(v, (bytes, str)) else v
                        for k, v in cell["accuracy"].attrs.items()
                    }
                    if "accuracy" in cell
                    else None
                ),
                "validation_outputs": (
                    {name: ds[()] for name, ds in cell["validation_outputs"].items()}
                    if "validation_outputs" in cell
                    else {}
                ),
            }
    return out


def measured(cell: dict, phase: str) -> np.ndarray:
    """(ranks, measured iterations) seconds of `phase`."""
    return cell["timings"][:, cell["warmup"] :, cell["phases"].index(phase)]


def measured_starts(cell: dict, phase: str) -> np.ndarray:
    """(ranks, measured iterations) seconds since the cell's origin at which `phase` began
    (`phase_starts`, schemas/results-layout.md)."""
    return cell["phase_starts"][:, cell["warmup"] :, cell["phases"].index(phase)]


def record_gaps(cell: dict, rank: int, order) -> np.ndarray:
    """(measured steps, len(order) + 1) seconds between the consecutive records of `rank`'s
    steps, the phases of `order` taken one after another: from the step's begin to the first
    phase's, from each phase's end to the next one's begin, from the last one's end to the
    step's end. The time the client could have lost; negative where two records overlap or
    a phase lies outside its step, NaN where a phase is missing."""
    begin = measured_starts(cell, "step")[rank]
    edges = [begin]
    for phase in order:
        start = measured_starts(cell, phase)[rank]
        edges += [start, start + measured(cell, phase)[rank]]
    edges.append(begin + measured(cell, "step")[rank])
    edges = np.stack(edges, axis=1)
    return edges[:, 1::2] - edges[:, 0::2]


def step_gaps(cell: dict, rank: int) -> np.ndarray:
    """(measured steps - 1,) seconds from the end of each of `rank`'s measured steps to the
    begin of the next (negative: two steps overlap)."""
    begin = measured_starts(cell, "step")[rank]
    step = measured(cell, "step")[rank]
    return begin[1:] - (begin[:-1] + step[:-1])


def shares(cell: dict, phases) -> np.ndarray:
    """(ranks, measured iterations): the sum of `phases` over the step."""
    return sum(measured(cell, p) for p in phases) / measured(cell, "step")
