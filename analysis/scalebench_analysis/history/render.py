"""The renderings of a History (`scalebench history`): the trend table as text and as
Markdown, each with the summary line; the JSON document; a self-contained HTML page.

JSON output (`--format json`), keys stable:

* ``command`` ("history"), ``metric`` ("time" / "throughput"), ``unit`` ("s" /
  "samples/s"), ``order``, ``threshold``, ``confidence``, ``bootstrap_resamples``,
  ``bootstrap_seed``, ``files`` (the usable files, in the order given), ``skipped``
  (``[{"path", "reason"}]``), ``slower_steps``, ``faster_steps``, ``unjudged_changes``
  (counts: changes beyond the threshold with one run on a side, lines.py Steps), ``lines``;
* each line: ``label``, ``key`` (canonical JSON of the spec without HISTORY_DROP),
  ``branch``, ``experiment``, ``mode``, ``precision``, ``batch_size``, ``world_size``,
  ``device``, ``n_points``, ``first``, ``last``, ``change`` (last / first - 1),
  ``steps``, ``unjudged_changes``, ``points``;
* each point: ``label``, ``file``, ``cell_ids``, ``commit``, ``commit_date``,
  ``start_time``, ``when`` (the ISO time it was ordered by, null if none),
  ``value``, ``ci_low``, ``ci_high`` (in ``unit``), ``interval`` (``series``,
  ``repetitions``, ``within-run``, ``none``), ``repetitions`` (cells collapsed),
  ``disagree`` (the series' repetitions disagree), ``runs`` (each run's figure);
* each step: ``from``, ``to`` (point labels), ``from_file``, ``to_file``,
  ``from_commit``, ``to_commit``, ``change``, ``direction`` (``slower`` / ``faster``),
  ``ratio``, ``ci_low``, ``ci_high``, ``p_value`` (the judgement over the runs,
  tables/verdict.py).

NaN is written as null.
"""

from __future__ import annotations

import html
import json
import math

from ..tables import verdict
from .model import History, Line, Point, Step

#: The sparkline's marks, lowest to highest (digits 0-7 where the console cannot show them).
SPARK = "▁▂▃▄▅▆▇█"


def format_value(value: float, metric: str) -> str:
    """A figure for the tables: time in ms, throughput in samples/s (4 significant)."""
    if not math.isfinite(value):
        return "-"
    return f"{value * 1e3:.4g} ms" if metric == "time" else f"{value:.4g}/s"


def sparkline(values: list, unicode: bool = True) -> str:
    """One character per value, scaled between the line's smallest and largest value
    (ASCII digits 0-7 when `unicode` is False)."""
    marks = SPARK if unicode else "01234567"
    low, high = min(values), max(values)
    if not high > low:
        return marks[3] * len(values)
    return "".join(marks[min(7, int((v - low) / (high - low) * 8))] for v in values)


def _step_text(line: Line, step: Step) -> str:
    a, b = line.points[step.before], line.points[step.after]
    return f"{step.direction} {step.change:+.1%} ({a.label} -> {b.label})"


def table_rows(hist: History, unicode: bool = True) -> list:
    """One dict per line: the columns of the trend table, as text."""
    metric = hist.options.metric
    rows = []
    for line in hist.lines:
        values = [p.value for p in line.points]
        rows.append(
            {
                "line": line.label,
                "n": str(len(line.points)),
                "first": format_value(line.first, metric),
                "last": format_value(line.last, metric),
                "change": f"{line.change:+.1%}" if math.isfinite(line.change) else "-",
                "steps": "; ".join(_step_text(line, s) for s in line.steps) or "-",
                "trend": sparkline(values, unicode),
            }
        )
    return rows


_COLUMNS = ("line", "n", "first", "last", "change", "steps", "trend")


def summary_line(hist: History) -> str:
    """One line: files, lines, what was followed, and the flagged steps."""
    opts = hist.options
    figure = "median step/batch time" if opts.metric == "time" else "throughput"
    return (
        f"history of {figure} over {len(hist.files)} file(s), {len(hist.lines)} line(s), "
        f"order {opts.order}, threshold {opts.threshold:.1%}: "
        f"{hist.count('slower')} slower step(s), {hist.count('faster')} faster step(s)"
        + (
            f"; {hist.unjudged} change(s) beyond the threshold between single runs not judged "
            f"({verdict.ONE_RUN}: {verdict.REMEDY_ONE_RUN})"
            if hist.unjudged
            else ""
        )
    )


