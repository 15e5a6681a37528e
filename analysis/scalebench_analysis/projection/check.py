"""The projection checked against runs: fitted on the small worlds of a results file, it
predicts the larger worlds that file measured, and the errors are printed.
See Note [Projection model] in projection/__init__.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .comm import LinkFit
from .inputs import MeasuredCell
from .model import ProjectionOptions, curves, infer_rows, train_rows

#: The largest world a check fits on: world 1, and 2 where measured.
CHECK_FIT_WORLD = 2
CHECK_COLUMNS = [
    "curve",
    "mode",
    "batch_size",
    "workers",
    "figure",
    "predicted",
    "measured",
    "error",
    "comm_exposed_predicted_s",
    "comm_exposed_measured_s",
]


@dataclass(frozen=True)
class Check:
    """Predicted against measured for every measured cell beyond the fit worlds."""

    table: pd.DataFrame
    fit_world: int

    def summary(self) -> str:
        errors = self.table.error.to_numpy(float)
        errors = np.abs(errors[np.isfinite(errors)])
        if errors.size == 0:
            return (
                f"check: no measured world beyond {self.fit_world} to check the projection "
                f"against (run the same cells at 4 workers or more)"
            )
        return (
            f"check (fit on worlds <= {self.fit_world}, {errors.size} larger cells predicted): "
            f"median |error| {np.median(errors):.1%}, largest {errors.max():.1%}"
        )


def check(
    cells: Sequence[MeasuredCell], probe_links: Sequence[LinkFit], gpus_per_node: int | None
) -> Check:
    """Fits on the cells of worlds <= CHECK_FIT_WORLD and predicts every measured larger
    world of the same curve and per-rank batch: the step median (training) or the
    throughput (inference)."""
    larger = sorted({c.world_size for c in cells if c.world_size > CHECK_FIT_WORLD})
    rows = []
    if larger:
        options = ProjectionOptions(tuple(larger), gpus_per_node, CHECK_FIT_WORLD)
        measured = {(c.config, c.batch_size, c.world_size): c for c in cells}
        for curve in curves(cells, probe_links, options):
            projected = (
                train_rows(curve, options) if curve.mode == "train" else infer_rows(curve, options)
            )
            config = curve.cells[0].config
            for row in projected:
                cell = measured.get((config, row["batch_size"], row["workers"]))
                if cell is None or not math.isfinite(row["measured"]):
                    continue
                train = curve.mode == "train"
                rows.append(
                    {
                        "curve": curve.label,
                        "mode": curve.mode,
                        "batch_size": row["batch_size"],
                        "workers": row["workers"],
                        "figure": "step_s" if train else "throughput_samples_per_s",
                        "predicted": row["step_s"] if train else row["throughput_samples_per_s"],
                        "measured": row["measured"],
                        "error": row["error"],
                        "comm_exposed_predicted_s": row.get("comm_exposed_s", math.nan),
                        "comm_exposed_measured_s": cell.exposed_s if train else math.nan,
                    }
                )
    return Check(pd.DataFrame(rows, columns=CHECK_COLUMNS), CHECK_FIT_WORLD)
