"""Reading the program cells of a real results file with h5py alone (test_program_cells.py,
test_framework_programs.py): what scalebench stored, without the analysis package."""

from __future__ import annotations

import json

import h5py
import numpy as np


def text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_program_cells(path: str) -> dict:
    """{cell_id: {attrs, timings, phases, warmup, metrics (one dict per rank), argv (one
    list per rank), output (one text per rank), accuracy (the `accuracy` group's attributes
    or None), validation_outputs ({rank<g>: array})}}; every cell must be ok."""
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


def shares(cell: dict, phases) -> np.ndarray:
    """(ranks, measured iterations): the sum of `phases` over the step."""
    return sum(measured(cell, p) for p in phases) / measured(cell, "step")
