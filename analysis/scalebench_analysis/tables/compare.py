"""Speedups against a baseline and the regression gate between two runs.

Definitions (docs/analysis-guide.md#comparisons):

* compared cell: a cell, or a repeated cell with its repetitions as its runs (runs.Unit):
  one row each, never one per repetition.
* speedup = throughput(cell) / throughput(baseline cell) (medians over the runs);
  time_ratio: verdict.judge's ratio of the geometric means of the runs' judged figures.
  Baseline cell within a file (`--baseline FIELD=VALUE`, `--baseline-branch B` =
  `--baseline branch=B`): the cell whose spec equals the cell's except FIELD = VALUE
  (and, for the branch, any commit). Across files (`--baseline-file`): runs.match_units
  (same series / cell id, else the one cell with the same spec apart from the commit, so a
  new commit of a branch still meets its baseline).
* judgement of every pair (speedup tables and the regression gate alike): verdict.judge
  over the runs (Note [Runs are the unit of evidence] in verdict.py): Welch's t test (or
  the paired one, by round) on the logs of each run's judged figure, the 20th percentile
  of its steps (Note [The judged statistic] in run_statistic.py; the medians stay the step
  time shown), with 2+ runs a side (p-value and interval of one method), `inconclusive`
  with one run on a side, an untrusted side, or noisy runs the change does not clear (Note
  [Noise weighed against the change]), each with its reason and a remedy the cell's kind
  accepts (remedies.py); regression / improvement: significant and beyond the threshold.
  Every judged pair has its `resolution` (the smallest change its runs could show at
  alpha) and an undecided one the `runs_needed` a side for the threshold (resolution.py).
  Each phase of the pair gets the same test on its own judged figures
  (pairs._phase_changes): the changed ones are listed
  (`forward +5.1 ms [4.8, 5.4]`) and the one carrying the verdict's change named
  (`carried_by`). A cell ok in base with a run failed / oom / timeout in new is a
  regression too ("broke").
* accuracy (accuracy.py): every table shows the cell's accuracy verdict (`accuracy`:
  passed / FAIL (<first failed check>) / not checked). Between two files, a matched pair
  whose verdict changed gets `accuracy_change` (`passed -> failed`, `failed -> passed`,
  ...) and a flagged line under the table; `passed -> failed` fails the gate like a cell
  that broke, whatever its timing verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..errors import UsageError
from ..read.loader import Results
from . import accuracy, pairs, quality, runs, verdict

BROKEN_STATUSES = runs.BROKEN_STATUSES
_DROP_FOR_FILE_MATCH = ("commit",)
#: The trust thresholds of compare_tables when none are given.
_QUALITY = quality.QualityOptions()


@dataclass(frozen=True)
class GateOptions:
    threshold: float = 0.05
    alpha: float = 0.05
    correction: str = "none"  # "none" or "holm"


def spec_value(spec: dict, dotted: str):
    """The value at a dotted path of a cell spec ("model.zoo"), or None where it is absent."""
    value = spec
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _with(spec: dict, dotted: str, new_value) -> dict:
    copy = dict(spec)
    head, _, rest = dotted.partition(".")
    copy[head] = _with(copy.get(head, {}), rest, new_value) if rest else new_value
    return copy


def parse_value(text: str, example):
    """`text` converted to the type of `example` (bool, int, float, str)."""
    if isinstance(example, bool):
        if text.lower() not in ("true", "false", "1", "0"):
            raise UsageError(f"expected true or false, got {text!r}")
        return text.lower() in ("true", "1")
    if isinstance(example, (int, float)):
        try:
            return type(example)(text)
        except ValueError:
            raise UsageError(f"expected a number, got {text!r}") from None
    return text


def speedup_in_file(
    results: Results,
    field: str,
    value: str,
    trust: pd.DataFrame,
    options: GateOptions = GateOptions(),
) -> pd.DataFrame:
    """Every compared cell (runs.Unit: a cell, or a repeated cell with its repetitions as
    runs) whose spec `field` differs from `value`, against its baseline cell, judged by
    verdict.judge (pairs.judged_row)."""
    units = runs.units_of(results)
    examples = [
        spec_value(u.spec, field) for u in units.values() if spec_value(u.spec, field) is not None
    ]
    if not examples:
        fields = ", ".join(sorted(results.cells.spec.iloc[0])) if len(results.cells) else "-"
        raise UsageError(
            f"--baseline {field}={value}: no ok cell spec has a field {field!r} (fields: {fields})"
        )
    target = parse_value(value, examples[0])
    drop = ("commit",) if field == "branch" else ()
    usable = {u: unit for u, unit in units.items() if runs.ok_runs(unit)}
    key = {
        runs.match_key(unit.spec, drop): u
        for u, unit in usable.items()
        if spec_value(unit.spec, field) == target
    }
    if not key:
        found = sorted({str(e) for e in examples})
        raise UsageError(
            f"--baseline {field}={value}: no ok cell has {field}={value} "
            f"(found: {', '.join(found)})"
        )
    rows, side = [], pairs.Side(results, trust)
    for unit in usable.values():
        if spec_value(unit.spec, field) == target:
            continue
        base_id = key.get(runs.match_key(_with(unit.spec, field, target), drop))
        if base_id is None:
            continue
        row = pairs.judged_row(side, usable[base_id], side, unit, options.alpha)
        row["baseline"] = f"{field}={spec_value(usable[base_id].spec, field)}"
        rows.append(row)
    return _speedup_frame(rows, options)


#: Columns of the speedup tables: throughput and speedup (point figures, medians over the
#: runs), then the judgement of the time (verdict.judge: time_ratio with its interval).
SPEEDUP_COLUMNS = [
    "label",
    "baseline",
    "verdict",
    "speedup",
    "time_ratio",
    "ci_low",
    "ci_high",
    "p_value",
    "n_base",
    "n_new",
    "paired",
    "throughput",
    "baseline_throughput",
    "carried_by",
    "phases",
    "reason",
    "remedy",
    "trusted",
    "accuracy",
    "resolution",
    "runs_needed",
    "cell_id",
    "baseline_cell_id",
]


def _speedup_frame(rows: list, options: GateOptions) -> pd.DataFrame:
    for row in rows:
        pairs.finish(row, options.threshold, options.alpha)
        row["time_ratio"] = row["ratio"]
        row["baseline_cell_id"], row["cell_id"] = row["base_cell_id"], row["new_cell_id"]
    return pd.DataFrame(rows).reindex(columns=SPEEDUP_COLUMNS)


def branch_view(results: Results, branch: str) -> Results:
    """`results` with the cells (and series) of `branch` only, for compare --branches.
    Raises UsageError naming the file's branches when none of its cells is on `branch`."""
    cells = results.cells[results.cells.branch == branch]
    if cells.empty:
        have = ", ".join(sorted(set(results.cells.branch))) or "none"
        raise UsageError(f"{results.path}: no cell of branch {branch!r} (its branches: {have})")
    series = results.series[results.series.series_id.isin(set(cells.series_id.dropna()))]
    return replace(
        results,
        path=f"{results.path} [{branch}]",
        cells=cells.reset_index(drop=True),
        series=series,
    )


