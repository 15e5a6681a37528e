"""Speedups against a baseline and the statistical regression gate between two runs.

Definitions (docs/analysis-guide.md#comparisons):

* speedup = throughput(cell) / throughput(baseline cell); time_ratio = median iteration
  time(cell) / median(baseline). Baseline cell within a file (`--baseline FIELD=VALUE`,
  `--baseline-branch B` = `--baseline branch=B`): the cell whose spec equals the cell's
  except FIELD = VALUE (and, for the branch, any commit). Across files
  (`--baseline-file`): the cell with the same cell_id, else the one cell with the same spec
  apart from the commit (so a new commit of a branch still meets its baseline).
* regression gate, per matched pair of ok cells, on the iteration samples (quality.py):
  ratio = median(new) / median(base) (> 1 is slower); p from a two-sided Mann-Whitney U
  test; a (1 - alpha) percentile bootstrap confidence interval of the ratio (resampling
  both sides, `bootstrap` draws, seeded per cell from `seed` and the cell id). Significant:
  p < alpha and the interval excludes 1. Regression: significant and ratio - 1 >
  threshold; improvement: significant and 1 - ratio > threshold. A cell ok in base and
  failed / oom / timeout in new is a regression too ("broke").
* accuracy (accuracy.py): every table shows the cell's accuracy verdict (`accuracy`:
  passed / FAIL (<first failed check>) / not checked). Between two files, a matched pair
  whose verdict changed gets `accuracy_change` (`passed -> failed`, `failed -> passed`,
  ...) and a flagged line under the table; `passed -> failed` fails the gate like a cell
  that broke, whatever its timing verdict.
* repeated cells (`repetitions`, repetitions.py): a series present in both files with an
  interval on each side is judged as one row (`matched_by` "series"): a regression only when
  the new median over the repetitions is slower than the base's by more than the threshold
  AND the two 95 % intervals do not overlap (improvement the other way, else "within
  noise"); its repetitions' rows keep their figures with the verdict "judged by its series"
  (a repetition that broke still fails the gate). A single run against a series of the same
  cell is tested as above against the series' representative repetition, the row showing
  the series' interval (`series_base_*` / `series_new_*`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats

from ..errors import UsageError
from ..read.keys import config_key
from ..read.loader import Results
from . import accuracy, repetitions
from .quality import iteration_samples

BROKEN_STATUSES = ("failed", "oom", "timeout")
_DROP_FOR_FILE_MATCH = ("commit",)


@dataclass(frozen=True)
class GateOptions:
    threshold: float = 0.05
    alpha: float = 0.05
    bootstrap: int = 2000
    seed: int = 0
    correction: str = "none"  # "none" or "holm"


def _get(spec: dict, dotted: str):
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


def speedup_in_file(results: Results, field: str, value: str, trust: pd.DataFrame) -> pd.DataFrame:
    """Every ok cell whose spec `field` differs from `value`, against its baseline cell."""
    cells = results.cells[results.cells.status == "ok"]
    examples = [_get(s, field) for s in cells.spec if _get(s, field) is not None]
    if not examples:
        fields = ", ".join(sorted(cells.spec.iloc[0])) if len(cells) else "-"
        raise UsageError(
            f"--baseline {field}={value}: no ok cell spec has a field {field!r} (fields: {fields})"
        )
    target = parse_value(value, examples[0])
    drop = ("commit",) if field == "branch" else ()
    key = {
        config_key(s, drop=drop): c
        for c, s in zip(cells.cell_id, cells.spec)
        if _get(s, field) == target
    }
    if not key:
        found = sorted({str(e) for e in examples})
        raise UsageError(
            f"--baseline {field}={value}: no ok cell has {field}={value} "
            f"(found: {', '.join(found)})"
        )
    by_id = cells.set_index("cell_id")
    trusted = dict(zip(trust.cell_id, trust.trusted))
    rows = []
    for _, cell in cells.iterrows():
        if _get(cell.spec, field) == target:
            continue
        base_id = key.get(config_key(_with(cell.spec, field, target), drop=drop))
        if base_id is None:
            continue
        base = by_id.loc[base_id]
        rows.append(_speedup_row(cell, base, field, trusted))
    return pd.DataFrame(rows, columns=_SPEEDUP_COLUMNS)


_SPEEDUP_COLUMNS = [
    "label",
    "baseline",
    "cell_id",
    "baseline_cell_id",
    "throughput",
    "baseline_throughput",
    "speedup",
    "time_ratio",
    "trusted",
    "accuracy",
]


def _speedup_row(cell, base, field: str, trusted: dict) -> dict:
    base_label = f"{field}={_get(base.spec, field)}" if field else base.label
    return {
        "label": cell.label,
        "baseline": base_label,
        "cell_id": cell.cell_id,
        "baseline_cell_id": base.name if field else base.cell_id,
        "throughput": cell.throughput_samples_per_s,
        "baseline_throughput": base.throughput_samples_per_s,
        "speedup": cell.throughput_samples_per_s / base.throughput_samples_per_s,
        "time_ratio": cell.median_s / base.median_s,
        "trusted": bool(
            trusted.get(cell.cell_id, False)
            and trusted.get(base.name if field else base.cell_id, False)
        ),
        "accuracy": accuracy.text(cell),
    }


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


def match_cells(
    base: Results, new: Results, drop: tuple = _DROP_FOR_FILE_MATCH
) -> list[tuple[str | None, str | None, str]]:
    """(base_id, new_id, matched_by) for every cell of either file. matched_by: "cell_id",
    "spec" (same spec but the fields in `drop`, the commit by default; only when unique on
    both sides) or "" (unmatched)."""
    base_ids, new_ids = list(base.cells.cell_id), list(new.cells.cell_id)
    pairs = [(c, c, "cell_id") for c in base_ids if c in set(new_ids)]
    matched = {c for c, _, _ in pairs}
    rest_base = [c for c in base_ids if c not in matched]
    rest_new = [c for c in new_ids if c not in matched]

    def keys(results, ids):
        spec = results.cells.set_index("cell_id").spec
        out = {}
        for c in ids:
            out.setdefault(config_key(spec[c], drop=drop), []).append(c)
        return out

    base_keys, new_keys = keys(base, rest_base), keys(new, rest_new)
    for k, ids in base_keys.items():
        if len(ids) == 1 and len(new_keys.get(k, [])) == 1:
            pairs.append((ids[0], new_keys[k][0], "spec"))
    paired_base = {b for b, _, _ in pairs}
    paired_new = {n for _, n, _ in pairs}
    pairs += [(c, None, "") for c in rest_base if c not in paired_base]
    pairs += [(None, c, "") for c in rest_new if c not in paired_new]
    return pairs


def speedup_between_files(
    base: Results, new: Results, trust_base: pd.DataFrame, trust_new: pd.DataFrame
) -> pd.DataFrame:
    """Every matched pair of ok cells: new against base."""
    trusted = dict(zip(trust_base.cell_id, trust_base.trusted))
    trusted.update(zip(trust_new.cell_id, trust_new.trusted))
    b, n = base.cells.set_index("cell_id"), new.cells.set_index("cell_id")
    rows = []
    for base_id, new_id, _ in match_cells(base, new):
        if base_id is None or new_id is None:
            continue
        if b.loc[base_id].status != "ok" or n.loc[new_id].status != "ok":
            continue
        cell = n.loc[new_id].copy()
        cell["cell_id"] = new_id
        ref = b.loc[base_id].copy()
        ref["cell_id"] = base_id
        row = _speedup_row(cell, ref, "", {})
        row["baseline"] = f"{base.path}"
        row["trusted"] = bool(trusted.get(new_id, False) and trusted.get(base_id, False))
        rows.append(row)
    return pd.DataFrame(rows, columns=_SPEEDUP_COLUMNS)


def median_ratio_ci(
    base_s: np.ndarray, new_s: np.ndarray, alpha: float, draws: int, rng: np.random.Generator
) -> tuple[float, float]:
    """Percentile bootstrap (1 - alpha) interval of median(new) / median(base)."""
    b = np.median(base_s[rng.integers(0, base_s.size, (draws, base_s.size))], axis=1)
    n = np.median(new_s[rng.integers(0, new_s.size, (draws, new_s.size))], axis=1)
    low, high = np.quantile(n / b, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def _test_pair(base_s, new_s, cell_key: str, options: GateOptions) -> dict:
    ratio = float(np.median(new_s) / np.median(base_s))
    if np.array_equal(np.sort(base_s), np.sort(new_s)):
        p = 1.0
    else:
        p = float(stats.mannwhitneyu(new_s, base_s, alternative="two-sided").pvalue)
    rng = np.random.default_rng([options.seed, zlib.crc32(cell_key.encode())])
    low, high = median_ratio_ci(base_s, new_s, options.alpha, options.bootstrap, rng)
    return {
        "n_base": base_s.size,
        "n_new": new_s.size,
        "median_base_s": float(np.median(base_s)),
        "median_new_s": float(np.median(new_s)),
        "ratio": ratio,
        "change": ratio - 1.0,
        "ci_low": low,
        "ci_high": high,
        "p_value": p,
    }


def _holm(p: np.ndarray) -> np.ndarray:
    order = np.argsort(p)
    adjusted = np.empty_like(p)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (p.size - rank) * p[index]))
        adjusted[index] = running
    return adjusted


def _verdict(row: dict, options: GateOptions) -> str:
    significant = row["p_adjusted"] < options.alpha and (
        row["ci_low"] > 1.0 or row["ci_high"] < 1.0
    )
    if not significant:
        return "not significant"
    if row["change"] > options.threshold:
        return "regression"
    if -row["change"] > options.threshold:
        return "improvement"
    return "within threshold"


def _status_verdict(base_status, new_status) -> str:
    if base_status is None:
        return "new cell"
    if new_status is None:
        return "missing in new"
    if base_status == "ok" and new_status in BROKEN_STATUSES:
        return "broke"
    if base_status != "ok" and new_status == "ok":
        return "fixed"
    return f"not compared ({base_status} -> {new_status})"


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
    base: Results, new: Results, options: GateOptions, drop: tuple = _DROP_FOR_FILE_MATCH
) -> pd.DataFrame:
    """One row per cell of either file: the test results, a verdict and the accuracy (see
    `_accuracy_columns`); with repeated cells (repetitions.py), one more row per series pair
    judged by the series, the repetitions' timing verdicts "judged by its series", and a
    single run against a series in one row with the series' interval. Gate: any verdict
    "regression" or "broke", or an accuracy change "passed -> failed" (see
    `gate_failed`). `drop`: the spec fields a matched pair may differ in besides the cell id
    (the commit; with compare --branches, the branch too)."""
    b, n = base.cells.set_index("cell_id"), new.cells.set_index("cell_id")
    pairs = match_cells(base, new, drop)
    plan = repetitions.plan(base, new, pairs)  # Note [Repetitions]
    rows, tested = [], []
    for base_id, new_id, matched_by in plan.cell_pairs(pairs):
        row = _cell_row(base, new, b, n, base_id, new_id, matched_by, options)
        row["label"] = plan.label(base_id, new_id) or row["label"]
        row.update(plan.interval_columns(base_id, new_id, matched_by))
        if plan.in_series(base_id, new_id):  # its figures shown, not judged alone
            broke = _status_verdict(row["base_status"] or None, row["new_status"] or None)
            if broke == "broke":  # even with timings (an oom judged after its loop)
                row["verdict"] = broke
            elif "p_value" in row or row["verdict"] in _ABSENT:
                row["verdict"] = repetitions.IN_SERIES
        elif "p_value" in row:
            tested.append(len(rows))
        rows.append(row)
    p = np.array([rows[i]["p_value"] for i in tested])
    adjusted = _holm(p) if options.correction == "holm" and p.size else p
    for i, p_adj in zip(tested, adjusted):
        rows[i]["p_adjusted"] = float(p_adj)
        rows[i]["verdict"] = _verdict(rows[i], options)
    rows.extend(plan.series_rows(options.threshold))
    return pd.DataFrame(rows).reindex(columns=REGRESSION_COLUMNS)


#: Verdicts of a cell without a partner: a repetition the other file's series has fewer of.
_ABSENT = ("new cell", "missing in new")
#: Columns of regression_table.
REGRESSION_COLUMNS = [
    "label",
    "verdict",
    "accuracy",
    "ratio",
    "change",
    "ci_low",
    "ci_high",
    "p_value",
    "p_adjusted",
    "n_base",
    "n_new",
    "median_base_s",
    "median_new_s",
    *repetitions.INTERVAL_COLUMNS,
    "base_status",
    "new_status",
    "accuracy_change",
    "matched_by",
    "base_cell_id",
    "new_cell_id",
]


def _cell_row(base, new, b, n, base_id, new_id, matched_by: str, options: GateOptions) -> dict:
    """The row of one matched (or unmatched) pair of cells: the test of their iteration
    samples (_test_pair: `p_value` and the figures, verdict still to judge) when both have
    two or more, else the status verdict (_status_verdict)."""
    base_cell = b.loc[base_id] if base_id else None
    new_cell = n.loc[new_id] if new_id else None
    any_cell = new_cell if new_cell is not None else base_cell
    row = {
        "label": any_cell.label,
        "base_cell_id": base_id or "",
        "new_cell_id": new_id or "",
        "matched_by": matched_by,
        "base_status": base_cell.status if base_cell is not None else "",
        "new_status": new_cell.status if new_cell is not None else "",
        **_accuracy_columns(base_cell, new_cell),
    }
    base_s = new_s = np.empty(0)
    if base_cell is not None and new_cell is not None:
        base_s = iteration_samples(base, base_id, base_cell["mode"])
        new_s = iteration_samples(new, new_id, new_cell["mode"])
    if base_s.size >= 2 and new_s.size >= 2:
        row.update(_test_pair(base_s, new_s, base_id, options))
        row["verdict"] = ""
    else:
        row["verdict"] = _status_verdict(
            base_cell.status if base_cell is not None else None,
            new_cell.status if new_cell is not None else None,
        )
    return row


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
        f"{counts.get(v, 0)} {v}" for v in ("improvement", "within threshold", "not significant")
    ]
    if counts.get(repetitions.WITHIN_NOISE, 0):  # series pairs (Note [Repetitions])
        parts.append(f"{counts[repetitions.WITHIN_NOISE]} series {repetitions.WITHIN_NOISE}")
    return (
        ("REGRESSION" if failed else "OK") + f": {', '.join(parts)} "
        f"(threshold {options.threshold:.1%}, alpha {options.alpha:g}, "
        f"correction {options.correction})"
    )
