"""Repeated cells (Note [Repetitions], results layout 1.5): the Repetitions table, and the
judgement of repeated cells between two files.

A series is every repetition of one cell; the C++ run stores its figures in
`/series/<series_id>` (read by read/series.py into `Results.series`): the median over the
repetitions of their median step/batch time and throughput, each with a 95 % percentile
bootstrap interval over the repetitions, the spread and the `disagree` flag. Nothing here
recomputes them: the analysis reads the file's figures (tests/analysis/rawdata.py holds the
independent reference the tests check them against).

Between two files (`compare`), the repetitions of a series are not judged one by one (each
repetition's iterations share one state of the machine, so testing them alone would take
machine drift for a regression): the pair of series is, when both series have an interval
(two or more completed repetitions on each side). It is a regression when the new median is
slower than the base by more than the threshold AND the two intervals do not overlap; an
improvement the other way round; "within noise" otherwise. Its ratio interval is the
conservative [new low / base high, new high / base low], which excludes 1 exactly when the
intervals do not overlap. A repetition that broke (ok in base, failed / oom / timeout in
new) still fails the gate on its own row.

When only one side is repeated (a single run against a series of the same cell), the
single-run test of compare.py runs between the single cell and the series' representative
repetition (the completed one whose median is closest to the series median), and the row
shows the series' interval as well. When a series has fewer than two completed repetitions
(no interval), its repetitions are compared cell by cell as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from ..read.keys import config_key
from ..read.series import LABEL_COLUMNS, attach_labels, reference_cell, series_of_cells

#: Spec fields that do not separate two runs of one cell across files: a series of 5 and a
#: single run of the same cell are the same cell measured differently.
SERIES_MATCH_DROP = ("commit", "repetition", "repetitions", "interleave")
#: Verdict of a repetition cell whose series is judged instead (compare).
IN_SERIES = "judged by its series"
#: Verdict of a series pair whose intervals overlap (or whose change is within the
#: threshold).
WITHIN_NOISE = "within noise"
#: `matched_by` of a series pair row, and of a single run against a series.
MATCHED_SERIES = "series"
MATCHED_ONE_SIDE = "one side repeated"


# --- the Repetitions table of analyze / report -----------------------------------------

#: Columns of the Repetitions section (machine output: json, csv).
TABLE_COLUMNS = [
    "label",
    "series_id",
    "metric",
    "reps",
    "completed",
    "repetitions",
    "median_ms",
    "ci_low_ms",
    "ci_high_ms",
    "throughput_samples_per_s",
    "throughput_ci_low",
    "throughput_ci_high",
    "spread_pct",
    "disagree",
    "repetition_median_ms",
    "branch",
    "experiment",
    "mode",
    "precision",
    "setting",
    "batch_size",
    "world_size",
]


def repetitions_table(series: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """One row per series (sorted by label): `reps` "completed/N", the median over the
    repetitions and its interval in ms, the throughput and its interval, the spread in
    percent, `disagree` ("DISAGREE" or ""), each repetition's median in ms (NaN: not
    completed) and the labelling columns. Empty (no columns) without series."""
    if series.empty:
        return pd.DataFrame()
    if "label" not in series:
        series = attach_labels(series, cells)
    out = pd.DataFrame(
        {
            "label": series.label,
            "series_id": series.series_id,
            "metric": series.metric,
            "reps": [f"{c}/{n}" for c, n in zip(series.completed, series.repetitions)],
            "completed": series.completed,
            "repetitions": series.repetitions,
            "median_ms": series.median_s * 1e3,
            "ci_low_ms": series.median_s_ci_low * 1e3,
            "ci_high_ms": series.median_s_ci_high * 1e3,
            "throughput_samples_per_s": series.throughput_samples_per_s,
            "throughput_ci_low": series.throughput_ci_low,
            "throughput_ci_high": series.throughput_ci_high,
            "spread_pct": series.spread_rel * 100,
            "disagree": ["DISAGREE" if d else "" for d in series.disagree],
            "repetition_median_ms": [[m * 1e3 for m in ms] for ms in series.repetition_median_s],
            **{name: series[name] for name in LABEL_COLUMNS[1:]},
        },
        columns=TABLE_COLUMNS,
    )
    return out.sort_values("label", kind="stable").reset_index(drop=True)


def _finite(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)


def interval_text(value, low, high, fmt: str = "{:,.3f}", unit: str = "") -> str:
    """ "19.172 [19.006, 22.359] ms": a figure with its interval ("-" without the figure,
    the figure alone without an interval)."""
    if not _finite(value):
        return "-"
    text = fmt.format(value)
    if _finite(low) and _finite(high):
        text += f" [{fmt.format(low)}, {fmt.format(high)}]"
    return text + (f" {unit}" if unit else "")


def display_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The Repetitions table as text for the console, Markdown and HTML: label, reps,
    median (ms) and throughput each with its 95 % interval, spread, DISAGREE."""
    return pd.DataFrame(
        {
            "label": frame.label,
            "reps": frame.reps,
            "median ms [95% CI]": [
                interval_text(m, lo, hi)
                for m, lo, hi in zip(frame.median_ms, frame.ci_low_ms, frame.ci_high_ms)
            ],
            "samples/s [95% CI]": [
                interval_text(t, lo, hi, "{:,.1f}")
                for t, lo, hi in zip(
                    frame.throughput_samples_per_s,
                    frame.throughput_ci_low,
                    frame.throughput_ci_high,
                )
            ],
            "spread": [f"{s:.1f}%" if _finite(s) else "-" for s in frame.spread_pct],
            "agree": ["DISAGREE" if d else "yes" for d in frame.disagree],
        },
        index=range(len(frame)),
    )


