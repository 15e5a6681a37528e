"""The answer first (issue 29): a few lines a person reads in ten seconds, printed at the end of
``analyze`` and at the top of the HTML report. Built only from the analysis' own tables (no
figure of its own):

* per experiment and mode, the fastest ok cell (among the trusted ones when there are any) and
  its throughput; its speedup over the baseline when one was asked for (``--baseline``,
  ``--baseline-branch``: the speedup table); its scaling efficiency at the largest world size
  of its group (the scaling table: strong scaling where the global batch was kept, else
  weak); the recommended batch of its experiment's ``batch_size: auto`` cells; a failed
  accuracy check;
* the cells that failed, by status, with the first reason;
* the untrusted cells with what would fix them (the reasons of quality.py mapped to a
  remedy: more iterations or repetitions for noise, more warm-up for drift);
* the straggler nodes of multi-node cells (straggler_nodes.py), by host;
* what to run next for the plots: ``scalebench report`` (the console's one name for it;
  the HTML report, which is that command's output, leaves the line out).
"""

from __future__ import annotations

import math

import pandas as pd

from ..read.keys import GROUP_COLUMNS
from .straggler_nodes import summary_line as straggler_nodes_line

#: Untrusted-reason fragment (quality.py) -> what to do about it.
_REMEDIES = (
    (
        "cv ",
        "noisy: set iterations: auto (measures until the median is known to +-2 %), or "
        "repeat the cells (repetitions: 3) on a quieter machine",
    ),
    ("short of ci_width", "interval not reached: raise max_seconds (or ci_width)"),
    (
        "warm-up drift",
        "drifting (still warming up, or the machine's load changed): raise warmup or set "
        "warmup: auto, and rerun on a quieter machine",
    ),
    ("only ", "too few samples: raise iterations"),
    ("replicas out of sync", "replicas diverged: a correctness problem, see docs/ddp.md"),
    (
        "steps: the program ran",
        "a program ran other steps than asked: pass {steps} as its step limit and lift the "
        "others (trainer.max_epochs=-1, EarlyStopping), see docs/programs.md#steps-asked-and-run",
    ),
    (
        "code identity:",
        'a branch\'s package was imported from outside its tree: set env: {PYTHONPATH: "."} '
        "or install the tree in a prepare step, see docs/programs.md#code-identity",
    ),
)


def _efficiency(scaling: pd.DataFrame, best) -> str:
    """'; scaling 87 % at 8 ranks (strong)' for the group of `best`, '' without one."""
    if scaling is None or not len(scaling):
        return ""
    keys = GROUP_COLUMNS
    mine = scaling
    for key in keys:
        if key in mine and key in best:
            mine = mine[mine[key].astype(str) == str(best[key])]
    mine = mine[mine.world_size > 1] if "world_size" in mine else mine.iloc[0:0]
    if not len(mine):
        return ""
    top = mine[mine.world_size == mine.world_size.max()]
    for column, kind in (("strong_efficiency", "strong"), ("weak_efficiency", "weak")):
        if column in top:
            values = top[column].dropna()
            if len(values):
                world = int(top.world_size.iloc[0])
                return f"; scaling {values.max():.0%} at {world} ranks ({kind})"
    return ""


def _unit_id(cell) -> str:
    """The id the speedup table gives a cell: its series id (a repeated cell is one row,
    runs.Unit), its own id when it is not repeated."""
    series_id = cell.get("series_id")
    return series_id if isinstance(series_id, str) and series_id else cell.cell_id


def _speedup(speedup: pd.DataFrame | None, cell_id: str) -> str:
    if speedup is None or not len(speedup):
        return ""
    row = speedup[speedup.cell_id == cell_id]
    if not len(row) or not math.isfinite(float(row.speedup.iloc[0])):
        return ""
    return f", x{float(row.speedup.iloc[0]):.2f} over {row.baseline.iloc[0]}"


def _recommended(results_cells: pd.DataFrame, experiment: str, mode: str) -> str:
    if "recommended_batch" not in results_cells:
        return ""
    mine = results_cells[
        (results_cells.experiment == experiment)
        & (results_cells["mode"] == mode)
        & results_cells.recommended_batch.notna()
        & (results_cells.status == "ok")
    ]
    batches = sorted({int(b) for b in mine.recommended_batch if b and b > 0})
    if not batches:
        return ""
    return "; recommended batch " + "/".join(str(b) for b in batches)


def summary_lines(analysis, next_step: bool = True) -> list[str]:
    """The summary of `analysis` (tables/analysis.py), one line per fact; with `next_step`
    (and a file), last the command that makes the plots."""
    cells = analysis.sections["cells"]
    ok = cells[cells.status == "ok"]
    lines = []
    untrusted = ok[ok.trusted != True]  # noqa: E712 (NaN: no summary, untrusted)
    failed = cells[~cells.status.isin(["ok", "skipped"])]
    lines.append(
        f"{len(cells)} cells: {len(ok)} ok ({len(ok) - len(untrusted)} trusted), "
        f"{len(failed)} failed, {int((cells.status == 'skipped').sum())} skipped"
    )
    for (experiment, mode), group in ok.groupby(["experiment", "mode"], sort=True):
        pool = group[group.trusted == True]  # noqa: E712
        pool = pool if len(pool) else group
        best = pool.sort_values("throughput_samples_per_s", ascending=False).iloc[0]
        text = (
            f"{experiment} {mode}: fastest {best.label}, "
            f"{best.throughput_samples_per_s:,.0f} samples/s"
            + ("" if best.trusted == True else " (untrusted)")  # noqa: E712
            + _speedup(analysis.sections.get("speedup"), _unit_id(best))
            + _efficiency(analysis.sections.get("scaling"), best)
            + _recommended(analysis.results.cells, experiment, mode)
        )
        if isinstance(best.accuracy, str) and best.accuracy.startswith("FAIL"):
            text += f"; accuracy {best.accuracy}"
        lines.append(text)
    for status, group in failed.groupby("status", sort=True):
        reason = next((r for r in group.reason if isinstance(r, str) and r), "")
        lines.append(
            f"{len(group)} {status}: first {group.label.iloc[0]}"
            + (f": {reason[:160]}" if reason else "")
        )
    if len(untrusted):
        remedies = []
        for fragment, remedy in _REMEDIES:
            if any(fragment in str(r) for r in untrusted.untrusted_because):
                remedies.append(remedy)
        lines.append(
            f"{len(untrusted)} untrusted cells: "
            + ("; ".join(remedies) or "see the cells table's notes")
        )
    nodes = straggler_nodes_line(analysis.sections.get("straggler_nodes"))
    if nodes:
        lines.append(nodes)
    if next_step and analysis.results.path:
        lines.append(
            f"plots and every table: scalebench report {analysis.results.path} -o report.html"
        )
    return lines
