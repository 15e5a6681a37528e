"""Rows of judged pairs (Note [Runs are the unit of evidence] in verdict.py): the one row
builder of compare's gate and the speedup tables: a pair of compared cells (runs.Unit) with
ok runs each, judged by verdict.judge over their runs' judged figures (Note [The judged
statistic] in run_statistic.py: a low percentile of each run's steps), every phase's change
by the same figures, the phase carrying the verdict, what the comparison could resolve
(resolution.py), and the lines that say why and what to do (remedies.py).

The tables keep calling the median the step time: `median_base_s` / `median_new_s` are the
medians over the runs of each run's summary `median_s`, and the judged figures stand beside
them (`p20_base_s`, `p20_new_s`; per phase `base_p20_ms`, `new_p20_ms`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..read.loader import Results
from . import accuracy, remedies, resolution, runs, verdict
from .quality import iteration_samples
from .run_statistic import JUDGED_NAME, interval_rel, judged_value
from .sequential import look_alpha

#: Columns of the judged figures beside the medians (pair rows and phase rows).
JUDGED_BASE, JUDGED_NEW = f"{JUDGED_NAME}_base_s", f"{JUDGED_NAME}_new_s"
PHASE_JUDGED_BASE, PHASE_JUDGED_NEW = f"base_{JUDGED_NAME}_ms", f"new_{JUDGED_NAME}_ms"


@dataclass
class Side:
    """One side of a comparison: the file, its trust table and each cell's untrusted
    reason ("" when trusted); `figures` caches each (cell, phase)'s (judged figure, its
    interval_rel, median) from the cell's iteration samples."""

    results: Results
    trust: pd.DataFrame
    reasons: dict = field(init=False)
    figures: dict = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.reasons = runs.trust_reasons(self.trust)

    def figure(self, cell_id: str, mode: str, phase: str | None = None) -> tuple:
        """(judged figure, its interval_rel, median) of a run's samples of `phase` (the
        summarised one when None); NaNs without samples."""
        key = (cell_id, phase)
        if key not in self.figures:
            samples = iteration_samples(self.results, cell_id, mode, phase)
            median = float(np.median(samples)) if samples.size else math.nan
            self.figures[key] = (judged_value(samples), interval_rel(samples), median)
        return self.figures[key]


def _throughput(unit, cell_ids: list) -> float:
    values = [v for v in runs.run_figures(unit, cell_ids, "throughput_samples_per_s")]
    values = [v for v in values if np.isfinite(v)]
    return float(np.median(values)) if values else np.nan


def _judged_figures(side: Side, unit, cell_ids: list) -> tuple[list, list]:
    """(judged figure, interval_rel) per run; the summary medians (interval unknown) when
    a run has no samples, so that every run of a side is judged by one statistic."""
    figures = [side.figure(c, unit.mode) for c in cell_ids]
    if all(math.isfinite(f[0]) for f in figures):
        return [f[0] for f in figures], [f[1] for f in figures]
    return runs.run_figures(unit, cell_ids), [math.nan] * len(cell_ids)


def _noise(reasons: dict, rels: dict) -> verdict.Noise | None:
    """The runs untrusted for their noise alone (verdict.is_noise) as a verdict.Noise: the
    text of untrusted_text and the largest interval_rel among them (NaN when one is
    unknown); None without such runs."""
    noisy = {s: [r if verdict.is_noise(r) else "" for r in found] for s, found in reasons.items()}
    spreads = [rels[s][i] for s, found in noisy.items() for i, r in enumerate(found) if r]
    if not spreads:
        return None
    spread = max(spreads) if all(math.isfinite(x) for x in spreads) else math.nan
    return verdict.Noise(verdict.untrusted_text(noisy)[0], "", spread)


def judged_alpha(base_unit, new_unit, alpha: float) -> float:
    """The alpha a pair is judged at: `alpha`, or for a pair with a `repetitions: auto`
    side the alpha of its looks (Note [The sequential test] in sequential.py). Such a
    series stopped at the first look that decided it; judging its runs afterwards at
    `alpha` would give an A/A pair every look's chance again (23 % at the default cap),
    so compare holds it to the rule that stopped it."""
    caps = [
        int(u.spec.get("repetitions", 1) or 1)
        for u in (base_unit, new_unit)
        if u.spec.get("repetitions_auto", False)
    ]
    return look_alpha(max(caps), alpha) if caps else alpha


