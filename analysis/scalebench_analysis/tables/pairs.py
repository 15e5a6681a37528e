"""Rows of judged pairs (Note [Runs are the unit of evidence] in verdict.py): the one row
builder of compare's gate and the speedup tables: a pair of compared cells (runs.Unit) with
ok runs each, judged by verdict.judge over their run medians, every phase's change
(runs.phase_changes), the phase carrying the verdict, and the lines that say why."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..read.loader import Results
from . import accuracy, runs, verdict


@dataclass
class Side:
    """One side of a comparison: the file, its trust table and each cell's untrusted
    reason ("" when trusted)."""

    results: Results
    trust: pd.DataFrame
    reasons: dict = field(init=False)

    def __post_init__(self) -> None:
        self.reasons = runs.trust_reasons(self.trust)


def _throughput(unit, cell_ids: list) -> float:
    values = [v for v in runs.run_figures(unit, cell_ids, "throughput_samples_per_s")]
    values = [v for v in values if np.isfinite(v)]
    return float(np.median(values)) if values else np.nan


def judged_row(base: Side, base_unit, new: Side, new_unit, alpha: float) -> dict:
    """The row of two units with ok runs each (Note [Runs are the unit of evidence]):
    verdict.judge of their run medians (verdict still "" when a test is to decide; paired
    when runs.rounds_paired says the runs are pairs), the phases' changes
    (`phase_changes`: (phase, verdict.phase_change) list), the throughputs and speedup,
    trusted, accuracy, `paired` and the ids."""
    b_runs = runs.ok_runs(base_unit)
    n_runs = runs.ok_runs(new_unit)
    paired = runs.rounds_paired(base.results, base_unit, b_runs, new.results, new_unit, n_runs)
    reasons = {
        "base": [base.reasons.get(c, "") for c in b_runs],
        "new": [new.reasons.get(c, "") for c in n_runs],
    }
    untrusted = verdict.untrusted_text(reasons)
    row = verdict.judge(
        runs.run_figures(base_unit, b_runs),
        runs.run_figures(new_unit, n_runs),
        alpha,
        untrusted,
        pairs=paired,
    )
    throughput = _throughput(new_unit, n_runs)
    base_throughput = _throughput(base_unit, b_runs)
    new_cell = new_unit.rows[n_runs[0]]
    row.update(
        label=new_unit.label,
        base_cell_id=base_unit.unit_id,
        new_cell_id=new_unit.unit_id,
        throughput=throughput,
        baseline_throughput=base_throughput,
        speedup=throughput / base_throughput,
        trusted=not untrusted[0],
        accuracy=accuracy.text(new_cell),
        paired=paired,
        phase_changes=runs.phase_changes(
            base.results, b_runs, new.results, n_runs, alpha, new_unit.mode, paired
        ),
    )
    return row


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
    """One row per (compared pair, phase) of judged rows: label, phase, base_ms, new_ms,
    delta_ms, ci_low_ms, ci_high_ms, p_value, changed, carries (the verdict's phase)."""
    out = []
    for row in rows:
        for phase, change in row.get("phase_changes", []):
            out.append(
                {
                    "label": row["label"],
                    "phase": phase,
                    "base_ms": change["base_s"] * 1e3,
                    "new_ms": change["new_s"] * 1e3,
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


def verdict_notes(table: pd.DataFrame) -> list[str]:
    """The verdict lines under a comparison (regressions or a speedup table): per regression
    / improvement, the time's change with its interval, the runs and the phase carrying it;
    per reason of the inconclusive rows, which rows, why and the remedy."""
    lines = []
    ratio_column = "ratio" if "ratio" in table else "time_ratio"
    for r in table.to_dict("records"):
        if r["verdict"] in (verdict.REGRESSION, verdict.IMPROVEMENT):
            line = (
                f"{r['verdict']}: {r['label']}: time {r[ratio_column] - 1:+.1%} "
                f"[{r['ci_low'] - 1:+.1%}, {r['ci_high'] - 1:+.1%}] over "
                f"{int(r['n_base'])} + {int(r['n_new'])} runs"
            )
            if r.get("paired") is True:
                line += " (paired by round)"
            phases = str(r.get("phases", "")).split("; ")
            carried = [p for p in phases if p.split(" ")[0] == r["carried_by"]]
            if carried and r["carried_by"]:
                line += f", carried by {carried[0]}"
            lines.append(line)
    inconclusive: dict = {}  # (reason, remedy) -> labels: one line each
    for r in table.to_dict("records"):
        if r["verdict"] == verdict.INCONCLUSIVE:
            inconclusive.setdefault((r["reason"], r["remedy"]), []).append(r["label"])
    for (reason, remedy), labels in inconclusive.items():
        who = labels[0] if len(labels) == 1 else f"{len(labels)} cells ({', '.join(labels[:3])}"
        who += "" if len(labels) == 1 else (", ...)" if len(labels) > 3 else ")")
        lines.append(f"inconclusive: {who}: {reason}; remedy: {remedy}")
    return lines


def finish(row: dict, threshold: float, alpha: float, p_adjusted: float | None = None) -> None:
    """Decides a judged row's verdict (verdict.decide) and writes its `phases` text and
    `carried_by` (phases_text)."""
    row["verdict"] = verdict.decide(row, threshold, alpha, p_adjusted)
    row["phases"] = phases_text(row)