def speedup_between_files(
    base: Results,
    new: Results,
    trust_base: pd.DataFrame,
    trust_new: pd.DataFrame,
    options: GateOptions = GateOptions(),
) -> pd.DataFrame:
    """Every matched pair of compared cells with ok runs (runs.match_units): new against
    base, judged as in speedup_in_file."""
    base_units, new_units = runs.units_of(base), runs.units_of(new)
    rows = []
    for base_id, new_id, _ in runs.match_units(base_units, new_units, _DROP_FOR_FILE_MATCH):
        if base_id is None or new_id is None:
            continue
        b, n = base_units[base_id], new_units[new_id]
        if not runs.ok_runs(b) or not runs.ok_runs(n):
            continue
        row = pairs.judged_row(
            pairs.Side(base, trust_base), b, pairs.Side(new, trust_new), n, options.alpha
        )
        row["baseline"] = f"{base.path}"
        rows.append(row)
    return _speedup_frame(rows, options)


def _status_verdict(base_unit, new_unit, base_ok: list, new_ok: list) -> tuple[str, str]:
    """(verdict, reason) of a pair that is not judged by its timings: one side missing, a
    run that broke (ok in base, failed / oom / timeout in new: fails the gate), fixed, or
    nothing to compare."""
    if base_unit is None:
        return "new cell", ""
    if new_unit is None:
        return "missing in new", ""
    broken = runs.broken_runs(new_unit)
    if base_ok and broken:
        return "broke", f"{broken} of {len(new_unit.statuses)} new runs did not complete"
    if not base_ok and new_ok and runs.broken_runs(base_unit):
        return "fixed", ""
    return f"not compared ({base_unit.status_text()} -> {new_unit.status_text()})", ""


