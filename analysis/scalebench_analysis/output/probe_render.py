"""Renderings of a probe file (tables/probe.py) for `scalebench analyze` and `report`:
console text, Markdown, JSON, CSV and a self-contained HTML page."""

from __future__ import annotations

import html
import json

from ..errors import UsageError
from ..tables.probe import (
    Probe,
    check_line,
    display_table,
    failed_checks,
    header_line,
    one_worker_note,
    provenance_line,
    summary_lines,
    summary_table,
    tables,
)
from .render import markdown_table

#: Tables `--format csv --table NAME` can write.
CSV_TABLES = ("probe", "summary")


def probe_text(probe: Probe) -> str:
    parts = [f"# {provenance_line(probe)}", f"# {header_line(probe)}"]
    parts += [f"# {note}" for note in one_worker_note(probe)]
    parts.append("")
    for label, frame in tables(probe).items():
        parts += [f"== {label} ==", display_table(frame).to_string(index=False), ""]
    if probe.rows.empty:
        parts += ["(no rows)", ""]
    parts.append("== Summary ==")
    parts += summary_lines(probe)
    return "\n".join(parts) + "\n"


def probe_markdown(probe: Probe) -> str:
    parts = [f"# scalebench probe: `{probe.path}`", "", header_line(probe) + ".", ""]
    parts += [f"{note}." for note in one_worker_note(probe)]
    for label, frame in tables(probe).items():
        parts += [f"## {label}", "", markdown_table(display_table(frame)), ""]
    parts += ["## Summary", ""] + [f"* {line}" for line in summary_lines(probe)]
    parts += ["", provenance_line(probe) + "."]
    return "\n".join(parts) + "\n"


def probe_json(probe: Probe) -> str:
    """The rows at machine precision (NaN -> null), the summary and the metadata."""
    document = {
        "file": probe.path,
        "kind": "probe",
        "probe_version": probe.version,
        "meta": probe.meta,
        "rows": json.loads(probe.rows.to_json(orient="records", double_precision=15)),
        "summary": json.loads(summary_table(probe).to_json(orient="records", double_precision=15)),
        "checks": {"rows": len(probe.rows), "wrong": failed_checks(probe)},
    }
    return json.dumps(document, indent=2, default=str)


def probe_csv(probe: Probe, table: str | None = None) -> str:
    """`probe` (default: every row, every column) or `summary`, as CSV."""
    table = table or "probe"
    if table == "probe":
        return probe.rows.to_csv(index=False)
    if table == "summary":
        return summary_table(probe).to_csv(index=False)
    raise UsageError(
        f"--table {table}: no such table in a probe file (have: {', '.join(CSV_TABLES)})"
    )


def render_probe(probe: Probe, fmt: str, table: str | None = None) -> str:
    if fmt == "table":
        return probe_text(probe)
    if fmt == "markdown":
        return probe_markdown(probe)
    if fmt == "json":
        return probe_json(probe)
    if fmt == "csv":
        return probe_csv(probe, table)
    raise ValueError(f"unknown format {fmt}")


_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{title}</title>
<style>
 body {{ font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 24px auto;
        max-width: 1000px; color: #222; background: #fff; }}
 h1 {{ font-size: 22px; }} h2 {{ font-size: 17px; margin-top: 24px;
 border-bottom: 1px solid #ddd; padding-bottom: 3px; }}
 .meta {{ color: #555; font-size: 12px; }}
 table {{ border-collapse: collapse; font-size: 12px; margin: 8px 0; }}
 th, td {{ border: 1px solid #e2e2e2; padding: 2px 8px; text-align: right; }}
 th {{ background: #f4f4f4; }} tr.wrong td {{ background: #fde7e7; }}
 p.bad {{ color: #b3261e; font-weight: bold; }}
</style></head>
<body>
<h1>{title}</h1>
<p class="meta">{header}</p>
{body}
<p class="meta">{provenance}. Definitions: docs/probe.md.</p>
</body></html>
"""


def probe_html(probe: Probe, title: str | None = None) -> str:
    """A self-contained page: the header, one table per operation, the summary."""
    esc = html.escape
    body = []
    for label, frame in tables(probe).items():
        shown = display_table(frame)
        head = "".join(f"<th>{esc(c)}</th>" for c in shown.columns)
        lines = []
        for ok, row in zip(frame.ok, shown.itertuples(index=False)):
            cells = "".join(f"<td>{esc(str(v))}</td>" for v in row)
            lines.append(f'<tr class="{"" if ok else "wrong"}">{cells}</tr>')
        body.append(
            f"<h2>{esc(label)}</h2>\n<table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(lines)}</tbody></table>"
        )
    items = "".join(f"<li>{esc(line)}</li>" for line in summary_lines(probe)[:-1])
    check = esc(check_line(probe))
    css = "bad" if failed_checks(probe) else ""
    body.append(f'<h2>Summary</h2>\n<ul>{items}</ul>\n<p class="{css}">{check}</p>')
    return _HTML.format(
        title=esc(title or f"scalebench probe: {probe.path}"),
        header=esc(header_line(probe)),
        body="\n".join(body),
        provenance=esc(provenance_line(probe)),
    )