def _ms_list(values) -> str:
    return ", ".join("-" if not _finite(v) else f"{v:.3f}" for v in values)


def notes(frame: pd.DataFrame) -> list[str]:
    """One line per series whose repetitions disagree (their medians listed) and per series
    with repetitions that did not complete."""
    lines = []
    for r in frame.itertuples():
        if r.disagree:
            lines.append(
                f"DISAGREE: {r.label}: the repetitions' medians span {r.spread_pct:.1f}% of "
                f"their median (more than 10%): {_ms_list(r.repetition_median_ms)} ms; the "
                f"machine changed during the run, and the interval understates the "
                f"uncertainty (docs/repetitions.md)"
            )
        if r.completed < r.repetitions:
            lines.append(
                f"{r.label}: {r.completed} of {r.repetitions} repetitions completed"
                + ("" if r.completed >= 2 else ": no interval (it needs two)")
            )
    return lines


def executive_summary(frame: pd.DataFrame) -> str:
    """Markdown bullets, one per series: the median and the throughput with their 95 %
    intervals, the repetitions completed, and DISAGREE with the spread."""
    lines = []
    for r in frame.itertuples():
        what = "step" if r.metric == "step" else "batch"
        line = (
            f"* **{r.label}**: median {what} time "
            f"{interval_text(r.median_ms, r.ci_low_ms, r.ci_high_ms, unit='ms')}, throughput "
            + interval_text(
                r.throughput_samples_per_s,
                r.throughput_ci_low,
                r.throughput_ci_high,
                "{:,.1f}",
                "samples/s",
            )
            + f" (95% bootstrap intervals over {r.reps} repetitions)"
        )
        if r.disagree:
            line += f"; **DISAGREE**: the repetitions span {r.spread_pct:.1f}% (> 10%)"
        lines.append(line + ".")
    return "\n".join(lines) + "\n" if lines else ""


# --- compare: repeated cells between two files ------------------------------------------


def _by_id(series: pd.DataFrame) -> dict:
    return {row.series_id: row for row in series.itertuples(index=False)}


def has_interval(row) -> bool:
    """The series has a median interval (two or more completed repetitions)."""
    return _finite(row.median_s_ci_low) and _finite(row.median_s_ci_high)


def _match_key(spec: dict) -> str:
    return config_key(spec, drop=SERIES_MATCH_DROP)


def _series_keys(results) -> dict:
    """series id -> match key (the spec of its reference cell without SERIES_MATCH_DROP),
    for the series with a cell in the file."""
    by_id = results.cells.set_index("cell_id")
    keys = {}
    for row in results.series.itertuples():
        cell = reference_cell(row, by_id)
        if cell is not None:
            keys[row.series_id] = _match_key(cell.spec)
    return keys


def _unique_pairs(base_keys: dict, new_keys: dict) -> list:
    """(base id, new id) of the ids (id -> match key) on both sides, then of the keys
    that exactly one remaining id has on each side."""
    base_ids, new_ids = list(base_keys), list(new_keys)
    pairs = [(b, b) for b in base_ids if b in set(new_ids)]
    paired = {b for b, _ in pairs}
    by_key_base, by_key_new = {}, {}
    for b in base_ids:
        if b not in paired:
            by_key_base.setdefault(base_keys[b], []).append(b)
    for n in new_ids:
        if n not in paired:
            by_key_new.setdefault(new_keys[n], []).append(n)
    for key, ids in by_key_base.items():
        if len(ids) == 1 and len(by_key_new.get(key, [])) == 1:
            pairs.append((ids[0], by_key_new[key][0]))
    return pairs


