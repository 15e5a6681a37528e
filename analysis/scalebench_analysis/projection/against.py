"""A stored projection against a later run (`scalebench project NEW.h5 --against OLD.h5`):
every projected training row whose curve, per-rank batch and worker count the later run
measured, predicted against measured (Note [Stored projections] in projection/store.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import UsageError
from ..read.loader import load
from .inputs import measured_cells
from .store import stored

COLUMNS = [
    "curve",
    "batch_size",
    "workers",
    "nodes_projected",
    "hosts_measured",
    "step_projected_s",
    "step_measured_s",
    "step_error",
    "p95_projected_s",
    "p95_measured_s",
    "p95_error",
    "comm_exposed_projected_s",
    "comm_exposed_measured_s",
]


@dataclass(frozen=True)
class Against:
    """The stored projection's name, when and on what it was made, and the table."""

    stored_path: str
    name: str
    made: str
    fitted_on: str
    results_path: str
    table: pd.DataFrame

    def summary(self) -> str:
        errors = np.abs(self.table.step_error.to_numpy(float))
        errors = errors[np.isfinite(errors)]
        if errors.size == 0:
            return (
                f"{self.results_path} measured none of the projected shapes (curve, batch, "
                f"workers) of {self.stored_path}{self.name}"
            )
        return (
            f"{errors.size} projected step(s) measured: median |error| {np.median(errors):.1%}, "
            f"largest {errors.max():.1%}"
        )


def _error(predicted, measured) -> float:
    if predicted is None or measured is None or not math.isfinite(measured) or measured <= 0:
        return math.nan
    return predicted / measured - 1.0


def against(results_path: str, stored_path: str, index: int | None = None) -> Against:
    """The projection stored in `stored_path` (the last, or number `index`) against the
    measured cells of `results_path`. UsageError when none is stored or `index` is not."""
    documents = stored(stored_path)
    if not documents:
        raise UsageError(
            f"{stored_path}: no stored projection; make one with "
            f"`scalebench project {stored_path} --workers N,... --store`"
        )
    if index is not None and not 0 <= index < len(documents):
        raise UsageError(f"{stored_path}: stored projections are 0..{len(documents) - 1}")
    document = documents[-1 if index is None else index]
    measured = {
        (c.curve_label, c.batch_size, c.world_size): c
        for c in measured_cells(load(results_path))
        if c.mode == "train"
    }
    rows = []
    for row in document.get("train", []):
        cell = measured.get((row["curve"], row["batch_size"], row["workers"]))
        if cell is None:
            continue
        rows.append(
            {
                "curve": row["curve"],
                "batch_size": row["batch_size"],
                "workers": row["workers"],
                "nodes_projected": row.get("nodes"),
                "hosts_measured": cell.hosts,
                "step_projected_s": row.get("step_s"),
                "step_measured_s": cell.measured_step_s,
                "step_error": _error(row.get("step_s"), cell.measured_step_s),
                "p95_projected_s": row.get("step_p95_s"),
                "p95_measured_s": cell.measured_p95_s,
                "p95_error": _error(row.get("step_p95_s"), cell.measured_p95_s),
                "comm_exposed_projected_s": row.get("comm_exposed_s"),
                "comm_exposed_measured_s": cell.exposed_s,
            }
        )
    stamp = document["stored"]
    return Against(
        stored_path,
        document["name"],
        f"{stamp.get('created_at', '?')} by {stamp.get('tool', '?')}",
        document.get("results", "?"),
        results_path,
        pd.DataFrame(rows, columns=COLUMNS),
    )
