"""Operator profiles of cells (`/cells/<id>/profile`, layout 1.9+; setting `profile_steps`,
docs/profiles.md): one row per rank and operator, as the worker stored it.

Columns of `read_profile`: ``cell_id``, ``rank``, ``device`` (``cpu``: operators, ``cuda``:
kernels), ``phase`` (the workload's phase, ``""`` when unknown), ``name``, ``count``,
``self_s``, ``total_s``, ``self_cpu_memory_bytes`` (sums over the profiled steps) and
``steps`` (the cell's profiled steps). Its ``attrs`` hold ``steps`` and ``activities``.
"""

from __future__ import annotations

import h5py
import numpy as np
import pandas as pd

from ..errors import ResultsFileError
from .decoding import attribute, decode, json_attr
from .loader import open_file

PROFILE_GROUP = "profile"
#: The phase shown for an operator the profiler saw outside every phase of a profiled step
#: (stored as an empty phase): between two profiled steps, e.g. Lightning's validation loop
#: or the loader's iterator at an epoch's end. A blank table cell read as a missing value.
BETWEEN_STEPS = "(between steps)"
OP_COLUMNS = (
    "cell_id",
    "rank",
    "device",
    "phase",
    "name",
    "count",
    "self_s",
    "total_s",
    "self_cpu_memory_bytes",
    "steps",
)
_STORED_COLUMNS = ("rank", "count", "self_s", "total_s", "self_cpu_memory_bytes")


def _strings(dataset) -> list[str]:
    return [decode(v) for v in dataset[()]]


def _frame(cell_id: str, group: h5py.Group, path: str) -> pd.DataFrame:
    steps = int(attribute(group, "steps"))
    frame = pd.DataFrame(columns=list(OP_COLUMNS))
    if "ops" in group:
        values = np.asarray(group["ops"][()], dtype=float).reshape(-1, len(_STORED_COLUMNS))
        columns = json_attr(group["ops"], "columns", list(_STORED_COLUMNS))
        if list(columns) != list(_STORED_COLUMNS):
            raise ResultsFileError(
                f"{path}: cell {cell_id}: profile columns {columns}, expected "
                f"{list(_STORED_COLUMNS)} (a newer layout? update scalebench-analysis)"
            )
        frame = pd.DataFrame(values, columns=list(_STORED_COLUMNS))
        frame["rank"] = frame["rank"].astype(int)
        frame["count"] = frame["count"].astype(int)
        frame["name"] = _strings(group["names"])
        frame["phase"] = [phase or BETWEEN_STEPS for phase in _strings(group["phases"])]
        frame["device"] = _strings(group["devices"])
        frame["cell_id"] = cell_id
        frame["steps"] = steps
        frame = frame.reindex(columns=list(OP_COLUMNS))
    frame.attrs = {"steps": steps, "activities": json_attr(group, "activities", [])}
    return frame


def profiled_cells(path: str) -> list[str]:
    """Ids of the cells of the file at `path` that hold a profile, in the file's order."""
    with open_file(path) as f:
        cells = f.get("cells", {})
        return [cell_id for cell_id in cells if PROFILE_GROUP in cells[cell_id]]


def read_profile(path: str, cell_id: str) -> pd.DataFrame | None:
    """The profile of one cell (columns OP_COLUMNS), or None when the cell has none.
    ResultsFileError when the cell is not in the file."""
    with open_file(path) as f:
        cells = f.get("cells", {})
        if cell_id not in cells:
            raise ResultsFileError(f"{path}: no cell {cell_id}")
        group = cells[cell_id]
        if PROFILE_GROUP not in group:
            return None
        return _frame(cell_id, group[PROFILE_GROUP], path)