def representative(row, cells: pd.DataFrame) -> str | None:
    """The series' completed repetition whose median is closest to the series median
    (ties: the lowest repetition); None when none completed."""
    by_id = cells.set_index("cell_id")
    best, best_gap = None, math.inf
    for cell_id in row.cells:
        if cell_id not in by_id.index:
            continue
        cell = by_id.loc[cell_id]
        median = cell.get("median_s", math.nan)
        if cell.status != "ok" or not _finite(median):
            continue
        gap = abs(median - row.median_s) if _finite(row.median_s) else 0.0
        if gap < best_gap:
            best, best_gap = cell_id, gap
    return best


@dataclass
class Plan:
    """How compare treats the repeated cells of two files (the module docstring):
    `series_pairs` judged as series, the cells whose timing verdict their series replaces
    (`judged`, and `absorbed`: the other repetitions of a series met by a single run), the
    single runs paired with a series' representative repetition (`one_sided`: (base id,
    new id) -> label), and cell id -> series id of each file."""

    base: object
    new: object
    series_pairs: list = field(default_factory=list)
    judged: set = field(default_factory=set)  # ("base" | "new", cell id)
    one_sided: dict = field(default_factory=dict)
    absorbed: set = field(default_factory=set)  # ("base" | "new", cell id)
    base_of: dict = field(default_factory=dict)
    new_of: dict = field(default_factory=dict)

    def cell_pairs(self, pairs: list) -> list:
        """compare.match_cells' `pairs` with the two unmatched rows of each one-sided pair
        joined into one (base id, new id, MATCHED_ONE_SIDE), where the first of them was."""
        ends = {}
        for pair in self.one_sided:
            ends[(pair[0], None)] = ends[(None, pair[1])] = pair
        out, done = [], set()
        for base_id, new_id, matched_by in pairs:
            pair = ends.get((base_id, new_id)) if not matched_by else None
            if pair is None:
                out.append((base_id, new_id, matched_by))
            elif pair not in done:
                out.append((*pair, MATCHED_ONE_SIDE))
                done.add(pair)
        return out

    def in_series(self, base_id, new_id) -> bool:
        """The row's timing verdict is its series' (a repetition of a judged series pair,
        or a repetition left aside when a single run met its series)."""
        keys = (("base", base_id), ("new", new_id))
        return any(key in self.judged or key in self.absorbed for key in keys)

    def label(self, base_id, new_id) -> str | None:
        """The label of a one-sided row, None for any other."""
        return self.one_sided.get((base_id, new_id))

    def interval_columns(self, base_id, new_id, matched_by: str) -> dict:
        """INTERVAL_COLUMNS of a row: a one-sided row's repeated side's series median and
        interval; NaN for any other row."""
        out = {name: math.nan for name in INTERVAL_COLUMNS}
        if matched_by != MATCHED_ONE_SIDE:
            return out
        for side, cell_id, of, results in (
            ("base", base_id, self.base_of, self.base),
            ("new", new_id, self.new_of, self.new),
        ):
            row = _by_id(results.series).get(of.get(cell_id))
            if row is not None:
                out.update(_interval_of(side, row))
        return out

    def series_rows(self, threshold: float) -> list:
        """One compare row per series pair (judge), labelled "<label> [series of N]"."""
        base_rows, new_rows = _by_id(self.base.series), _by_id(self.new.series)
        rows = []
        for b, n in self.series_pairs:
            judged = judge(base_rows[b], new_rows[n], threshold)
            label = _label_of(new_rows[n]) or _label_of(base_rows[b]) or n
            rows.append({"label": f"{label} [series of {judged['n_new']}]", **judged})
        return rows


def _label_of(row) -> str | None:
    label = getattr(row, "label", None)
    return label if isinstance(label, str) and label else None


#: The series columns of a compare row: the repeated side's median and interval.
INTERVAL_COLUMNS = [
    "series_base_median_s",
    "series_base_ci_low_s",
    "series_base_ci_high_s",
    "series_new_median_s",
    "series_new_ci_low_s",
    "series_new_ci_high_s",
]


def _interval_of(side: str, row) -> dict:
    return {
        f"series_{side}_median_s": row.median_s,
        f"series_{side}_ci_low_s": row.median_s_ci_low,
        f"series_{side}_ci_high_s": row.median_s_ci_high,
    }