def to_text(hist: History, unicode: bool = True) -> str:
    """The trend table for the console, then the summary line."""
    rows = table_rows(hist, unicode)
    widths = {c: max([len(c)] + [len(r[c]) for r in rows]) for c in _COLUMNS}
    header = "  ".join(c.ljust(widths[c]) for c in _COLUMNS)
    body = ["  ".join(r[c].ljust(widths[c]) for c in _COLUMNS).rstrip() for r in rows]
    return "\n".join([header.rstrip(), *body, "", summary_line(hist)]) + "\n"


def to_markdown(hist: History, unicode: bool = True) -> str:
    """The trend table as a GitHub markdown table, then the summary line."""
    rows = table_rows(hist, unicode)
    lines = ["| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    for r in rows:
        cells = [r[c].replace("|", "\\|") for c in _COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", summary_line(hist)]) + "\n"


def _number(value):
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def _point_json(p: Point) -> dict:
    return {
        "label": p.label,
        "file": p.file,
        "cell_ids": p.cell_ids,
        "commit": p.commit,
        "commit_date": p.commit_date,
        "start_time": p.start_time,
        "when": p.when or None,
        "value": _number(p.value),
        "ci_low": _number(p.ci_low),
        "ci_high": _number(p.ci_high),
        "interval": p.interval,
        "repetitions": p.repetitions,
        "disagree": p.disagree,
        "runs": [_number(v) for v in p.runs],
    }


def _step_json(line: Line, s: Step) -> dict:
    a, b = line.points[s.before], line.points[s.after]
    return {
        "from": a.label,
        "to": b.label,
        "from_file": a.file,
        "to_file": b.file,
        "from_commit": a.commit,
        "to_commit": b.commit,
        "change": _number(s.change),
        "direction": s.direction,
        "ratio": _number(s.ratio),
        "ci_low": _number(s.ci_low),
        "ci_high": _number(s.ci_high),
        "p_value": _number(s.p_value),
    }


def _line_json(line: Line) -> dict:
    spec = line.spec
    return {
        "label": line.label,
        "key": line.key,
        **{f: spec.get(f) for f in ("branch", "experiment", "mode", "precision")},
        **{f: spec.get(f) for f in ("batch_size", "world_size", "device")},
        "n_points": len(line.points),
        "first": _number(line.first),
        "last": _number(line.last),
        "change": _number(line.change),
        "steps": [_step_json(line, s) for s in line.steps],
        "unjudged_changes": line.unjudged,
        "points": [_point_json(p) for p in line.points],
    }


def to_json(hist: History) -> str:
    """The JSON document of the module doc."""
    opts = hist.options
    document = {
        "command": "history",
        "metric": opts.metric,
        "unit": "s" if opts.metric == "time" else "samples/s",
        "order": opts.order,
        "threshold": opts.threshold,
        "confidence": opts.confidence,
        "bootstrap_resamples": opts.resamples,
        "bootstrap_seed": opts.seed,
        "files": hist.files,
        "skipped": [{"path": p, "reason": r} for p, r in hist.skipped],
        "slower_steps": hist.count("slower"),
        "faster_steps": hist.count("faster"),
        "unjudged_changes": hist.unjudged,
        "lines": [_line_json(line) for line in hist.lines],
    }
    return json.dumps(document, indent=2, allow_nan=False) + "\n"


def render(hist: History, fmt: str, unicode: bool = True) -> str:
    """`hist` as text, markdown or json."""
    if fmt == "json":
        return to_json(hist)
    if fmt == "markdown":
        return to_markdown(hist, unicode)
    return to_text(hist, unicode)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; font-size: 0.85em; }}
th, td {{ border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; }}
td.slower {{ background: #fdd; }} td.faster {{ background: #dfd; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>{title}</h1>
<p>{summary}</p>
{plots}
<h2>Trend table</h2>
{table}
</body></html>
"""


def html_page(hist: History, pngs: list, title: str = "scalebench history") -> str:
    """A self-contained page: the summary, one inlined PNG per experiment (`pngs`:
    [(experiment, base64 text)]), the trend table. No script, no external link."""
    plots = "\n".join(
        f"<h2>{html.escape(name)}</h2>\n"
        f'<img alt="{html.escape(name)}" src="data:image/png;base64,{data}">'
        for name, data in pngs
    )
    rows = table_rows(hist)
    head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
    body = []
    for line, row in zip(hist.lines, rows):
        directions = {s.direction for s in line.steps}
        kind = "slower" if "slower" in directions else ("faster" if directions else "")
        cells = "".join(
            (f'<td class="{kind}">' if c == "steps" and kind else "<td>")
            + html.escape(row[c])
            + "</td>"
            for c in _COLUMNS
        )
        body.append(f"<tr>{cells}</tr>")
    table = f"<table><tr>{head}</tr>\n" + "\n".join(body) + "\n</table>"
    return _PAGE.format(
        title=html.escape(title), summary=html.escape(summary_line(hist)), plots=plots, table=table
    )
