"""Operator tables of profiled cells (setting `profile_steps`, docs/profiles.md): the top
operators of one cell per phase (`analyze --ops`), and the operators that explain the step's
change between two cells (`compare --ops`).

Note [Operators explain a step's change]
A profile is taken in extra steps after the measured ones, under the profiler, so its times
are inflated by the profiler's cost (docs/profiles.md) and never replace the measured
figures. The step's change is the measured one: the new cell's summary median minus the
base cell's. Each operator (device, phase, name) gets its change of self time per step
(mean over the ranks that profiled), and its share of the step's change is that change
divided by the step's: an added matmul that costs 1.1 ms per step in a step 1.2 ms slower has
a share of 92 %; one that moved against the step has a negative share. Operators are ranked
by the size of their share, either sign; `explained` is the sum of the changes of the rows
shown, and `unexplained` the
step's change minus the sum over all operators (time outside operators, the profiler's
distortion, noise). On a GPU the kernels' rows (device `cuda`) are the device's time and the
CPU rows the host's; the sums are taken over the kernels there, as the GPU's time is what a
step waits for when the GPU is busy.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

KEY = ["device", "phase", "name"]
TOP_COLUMNS = [
    "phase",
    "name",
    "device",
    "calls_per_step",
    "self_ms_per_step",
    "self_share",
    "total_ms_per_step",
    "self_cpu_kib_per_step",
]
DIFF_COLUMNS = [
    "change",
    "phase",
    "name",
    "device",
    "base_calls",
    "new_calls",
    "base_self_ms",
    "new_self_ms",
    "delta_self_ms",
    "share_of_step_change",
]


def per_step(profile: pd.DataFrame) -> pd.DataFrame:
    """One row per (device, phase, name): calls, self and total seconds and self CPU bytes per
    profiled step, the mean over the ranks that profiled (a rank without the operator counts
    0)."""
    if profile.empty:
        return pd.DataFrame(columns=KEY + ["calls", "self_s", "total_s", "self_cpu_bytes"])
    ranks = profile["rank"].nunique()
    steps = profile["steps"].clip(lower=1)
    scaled = profile.assign(
        calls=profile["count"] / steps,
        self_s=profile["self_s"] / steps,
        total_s=profile["total_s"] / steps,
        self_cpu_bytes=profile["self_cpu_memory_bytes"] / steps,
    )
    summed = scaled.groupby(KEY, as_index=False)[["calls", "self_s", "total_s", "self_cpu_bytes"]]
    out = summed.sum()
    for column in ("calls", "self_s", "total_s", "self_cpu_bytes"):
        out[column] = out[column] / ranks
    return out


def top_ops(profile: pd.DataFrame, limit: int = 10) -> pd.DataFrame:
    """The `limit` operators of most self time per step in each phase (phases in order of
    their self time), with their share of the phase's self time."""
    steps = per_step(profile)
    if steps.empty:
        return pd.DataFrame(columns=TOP_COLUMNS)
    phase_self = steps.groupby(["device", "phase"])["self_s"].transform("sum")
    steps["self_share"] = np.where(phase_self > 0, steps["self_s"] / phase_self, np.nan)
    order = steps.groupby(["device", "phase"])["self_s"].sum().sort_values(ascending=False)
    rows = []
    for device, phase in order.index:
        part = steps[(steps.device == device) & (steps.phase == phase)]
        rows.append(part.sort_values(["self_s", "name"], ascending=[False, True]).head(limit))
    table = pd.concat(rows, ignore_index=True)
    return pd.DataFrame(
        {
            "phase": table["phase"],
            "name": table["name"],
            "device": table["device"],
            "calls_per_step": table["calls"],
            "self_ms_per_step": table["self_s"] * 1e3,
            "self_share": table["self_share"],
            "total_ms_per_step": table["total_s"] * 1e3,
            "self_cpu_kib_per_step": table["self_cpu_bytes"] / 1024,
        }
    )[TOP_COLUMNS]


def _change(base_calls: float, new_calls: float) -> str:
    if base_calls == 0 and new_calls > 0:
        return "added"
    if new_calls == 0 and base_calls > 0:
        return "removed"
    if not np.isclose(base_calls, new_calls, rtol=1e-9, atol=1e-9):
        return "count"
    return "time"


def ops_diff(
    base: pd.DataFrame, new: pd.DataFrame, step_delta_s: float, limit: int = 15
) -> tuple[pd.DataFrame, dict]:
    """Note [Operators explain a step's change]: (rows, totals). Rows: the `limit` operators
    of the largest share (either sign) of the step's change `step_delta_s` (new minus base,
    seconds), with
    `change` added / removed / count (calls per step changed) / time (same calls, other self
    time). Totals: `step_delta_ms`, `explained_ms` (the rows shown), `all_ops_ms` (every
    operator), `unexplained_ms` (step change minus all operators) and their shares of the
    step's change (`explained_share`, `unexplained_share`; NaN for a change of 0), `device`
    (the rows the sums are over), `operators` (rows compared)."""
    b, n = per_step(base), per_step(new)
    merged = b.merge(n, on=KEY, how="outer", suffixes=("_base", "_new")).fillna(
        {c: 0.0 for c in ("calls_base", "calls_new", "self_s_base", "self_s_new")}
    )
    device = "cuda" if (merged["device"] == "cuda").any() else "cpu"
    merged = merged[merged["device"] == device].copy()
    merged["delta"] = merged["self_s_new"] - merged["self_s_base"]
    step_ms = step_delta_s * 1e3
    merged["share"] = merged["delta"] / step_delta_s if step_delta_s != 0 else np.nan
    merged["rank_key"] = merged["delta"].abs()
    merged = merged.sort_values(["rank_key", "name"], ascending=[False, True])
    shown = merged.head(limit)
    rows = pd.DataFrame(
        {
            "change": [_change(b_, n_) for b_, n_ in zip(shown["calls_base"], shown["calls_new"])],
            "phase": shown["phase"],
            "name": shown["name"],
            "device": shown["device"],
            "base_calls": shown["calls_base"],
            "new_calls": shown["calls_new"],
            "base_self_ms": shown["self_s_base"] * 1e3,
            "new_self_ms": shown["self_s_new"] * 1e3,
            "delta_self_ms": shown["delta"] * 1e3,
            "share_of_step_change": shown["share"],
        }
    )[DIFF_COLUMNS].reset_index(drop=True)
    explained = float(shown["delta"].sum()) * 1e3
    all_ops = float(merged["delta"].sum()) * 1e3
    unexplained = step_ms - all_ops

    def share(value: float) -> float:
        return value / step_ms if step_ms != 0 else float("nan")

    totals = {
        "device": device,
        "operators": int(len(merged)),
        "step_delta_ms": step_ms,
        "explained_ms": explained,
        "explained_share": share(explained),
        "all_ops_ms": all_ops,
        "all_ops_share": share(all_ops),
        "unexplained_ms": unexplained,
        "unexplained_share": share(unexplained),
    }
    return rows, totals
