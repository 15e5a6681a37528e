"""The answer first (issue 29): a few lines a person reads in ten seconds, printed at the end of
``analyze`` and at the top of the HTML report. Built only from the analysis' own tables (no
figure of its own):

* when the analysis compares (``--baseline-branch``, ``--baseline``, ``--baseline-file``),
  first: per compared branch the count of each verdict, each regression / improvement with its
  interval and the phase carrying it, and why the others are undecided
  (summary_comparison.py);
* per experiment and mode, the fastest ok compared cell (among the trusted ones when there
  are any; a repeated cell is one, its figure the median over its repetitions, never one
  repetition) and its throughput; its speedup over the baseline when one was asked for
  (``--baseline``, ``--baseline-branch``: the speedup table); its scaling efficiency at the
  largest world size of its group (the scaling table: strong scaling where the global batch
  was kept, else weak); the recommended batch of its experiment's ``batch_size: auto``
  cells; a failed accuracy check;
* the cells that failed, by status, with the first reason;
* the untrusted cells by label with what would fix them, for the settings they ran with
  (remedies.py: a program cell is offered numbers, never `iterations: auto`; repetitions
  always more than the cell had);
* the repeated cells whose repetitions disagree, by label;
* the straggler nodes of multi-node cells (straggler_nodes.py), by host;
* what to run next for the plots: ``scalebench report`` (the console's one name for it;
  the HTML report, which is that command's output, leaves the line out).
"""

from __future__ import annotations

import math

import pandas as pd

from ..read.keys import GROUP_COLUMNS
from ..read.natural_order import natural_key
from . import remedies
from .straggler_nodes import summary_line as straggler_nodes_line
from .summary_comparison import comparison_lines


def _noisy(settings: remedies.Settings) -> str:
    # More runs than the cell had, as remedies.more_runs counts them.
    runs = max(3, settings.repetitions + 1)
    return (
        f"noisy: {remedies.more_iterations(settings)}, or repeat it (`repetitions: {runs}`), "
        "on a quieter machine"
    )


