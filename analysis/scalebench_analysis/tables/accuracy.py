"""Accuracy validation verdicts as the tables show them (docs/analysis-guide.md, section
"Reading accuracy in the analysis").

The numbers and the verdict are the file's: scalebench compares each cell with
`validate: true` against its fp32 reference run (a program cell: against its baseline cell,
layout 1.7) and stores the result in the cell's
`accuracy` subgroup (schemas/results-layout.md, layout 1.3); read/accuracy_columns.py reads
it into the ``accuracy_*`` columns. Nothing is re-judged here.

* verdict of a cell: ``passed``, ``failed``, ``not checked`` (no accuracy group: the cell
  did not ask for validation, or the file is older than layout 1.3) or ``unreadable`` (a
  damaged group, listed in `Results.problems`).
* the ``accuracy`` column of the comparison tables: ``passed``, ``FAIL (<first failed
  check>)``, ``not checked`` or ``unreadable``.
* a change between two files (compare): ``<base verdict> -> <new verdict>``, e.g.
  ``passed -> failed``, empty when the verdict is the same.
"""

from __future__ import annotations

import math

import pandas as pd

NOT_CHECKED = "not checked"
UNREADABLE = "unreadable"
#: Verdicts of cells that are never recommended (ablation.py): the outputs were found to
#: differ beyond the tolerance, or the validation that was asked for cannot be read back.
REJECTED = ("failed", UNREADABLE)
#: The figures of the `accuracy` section: inference, then training.
FIGURES = (
    "mae_rel",
    "cosine_similarity",
    "ssim",
    "psnr_db",
    "max_loss_rel_deviation",
    "param_rel_distance",
)


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def verdict(row) -> str:
    """passed, failed, not checked or unreadable (see module doc). `row`: a dict or a row
    (Series) of the cells table."""
    problem = row.get("accuracy_problem")
    if isinstance(problem, str) and problem:
        return UNREADABLE
    value = row.get("accuracy_verdict")
    return NOT_CHECKED if _missing(value) else str(value)


def failed_checks(row) -> list[str]:
    """The checks the cell failed, as the file words them ([] when none or not checked)."""
    checks = row.get("accuracy_failed_checks")
    return [str(c) for c in checks] if isinstance(checks, list) else []


def text(row) -> str:
    """The `accuracy` column: passed, FAIL (<first failed check>), not checked, unreadable."""
    value = verdict(row)
    if value != "failed":
        return value
    checks = failed_checks(row)
    return f"FAIL ({checks[0]})" if checks else "FAIL"


def change(base_row, new_row) -> str:
    """``<base verdict> -> <new verdict>`` when the verdict differs between the two cells,
    else "" (e.g. ``passed -> failed``, ``not checked -> passed``)."""
    before, after = verdict(base_row), verdict(new_row)
    return "" if before == after else f"{before} -> {after}"


def column(cells: pd.DataFrame) -> list[str]:
    """`text` of every row of a cells table."""
    if "accuracy_verdict" not in cells and "accuracy_problem" not in cells:
        return [NOT_CHECKED] * len(cells)  # a file without accuracy groups (issue 53: fast)
    return [text(row) for row in cells.to_dict("records")]


_TABLE_COLUMNS = [
    "experiment",
    "label",
    "verdict",
    "kind",
    *FIGURES,
    "tolerance",
    "failed_checks",
    "cell_id",
]


def accuracy_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per cell with an accuracy group (readable or not): experiment, label,
    verdict, kind, the figures (mae_rel, cosine_similarity, ssim, psnr_db for inference;
    max_loss_rel_deviation, param_rel_distance for training; NaN where they do not apply),
    tolerance and the failed checks joined with "; "."""
    rows = []
    if "accuracy_verdict" not in cells and "accuracy_problem" not in cells:
        return pd.DataFrame(rows, columns=_TABLE_COLUMNS)  # no accuracy group in the file
    for cell in cells.to_dict("records"):
        value = verdict(cell)
        if value == NOT_CHECKED:
            continue
        row = {
            "experiment": cell["experiment"],
            "label": cell["label"],
            "verdict": value,
            "kind": cell.get("accuracy_kind", ""),
            **{name: cell.get(f"accuracy_{name}", math.nan) for name in FIGURES},
            "tolerance": cell.get("accuracy_tolerance", math.nan),
            "failed_checks": "; ".join(failed_checks(cell))
            if value != UNREADABLE
            else str(cell.get("accuracy_problem")),
            "cell_id": cell["cell_id"],
        }
        rows.append(row)
    return pd.DataFrame(rows, columns=_TABLE_COLUMNS)
