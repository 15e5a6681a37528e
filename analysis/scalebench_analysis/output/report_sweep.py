"""The HTML report of a large sweep (issue 53). See Note [Report at scale].

Note [Report at scale]
~~~~~~~~~~~~~~~~~~~~~~
The report of 10,000 cells was 45 MB and took minutes: every table a static HTML row per
cell (the cells, scaling, batch curve, start-up and MFU tables each), a panel per experiment
in the per-cell plots, a list per batch study. Once the file has more cells than a screen
(output/sweep_console.py LARGE_SWEEP_CELLS) the report instead shows, after the summary:

* the sweep: each swept axis with the share of the spread of log throughput it explains
  (tables/sweep.py), and a heatmap over the two axes that explain most: a cell per pair of
  values, its colour the throughput over the best of its row (where each row peaks), drawn
  once for the file;
* the best and the worst `EXTREME_CELLS` cells, and the experiments table (one row per
  experiment: its best cell, the axis that matters most within it);
* the cells as one searchable, sortable table: the rows as JSON text in the page, drawn
  `PAGE_ROWS` at a time by a few lines of JavaScript (a filter box, a click on a header
  sorts; `report.html#filter=e12 b64` opens it filtered), instead of a static row per cell.
  Every row is in the page; nothing is fetched.

The per-cell plots and the batch studies' lists are not drawn (the page names them, with
why); the other per-cell tables are cut to `SHOWN_ROWS` rows with where every row is
(`analyze --format csv --table NAME`). A file of a screen of cells or fewer gets the report
it always had.
"""

from __future__ import annotations

import base64
import html
import json

import numpy as np
import pandas as pd

from ..read.natural_order import natural_column
from ..tables import sweep
from .figures import STYLE, figure_png
from .html_table import plain_table
from .render import display_frame
from .sweep_console import SHOWN_ROWS, display_experiments

#: The best and the worst cells listed.
EXTREME_CELLS = 10
#: Rows of the cells table drawn at a time.
PAGE_ROWS = 100
#: Columns of the searchable cells table (display_frame's text of each).
CELL_COLUMNS = (
    "label",
    "status",
    "throughput_samples_per_s",
    "median_ms",
    "p99_ms",
    "cv",
    "ci_rel",
    "trusted",
    "peak_memory_mib",
)

_SCRIPT = """
<script>
(function () {
  const data = JSON.parse(document.getElementById("cells-data").textContent);
  const columns = data.columns, rows = data.rows, page = %(page)d;
  const numeric = columns.map((c, i) => rows.every(r => r[i] === "-" ||
    !isNaN(parseFloat(r[i].replace(/[,+%%x]/g, "")))));
  let order = null, descending = false;
  const input = document.getElementById("cells-filter");
  const body = document.getElementById("cells-body");
  const count = document.getElementById("cells-count");
  function value(row, i) {
    if (!numeric[i]) return row[i];
    const v = parseFloat(row[i].replace(/[,+%%x]/g, ""));
    return isNaN(v) ? -Infinity : v;
  }
  function draw() {
    const words = input.value.toLowerCase().split(/\\s+/).filter(w => w);
    let shown = rows.filter(r => words.every(w => r.join(" ").toLowerCase().includes(w)));
    if (order !== null) {
      shown = shown.slice().sort((a, b) => {
        const x = value(a, order), y = value(b, order);
        return (x < y ? -1 : x > y ? 1 : 0) * (descending ? -1 : 1);
      });
    }
    body.innerHTML = "";
    for (const row of shown.slice(0, page)) {
      const tr = document.createElement("tr");
      for (const text of row) {
        const td = document.createElement("td");
        td.textContent = text;
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
    count.textContent = shown.length + " of " + rows.length + " cells match" +
      (shown.length > page ? "; the first " + page + " shown" : "");
  }
  document.querySelectorAll("#cells-table th").forEach((th, i) => {
    th.style.cursor = "pointer";
    th.addEventListener("click", () => {
      descending = order === i ? !descending : numeric[i];
      order = i;
      draw();
    });
  });
  input.addEventListener("input", draw);
  const asked = decodeURIComponent(location.hash.slice(1));
  if (asked.startsWith("filter=")) input.value = asked.slice(7);  // report.html#filter=e12 b64
  draw();
})();
</script>
"""


