"""The self-contained HTML report: no network access, plots inlined as base64 PNG."""

from __future__ import annotations

import base64
import html
import re

import jinja2

from ..tables import batch, compare, summary
from ..tables.analysis import Analysis
from . import ops_render, report_sweep, sweep_console
from .batch_plots import BATCH_PLOTS
from .figures import figure_png
from .html_table import plain_table
from .plots import PLOTS, REPETITION_PLOTS
from .render import TITLES, display_frame, section_notes, shown_rows

_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{{ title }}</title>
<style>
 body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 24px auto;
        max-width: 1200px; color: #222; background: #fff; }
 h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px;
 border-bottom: 1px solid #ddd; padding-bottom: 3px; }
 .meta { color: #555; font-size: 12px; }
 .cards { display: flex; gap: 12px; flex-wrap: wrap; margin: 16px 0; }
 .card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 120px; }
 .card b { display: block; font-size: 22px; } .card.bad b { color: #b3261e; }
 .card.good b { color: #1e7a34; }
 table { border-collapse: collapse; font-size: 11px; margin: 8px 0; }
 th, td { border: 1px solid #e2e2e2; padding: 2px 6px; text-align: right; }
 th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
 tr.regression td, tr.broke td, tr.accuracy-failed td { background: #fde7e7; }
 tr.improvement td { background: #e6f4ea; }
 tr.untrusted td { color: #888; font-style: italic; }
 tr.disagree td { background: #fff4e0; }
 img { max-width: 100%; border: 1px solid #eee; } .caption { font-size: 12px; color: #555; }
 ul.notes { font-size: 12px; } .scroll { overflow-x: auto; }
</style></head>
<body>
<h1>{{ title }}</h1>
<div class="meta">{% for f, v in overview %}
 <span><b>{{ f }}</b>: {{ v }}</span>&nbsp;&nbsp; {% endfor %}</div>
{% if summary %}<h2>Summary</h2>
<ul class="summary">{% for line in summary %}<li>{{ line }}</li>{% endfor %}</ul>{% endif %}
<div class="cards">{% for card in cards %}
 <div class="card {{ card.kind }}"><b>{{ card.value }}</b>{{ card.name }}</div>{% endfor %}
</div>
{% if gate %}<p><b>{{ gate }}</b></p>{% endif %}{% if sweep %}
<h2 id="sweep">Sweep: {{ sweep.cells }} cells</h2>
<p class="caption">Each swept axis: how many values, and the share of the spread of log
throughput over the ok cells it explains alone (docs/analysis-guide.md#large-sweeps).</p>
{{ sweep.axes | safe }}
{% if sweep.heatmap %}<h3>{{ sweep.heatmap.title }}</h3>
<img alt="{{ sweep.heatmap.title }}" src="data:image/png;base64,{{ sweep.heatmap.data }}">
<p class="caption">{{ sweep.heatmap.caption }}</p>{% endif %}
{% for table in sweep.extremes %}<h3>{{ table.title }}</h3>{{ table.html | safe }}{% endfor %}
<h3 id="experiments">Experiments: the best cell of each</h3>
{{ sweep.experiments | safe }}
<h3 id="cells">Cells</h3>
{{ sweep.cells_table | safe }}
{% endif %}
{% for plot in plots %}
<h2>{{ plot.title }}</h2>
<img alt="{{ plot.title }}" src="data:image/png;base64,{{ plot.data }}">
<p class="caption">{{ plot.caption }}</p>
{% endfor %}
{% if absent %}<p class="caption" id="not-drawn">Not drawn:
{% for a in absent %}{{ a.title }} ({{ a.why }}){% if not loop.last %}; {% endif %}{% endfor %}.
</p>{% endif %}
{% if repetitions %}
<h2 id="repetitions">Repetitions</h2>
<p class="caption">{{ repetitions.title }}</p>
{% for plot in repetitions.plots %}
<img alt="{{ plot.title }}" src="data:image/png;base64,{{ plot.data }}">
<p class="caption">{{ plot.caption }}</p>
{% endfor %}
{{ repetitions.html | safe }}
{% if repetitions.notes %}<ul class="notes">
{% for n in repetitions.notes %}<li>{{ n }}</li>{% endfor %}
</ul>{% endif %}
{% endif %}
{% if projection %}
<h2 id="projection">Projection: the step beyond the measured workers</h2>
{% if projection.plot %}
<img alt="Projected step and efficiency against workers"
 src="data:image/png;base64,{{ projection.plot }}">
<p class="caption">{{ projection.caption }}</p>
{{ projection_table | safe }}
{% else %}<p class="caption" id="projection-empty">Not projected: {{ projection.why }}.</p>
{% endif %}
{% if projection.notes %}<ul class="notes">
{% for n in projection.notes %}<li>{{ n }}</li>{% endfor %}
</ul>{% endif %}
{% endif %}
{% if studies %}
<h2 id="batch-size">Batch size</h2>
{% for study in studies %}
<h3>{{ study.title | safe }}</h3>
<ul class="notes">{% for line in study.lines %}<li>{{ line | safe }}</li>{% endfor %}</ul>
{% endfor %}
{% for plot in batch_plots %}
<h3>{{ plot.title }}</h3>
<img alt="{{ plot.title }}" src="data:image/png;base64,{{ plot.data }}">
<p class="caption">{{ plot.caption }}</p>
{% endfor %}
{% endif %}
{% for table in tables %}
<h2 id="{{ table.id }}">{{ table.title }}</h2>
{{ table.html | safe }}
{% if table.notes %}<ul class="notes">
{% for n in table.notes %}<li>{{ n }}</li>{% endfor %}
</ul>{% endif %}
{% endfor %}
<p class="meta">Generated by scalebench_analysis from {{ path }} (layout {{ layout }}).
Definitions: docs/analysis-guide.md.</p>
</body></html>
"""

CAPTIONS = {
    "throughput_vs_batch": "Samples per second against per-rank batch size. Filled markers: "
    "trusted cells; hollow: untrusted (noisy or drifting); x on the axis: out of memory.",
    "scaling_efficiency": "Weak: (T(b,w)/w) / (T(b,w0)/w0) at fixed per-rank batch b. Strong: "
    "T(G/w,w)/T(G/w0,w0) · w0/w at fixed global batch G. The dashed line is ideal scaling.",
    "phase_breakdown": "Median over measured iterations of the rank-mean time of each phase.",
    "rank_heatmap": "Each row is one rank of a multi-rank cell; colour is the rank's busy time "
    "(train: step minus comm_wait, inference: batch) divided by the cell's median.",
    "latency_cdf": "Empirical CDF of the iteration samples: the slowest rank's step per "
    "iteration (train) or every batch latency (inference).",
    "regression_forest": "Time ratio new / base over the runs (ratio of the geometric means "
    "of the runs' median times) with its interval from Welch's t test on the log run medians "
    "(the p-value comes from the same test); grey band: the regression threshold. A repeated "
    "cell is one row, its repetitions its runs; a cell run once on a side shows the ratio "
    "alone (inconclusive: run-to-run variation unknown).",
    "repetitions": "One row per repeated cell: each dot is one repetition's median step "
    "(train) or batch (inference) time, the black bar the median over the repetitions, the "
    "line its 95% percentile-bootstrap interval (10000 resamples of the repetitions), all as "
    "percent of the series median. Red: the repetitions disagree (they span more than 10%): "
    "the machine changed during the run and the interval understates the uncertainty.",
    "batch_throughput": "One panel per batch study (a batch_size auto cell's probes, or cells "
    "that differ only in batch). Open markers: knee (within 5% of the best), best, recommended; "
    "dashed lines: the largest batch that fit (green) and the smallest that did not (red); x: "
    "probes that did not fit.",
    "batch_memory": "Peak memory of each probe or cell; solid red line: the memory budget the "
    "probes were judged by, dotted: the budget less the safety margin (the recommended batch "
    "stays below it).",
    "batch_latency": "Distribution of the step (train, slowest rank) or batch (inference) time: "
    "an auto cell's probe iterations, a listed cell's measured iterations.",
    "batch_speedup": "Throughput over the throughput of the smallest batch that fit; dashed: "
    "linear in the batch (every sample free).",
    "batch_efficiency": "Samples per second per GiB of peak memory: what a GiB of memory buys "
    "at each batch.",
}


def _inline(markdown: str) -> str:
    """HTML of one line of study_lines' Markdown: escaped, **bold** and `code` kept (the
    template marks it `safe`: escaped here, it must not be escaped again)."""
    text = html.escape(markdown)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


def _row_classes(name: str, frame) -> list[str]:
    if name == "regressions":
        lost = compare.accuracy_lost(frame)
        return [f"{v} accuracy-failed" if x else str(v) for v, x in zip(frame.verdict, lost)]
    if name == "accuracy":
        return ["" if v == "passed" else "accuracy-failed" for v in frame.verdict]
    if name == "repetitions":
        return ["disagree" if d else "" for d in frame.disagree]
    classes = [""] * len(frame)
    if "trusted" in frame:
        classes = ["" if t is True or t == 1 else "untrusted" for t in frame.trusted]
    if "accuracy" in frame:
        classes = [
            f"{c} accuracy-failed".strip() if str(a).startswith("FAIL") else c
            for c, a in zip(classes, frame.accuracy)
        ]
    return classes


def html_table(name: str, frame) -> str:
    shown = display_frame(name, frame)
    classes = _row_classes(name, shown_rows(name, frame))  # the rows display_frame shows
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown.columns)
    body = []
    for css, row in zip(classes, shown.itertuples(index=False)):
        cells = "".join(f"<td>{html.escape(str(v))}</td>" for v in row)
        body.append(f'<tr class="{html.escape(css)}">{cells}</tr>')
    if not body:
        return "<p>(none)</p>"
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _cards(analysis: Analysis) -> list[dict]:
    cells = analysis.sections["cells"]
    ok = int((cells.status == "ok").sum())
    bad = int((cells.status != "ok").sum())
    untrusted = int((cells.trusted == False).sum())  # noqa: E712 (NaN for non-ok cells)
    stragglers = int(analysis.sections["stragglers"].straggler.sum())
    cards = [
        {"name": "cells ok", "value": ok, "kind": "good"},
        {"name": "not ok", "value": bad, "kind": "bad" if bad else ""},
        {"name": "untrusted", "value": untrusted, "kind": "bad" if untrusted else ""},
        {"name": "straggler ranks", "value": stragglers, "kind": "bad" if stragglers else ""},
    ]
    nodes = analysis.sections.get("straggler_nodes")  # only when a cell spans 2+ hosts
    if nodes is not None:
        n = int(nodes.straggler.sum())
        cards.append({"name": "straggler nodes", "value": n, "kind": "bad" if n else "good"})
    checked = analysis.sections.get("accuracy")
    if checked is not None:
        n = int((checked.verdict != "passed").sum())
        cards.append({"name": "accuracy failed", "value": n, "kind": "bad" if n else "good"})
    repeated = analysis.sections.get("repetitions")
    if repeated is not None:
        n = int(sum(bool(d) for d in repeated.disagree))
        cards.append({"name": "series disagree", "value": n, "kind": "bad" if n else "good"})
    table = analysis.sections.get("regressions")
    if table is not None:
        n = int((table.verdict.isin(["regression", "broke"]) | compare.accuracy_lost(table)).sum())
        cards.append({"name": "regressions", "value": n, "kind": "bad" if n else "good"})
    return cards


def _repetitions(analysis: Analysis, rendered) -> dict | None:
    """The report's Repetitions section (None without series): the table's title, the strip
    plot (plots.repetition_strip), the table and its notes (DISAGREE, incomplete series)."""
    frame = analysis.sections.get("repetitions")
    if frame is None or frame.empty:
        return None
    return {
        "title": TITLES["repetitions"],
        "plots": rendered(REPETITION_PLOTS),
        "html": html_table("repetitions", frame),
        "notes": section_notes(analysis, "repetitions", frame),
    }


#: Why each plot of PLOTS is left out of a report (its function returned None): every plot
#: the report does not draw is named with its reason (issue 54 row 11).
NOT_DRAWN = {
    "throughput_vs_batch": "no cell ran ok",
    "scaling_efficiency": "the ok cells ran at one world size",
    "phase_breakdown": "no cell ran ok",
    "rank_heatmap": "no ok cell ran on 2 or more ranks",
    "latency_cdf": "no cell ran ok",
    "regression_forest": "no baseline file (--baseline-file) or no compared pair with a ratio",
}


def render_html(analysis: Analysis, title: str | None = None, projection=None) -> str:
    """The page. `projection`: the Projection section (projection/report_section.py's
    ProjectionSection: plot, caption, table, why, notes), None to leave it out."""
    absent = []

    def rendered(plot_list):
        out = []
        for key, plot_title, function in plot_list:
            fig = function(analysis)
            if fig is None and key in NOT_DRAWN:
                absent.append({"title": plot_title, "why": NOT_DRAWN[key]})
            if fig is not None:
                out.append(
                    {
                        "title": plot_title,
                        "caption": CAPTIONS[key],
                        "data": base64.b64encode(figure_png(fig)).decode("ascii"),
                    }
                )
        return out

    large = sweep_console.is_large(analysis)  # Note [Report at scale]
    plots = [] if large else rendered(PLOTS)
    if large:
        why = f"a mark or panel per cell at {len(analysis.sections['cells']):,} cells"
        absent += [{"title": plot_title, "why": why} for _, plot_title, _ in PLOTS]
    studies = []
    if analysis.batch_studies is not None and not large:
        for study in analysis.batch_studies.itertuples():
            study_title, lines = batch.study_lines(study)
            studies.append(
                {"title": _inline(study_title), "lines": [_inline(line) for line in lines]}
            )
    tables = []
    for name, frame in analysis.sections.items():
        if name in ("overview", "repetitions"):  # repetitions: a section of its own
            continue
        if large and name == "cells":  # the sweep section's searchable table
            continue
        notes = section_notes(analysis, name, frame)
        if large:
            frame, left_out = report_sweep.cut_rows(shown_rows(name, frame))
            notes = notes[: sweep_console.SHOWN_ROWS]
            if left_out:
                notes.append(
                    f"{left_out:,} more rows: scalebench analyze --format csv --table {name}"
                )
        tables.append(
            {
                "id": name,  # the section's anchor: report.html#<table name>
                "title": TITLES.get(name, name),
                "html": html_table(name, frame),
                "notes": notes,
            }
        )
    operators = ops_render.report_ops_frame(analysis.results, analysis.results.path)
    if operators is not None:  # docs/profiles.md: cells run with profile_steps
        tables.append(
            {
                "id": "operators",
                "title": "Operators of the profiled cells (top 5 a phase, per profiled step)",
                "html": plain_table(operators),
                "notes": [
                    "Times are under the profiler (inflated by its cost): compare operators "
                    "with each other, never with the measured step (analyze --ops, "
                    "compare --ops; docs/profiles.md)."
                ],
            }
        )
    gate = None
    if "regressions" in analysis.sections:
        gate = compare.gate_summary(analysis.sections["regressions"], analysis.options.gate)
    overview = analysis.sections["overview"]
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(_TEMPLATE).render(
        title=title or f"scalebench report: {analysis.results.path}",
        overview=list(zip(overview.field, overview.value)),
        cards=_cards(analysis),
        summary=(
            summary.summary_lines(
                analysis,
                next_step=False,
                max_experiments=sweep_console.SUMMARY_EXPERIMENTS if large else None,
            )
            if "cells" in analysis.sections
            else []
        ),
        sweep=report_sweep.sweep_section(analysis) if large else None,
        plots=plots,
        absent=absent,
        studies=studies,
        batch_plots=rendered(BATCH_PLOTS) if studies else [],
        repetitions=_repetitions(analysis, rendered),
        projection=projection,
        projection_table=(
            plain_table(projection.table)
            if projection is not None and projection.table is not None
            else ""
        ),
        tables=tables,
        gate=gate,
        path=analysis.results.path,
        layout=analysis.results.layout_version,
    )


def write_report(analysis: Analysis, path: str, title: str | None = None, projection=None) -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.write(render_html(analysis, title, projection))