def judged_row(base: Side, base_unit, new: Side, new_unit, alpha: float) -> dict:
    """The row of two units with ok runs each (Note [Runs are the unit of evidence]):
    verdict.judge of their runs' judged figures (verdict still "" when a test is to decide;
    paired when runs.rounds_paired says the runs are pairs; runs untrusted for their noise
    alone weighed against the change), the medians beside them, the phases' changes
    (`phase_changes`: (phase, verdict.phase_change) list), the spreads `finish` chooses a
    remedy by, the throughputs and speedup, trusted, accuracy, `paired` and the ids."""
    judged_at = judged_alpha(base_unit, new_unit, alpha)
    sequential, alpha = judged_at != alpha, judged_at
    b_runs = runs.ok_runs(base_unit)
    n_runs = runs.ok_runs(new_unit)
    paired = runs.rounds_paired(base.results, base_unit, b_runs, new.results, new_unit, n_runs)
    settings = remedies.Settings.of(base_unit.spec, new_unit.spec)
    reasons = {
        "base": [base.reasons.get(c, "") for c in b_runs],
        "new": [new.reasons.get(c, "") for c in n_runs],
    }
    hard = {s: [r if not verdict.is_noise(r) else "" for r in f] for s, f in reasons.items()}
    untrusted = verdict.untrusted_text(hard, settings)
    b_figures, b_rels = _judged_figures(base, base_unit, b_runs)
    n_figures, n_rels = _judged_figures(new, new_unit, n_runs)
    noise = _noise(reasons, {"base": b_rels, "new": n_rels})
    row = verdict.judge(b_figures, n_figures, alpha, untrusted, paired, noise, settings)
    throughput = _throughput(new_unit, n_runs)
    base_throughput = _throughput(base_unit, b_runs)
    new_cell = new_unit.rows[n_runs[0]]
    rels = np.asarray(b_rels + n_rels, float)
    row.update(
        {JUDGED_BASE: row["base_s"], JUDGED_NEW: row["new_s"]},
        alpha=alpha,
        sequential=sequential,
        median_base_s=float(np.nanmedian(runs.run_figures(base_unit, b_runs))),
        median_new_s=float(np.nanmedian(runs.run_figures(new_unit, n_runs))),
        spread_between=resolution.log_spread(b_figures, n_figures, paired=False),
        spread_for_runs=resolution.log_spread(b_figures, n_figures, paired),
        spread_within=float(np.sqrt(np.nanmean(rels**2)) / 1.96) if rels.size else math.nan,
        noisy=noise is not None,
        settings=settings,
        label=new_unit.label,
        base_cell_id=base_unit.unit_id,
        new_cell_id=new_unit.unit_id,
        throughput=throughput,
        baseline_throughput=base_throughput,
        speedup=throughput / base_throughput,
        trusted=not untrusted[0] and not row.get("noise_undecided", False),
        accuracy=accuracy.text(new_cell),
        paired=paired,
        phase_changes=_phase_changes(base, b_runs, new, n_runs, alpha, new_unit.mode, paired),
    )
    return row


def _phase_changes(
    base: Side, base_cells: list, new: Side, new_cells: list, alpha, mode: str, paired: bool
) -> list:
    """(phase, verdict.phase_change) of every phase both sides timed, judged by the runs'
    judged figures of that phase; `base_s` / `new_s` are the medians over the runs of each
    run's median of the phase (the step time as the tables call it), the judged figures
    beside them (`judged_base_s`, `judged_new_s`)."""
    out = []
    names = runs.phase_names(base.results, base_cells, new.results, new_cells, mode)
    for phase in names:
        b = [base.figure(c, mode, phase) for c in base_cells]
        n = [new.figure(c, mode, phase) for c in new_cells]
        change = verdict.phase_change([f[0] for f in b], [f[0] for f in n], alpha, paired)
        change["judged_base_s"], change["judged_new_s"] = change["base_s"], change["new_s"]
        change["base_s"] = _median([f[2] for f in b])
        change["new_s"] = _median([f[2] for f in n])
        out.append((phase, change))
    return out


def _median(values: list) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.median(finite)) if finite else math.nan