def _heatmap(cells: pd.DataFrame, axes: pd.DataFrame) -> dict | None:
    """The heatmap of Note [Report at scale] over the two axes that explain most; None with
    fewer than two swept axes."""
    if len(axes) < 2:
        return None
    rows_axis, columns_axis = axes.axis.iloc[0], axes.axis.iloc[1]
    if "experiment" in (rows_axis, columns_axis):  # experiments read best as rows
        rows_axis, columns_axis = "experiment", ({rows_axis, columns_axis} - {"experiment"}).pop()
    ok = cells[(cells.status == "ok") & (cells.throughput_samples_per_s > 0)]
    grid = ok.pivot_table(
        index=rows_axis, columns=columns_axis, values="throughput_samples_per_s", aggfunc="max"
    )
    grid = grid.sort_index(key=natural_column).sort_index(axis=1, key=natural_column)
    share = grid.div(grid.max(axis=1), axis=0)
    import matplotlib.pyplot as plt

    with plt.rc_context(STYLE):
        height = min(14.0, 2.0 + 0.12 * len(share))
        fig, ax = plt.subplots(figsize=(10.0, height), layout="constrained")
        image = ax.imshow(share.to_numpy(), aspect="auto", cmap="viridis", vmin=0, vmax=1)
        for labels, setter in ((share.columns, ax.set_xticks), (share.index, ax.set_yticks)):
            step = max(1, len(labels) // 25)
            setter(np.arange(0, len(labels), step), [str(v) for v in labels[::step]])
        ax.set_xlabel(columns_axis)
        ax.set_ylabel(rows_axis)
        fig.colorbar(image, ax=ax, label=f"throughput / best of the {rows_axis}")
    return {
        "title": f"Throughput over {rows_axis} and {columns_axis}",
        "caption": f"One cell per ({rows_axis}, {columns_axis}) pair: the highest throughput "
        f"of the ok cells there, over the best of its {rows_axis} (1.0, yellow: where the "
        f"row peaks). The two swept axes that explain most of the spread; empty: not run.",
        "data": base64.b64encode(figure_png(fig)).decode("ascii"),
    }


def _cells_html(cells: pd.DataFrame) -> str:
    shown = display_frame("cells", cells)
    shown = shown[[c for c in CELL_COLUMNS if c in shown]]
    data = {"columns": list(shown.columns), "rows": shown.to_numpy().tolist()}
    text = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown.columns)
    return (
        '<p><input id="cells-filter" type="search" size="40" '
        'placeholder="filter: words every row shown contains (e12 b64 no)"> '
        '<span id="cells-count" class="caption"></span></p>'
        f'<div class="scroll"><table id="cells-table"><thead><tr>{head}</tr></thead>'
        '<tbody id="cells-body"></tbody></table></div>'
        f'<script type="application/json" id="cells-data">{text}</script>'
        + _SCRIPT
        % {"page": PAGE_ROWS}
    )


def sweep_section(analysis) -> dict:
    """The parts of Note [Report at scale] for the template: the axes, the heatmap, the best,
    worst and experiments tables, the searchable cells table."""
    cells = analysis.sections["cells"]
    axes = sweep.axis_table(cells)
    shown_axes = pd.DataFrame(
        {
            "axis": axes.axis,
            "values": axes["values"],
            "from": axes["first"].astype(str),
            "to": axes["last"].astype(str),
            "explains": [("-" if pd.isna(v) else f"{v:.0%}") for v in axes.explained],
        }
    )
    extremes = []
    for best, title in ((True, "Best"), (False, "Worst")):
        rows = sweep.extreme_cells(cells, EXTREME_CELLS, best)
        extremes.append(
            {"title": f"{title} {EXTREME_CELLS} cells", "html": plain_table(_cell_text(rows))}
        )
    experiments = sweep.experiments_table(cells)
    return {
        "cells": len(cells),
        "axes": plain_table(shown_axes),
        "heatmap": _heatmap(cells, axes),
        "extremes": extremes,
        "experiments": plain_table(display_experiments(experiments)),
        "cells_table": _cells_html(cells),
    }


def _cell_text(rows: pd.DataFrame) -> pd.DataFrame:
    shown = display_frame("cells", rows)
    return shown[[c for c in CELL_COLUMNS if c in shown]]


def cut_rows(frame: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """A per-cell table of the report cut to SHOWN_ROWS rows, and how many were left out."""
    if len(frame) <= SHOWN_ROWS:
        return frame, 0
    return frame.head(SHOWN_ROWS), len(frame) - SHOWN_ROWS