def plan(base, new, pairs: list) -> Plan:
    """The Plan of two loaded files and compare.match_cells' `pairs` of them (module
    docstring): series pairs matched by series id, else by the spec without
    SERIES_MATCH_DROP when unique on both sides, judged as series when both have an
    interval; a series without a partner series and a single run of the same spec (a cell
    that is not repeated and that match_cells left unmatched) joined into one row, compared
    with the series' representative repetition (when that one is unmatched too)."""
    out = Plan(base, new, base_of=series_of_cells(base.series), new_of=series_of_cells(new.series))
    base_keys, new_keys = _series_keys(base), _series_keys(new)
    base_rows, new_rows = _by_id(base.series), _by_id(new.series)
    series_pairs = _unique_pairs(base_keys, new_keys)
    for b, n in series_pairs:
        if has_interval(base_rows[b]) and has_interval(new_rows[n]):
            out.series_pairs.append((b, n))
            out.judged.update(("base", c) for c in base_rows[b].cells)
            out.judged.update(("new", c) for c in new_rows[n].cells)
    unmatched_base = {b for b, n, _ in pairs if n is None}
    unmatched_new = {n for b, n, _ in pairs if b is None}
    _join_one_sided(
        out,
        _singles(base, unmatched_base),
        new,
        new_keys,
        {n for _, n in series_pairs},
        unmatched_new,
        single_side="base",
    )
    _join_one_sided(
        out,
        _singles(new, unmatched_new),
        base,
        base_keys,
        {b for b, _ in series_pairs},
        unmatched_base,
        single_side="new",
    )
    return out


def _singles(results, unmatched: set) -> dict:
    """cell id -> match key of the cells of `results` that are not repeated and unmatched."""
    cells = results.cells
    return {
        c: _match_key(s)
        for c, s, k in zip(cells.cell_id, cells.spec, cells.repetitions)
        if k <= 1 and c in unmatched
    }


def _join_one_sided(out, singles, series_file, keys, paired, free, single_side) -> None:
    """Adds to `out` each single run (`singles`: id -> key) met by exactly one series of
    `series_file` (`keys`: series id -> key) that has no partner series (`paired`) and
    whose representative repetition is unmatched (in `free`)."""
    rows = _by_id(series_file.series)
    unpaired = {s: k for s, k in keys.items() if s not in paired}
    series_side = "new" if single_side == "base" else "base"
    for single, series_id in _unique_pairs(singles, unpaired):
        row = rows[series_id]
        chosen = representative(row, series_file.cells)
        if chosen is None or chosen not in free:
            continue
        k = row.cells.index(chosen)
        label = (
            f"{_label_of(row) or series_id} [series of {row.completed} against a single run: "
            f"rep {k + 1} compared]"
        )
        pair = (single, chosen) if single_side == "base" else (chosen, single)
        out.one_sided[pair] = label
        out.absorbed.update((series_side, c) for c in row.cells if c != chosen)


def judge(base_row, new_row, threshold: float) -> dict:
    """The compare row of a series pair (see the module docstring): both rows have an
    interval (has_interval)."""
    ratio = new_row.median_s / base_row.median_s
    low = new_row.median_s_ci_low / base_row.median_s_ci_high
    high = new_row.median_s_ci_high / base_row.median_s_ci_low
    slower = new_row.median_s_ci_low > base_row.median_s_ci_high
    faster = new_row.median_s_ci_high < base_row.median_s_ci_low
    if slower and ratio - 1 > threshold:
        verdict = "regression"
    elif faster and 1 - ratio > threshold:
        verdict = "improvement"
    else:
        verdict = WITHIN_NOISE
    return {
        "verdict": verdict,
        "ratio": ratio,
        "change": ratio - 1.0,
        "ci_low": low,
        "ci_high": high,
        "p_value": _medians_p_value(base_row, new_row),
        "n_base": base_row.completed,
        "n_new": new_row.completed,
        "median_base_s": base_row.median_s,
        "median_new_s": new_row.median_s,
        **_interval_of("base", base_row),
        **_interval_of("new", new_row),
        "matched_by": MATCHED_SERIES,
        "base_cell_id": base_row.series_id,
        "new_cell_id": new_row.series_id,
        "base_status": f"{base_row.completed}/{base_row.repetitions} ok",
        "new_status": f"{new_row.completed}/{new_row.repetitions} ok",
        "accuracy": "",
        "accuracy_change": "",
    }


def _medians_p_value(base_row, new_row) -> float:
    """Two-sided Mann-Whitney U p-value of the two series' repetition medians (shown for
    information: the verdict is the intervals'); 1 when they are equal."""
    b = np.array([m for m in base_row.repetition_median_s if _finite(m)])
    n = np.array([m for m in new_row.repetition_median_s if _finite(m)])
    if b.size < 1 or n.size < 1:
        return math.nan
    if np.array_equal(np.sort(b), np.sort(n)):
        return 1.0
    return float(stats.mannwhitneyu(n, b, alternative="two-sided").pvalue)
