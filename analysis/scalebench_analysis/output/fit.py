"""Console tables that fit the terminal. See Note [Console width].

Note [Console width]
~~~~~~~~~~~~~~~~~~~~
A console table wider than the terminal wraps every row into unreadable pieces (the demo
printed tables up to 230 columns wide: issue 29). So `fit_table` makes each table at most
`width` columns, in this order, stopping as soon as it fits:

1. a column whose text is the same in every row (two rows or more: `status ok`,
   `trusted yes`, `accuracy not checked`, a start-up figure no cell has) leaves the table
   and is named once under it ("every row: status ok, trusted yes"): nothing is lost (the
   `KEEP_LAST` columns stay: a comparison's verdict is read in its table, same or not);
2. the table's columns of `DROP_ORDER` leave it, first listed first: the secondary figures
   (p99, peak memory, comm share, drift, ...), never the label nor the headline figures;
3. the label column is shortened in its middle (``~`` marks the cut), to no fewer than
   `_MIN_LABEL` characters;
4. the remaining columns leave from the right, but for the label columns and the table's
   `KEEP_LAST` columns (a comparison's answer: the verdict, the change and its interval);
5. the label is shortened further, to no fewer than `_MIN_LAST_LABEL` characters;
6. the `KEEP_LAST` columns leave, last listed first;
7. the label is shortened further, to what is left.

Steps 2, 4 and 6 are named under the table ("left out for width: p99_ms, ..."), with where
every column is: `--format csv --table NAME` (machine precision) or a wider `COLUMNS`. The
label columns (`label`, a batch study's `study`, the identity columns of the tables that
have no label) are never dropped, only shortened or, when constant, named once. So a
comparison at 80 columns still reads "label, verdict, change, ci_low, ci_high" (issue 54:
at 120 columns the regression gate kept its label alone, its change and interval gone at
step 2 and the verdict, constant, named once). The width
is the terminal's (`shutil.get_terminal_size`, which honours `COLUMNS`) when the output
goes to one, else `COLUMNS`, else `DEFAULT_WIDTH`. Lines that are not tables (the overview,
the notes, a long title) wrap at the width, continued indented. The summary wraps at
`SUMMARY_WIDTH` when the width is larger: `scalebench run` ends with it, after its own
sentences, which wrap at 100 columns (orchestrator/console_text.h), so the run's whole
console fits 100 columns (issue 38: a summary line of 115 columns).

Alternatives rejected: wrapping rows (a row over several lines is no longer a table a
person can scan down) and renaming headers to shorter words (the console's column names
are those of `--format csv`, which a user looks up).
"""

from __future__ import annotations

import os
import shutil
import textwrap

import pandas as pd

from ..read.keys import IDENTITY_COLUMNS

#: The width when the output is not a terminal and COLUMNS is not set.
DEFAULT_WIDTH = 120
#: The summary's lines wrap at this width, or the console's when narrower: kConsoleWidth of
#: orchestrator/console_text.h, the width of `scalebench run`'s own sentences.
SUMMARY_WIDTH = 100
#: A shortened label keeps at least this many characters (step 3), and this many before a
#: `KEEP_LAST` column leaves (step 5).
_MIN_LABEL = 24
_MIN_LAST_LABEL = 12
_CUT = "~"

#: Per table: the columns left out for width, first listed first (step 2). Those not
#: listed are the table's label and headline figures, dropped only at step 4.
DROP_ORDER = {
    # headline: label, status, throughput, median, trusted, accuracy
    "cells": ("peak_memory_mib", "comm_share", "drift", "count", "p99_ms", "cv", "ci_rel"),
    "repetitions": ("spread", "reps"),
    "scaling": (
        "comm_share",
        "weak_reference_world",
        "strong_reference_world",
        "global_batch",
        "strong_speedup",
    ),
    "batch": ("untrusted_ok_cells", "oom_batch", "knee_batch", "max_ok_batch", "batches"),
    "batch_study": (
        "memory_per_sample_mib",
        "memory_budget_mib",
        "smallest_batch",
        "slo_batch",
        "knee_batch",
        "oom_batch",
        "best_batch",
        "recommended_memory_mib",
        "max_batch_ok",
        "batches",
        "kind",
        "bottleneck",
    ),
    "batch_curve": (
        "samples_per_s_per_gib",
        "per_sample_latency_s",
        "p99_s",
        "peak_memory_mib",
        "kind",
        "speedup",
    ),
    "stragglers": ("straggler", "median_busy_s"),
    "straggler_nodes": ("straggler", "straggler_ranks", "median_busy_s", "ranks"),
    "startup": ("data_open_s", "compile_s", "steady_step_s", "startup_s", "model"),
    "segments": ("kind",),
    "mfu": ("flops_per_sample", "precision_used", "peak_tflops", "device"),
    "accuracy": (
        "tolerance",
        "param_rel_distance",
        "max_loss_rel_deviation",
        "psnr_db",
        "ssim",
        "cosine_similarity",
        "mae_rel",
        "kind",
        "experiment",
    ),
    "ablation": ("memory_change_mib", "peak_memory_mib", "throughput_samples_per_s"),
    "cumulative": ("memory_change_mib", "peak_memory_mib", "throughput_samples_per_s"),
    "speedup": ("baseline_throughput", "baseline", "throughput", "trusted", "accuracy"),
    "speedup_vs_file": ("baseline_throughput", "baseline", "throughput", "trusted", "accuracy"),
    "regressions": (
        "matched_by",
        "n_base",
        "n_new",
        "p_adjusted",
        "base_status",
        "new_status",
        "base series",
        "new series",
        "paired",
        "p_value",
        "ratio",
        "phases",
        "accuracy",
        "carried_by",
    ),
}
#: Per table: the columns that leave last, after every other but the label (steps 4 to 6),
#: the last listed first: a comparison's verdict, its change and the change's interval.
KEEP_LAST = {
    "regressions": ("verdict", "change", "ci_low", "ci_high"),
    "speedup": ("verdict", "time_ratio", "ci_low", "ci_high", "speedup"),
    "speedup_vs_file": ("verdict", "time_ratio", "ci_low", "ci_high", "speedup"),
}
#: Columns never dropped (steps 2 and 4): a row's name.
_LABELS = (
    "label",
    "host",
    "study",
    "change",
    "recommendation",
    "field",
    *IDENTITY_COLUMNS,
)
#: The column shortened at steps 3 and 5, the first of these a table has.
_SHORTENED = ("label", "study", "change", "experiment")