def phases_text(row: dict) -> str:
    """The changed phases of a judged row, largest change first ("" without a test); sets
    row["carried_by"]: the phase carrying a regression or an improvement (the largest
    change in its direction)."""
    changed = [(p, c) for p, c in row.get("phase_changes", []) if c["changed"]]
    changed.sort(key=lambda pc: -abs(pc[1]["delta_s"]))
    sign = {verdict.REGRESSION: 1.0, verdict.IMPROVEMENT: -1.0}.get(row.get("verdict"))
    carriers = [p for p, c in changed if sign is not None and c["delta_s"] * sign > 0]
    row["carried_by"] = carriers[0] if carriers else ""
    return "; ".join(verdict.phase_text(p, c) for p, c in changed)


def phase_rows(rows: list) -> list:
    """One row per (compared pair, phase) of judged rows: label, phase, base_ms, new_ms
    (medians), base_p20_ms, new_p20_ms (the judged figures), delta_ms, ci_low_ms, ci_high_ms,
    p_value, changed, carries (the verdict's phase)."""
    out = []
    for row in rows:
        for phase, change in row.get("phase_changes", []):
            out.append(
                {
                    "label": row["label"],
                    "phase": phase,
                    "base_ms": change["base_s"] * 1e3,
                    "new_ms": change["new_s"] * 1e3,
                    PHASE_JUDGED_BASE: change.get("judged_base_s", math.nan) * 1e3,
                    PHASE_JUDGED_NEW: change.get("judged_new_s", math.nan) * 1e3,
                    "delta_ms": change["delta_s"] * 1e3,
                    "ci_low_ms": change["ci_low_s"] * 1e3,
                    "ci_high_ms": change["ci_high_s"] * 1e3,
                    "p_value": change["p_value"],
                    "changed": change["changed"],
                    "carries": phase == row.get("carried_by"),
                    "base_cell_id": row["base_cell_id"],
                    "new_cell_id": row["new_cell_id"],
                }
            )
    return out


def _judged_beside(r: dict) -> str:
    """ " (p20 of each run's steps; median 12.3 -> 32.1 ms)": what was judged, and the
    medians the tables call the step time."""
    base, new = r.get("median_base_s", math.nan), r.get("median_new_s", math.nan)
    if not (math.isfinite(base) and math.isfinite(new)):
        return ""
    return f" ({JUDGED_NAME} of each run's steps; median {base * 1e3:.4g} -> {new * 1e3:.4g} ms)"


def _sequential_note(r: dict) -> str:
    """ ", at the looks' alpha 0.0078 (repetitions: auto)" for a pair judged_alpha held to
    its sequential test; "" otherwise."""
    alpha = r.get("alpha")
    if alpha is None or r.get("sequential") is not True:
        return ""
    return f", at the looks' alpha {alpha:.2g} (repetitions: auto)"


def resolution_line(r: dict) -> str:
    """ "resolution: <label>: ..." of a pair left undecided with 2+ runs a side (issue 52
    deliver 3): the smallest change its runs could show at alpha with the spread they had,
    and the runs a side a change of the threshold needs; "" for a decided pair or one
    without a test (resolution_lines groups those)."""
    if r.get("verdict") not in (verdict.INCONCLUSIVE, verdict.NOT_SIGNIFICANT):
        return ""
    resolved = r.get("resolution", math.nan)
    if not isinstance(resolved, float) or not math.isfinite(resolved):
        return ""
    line = (
        f"resolution: {r['label']}: with these {int(r['n_base'])} + {int(r['n_new'])} runs "
        f"only changes beyond +-{resolved:.1%} reach significance"
    )
    needed = int(r.get("runs_needed", 0) or 0)
    if needed > resolution.MAX_RUNS:
        line += f"; the threshold needs more than {resolution.MAX_RUNS} runs a side"
    elif needed:
        line += f"; a change of the threshold needs {needed} runs a side (found in 4 trials of 5)"
    return line


def resolution_lines(records: list) -> list[str]:
    """The resolution line of every undecided pair (resolution_line), and one line for the
    inconclusive pairs with one run on a side, whose resolution is unknown."""
    lines = [line for line in map(resolution_line, records) if line]
    unknown = [
        r["label"]
        for r in records
        if r.get("verdict") == verdict.INCONCLUSIVE
        and not (isinstance(r.get("resolution"), float) and math.isfinite(r["resolution"]))
    ]
    if unknown:
        who = unknown[0] if len(unknown) == 1 else f"{len(unknown)} cells ({', '.join(unknown[:3])}"
        who += "" if len(unknown) == 1 else (", ...)" if len(unknown) > 3 else ")")
        lines.append(f"resolution: {who}: unknown (one run on a side: no spread between runs)")
    return lines


