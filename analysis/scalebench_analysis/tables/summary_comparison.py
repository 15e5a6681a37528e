"""The summary's first lines when the analysis compares (issue 54 rows 4 and 5): per compared
branch (``--baseline-branch``; any ``--baseline FIELD=VALUE``) and against a baseline file,
the count of each verdict, then the verdict lines of the comparison (pairs.verdict_notes:
the change with its interval and the phase carrying it, or why it is inconclusive and what
to do), and a line per compared cell that is not significant or within the threshold.

Built from the speedup tables alone (compare.speedup_in_file / speedup_between_files,
judged by verdict.py): nothing is judged here, and no verdict is named that those tables do
not give.
"""

from __future__ import annotations

import math

import pandas as pd

from . import compare, pairs, verdict

#: The verdicts in the order a count line names them.
_ORDER = (
    verdict.REGRESSION,
    verdict.IMPROVEMENT,
    verdict.WITHIN_THRESHOLD,
    verdict.NOT_SIGNIFICANT,
    verdict.INCONCLUSIVE,
)
#: The verdict lines of pairs.verdict_notes the summary keeps (its other lines, such as
#: each undecided pair's resolution, stay under the table).
_KEPT = (verdict.REGRESSION, verdict.IMPROVEMENT, verdict.INCONCLUSIVE)
#: Lines of one kind shown per comparison; the rest are counted ("and 4 more").
_MAX_LINES = 6


def _new_side(cells: pd.DataFrame, unit_ids: pd.Series, field: str) -> list[str]:
    """Per row of a speedup table (its `cell_id`: a cell or a series id), the value of
    `field` of the compared cell."""
    specs = dict(zip(cells.cell_id, cells.spec))
    if "series_id" in cells:
        specs.update({s: p for s, p in zip(cells.series_id, cells.spec) if isinstance(s, str)})
    return [str(compare.spec_value(specs.get(u, {}), field)) for u in unit_ids]


def _side_name(field: str, value) -> str:
    return str(value) if field == "branch" else f"{field}={value}"


def _percent(ratio) -> str:
    return f"{ratio - 1:+.1%}" if isinstance(ratio, float) and math.isfinite(ratio) else "-"


def _undecided_line(row: dict) -> str:
    """ "not significant: LABEL: time +1.2% [-3.0%, +5.6%] over 3 + 3 runs; phases: ..."."""
    line = (
        f"{row['verdict']}: {row['label']}: time {_percent(row['time_ratio'])} "
        f"[{_percent(row['ci_low'])}, {_percent(row['ci_high'])}] over "
        f"{int(row['n_base'])} + {int(row['n_new'])} runs"
    )
    phases = row.get("phases")
    return line + (f"; phases changed: {phases}" if isinstance(phases, str) and phases else "")


def _capped(lines: list[str]) -> list[str]:
    if len(lines) <= _MAX_LINES:
        return lines
    more = len(lines) - _MAX_LINES + 1
    return lines[: _MAX_LINES - 1] + [f"... and {more} more (the speedup table's notes)"]


def _block(title: str, table: pd.DataFrame) -> list[str]:
    """The count line of one comparison, then its verdict lines."""
    counts = table.verdict.value_counts()
    parts = [f"{counts[v]} {v}" for v in _ORDER if counts.get(v, 0)]
    lines = [f"{title}: {', '.join(parts)} ({len(table)} compared cells)"]
    notes = pairs.verdict_notes(table)
    decided = [n for n in notes if n.split(":", 1)[0] in _KEPT[:2]]
    inconclusive = [n for n in notes if n.split(":", 1)[0] == verdict.INCONCLUSIVE]
    undecided = [
        _undecided_line(r)
        for r in table.to_dict("records")
        if r["verdict"] in (verdict.WITHIN_THRESHOLD, verdict.NOT_SIGNIFICANT)
    ]
    return lines + _capped(decided) + _capped(undecided) + _capped(inconclusive)


def comparison_lines(analysis) -> list[str]:
    """The summary's comparison lines (module doc); [] when nothing was compared."""
    lines = []
    table = analysis.sections.get("speedup")
    if analysis.options.baseline is not None and table is not None and len(table):
        field, value = analysis.options.baseline
        sides = _new_side(analysis.results.cells, table.cell_id, field)
        for new_value, group in table.groupby(pd.Series(sides, index=table.index), sort=True):
            title = f"{_side_name(field, new_value)} against {_side_name(field, value)}"
            lines += _block(title, group)
    table = analysis.sections.get("speedup_vs_file")
    if table is not None and len(table):
        title = f"{analysis.results.path} against {analysis.options.baseline_file}"
        lines += _block(title, table)
    return lines
