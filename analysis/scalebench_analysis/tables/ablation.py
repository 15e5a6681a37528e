"""Ablation of optimization axes: what each switch bought, what the combinations bought,
and which configuration to ship (docs/optimizations.md#the-ablation-table).

A *context* is one (branch, experiment, mode, batch size, world size). Inside it, an
*axis* is a setting that takes more than one value among the ok cells (precision,
channels_last, tf32, bucket_bytes, cpu_threads, optimizer.lr, ...). Its *baseline value*
is the setting's default: absent from the spec (a switch added later is stored only when
not its default), ``False`` for a switch, ``fp32`` for the precision, else the smallest
value. The *baseline cell* has every axis at its baseline value. Times are the cell
summary's median (step time for training, batch latency for inference); a repeated cell is
one row, its repetitions its runs and its time the median over them. Each change is judged
against the baseline cell over their runs as compare judges two cells (tables/verdict.py,
Note [Runs are the unit of evidence]): `verdict` (`improvement`: significantly faster
beyond the threshold; `inconclusive` with one run on a side or an untrusted side), with
`time_ratio`, its interval and p.

Every row carries the cell's accuracy verdict (accuracy.py: passed, FAIL (<first failed
check>), not checked). The recommendation is the fastest cell that is trusted and whose
accuracy did not fail (a failed or unreadable verdict rules a cell out); a faster cell
ruled out by its accuracy is named in the recommendation as not recommended.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..read.keys import NAMED_FIELDS, flatten_spec
from . import accuracy, verdict

CONTEXT = ("branch", "experiment", "mode", "batch_size", "world_size")
#: Spec fields that never are optimization axes (identity, bookkeeping).
_NOT_AXES = set(NAMED_FIELDS) - {"precision"} | {"label_settings", "seed", "checkpoint"}
_DEFAULT = "(default)"  # the value of a setting absent from the spec: its default


def _axis_values(spec: dict) -> dict:
    flat = flatten_spec(spec)
    return {
        k: v
        for k, v in flat.items()
        if k not in _NOT_AXES and k.split(".")[0] not in ("model", "data", "input_shape")
    }


def _baseline_value(key: str, values: list):
    if _DEFAULT in values:
        return _DEFAULT
    if key == "precision":
        return "fp32" if "fp32" in values else None
    if all(isinstance(v, bool) for v in values):
        return False if False in values else None
    try:
        return min(values)
    except TypeError:
        return None


def _is_baseline(value, baseline) -> bool:
    return value == baseline or (baseline is False and value == _DEFAULT)


def _describe(key: str, value) -> str:
    """ "bf16", "channels_last", "bucket_bytes=1048576": how a report names a change."""
    if key == "precision":
        return str(value)
    if value is True:
        return key
    return f"{key}={value}"


def _accuracy(row) -> str:
    """The accuracy column: passed, FAIL (<first failed check>), not checked, unreadable."""
    return accuracy.text(row) if hasattr(row, "get") else accuracy.NOT_CHECKED


def _accuracy_words(row) -> str:
    """How a recommendation words a cell's accuracy."""
    verdict = accuracy.verdict(row)
    if verdict == "failed":
        checks = accuracy.failed_checks(row)
        return "ACCURACY FAILED" + (f": {checks[0]}" if checks else "")
    return {"passed": "accuracy kept"}.get(verdict, f"accuracy {verdict}")


class _Context:
    """The ok cells of one context, their axes and baselines."""

    def __init__(self, cells: pd.DataFrame):
        self.cells = cells
        values = [_axis_values(spec) for spec in cells["spec"]]
        keys = sorted({k for v in values for k in v})
        self.values = [{k: v.get(k, _DEFAULT) for k in keys} for v in values]
        varying = [
            k
            for k in keys
            if len({json.dumps(v[k], sort_keys=True, default=str) for v in self.values}) > 1
        ]
        self.axes = sorted(varying, key=lambda k: (k != "precision", k))  # precision first
        self.baseline = {k: _baseline_value(k, [v[k] for v in self.values]) for k in self.axes}

    def _matches(self, values: dict, key: str, changes: dict) -> bool:
        if key in changes:
            return values[key] == changes[key]
        return _is_baseline(values[key], self.baseline[key])

    def find(self, changes: dict):
        """The row with the axes of `changes` at those values and every other at baseline."""
        for index, values in enumerate(self.values):
            if all(
                values[k] == changes[k]
                if k in changes
                else _is_baseline(values[k], self.baseline[k])
                for k in self.axes
            ):
                return self.cells.iloc[index]
        return None