#: Untrusted-reason fragment (quality.py) -> what to do about it, for a cell's settings
#: (remedies.Settings) or as text.
_REMEDIES = (
    ("cv ", _noisy),
    ("short of ci_width", "interval not reached: raise max_seconds (or ci_width)"),
    (
        "warm-up drift",
        lambda s: (
            "drifting (still warming up, or the machine's load changed): "
            f"{remedies.more_warmup(s)}, and rerun on a quieter machine"
        ),
    ),
    ("only ", lambda s: f"too few samples: {remedies.more_iterations(s)}"),
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


def _scaling_groups(scaling: pd.DataFrame | None) -> dict:
    """The rows of the scaling table beyond one rank, by their group (GROUP_COLUMNS as text):
    what _efficiency looks up once per experiment, split once rather than filtered each time."""
    if scaling is None or not len(scaling) or "world_size" not in scaling:
        return {}
    wide = scaling[scaling.world_size > 1]
    if not len(wide):
        return {}
    keys = [wide[k].astype(str) for k in GROUP_COLUMNS]
    return {key: rows for key, rows in wide.groupby(keys, sort=False)}


def _efficiency(groups: dict, best) -> str:
    """'; scaling 87 % at 8 ranks (strong)' for the group of `best` (groups: _scaling_groups),
    '' without one."""
    mine = groups.get(tuple(str(best[k]) for k in GROUP_COLUMNS))
    if mine is None:
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


def _recommended_batches(results_cells: pd.DataFrame) -> dict:
    """(experiment, mode) -> '; recommended batch 32/64' of its ok `batch_size: auto` cells."""
    if "recommended_batch" not in results_cells:
        return {}
    mine = results_cells[results_cells.recommended_batch.notna() & (results_cells.status == "ok")]
    out = {}
    for key, group in mine.groupby(["experiment", "mode"], sort=False):
        batches = sorted({int(b) for b in group.recommended_batch if b and b > 0})
        if batches:
            out[key] = "; recommended batch " + "/".join(str(b) for b in batches)
    return out


def _remedy(because: str, spec: dict) -> str:
    """What would fix a cell untrusted `because` (quality.py's reasons), for its settings."""
    settings = remedies.Settings.of(spec if isinstance(spec, dict) else {})
    found = [
        remedy if isinstance(remedy, str) else remedy(settings)
        for fragment, remedy in _REMEDIES
        if fragment in because
    ]
    return "; ".join(found) or "see the cells table's notes"


def _repeated_labels(analysis) -> dict:
    """series id -> the repeated cell's label (without " rep k/N")."""
    repeated = analysis.sections.get("repetitions")
    if repeated is None or not len(repeated):
        return {}
    return dict(zip(repeated.series_id, repeated.label))


def _compared_cells(ok: pd.DataFrame, analysis) -> pd.DataFrame:
    """`ok` with the repetitions of each repeated cell as one row: its label, its throughput
    the median over its ok repetitions (the Repetitions table's), trusted when every one
    is, `runs` the number of them (1 for a cell run once)."""
    series = ok.series_id if "series_id" in ok else pd.Series("", index=ok.index)
    runs = ok.repetitions if "repetitions" in ok else pd.Series(1, index=ok.index)
    repeated = series.map(lambda s: isinstance(s, str) and bool(s)) & (runs > 1)
    single = ok[~repeated].assign(runs=1)
    if not repeated.any():
        return single
    labels = _repeated_labels(analysis)
    table = analysis.sections.get("repetitions")
    throughput = dict(zip(table.series_id, table.throughput_samples_per_s)) if labels else {}
    rows = []
    for series_id, group in ok[repeated].groupby(series[repeated], sort=False):
        row = group.iloc[0].copy()
        row["label"] = labels.get(series_id, row.label.rsplit(" rep ", 1)[0])
        row["throughput_samples_per_s"] = throughput.get(
            series_id, group.throughput_samples_per_s.median()
        )
        row["trusted"] = bool((group.trusted == True).all())  # noqa: E712
        row["runs"] = len(group)
        rows.append(row)
    return pd.concat([single, pd.DataFrame(rows)], ignore_index=True)


def _untrusted_lines(untrusted: pd.DataFrame, analysis) -> list[str]:
    """One line per remedy: the untrusted cells it fixes, by label (a repeated cell once,
    with how many of its repetitions were untrusted)."""
    labels = _repeated_labels(analysis)
    cells = analysis.results.cells
    specs = dict(zip(cells.cell_id, cells.spec))
    groups: dict = {}  # remedy -> {label: [untrusted repetitions, repetitions]}
    for row in untrusted.itertuples():
        series_id = getattr(row, "series_id", "")
        label = labels.get(series_id, row.label) if isinstance(series_id, str) else row.label
        remedy = _remedy(str(row.untrusted_because), specs[row.cell_id])
        named = groups.setdefault(remedy, {})
        named.setdefault(label, [0, int(row.repetitions)])[0] += 1
    lines = []
    for remedy, named in groups.items():
        who = [
            label if of == 1 else f"{label} ({count} of {of} runs)"
            for label, (count, of) in named.items()
        ]
        text = ", ".join(who[:3]) + (f" and {len(who) - 3} more" if len(who) > 3 else "")
        lines.append(f"{text}: {remedy}")
    count = len(untrusted)
    first = f"{count} untrusted cell{'s' if count > 1 else ''}: {lines[0]}"
    return [first] + [f"untrusted: {line}" for line in lines[1:]]


def _disagree_line(analysis) -> str:
    repeated = analysis.sections.get("repetitions")
    if repeated is None or not len(repeated):
        return ""
    labels = [r.label for r in repeated.itertuples() if r.disagree]
    if not labels:
        return ""
    return (
        f"{len(labels)} repeated cell{'s' if len(labels) > 1 else ''} whose repetitions "
        f"disagree (span > 10%): {', '.join(labels)}: the machine changed during the run; "
        "rerun on a quieter machine (docs/repetitions.md)"
    )


def summary_lines(
    analysis, next_step: bool = True, max_experiments: int | None = None
) -> list[str]:
    """The summary of `analysis` (tables/analysis.py), one line per fact; with `next_step`
    (and a file), last the command that makes the plots. Experiments in natural order (e2
    before e10); `max_experiments`: the fastest-cell lines of the first that many only, and
    a line saying how many more (the console of a large sweep: output/sweep_console.py)."""
    cells = analysis.sections["cells"]
    ok = cells[cells.status == "ok"]
    lines = comparison_lines(analysis)
    untrusted = ok[ok.trusted != True]  # noqa: E712 (NaN: no summary, untrusted)
    failed = cells[~cells.status.isin(["ok", "skipped"])]
    lines.append(
        f"{len(cells)} cells: {len(ok)} ok ({len(ok) - len(untrusted)} trusted), "
        f"{len(failed)} failed, {int((cells.status == 'skipped').sum())} skipped"
    )
    compared = _compared_cells(ok, analysis)
    scaling = _scaling_groups(analysis.sections.get("scaling"))
    recommended = _recommended_batches(analysis.results.cells)
    groups = sorted(
        compared.groupby(["experiment", "mode"], sort=True),
        key=lambda item: (natural_key(str(item[0][0])), str(item[0][1])),
    )
    for (experiment, mode), group in groups[:max_experiments]:
        pool = group[group.trusted == True]  # noqa: E712
        pool = pool if len(pool) else group
        best = pool.sort_values("throughput_samples_per_s", ascending=False).iloc[0]
        text = (
            f"{experiment} {mode}: fastest {best.label}, "
            f"{best.throughput_samples_per_s:,.0f} samples/s"
            + (f" (median of {best.runs} runs)" if best.runs > 1 else "")
            + ("" if best.trusted == True else " (untrusted)")  # noqa: E712
            + _speedup(analysis.sections.get("speedup"), _unit_id(best))
            + _efficiency(scaling, best)
            + recommended.get((experiment, mode), "")
        )
        if isinstance(best.accuracy, str) and best.accuracy.startswith("FAIL"):
            text += f"; accuracy {best.accuracy}"
        lines.append(text)
    if max_experiments is not None and len(groups) > max_experiments:
        lines.append(
            f"... and {len(groups) - max_experiments:,} more experiments: "
            "the Experiments table below"
        )
    for status, group in failed.groupby("status", sort=True):
        reason = next((r for r in group.reason if isinstance(r, str) and r), "")
        lines.append(
            f"{len(group)} {status}: first {group.label.iloc[0]}"
            + (f": {reason[:160]}" if reason else "")
        )
    if len(untrusted):
        lines += _untrusted_lines(untrusted, analysis)
    disagree = _disagree_line(analysis)
    if disagree:
        lines.append(disagree)
    nodes = straggler_nodes_line(analysis.sections.get("straggler_nodes"))
    if nodes:
        lines.append(nodes)
    if next_step and analysis.results.path:
        lines.append(
            f"plots and every table: scalebench report {analysis.results.path} -o report.html"
        )
    return lines
