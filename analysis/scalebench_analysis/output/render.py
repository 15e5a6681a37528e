"""Text renderings of an Analysis: console tables, CSV, JSON and Markdown."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from ..errors import UsageError
from ..read.keys import IDENTITY_COLUMNS
from ..tables import batch, compare, pairs, summary
from ..tables.analysis import STATISTICS, Analysis
from . import repetitions_text, sweep_console
from .fit import SUMMARY_WIDTH, fit_table, wrap

TITLES = {
    "overview": "Run",
    "cells": "Cells",
    "scaling": "Scaling (weak: fixed per-rank batch; strong: fixed global batch; 1.0 = ideal)",
    "batch": "Batch size",
    "batch_study": "Batch study: the figures of each batch search (auto cell) or listed-batch "
    "group (0 = none)",
    "batch_curve": "Batch study: throughput, speedup over the smallest batch, per-sample latency "
    "and memory efficiency against batch",
    "repetitions": "Repetitions: median over the ok repetitions with its 95% bootstrap interval "
    "(DISAGREE: they span more than 10%; docs/repetitions.md)",
    "stragglers": "Straggler ranks",
    "straggler_nodes": "Straggler nodes (cells on 2+ hosts): per host, the low median of its "
    "ranks' busy times; slowdown over the fastest host, excess over the other hosts' median",
    "startup": "Start-up: seconds before the measured steps (median over ranks; startup_s: "
    "a program's launch to its first step)",
    "segments": "Run-level segments of program cells: launch to the first segment and to the "
    "first step, the program's named segments (count: occurrences), the steps' span, after the "
    "last step, the whole wall time (median over ranks; segments may hold each other)",
    "accuracy": (
        "Accuracy: each validated cell against its fp32 reference, or a program cell against "
        "its baseline cell (the file's verdict)"
    ),
    "mfu": "Model FLOPs utilisation: achieved model FLOP/s against the device's dense peak at "
    "the precision used (NaN: CPU, or a device not in the table)",
    "speedup": "Speedup against the baseline",
    "speedup_vs_file": "Speedup against the baseline file",
    "regressions": "Regression gate over runs (ratio = time new / base; > 1 is slower)",
    "phases": "Phases that changed between the compared cells (new - base, ms, with the "
    "interval of the same test)",
    "ablation": "Ablation: each change alone against the baseline cell (median, speedup)",
    "cumulative": "Cumulative: the changes added one at a time, best first",
    "recommendations": "Recommendations: the fastest trusted configuration per context whose "
    "accuracy did not fail",
}
#: Columns that only machines need; left out of console and Markdown tables.
_HIDDEN = {
    "cell_id",
    "base_cell_id",
    "new_cell_id",
    "baseline_cell_id",
    "curve",
    "config",
    "untrusted_because",
    "stop_reason",
    "reason",
    *IDENTITY_COLUMNS,
    "median_base_s",
    "median_new_s",
    "host",
    "others_median_busy_s",
    "accuracy_change",
    "series_id",
    "repetition",
    "repetitions",
    "remedy",
    # The alpha a pair was judged at and whether it is its sequential test's (pairs.
    # judged_alpha): the verdict line says so where it differs; CSV / JSON keep both.
    "alpha",
    "sequential",
}
#: Per table: columns of _HIDDEN that it shows (a node's host is its label).
_SHOWN = {"straggler_nodes": {"host"}}
#: The cells table's full statistics (tables/analysis.py STATISTICS): CSV and JSON only.
_HIDDEN_CELLS = set(STATISTICS)
# these tables have no label column
_KEEP_IDENTITY = {"scaling", "batch", "ablation", "cumulative", "recommendations", "accuracy"}
#: Numeric columns of the ablation tables shown in the `median` text instead.
_ABLATION_NUMBERS = {"median_ms", "speedup", "axis", "step"}
_RATIO = ("efficiency", "speedup", "ratio", "ci_low", "ci_high")
_PERCENT = ("cv", "comm_share")
_SIGNED_PERCENT = ("drift", "change", "excess", "slowdown")
_INTEGER = (
    "batch",
    "max_batch",
    "world",
    "count",
    "n_base",
    "n_new",
    "rank",
    "untrusted_ok_cells",
    "_ranks",
)
#: Figures of the accuracy table: small relative errors, similarities close to 1, decibels.
_ACCURACY_FORMATS = {
    "mae_rel": "{:.3g}",
    "max_loss_rel_deviation": "{:.3g}",
    "param_rel_distance": "{:.3g}",
    "tolerance": "{:.3g}",
    "cosine_similarity": "{:.6f}",
    "ssim": "{:.6f}",
    "psnr_db": "{:.1f}",
}


def _format_value(column: str, value) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if not isinstance(value, (int, float, np.integer, np.floating)):
        return str(value)
    if column in _ACCURACY_FORMATS:
        return _ACCURACY_FORMATS[column].format(value)
    if column.endswith(_RATIO):
        return f"{value:.3f}"
    if column == "ci_rel":  # the median's 95 % interval, +- relative
        return f"+-{value:.1%}"
    if column in _PERCENT:
        return f"{value:.1%}"
    if column in _SIGNED_PERCENT:
        return f"{value:+.1%}"
    if column.startswith("p_"):
        return f"{value:.2g}"
    if "throughput" in column:
        return f"{value:,.1f}"
    if any(column.startswith(p) or column.endswith(p) for p in _INTEGER) and value == int(value):
        return str(int(value))
    if column.endswith("_s"):
        return f"{value * 1e3:.3f} ms"
    return f"{value:.2f}"


def shown_rows(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows a person is shown (console, Markdown, HTML; CSV and JSON have every row):
    the stragglers alone (ranks and nodes), the phases that changed."""
    if name in ("stragglers", "straggler_nodes"):
        return frame[frame.straggler.astype(bool)]
    if name == "phases":
        return frame[frame.changed.astype(bool)]
    return frame