@dataclass(frozen=True)
class Criteria:
    """What a change must show to be judged faster or slower (compare.GateOptions')."""

    threshold: float = 0.05
    alpha: float = 0.05


def _judgement(base, cell, criteria: Criteria) -> dict:
    """verdict, time_ratio, ci_low, ci_high, p_value of `cell` against `base` over their
    runs; the baseline row gets none."""
    if cell["cell_id"] == base["cell_id"]:
        return {"verdict": "", "time_ratio": 1.0, "ci_low": math.nan, "ci_high": math.nan}
    untrusted = verdict.untrusted_text({"base": base["untrusted"], "new": cell["untrusted"]})
    row = verdict.judge(base["runs"], cell["runs"], criteria.alpha, untrusted)
    return {
        "verdict": verdict.decide(row, criteria.threshold, criteria.alpha),
        "time_ratio": row["ratio"],
        "ci_low": row["ci_low"],
        "ci_high": row["ci_high"],
        "p_value": row["p_value"],
        "reason": row["reason"],
    }


def _compare_row(context_row, base, cell, change: str, criteria: Criteria) -> dict:
    speedup = base["median_s"] / cell["median_s"] if cell["median_s"] > 0 else math.nan
    memory = cell.get("peak_memory_bytes", math.nan)
    base_memory = base.get("peak_memory_bytes", math.nan)
    return {
        **{k: context_row[k] for k in CONTEXT},
        "change": change,
        "median": f"{cell['median_s'] * 1e3:.3f} ms ({speedup:.2f}x)",
        "median_ms": cell["median_s"] * 1e3,
        "speedup": speedup,
        **_judgement(base, cell, criteria),
        "throughput_samples_per_s": cell.get("throughput_samples_per_s", math.nan),
        "peak_memory_mib": memory / 2**20,
        "memory_change_mib": (memory - base_memory) / 2**20,
        "trusted": bool(base.get("trusted", True)) and bool(cell.get("trusted", True)),
        "accuracy": _accuracy(cell),
        "cell_id": cell["cell_id"],
    }


def _pooled(ok: pd.DataFrame) -> pd.DataFrame:
    """One row per compared cell: a repeated cell's repetitions pooled into its repetition-0
    row (its first, when that one is not ok) with `runs` (each run's median_s), `untrusted`
    (each run's untrusted_because), `median_s` the median over the runs and `trusted` only
    when every run is. Rows in the order of each cell's first row; a cell run once is its own
    row with one run, set for all such cells at once (a row copy each took 2 ms: 20 s of
    a 10^4-cell report, issue 53)."""
    if ok.empty:
        return ok.assign(runs=[], untrusted=[])
    key = ok["series_id"].fillna(ok["cell_id"]) if "series_id" in ok else ok["cell_id"]
    alone = ~key.duplicated(keep=False)
    single = ok[alone].copy()
    single["runs"] = [[float(m)] for m in single["median_s"]]
    single["median_s"] = [float(m) for m in single["median_s"]]
    reasons = single.get("untrusted_because", pd.Series("", index=single.index))
    single["untrusted"] = [[r if isinstance(r, str) else ""] for r in reasons]
    if "trusted" in single:
        single["trusted"] = [bool(t) for t in single["trusted"].fillna(True)]
    rows = []
    for _, group in ok[~alone].groupby(key[~alone], sort=False):
        first = group.iloc[0].copy()
        first["runs"] = [float(m) for m in group["median_s"]]
        first["median_s"] = float(np.median(first["runs"]))
        reasons = group.get("untrusted_because", pd.Series("", index=group.index))
        first["untrusted"] = [r if isinstance(r, str) else "" for r in reasons]
        if "trusted" in group:
            first["trusted"] = bool(group["trusted"].fillna(True).astype(bool).all())
        rows.append(first)
    pooled = pd.concat([single, pd.DataFrame(rows)]) if rows else single
    return pooled.sort_index(kind="stable").reset_index(drop=True)


def _contexts(cells: pd.DataFrame, trust: pd.DataFrame | None):
    ok = cells[(cells.status == "ok") & cells["median_s"].notna()].copy()
    if trust is not None and "trusted" in trust:
        columns = [c for c in ("trusted", "untrusted_because") if c in trust]
        ok = ok.drop(columns=columns, errors="ignore").merge(
            trust[["cell_id", *columns]], on="cell_id", how="left"
        )
    ok = _pooled(ok)
    for _, group in ok.groupby(list(CONTEXT), sort=True, dropna=False):
        context = _Context(group.reset_index(drop=True))
        if context.axes:
            yield context