def verdict_notes(table: pd.DataFrame) -> list[str]:
    """The verdict lines under a comparison (regressions or a speedup table): per regression
    / improvement, the time's change with its interval, what was judged beside the medians,
    the runs and the phase carrying it; per reason of the inconclusive rows, which rows,
    why and the remedy; per undecided row its resolution line."""
    lines = []
    ratio_column = "ratio" if "ratio" in table else "time_ratio"
    records = table.to_dict("records")
    for r in records:
        if r["verdict"] in (verdict.REGRESSION, verdict.IMPROVEMENT):
            line = (
                f"{r['verdict']}: {r['label']}: time {r[ratio_column] - 1:+.1%} "
                f"[{r['ci_low'] - 1:+.1%}, {r['ci_high'] - 1:+.1%}]{_judged_beside(r)} over "
                f"{int(r['n_base'])} + {int(r['n_new'])} runs"
            )
            if r.get("paired") is True:
                line += " (paired by round)"
            line += _sequential_note(r)
            phases = str(r.get("phases", "")).split("; ")
            carried = [p for p in phases if p.split(" ")[0] == r["carried_by"]]
            if carried and r["carried_by"]:
                line += f", carried by {carried[0]}"
            lines.append(line)
    inconclusive: dict = {}  # (reason, remedy) -> labels: one line each
    for r in records:
        if r["verdict"] == verdict.INCONCLUSIVE:
            inconclusive.setdefault((r["reason"], r["remedy"]), []).append(r["label"])
    for (reason, remedy), labels in inconclusive.items():
        who = labels[0] if len(labels) == 1 else f"{len(labels)} cells ({', '.join(labels[:3])}"
        who += "" if len(labels) == 1 else (", ...)" if len(labels) > 3 else ")")
        lines.append(f"inconclusive: {who}: {reason}; remedy: {remedy}")
    return lines + resolution_lines(records)


def _remedy_of_spread(row: dict) -> str:
    """What fixes a pair the spread left undecided (remedies.py): more runs when the spread
    between runs dominates, longer runs when a run's own imprecision does; more warm-up
    besides for a warm-up drift."""
    settings = row.get("settings") or remedies.DEFAULT
    cause = remedies.spread_cause(row.get("spread_between", math.nan), row["spread_within"])
    if cause == "within":
        remedy = remedies.more_iterations(settings)
    else:
        needed = int(row.get("runs_needed", 0) or 0)
        remedy = remedies.more_runs(min(needed, resolution.MAX_RUNS) or 3, settings)
    if "warm-up drift" in row.get("reason", ""):
        remedy += "; " + remedies.more_warmup(settings)
    return remedy


def finish(row: dict, threshold: float, alpha: float, p_adjusted: float | None = None) -> None:
    """Decides a judged row's verdict (verdict.decide), writes its `phases` text and
    `carried_by` (phases_text), and for a row the spread left undecided (inconclusive by
    its noise, or not significant) the runs a side the threshold needs (`runs_needed`,
    resolution.runs_needed) and the remedy that fits the spread that dominates."""
    alpha = row.get("alpha", alpha)  # judged_alpha's: a repetitions: auto pair's looks'
    row["verdict"] = verdict.decide(row, threshold, alpha, p_adjusted)
    row["phases"] = phases_text(row)
    spread = row.get("spread_for_runs", math.nan)
    if row["verdict"] not in (verdict.INCONCLUSIVE, verdict.NOT_SIGNIFICANT):
        return
    if not math.isfinite(spread):
        return
    row["runs_needed"] = resolution.runs_needed(spread, threshold, alpha, bool(row["paired"]))
    if row.get("noise_undecided") or row["verdict"] == verdict.NOT_SIGNIFICANT:
        found = [r for r in row["remedy"].split("; ") if r]
        found += [r for r in _remedy_of_spread(row).split("; ") if r not in found]
        row["remedy"] = "; ".join(found)