def console_width(to_terminal: bool) -> int:
    """The width console tables are fitted to (Note [Console width])."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if to_terminal:
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    return DEFAULT_WIDTH


def _column_width(frame: pd.DataFrame, column) -> int:
    values = frame[column].astype(str)
    return max([len(str(column)), *(len(v) for v in values)])


def table_width(frame: pd.DataFrame) -> int:
    """Width of `frame.to_string(index=False)` for a frame of strings: the columns' widths
    and one space between them."""
    if not len(frame.columns):
        return 0
    return sum(_column_width(frame, c) for c in frame.columns) + len(frame.columns) - 1


def _shorten(text: str, length: int) -> str:
    """`text` cut in its middle to `length` characters (the cut marked by `_CUT`)."""
    if len(text) <= length:
        return text
    if length <= len(_CUT):
        return text[:length]
    head = (length - len(_CUT) + 1) // 2
    tail = length - len(_CUT) - head
    return text[:head] + _CUT + (text[-tail:] if tail else "")


def _shorten_labels(frame: pd.DataFrame, width: int, floor: int) -> tuple[pd.DataFrame, bool]:
    column = next((c for c in _SHORTENED if c in frame.columns), None)
    if column is None:
        return frame, False
    excess = table_width(frame) - width
    current = _column_width(frame, column)
    target = max(current - excess, floor, len(str(column)))
    if target >= current:
        return frame, False
    frame = frame.copy()
    frame[column] = [_shorten(str(v), target) for v in frame[column]]
    return frame, True


def _constant_columns(frame: pd.DataFrame, keep: tuple) -> list:
    if len(frame) < 2:
        return []
    return [c for c in frame.columns if c not in keep and frame[c].astype(str).nunique() == 1]


def fit_table(name: str, frame: pd.DataFrame, width: int) -> tuple[pd.DataFrame, list[str]]:
    """`frame` (of strings) made at most `width` wide, and the lines to print under it
    saying what was moved or left out (Note [Console width])."""
    if table_width(frame) <= width:
        return frame, []
    notes = []
    main_label = next((c for c in _SHORTENED if c in frame.columns), None)
    last = KEEP_LAST.get(name, ())
    constant = _constant_columns(frame, (main_label, *last))
    if constant:
        values = [str(frame[c].iloc[0]) or "(none)" for c in constant]
        notes.append("every row: " + ", ".join(f"{c} {v}" for c, v in zip(constant, values)))
        frame = frame.drop(columns=constant)
    dropped = []
    for column in DROP_ORDER.get(name, ()):
        if table_width(frame) <= width:
            break
        if column in frame.columns:
            frame = frame.drop(columns=[column])
            dropped.append(column)
    frame, shortened = _shorten_labels(frame, width, _MIN_LABEL)
    for column in reversed(list(frame.columns)):
        if table_width(frame) <= width:
            break
        if column not in _LABELS and column not in last and len(frame.columns) > 1:
            frame = frame.drop(columns=[column])
            dropped.append(column)
    frame, shortened_more = _shorten_labels(frame, width, _MIN_LAST_LABEL)
    for column in reversed(last):
        if table_width(frame) <= width:
            break
        if column in frame.columns and len(frame.columns) > 1:
            frame = frame.drop(columns=[column])
            dropped.append(column)
    frame, shortened_last = _shorten_labels(frame, width, 1)
    if shortened or shortened_more or shortened_last:
        notes.append(f"labels shortened to fit (the cut marked {_CUT})")
    if dropped:
        notes.append(
            f"left out for width: {', '.join(map(str, dropped))} "
            f"(every column: --format csv --table {name}, or a wider COLUMNS)"
        )
    return frame, notes


def wrap(line: str, width: int, indent: str = "    ") -> list[str]:
    """`line` wrapped at `width` on spaces, continuation lines indented by `indent`; a
    word longer than the width (a label, a path) is kept whole."""
    if len(line) <= width:
        return [line]
    return textwrap.wrap(
        line,
        width=width,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
        drop_whitespace=True,
    ) or [line]
