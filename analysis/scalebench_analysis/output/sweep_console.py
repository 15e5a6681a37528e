"""The console of a large sweep (issue 53). See Note [Console at scale].

Note [Console at scale]
~~~~~~~~~~~~~~~~~~~~~~~
A row per cell answers a matrix of a dozen cells; at 10,000 cells `analyze` printed 20,000
lines (the cells table and a note per untrusted cell), which no one reads and which took
longer to print than to compute. Once the cells outnumber a screen (`LARGE_SWEEP_CELLS`),
the console prints, in this order:

1. the run (the overview, as always);
2. the summary first (tables/summary.py), its per-experiment lines cut to the first
   `SUMMARY_EXPERIMENTS` in natural order, with how many more there are;
3. the shape of the sweep (tables/sweep.py): each swept axis with its values and the share of
   the spread of log throughput it explains alone, largest first ("which axis matters");
4. the experiments table: per experiment and mode its counts, its best cell and the axis that
   matters most within it, at most `SHOWN_ROWS` rows;
5. the other tables it prints anyway (with `--details`, or asked for by an option), each cut
   to `SHOWN_ROWS` rows.

Every cut says what was left out and where all of it is: `--format csv --table cells` (or
the table's name) keeps every row, and so do JSON and Markdown. A small file's console is
unchanged: the summary stays last there, the answer on the last lines of the screen.
"""

from __future__ import annotations

import pandas as pd

from ..tables import sweep
from .fit import fit_table, wrap

#: More cells than this and the console is the sweep's (a screen is about 50 lines).
LARGE_SWEEP_CELLS = 50
#: Rows of any table the console prints at scale.
SHOWN_ROWS = 30
#: Per-experiment lines of the summary at scale.
SUMMARY_EXPERIMENTS = 10


def is_large(analysis) -> bool:
    """Whether the file has more cells than a screen (Note [Console at scale])."""
    cells = analysis.sections.get("cells")
    return cells is not None and len(cells) > LARGE_SWEEP_CELLS


def more_rows_line(left_out: int, table: str) -> str:
    """The line under a table cut to SHOWN_ROWS rows."""
    return (
        f"  ... and {left_out:,} more rows: every row with --format csv --table {table} "
        "(or --format json)"
    )


def _values_text(row) -> str:
    first, last = row["first"], row["last"]
    return (
        f"{row['values']} values ({first} .. {last})" if row["values"] > 2 else f"{first}, {last}"
    )


def axis_lines(cells: pd.DataFrame) -> list[str]:
    """The swept axes, largest share first (tables/sweep.py axis_table)."""
    axes = sweep.axis_table(cells)
    if not len(axes):
        return ["  nothing was swept: every ok cell has the same settings"]
    lines = ["  swept: what each axis alone explains of the spread of log throughput (ok cells)"]
    for _, row in axes.iterrows():
        share = row["explained"]
        text = "-" if pd.isna(share) else f"{share:.0%}"
        lines.append(f"  {row['axis']:>12} {text:>5}  {_values_text(row)}")
    return lines


def display_experiments(table: pd.DataFrame) -> pd.DataFrame:
    """The experiments table as console text: the best cell's settings in one column."""
    best = [
        "-"
        if pd.isna(b)
        else f"b{int(b)} w{int(w)} {p}" + ("" if s in ("default", "") else f" [{s}]")
        for b, w, p, s in zip(
            table.best_batch_size, table.best_world_size, table.best_precision, table.best_setting
        )
    ]

    def rate(values):
        return ["-" if pd.isna(v) else f"{v:,.1f}" for v in values]

    return pd.DataFrame(
        {
            "experiment": table.experiment,
            "mode": table["mode"],
            "cells": table.cells.astype(int),
            "ok": table.ok.astype(int),
            "trusted": table.trusted.astype(int),
            "best": best,
            "best_samples_per_s": rate(table.best_throughput_samples_per_s),
            "worst_samples_per_s": rate(table.worst_throughput_samples_per_s),
            "best/worst": ["-" if pd.isna(v) else f"x{v:.2f}" for v in table.best_over_worst],
            "depends_most_on": table.depends_most_on.fillna(""),
        }
    )


def sweep_lines(analysis, width: int | None) -> list[str]:
    """Parts 3 and 4 of Note [Console at scale]."""
    cells = analysis.sections["cells"]
    lines = [f"== Sweep: {len(cells):,} cells ==", *axis_lines(cells), ""]
    table = sweep.experiments_table(cells)
    lines.append(f"== Experiments: the best cell of each ({len(table):,}; natural order) ==")
    shown = display_experiments(table.head(SHOWN_ROWS))
    notes = []
    if width is not None and len(shown):
        shown, notes = fit_table("experiments", shown, width)
    lines.append(shown.to_string(index=False) if len(shown) else "(none)")
    for note in notes:
        lines += wrap(f"  * {note}", width, "    ") if width else [f"  * {note}"]
    if len(table) > SHOWN_ROWS:
        lines.append(
            f"  ... and {len(table) - SHOWN_ROWS:,} more experiments; every cell: "
            "--format csv --table cells"
        )
    return lines