def display_frame(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    """`frame`'s shown_rows with machine-only columns dropped and every value formatted as
    text (the Repetitions table: repetitions_text.display_table)."""
    if name == "repetitions":
        return repetitions_text.display_table(frame)
    hidden = _HIDDEN - (set(IDENTITY_COLUMNS) if name in _KEEP_IDENTITY else set())
    hidden = hidden - _SHOWN.get(name, set())
    frame = shown_rows(name, frame)
    if name in ("ablation", "cumulative"):
        hidden = hidden | _ABLATION_NUMBERS
    if name == "cells":
        hidden = hidden | _HIDDEN_CELLS
    shown = frame[[c for c in frame.columns if c not in hidden]]
    return pd.DataFrame(
        {c: [_format_value(c, v) for v in shown[c]] for c in shown.columns},
        index=range(len(shown)),
        columns=shown.columns,
    )


def _notes(analysis: Analysis) -> list[str]:
    """Why cells are untrusted or failed: one line each."""
    cells = analysis.sections["cells"]
    lines = [
        f"untrusted: {r.label}: {r.untrusted_because}"
        for r in cells.itertuples()
        if isinstance(r.untrusted_because, str) and r.untrusted_because
    ]
    lines += [
        f"{r.status}: {r.label}: {r.reason}"
        for r in cells.itertuples()
        if r.status not in ("ok",) and isinstance(r.reason, str) and r.reason
    ]
    checked = analysis.sections.get("accuracy")
    if checked is not None:
        lines += [
            f"accuracy {r.verdict}: {r.label}: {r.failed_checks}"
            for r in checked.itertuples()
            if r.verdict != "passed"
        ]
    return lines


def section_notes(analysis: Analysis, name: str, frame: pd.DataFrame) -> list[str]:
    """The lines printed under a table: why cells are untrusted, failed or failed their
    accuracy (cells); accuracy verdicts that changed between the files (regressions); where
    every host's row is (straggler_nodes, which shows the straggler nodes alone)."""
    if name == "cells":
        return _notes(analysis)
    if name == "regressions":
        return pairs.verdict_notes(frame) + compare.accuracy_notes(frame)
    if name in ("speedup", "speedup_vs_file"):
        return pairs.verdict_notes(frame)
    if name == "repetitions":
        return repetitions_text.notes(frame)
    if name == "straggler_nodes":
        return [
            f"{frame.cell_id.nunique()} cells span 2+ hosts; every host's row: --format csv "
            "--table straggler_nodes"
        ]
    return []


def _empty_text(name: str) -> str:
    """The text of a table none of whose rows is shown."""
    return {
        "phases": "no phase changed",
        "stragglers": "no straggler rank",
        "straggler_nodes": "no straggler node",
    }.get(name, "(none)")


#: The sections `analyze` prints without --details (Note [Console width] fits them): the
#: run, the cells (the table the summary is drawn from), the repeated cells' figures with
#: their intervals, and the tables an option asked for (--baseline*, --ablation; compare's
#: regressions). The others are listed by name.
BRIEF_SECTIONS = (
    "overview",
    "cells",
    "repetitions",
    "ablation",
    "cumulative",
    "recommendations",
    "speedup",
    "speedup_vs_file",
    "regressions",
)


def _wrapped(line: str, width: int | None, indent: str) -> list[str]:
    return [line] if width is None else wrap(line, width, indent)


def _section_lines(
    analysis: Analysis, name: str, frame: pd.DataFrame, width, max_rows: int | None = None
) -> list[str]:
    """One section for the console: its title, its table fitted to `width` (None: as it
    is) and cut to `max_rows` rows (None: every row; Note [Console at scale]), the notes of
    the fitting and those of section_notes (cut alike)."""
    lines = _wrapped(f"== {TITLES.get(name, name)} ==", width, "   ")
    if name == "overview":
        for field_name, value in zip(frame.field, frame.value):
            lines += _wrapped(f"{field_name:>15}  {value}", width, " " * 17)
        return lines
    shown = display_frame(name, frame)
    left_out = 0
    if max_rows is not None and len(shown) > max_rows:
        shown, left_out = shown.head(max_rows), len(shown) - max_rows
    fitted = []
    if len(shown) and width is not None:
        shown, fitted = fit_table(name, shown, width)
    lines.append(shown.to_string(index=False) if len(shown) else _empty_text(name))
    if left_out:
        lines.append(sweep_console.more_rows_line(left_out, name))
    notes = section_notes(analysis, name, frame)
    if max_rows is not None and len(notes) > max_rows:
        notes = notes[:max_rows] + [f"... and {len(notes) - max_rows:,} more notes"]
    for note in fitted + notes:
        lines += _wrapped(f"  * {note}", width, "    ")
    return lines


def _summary_part(analysis: Analysis, width, max_experiments: int | None = None) -> list[str]:
    parts = ["== Summary =="]
    narrower = None if width is None else min(width, SUMMARY_WIDTH)  # Note [Console width]
    for line in summary.summary_lines(analysis, max_experiments=max_experiments):
        parts += _wrapped(f"  {line}", narrower, "    ")
    parts.append("")
    return parts


def to_console(
    analysis: Analysis, width: int | None = None, details: bool = True, summary_only: bool = False
) -> str:
    """The sections (all with `details`, else BRIEF_SECTIONS and the others' names), each
    table at most `width` wide (None: as wide as it is), then the summary
    (tables/summary.py): the last lines on the screen are the answer. `summary_only`: the
    summary alone (what `scalebench run` prints at its end). A file of more cells than a
    screen gets the summary first, the shape of the sweep instead of a row per cell, and
    every table cut to a screen (Note [Console at scale] in output/sweep_console.py)."""
    large = sweep_console.is_large(analysis)
    limit = sweep_console.SUMMARY_EXPERIMENTS if large else None
    if summary_only:
        return "\n".join(
            _summary_part(analysis, width, limit) if "cells" in analysis.sections else []
        )
    shown = [n for n in analysis.sections if details or n in BRIEF_SECTIONS]
    parts = []
    if large:
        parts += _section_lines(analysis, "overview", analysis.sections["overview"], width)
        parts += ["", *_summary_part(analysis, width, limit)]
        parts += [*sweep_console.sweep_lines(analysis, width), ""]
        shown = [n for n in shown if n not in ("overview", "cells")]
    for name in shown:
        max_rows = sweep_console.SHOWN_ROWS if large else None
        parts += _section_lines(analysis, name, analysis.sections[name], width, max_rows)
        parts.append("")
    skipped = ("overview", "cells") if large else ()
    others = [n for n in analysis.sections if n not in shown and n not in skipped]
    if large:
        others = ["cells"] + others
    if others:
        line = (
            f"Other tables: {', '.join(others)}: --details prints them; "
            "--format csv --table NAME writes one with every column"
        )
        if large:
            line = (
                f"Other tables: {', '.join(others)}: --format csv --table NAME writes one with "
                "every row and column"
            )
        parts += _wrapped(line, width, "  ")
        parts.append("")
    if "cells" in analysis.sections and not large:
        parts += _summary_part(analysis, width)
    return "\n".join(parts)


def markdown_table(frame: pd.DataFrame) -> str:
    """GitHub-flavoured Markdown table of a frame of strings."""

    def cell(text):
        return str(text).replace("|", "\\|").replace("\n", " ")

    header = "| " + " | ".join(cell(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def to_markdown(analysis: Analysis) -> str:
    """The executive summaries of the batch studies (when the file has any: tables/batch.py
    Note [Batch study]) and of the repeated cells (each series' figures with their
    intervals), then every section as a Markdown table."""
    parts = [f"# scalebench analysis: `{analysis.results.path}`", ""]
    if "cells" in analysis.sections:
        parts += ["## Summary", ""] + [f"* {line}" for line in summary.summary_lines(analysis)]
        parts.append("")
    studies = analysis.batch_studies
    if studies is not None and len(studies):
        parts += ["## Batch size: executive summary", "", batch.executive_summary(studies)]
    repeated = analysis.sections.get("repetitions")
    if repeated is not None and len(repeated):
        parts += [
            "## Repetitions: executive summary",
            "",
            repetitions_text.executive_summary(repeated),
        ]
    for name, frame in analysis.sections.items():
        parts += [f"## {TITLES.get(name, name)}", ""]
        shown = display_frame(name, frame)
        parts.append(markdown_table(shown) if len(shown) else _empty_text(name))
        notes = section_notes(analysis, name, frame)
        if notes or name == "cells":
            parts += [""] + [f"* {line}" for line in notes]
        parts.append("")
    return "\n".join(parts)


def _plain(value):
    """`value` as JSON has it: a non-finite number, NA or None -> None; numpy scalars as
    Python's (a float keeps every digit: pandas' to_json rounds to 15 decimals, which
    leaves a 20 us step 10 digits); lists element-wise; anything else as text."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value if isinstance(value, str) else str(value)


def _records(frame: pd.DataFrame) -> list[dict]:
    return [
        {str(column): _plain(value) for column, value in zip(frame.columns, row)}
        for row in frame.itertuples(index=False, name=None)
    ]


def to_json(analysis: Analysis) -> str:
    """Every section as a list of records (NaN and infinities -> null, floats at full
    precision), plus the file's metadata."""
    sections = {name: _records(frame) for name, frame in analysis.sections.items()}
    meta = {k: v for k, v in analysis.results.meta.items() if k != "matrix_text"}
    document = {
        "file": analysis.results.path,
        "layout_version": analysis.results.layout_version,
        "meta": meta,
        "summary": summary.summary_lines(analysis) if "cells" in analysis.sections else [],
        "sections": sections,
    }
    return json.dumps(document, indent=2, default=str)


def to_csv(analysis: Analysis, table: str = "cells") -> str:
    """One section as CSV (machine precision, every column)."""
    if table not in analysis.sections:
        raise UsageError(f"--table {table}: no such table (have: {', '.join(analysis.sections)})")
    return analysis.sections[table].to_csv(index=False)


def render(
    analysis: Analysis,
    fmt: str,
    table: str = "cells",
    width: int | None = None,
    details: bool = True,
    summary_only: bool = False,
) -> str:
    """`analysis` in format `fmt`; `width`, `details` and `summary_only` are the console's
    (to_console)."""
    if fmt == "table":
        return to_console(analysis, width, details, summary_only)
    if fmt == "markdown":
        return to_markdown(analysis)
    if fmt == "json":
        return to_json(analysis)
    if fmt == "csv":
        return to_csv(analysis, table)
    raise ValueError(f"unknown format {fmt}")