#: The accuracy change that fails the gate.
ACCURACY_LOST = "passed -> failed"


def _accuracy_columns(base_cell, new_cell) -> dict:
    """`accuracy`: the new cell's accuracy (the base cell's when only in base), prefixed
    with the base verdict when it changed; `accuracy_change`: "" or "<base> -> <new>"."""
    if base_cell is None or new_cell is None:
        return {
            "accuracy": accuracy.text(new_cell if new_cell is not None else base_cell),
            "accuracy_change": "",
        }
    changed = accuracy.change(base_cell, new_cell)
    shown = accuracy.text(new_cell)
    return {
        "accuracy": f"{accuracy.verdict(base_cell)} -> {shown}" if changed else shown,
        "accuracy_change": changed,
    }


def regression_table(
    base: Results,
    new: Results,
    options: GateOptions,
    drop: tuple = _DROP_FOR_FILE_MATCH,
    quality_options: quality.QualityOptions = _QUALITY,
) -> pd.DataFrame:
    """One row per compared cell of either file (compare_tables' first table)."""
    return compare_tables(base, new, options, drop, quality_options)[0]


def compare_tables(
    base: Results,
    new: Results,
    options: GateOptions,
    drop: tuple = _DROP_FOR_FILE_MATCH,
    quality_options: quality.QualityOptions = _QUALITY,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(regressions, phases). Regressions: one row per compared cell of either file
    (runs.Unit: a repeated cell is one row, its repetitions its runs; matched by
    runs.match_units, `drop`: the spec fields a matched pair may differ in, the commit; with
    compare --branches the branch too): the judgement of its runs (verdict.judge, decided
    with Holm-adjusted p-values under correction "holm"), the changed phases and the phase
    carrying the change, or a status verdict (_status_verdict), and the accuracy (see
    `_accuracy_columns`). Phases: pairs.phase_rows of every judged pair. Gate: any verdict
    "regression" or "broke", or an accuracy change "passed -> failed" (`gate_failed`)."""
    base_side = pairs.Side(base, quality.trust_table(base, quality_options))
    new_side = pairs.Side(new, quality.trust_table(new, quality_options))
    base_units, new_units = runs.units_of(base), runs.units_of(new)
    rows, tested = [], []
    for base_id, new_id, matched_by in runs.match_units(base_units, new_units, drop):
        b, n = base_units.get(base_id), new_units.get(new_id)
        b_ok = runs.ok_runs(b) if b else []
        n_ok = runs.ok_runs(n) if n else []
        status, why = _status_verdict(b, n, b_ok, n_ok)
        if b_ok and n_ok and status != "broke":
            row = pairs.judged_row(base_side, b, new_side, n, options.alpha)
            if row["verdict"] == "" and np.isfinite(row["p_value"]):
                tested.append(len(rows))
        else:
            any_unit = n or b
            row = {"label": any_unit.label, "verdict": status, "reason": why}
            row["base_cell_id"], row["new_cell_id"] = base_id or "", new_id or ""
        row.update(
            matched_by=matched_by,
            base_status=b.status_text() if b else "",
            new_status=n.status_text() if n else "",
            **_accuracy_columns(_reference(b), _reference(n)),
        )
        rows.append(row)
    p = np.array([rows[i]["p_value"] for i in tested])
    adjusted = verdict.holm(p) if options.correction == "holm" and p.size else p
    for i, p_adj in zip(tested, adjusted):
        rows[i]["p_adjusted"] = float(p_adj)
    for row in rows:
        if "p_value" in row:
            pairs.finish(row, options.threshold, options.alpha, row.get("p_adjusted"))
    table = pd.DataFrame(rows).reindex(columns=REGRESSION_COLUMNS)
    phases = pd.DataFrame(pairs.phase_rows(rows)).reindex(columns=PHASE_COLUMNS)
    return table, phases


def _reference(unit):
    """The cells row whose accuracy a unit shows: its first ok run, else its first run."""
    if unit is None:
        return None
    ok = runs.ok_runs(unit)
    return unit.rows[ok[0] if ok else unit.cells[0]]


#: Columns of compare_tables' regressions. n_base / n_new: runs on each side; paired: run k
#: of one side judged against run k of the other (runs.rounds_paired); median_*_s: the step
#: time (median over the runs of each run's median), p20_*_s: the judged figures beside it;
#: resolution and runs_needed: resolution.py.
REGRESSION_COLUMNS = [
    "label",
    "verdict",
    "carried_by",
    "phases",
    "reason",
    "remedy",
    "accuracy",
    "ratio",
    "change",
    "ci_low",
    "ci_high",
    "p_value",
    "p_adjusted",
    "alpha",
    "sequential",
    "n_base",
    "n_new",
    "paired",
    "median_base_s",
    "median_new_s",
    pairs.JUDGED_BASE,
    pairs.JUDGED_NEW,
    "resolution",
    "runs_needed",
    "base_status",
    "new_status",
    "accuracy_change",
    "matched_by",
    "base_cell_id",
    "new_cell_id",
]
#: Columns of compare_tables' phases (pairs.phase_rows).
PHASE_COLUMNS = [
    "label",
    "phase",
    "changed",
    "carries",
    "base_ms",
    "new_ms",
    pairs.PHASE_JUDGED_BASE,
    pairs.PHASE_JUDGED_NEW,
    "delta_ms",
    "ci_low_ms",
    "ci_high_ms",
    "p_value",
    "base_cell_id",
    "new_cell_id",
]


def accuracy_lost(table: pd.DataFrame) -> pd.Series:
    """Per row of a regression table: the accuracy verdict went from passed to failed."""
    if "accuracy_change" not in table:
        return pd.Series(False, index=table.index)
    return table["accuracy_change"] == ACCURACY_LOST


def accuracy_notes(table: pd.DataFrame) -> list[str]:
    """One flagged line per cell whose accuracy verdict changed: ``accuracy: passed ->
    failed: <label>: <the new cell's accuracy>``."""
    if "accuracy_change" not in table:
        return []
    return [
        f"accuracy: {r.accuracy_change}: {r.label}: {r.accuracy.split(' -> ', 1)[-1]}"
        for r in table.itertuples()
        if isinstance(r.accuracy_change, str) and r.accuracy_change
    ]


def gate_failed(table: pd.DataFrame) -> bool:
    """True when any cell regressed significantly beyond the threshold, broke, or lost its
    accuracy (passed -> failed)."""
    return bool(table.verdict.isin(["regression", "broke"]).any() or accuracy_lost(table).any())


def gate_summary(table: pd.DataFrame, options: GateOptions) -> str:
    """One line: OK or REGRESSION and the count of each verdict."""
    counts = table.verdict.value_counts()
    failed = gate_failed(table)
    parts = [f"{counts.get(v, 0)} {v}" for v in ("regression", "broke")]
    parts.append(f"{int(accuracy_lost(table).sum())} accuracy {ACCURACY_LOST}")
    parts += [
        f"{counts.get(v, 0)} {v}"
        for v in (
            verdict.IMPROVEMENT,
            verdict.WITHIN_THRESHOLD,
            verdict.NOT_SIGNIFICANT,
            verdict.INCONCLUSIVE,
        )
    ]
    return (
        ("REGRESSION" if failed else "OK") + f": {', '.join(parts)} "
        f"(threshold {options.threshold:.1%}, alpha {options.alpha:g}, "
        f"correction {options.correction})"
    )
