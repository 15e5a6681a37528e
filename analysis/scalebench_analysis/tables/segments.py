"""Run-level segments of program cells (Note [Run-level segments] in
program/program_report.h, docs/programs.md#run-level-segments): where a program's
whole wall time went outside (and around) its measured steps.

One row per (ok program cell that reported segments or steps, part), each figure the median
over the cell's ranks. The parts, in this order:

* ``launch_to_first_segment``: the launch to the adapter's first segment (for Lightning the
  Trainer's construction: interpreter, imports, configuration, the model and data objects);
* ``launch_to_first_step``: the launch to the first (warm-up) step: the start-up table's
  ``startup_s``;
* the program's named segments (``kind`` segment): the Lightning adapter's ``data_setup``,
  ``model_setup``, ``sanity_check``, ``fit``, ``train``, ``validation``, ``checkpoint_save``,
  ``validate``, ``test``, ``predict`` in that order, then any other (a plain program's
  ``scalebench_client.segment``) by name, each with its number of occurrences;
* ``steps``: the first step's begin to the last one's end (warm-up, measured and profiled);
* ``after_last_step``: the last step's end to the program's exit (teardown, a last validation,
  writing outputs);
* ``wall``: the program's whole run, launch to exit (``loop_wall_s``).

Segments may hold each other (``fit`` holds the steps and every ``validation``), so they are
named spans, not a partition of ``wall``; ``share_of_wall`` is each part's total over the
wall time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..read.loader import Results
from .startup import ok_cells_with_ranks, rank_median

COLUMNS = ["label", "cell_id", "kind", "segment", "count", "total_s", "share_of_wall"]
#: The Lightning adapter's segments, in the order a run passes them (lightning.py).
_KNOWN_ORDER = (
    "data_setup",
    "model_setup",
    "sanity_check",
    "fit",
    "train",
    "validation",
    "checkpoint_save",
    "validate",
    "test",
    "predict",
)
_PREFIX, _TIME, _COUNT = "segment_", "_s", "_count"


def segment_names(columns) -> list[str]:
    """The segment names of rank-metric `columns` (``segment_<name>_s`` with its
    ``segment_<name>_count``), in the adapter's order, then by name."""
    names = {
        column[len(_PREFIX) : -len(_TIME)]
        for column in columns
        if column.startswith(_PREFIX)
        and column.endswith(_TIME)
        and f"{column[: -len(_TIME)]}{_COUNT}" in columns
    }
    known = [name for name in _KNOWN_ORDER if name in names]
    return known + sorted(names - set(known))


def _cell_parts(mine: pd.DataFrame, names: list[str]) -> list[tuple]:
    """(kind, segment, count, total_s) of one cell's parts that it has, in the module doc's
    order; none when the cell has neither a segment nor steps."""
    present = [n for n in names if not np.isnan(rank_median(mine, f"{_PREFIX}{n}{_TIME}"))]
    steps = rank_median(mine, "program_steps_span_s")
    if not present and np.isnan(steps):
        return []
    nan = float("nan")
    parts = [
        ("program", "launch_to_first_segment", nan, rank_median(mine, "program_before_segments_s")),
        ("program", "launch_to_first_step", nan, rank_median(mine, "program_startup_s")),
    ]
    for name in present:
        count = rank_median(mine, f"{_PREFIX}{name}{_COUNT}")
        parts.append(("segment", name, count, rank_median(mine, f"{_PREFIX}{name}{_TIME}")))
    parts += [
        ("program", "steps", nan, steps),
        ("program", "after_last_step", nan, rank_median(mine, "program_after_steps_s")),
        ("program", "wall", nan, rank_median(mine, "loop_wall_s")),
    ]
    return [part for part in parts if not np.isnan(part[3])]


def segments_table(results: Results) -> pd.DataFrame:
    """One row per part of each ok program cell's run (see the module's doc); empty when no
    cell has any."""
    columns = set(results.rank_metrics.columns) if len(results.rank_metrics) else set()
    names = segment_names(columns)
    rows = []
    having = ["program_steps_span_s", *(f"{_PREFIX}{n}{_TIME}" for n in names)]
    for cell, mine in ok_cells_with_ranks(results, having):
        wall = rank_median(mine, "loop_wall_s")
        for kind, name, count, total in _cell_parts(mine, names):
            rows.append(
                {
                    "label": cell.label,
                    "cell_id": cell.cell_id,
                    "kind": kind,
                    "segment": name,
                    "count": count,
                    "total_s": total,
                    "share_of_wall": total / wall if wall > 0 else float("nan"),
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)