def ablation_tables(
    cells: pd.DataFrame, trust: pd.DataFrame | None = None, criteria: Criteria = Criteria()
) -> dict:
    """{"ablation": per-axis rows, "cumulative": stacked changes, "recommendations": one
    line per context}. Empty frames when no context has an axis."""
    per_axis, cumulative, recommendations = [], [], []
    for context in _contexts(cells, trust):
        base = context.find({})
        if base is None:
            continue
        singles = []
        for key in context.axes:
            for value in sorted({json.dumps(v[key], default=str) for v in context.values}, key=str):
                value = json.loads(value)
                if _is_baseline(value, context.baseline[key]):
                    continue
                cell = context.find({key: value})
                if cell is None:
                    continue
                row = _compare_row(base, base, cell, "+" + _describe(key, value), criteria)
                row["axis"] = key
                per_axis.append(row)
                singles.append((row["speedup"], key, value))
        # The cumulative table: the axes in the order of what each bought alone (best value
        # of each), added one at a time, as far as the matrix holds the combinations.
        best = {}
        for _speedup, key, value in sorted(singles, key=lambda s: -s[0]):
            best.setdefault(key, value)
        changes: dict = {}
        base_row = _compare_row(base, base, base, "baseline", criteria)
        base_row["step"] = 0
        steps = [base_row]
        for key, value in best.items():
            changes[key] = value
            cell = context.find(dict(changes))
            if cell is None:
                continue
            row = _compare_row(base, base, cell, "+" + _describe(key, value), criteria)
            row["step"] = len(steps)
            steps.append(row)
        if len(steps) > 2:
            cumulative.extend(steps)
        recommendations.append(_recommend(context, base))
    return {
        "ablation": pd.DataFrame(per_axis),
        "cumulative": pd.DataFrame(cumulative),
        "recommendations": pd.DataFrame(recommendations),
    }


def _changes(context: _Context, cell) -> list[str]:
    """The axes of `cell` that are not at their baseline value, described."""
    values = context.values[context.cells.index.get_loc(cell.name)]
    return [
        _describe(k, values[k])
        for k in context.axes
        if not _is_baseline(values[k], context.baseline[k])
    ]


def _not_recommended(context: _Context, base, rejected: pd.DataFrame, faster_than) -> str:
    """ "; not recommended: <changes> (<speedup>x faster, ACCURACY FAILED: <check>)" for the
    fastest cell ruled out by its accuracy that beats `faster_than` seconds, else ""."""
    rejected = rejected[rejected["median_s"] < faster_than]
    if rejected.empty:
        return ""
    cell = rejected.loc[rejected["median_s"].idxmin()]
    speedup = base["median_s"] / cell["median_s"]
    return (
        f"; not recommended: {' + '.join(_changes(context, cell)) or 'baseline'} "
        f"({speedup:.2f}x faster, {_accuracy_words(cell)})"
    )


def _recommend(context: _Context, base) -> dict:
    cells = context.cells
    mask = cells["trusted"].fillna(True).astype(bool) if "trusted" in cells else None
    trusted = cells if mask is None else cells[mask]
    row = {k: base[k] for k in CONTEXT}
    if trusted.empty:
        row["recommendation"] = "no trusted cell: rerun with more iterations"
        return row
    ruled_out = [accuracy.verdict(cell) in accuracy.REJECTED for _, cell in trusted.iterrows()]
    rejected = trusted[ruled_out]
    eligible = trusted[[not r for r in ruled_out]]
    if eligible.empty:
        row["recommendation"] = "no trusted cell kept its accuracy" + _not_recommended(
            context, base, rejected, math.inf
        )
        return row
    fastest = eligible.loc[eligible["median_s"].idxmin()]
    note = _not_recommended(context, base, rejected, fastest["median_s"])
    changes = _changes(context, fastest)
    if not changes:
        row["recommendation"] = "keep the baseline: no change made it faster" + (
            " with accuracy kept" + note if note else ""
        )
        row["speedup"] = 1.0
        return row
    speedup = base["median_s"] / fastest["median_s"]
    memory = base.get("peak_memory_bytes", math.nan) - fastest.get("peak_memory_bytes", math.nan)
    if math.isnan(memory):
        memory_text = "memory not measured"
    elif memory >= 0:
        memory_text = f"{memory / 2**30:.1f} GiB less memory"
    else:
        memory_text = f"{-memory / 2**30:.1f} GiB more memory"
    row["recommendation"] = (
        f"{' + '.join(changes)}: {speedup:.2f}x faster, {memory_text}, "
        f"{_accuracy_words(fastest)}{note}"
    )
    row["speedup"] = speedup
    row["cell_id"] = fastest["cell_id"]
    return row
