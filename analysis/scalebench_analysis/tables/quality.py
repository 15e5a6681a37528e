"""Per-iteration samples, trustworthiness (noise, warm-up drift) and straggler ranks.

Definitions (docs/analysis-guide.md#metrics):

* iteration samples of a cell: train: per measured iteration, the slowest rank's `step`
  time; inference: every measured `batch` time of every rank. This is the population the
  file's `summary` describes and the one the regression gate tests.
* count, cv and the validity flags (enough samples, cv within the limit, replicas in sync)
  are the file's: scalebench computes them once, in C++ (results/cell_summary.cc), and
  stores them with the thresholds they were judged by in `/cells/<id>/summary`. They are
  read here, never recomputed (see LAYOUT_1_0_THRESHOLDS in read/cells.py for layout 1.0
  files).
* drift: median of the first half of the measured iteration series / median of its second
  half - 1 (series: train: slowest-rank step per iteration; inference: mean over ranks of
  the batch time per batch index). Positive drift means the cell was still warming up;
  needs at least 4 measured iterations, else NaN. Since layout 1.10 the file stores it
  (summary `drift`, judged by `max_valid_drift` into `valid_drift` and `valid`: one notion
  of trust with `scalebench run`'s and `info`'s tables); it is computed here for older
  files.
* trusted: status ok, the file's validity flags all hold (with `max_cv` given, the file's
  cv is judged against it instead of the file's `valid_cv`), |drift| <= max_drift and the
  cell has no `untrusted_reasons` (layout 1.9: a program that ran other steps than asked,
  or a branch package imported from outside its tree; tables/program_checks.py).
  A cell that chose its own iterations (`iterations: auto`, layout 1.8's `stop_reason`
  precise/budget/cap) is judged by the interval of its median instead of its cv: it is
  trusted when it stopped `precise` (the interval reached its `ci_width`), and otherwise
  untrusted with what would fix it (a larger `max_seconds` or `max_iterations`, or a
  wider `ci_width`). The cv measures the machine's noise, not the precision of the
  median: a noisy cell measured long enough is as trustworthy as a quiet one
  (docs/measurement.md).
  Untrusted cells stay in every table, flagged, and are left out of picks (best batch,
  knee, SLO). A comparison (verdict.py) weighs a run untrusted for its noise alone (its cv,
  its warm-up drift) against the change instead of refusing it (Note [Noise weighed
  against the change]): a run judged by a low percentile of its steps (Note [The judged
  statistic]) can pin that figure through a load that made its cv 30 %.
* straggler: in a cell of 2+ ranks, a rank whose median busy time is more than
  `threshold` above the median of the other ranks' medians. Busy time: train: `step -
  comm_wait` (synchronous data parallel makes every rank's step equal: fast ranks wait in
  comm_wait, so the step alone hides the straggler); inference: `batch`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..read.loader import Results
from .program_checks import untrusted_reasons


@dataclass(frozen=True)
class QualityOptions:
    """Thresholds of the checks this package makes itself (fractions, not percent).

    `max_cv` None (the default) takes the file's verdict `valid_cv`, judged by the file's
    `max_valid_cv`; a number re-judges the file's `cv` against it (`--max-cv`)."""

    max_cv: float | None = None
    max_drift: float = 0.10
    straggler_threshold: float = 0.10


def summarised_phase(mode: str) -> str:
    """The phase a cell's summary and the regression gate are about."""
    return "step" if mode == "train" else "batch"


def iteration_samples(
    results: Results, cell_id: str, mode: str, phase: str | None = None
) -> np.ndarray:
    """1-D array of the cell's iteration samples (see module doc); empty without timings.
    `phase`: the same samples of another phase than the summarised one (train: the slowest
    rank's time of that phase per iteration; inference: every rank's)."""
    values = results.timing_array(cell_id, phase or summarised_phase(mode))
    if values.size == 0:
        return np.empty(0)
    if mode == "train":
        finite = np.isfinite(values).any(axis=0)
        return np.nanmax(values[:, finite], axis=0)
    return values[np.isfinite(values)]


def iteration_series(results: Results, cell_id: str, mode: str) -> np.ndarray:
    """Per measured iteration index: slowest rank (train) or rank mean (inference)."""
    values = results.timing_array(cell_id, summarised_phase(mode))
    if values.size == 0:
        return np.empty(0)
    finite = np.isfinite(values).any(axis=0)
    values = values[:, finite]
    return np.nanmax(values, axis=0) if mode == "train" else np.nanmean(values, axis=0)


def drift_of(series: np.ndarray) -> float:
    """median(first half) / median(second half) - 1; NaN below 4 iterations."""
    half = series.size // 2
    if half < 2:
        return float("nan")
    return float(np.median(series[:half]) / np.median(series[-half:]) - 1.0)


def _flag(cell: pd.Series, name: str) -> bool:
    """A summary flag of the file; False when the cell has none."""
    value = cell.get(name)
    return bool(value) if value is not None and pd.notna(value) else False


#: `stop_reason` values of an `iterations: auto` cell (layout 1.8); "fixed" cells are judged
#: by their cv as before.
AUTO_STOP_REASONS = ("precise", "budget", "cap")


def interval_rel(cell: pd.Series) -> float:
    """Half the width of the median's 95 % interval over the median (layout 1.8); NaN
    without one. The `+-` that `ci_width` is compared with (Note [Iterations auto])."""
    low, high, median = (cell.get(k) for k in ("median_ci_low_s", "median_ci_high_s", "median_s"))
    try:
        return float((high - low) / (2.0 * median))
    except (TypeError, ZeroDivisionError):
        return float("nan")


def interval_rel_column(cells: pd.DataFrame) -> np.ndarray:
    """interval_rel of every row of a cells table, vectorised: NaN where a row lacks one
    of the three figures, or its median is 0."""
    names = ("median_ci_low_s", "median_ci_high_s", "median_s")
    if any(name not in cells for name in names):
        return np.full(len(cells), np.nan)
    low, high, median = (pd.to_numeric(cells[n], errors="coerce").to_numpy(float) for n in names)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(median != 0, (high - low) / (2.0 * median), np.nan)


def _short_of_target(cell: pd.Series, stop: str) -> str:
    """'interval +-3.4 % short of ci_width +-2 % (stopped on its budget, max_seconds 60 s):
    raise max_seconds, or ci_width' for an auto cell that did not stop `precise`."""
    spec = cell.get("spec") if isinstance(cell.get("spec"), dict) else {}
    width = spec.get("ci_width", 0.02)
    achieved = interval_rel(cell)
    shown = f"+-{achieved:.1%}" if np.isfinite(achieved) else "unknown"
    if stop == "budget":
        why = f"stopped on its budget, max_seconds {spec.get('max_seconds', 60.0):g} s"
        fix = "raise max_seconds, or ci_width"
    else:
        why = f"stopped at its cap, max_iterations {spec.get('max_iterations', 2000)}"
        fix = "raise max_iterations (inference: or samples), or ci_width"
    return f"interval {shown} short of ci_width +-{width:.1%} ({why}): {fix}"


def _trust_row(results: Results, cell: dict, options: QualityOptions) -> dict:
    """`cell`: a row of the cells table as a dict (a Series reads the same)."""
    count, cv = cell.get("count"), cell.get("cv", np.nan)
    stored = cell.get("drift")  # layout 1.10: the file's own figure (module doc)
    drift = (
        float(stored)
        if stored is not None and pd.notna(stored)
        else drift_of(iteration_series(results, cell["cell_id"], cell["mode"]))
    )
    row = {"cell_id": cell["cell_id"], "count": count, "cv": cv, "drift": drift}
    if count is None or pd.isna(count):
        return {
            **row,
            "count": 0,
            "trusted": False,
            "untrusted_because": "no summary in the results file",
        }
    reasons = []
    if not _flag(cell, "valid_enough_iterations"):
        reasons.append(f"only {int(count)} samples (< {int(cell['min_valid_iterations'])})")
    stop = cell.get("stop_reason")
    if isinstance(stop, str) and stop in AUTO_STOP_REASONS:
        if stop != "precise":
            reasons.append(_short_of_target(cell, stop))
    elif options.max_cv is None:
        if not _flag(cell, "valid_cv"):
            reasons.append(f"cv {cv:.1%} > {cell['max_valid_cv']:.0%}")
    elif not (cv <= options.max_cv):
        reasons.append(f"cv {cv:.1%} > {options.max_cv:.0%} (--max-cv)")
    if np.isfinite(drift) and abs(drift) > options.max_drift:
        reasons.append(f"warm-up drift {drift:+.1%} (|drift| > {options.max_drift:.0%})")
    if not _flag(cell, "valid_replicas_in_sync"):
        reasons.append("replicas out of sync (param_checksum differs)")
    reasons += untrusted_reasons(cell)  # layout 1.9: what a program cell's worker found
    return {
        **row,
        "count": int(count),
        "trusted": not reasons,
        "untrusted_because": "; ".join(reasons),
    }


def trust_table(results: Results, options: QualityOptions = QualityOptions()) -> pd.DataFrame:
    """One row per ok cell: count and cv (the file's), drift, trusted, untrusted_because."""
    ok = results.cells[results.cells.status == "ok"]
    # Rows as dicts: a Series per row (iterrows) cost 10x more at 10^4 cells (issue 53).
    rows = [_trust_row(results, cell, options) for cell in ok.to_dict("records")]
    columns = ["cell_id", "count", "cv", "drift", "trusted", "untrusted_because"]
    return pd.DataFrame(rows, columns=columns)


def busy_times(results: Results, cell_id: str, mode: str) -> np.ndarray:
    """(ranks, measured iterations) busy seconds: step - comm_wait (train), batch (infer)."""
    if mode != "train":
        return results.timing_array(cell_id, "batch")
    step = results.timing_array(cell_id, "step")
    wait = results.timing_array(cell_id, "comm_wait")
    return step - wait if wait.shape == step.shape and wait.size else step


def straggler_table(results: Results, options: QualityOptions = QualityOptions()) -> pd.DataFrame:
    """One row per rank of every ok cell with 2+ ranks: rank median busy time, the median
    of the other ranks' medians, the excess over it, and `straggler`."""
    rows = []
    cells = results.cells
    for _, cell in cells[(cells.status == "ok") & (cells.world_size > 1)].iterrows():
        busy = busy_times(results, cell.cell_id, cell["mode"])
        if busy.shape[0] < 2:
            continue
        medians = np.array([np.nanmedian(r) if np.isfinite(r).any() else np.nan for r in busy])
        hosts = results.rank_metrics
        hosts = (
            hosts[hosts.cell_id == cell.cell_id].set_index("rank")["host"]
            if "host" in hosts
            else pd.Series(dtype=object)
        )
        for rank, median in enumerate(medians):
            others = np.nanmedian(np.delete(medians, rank))
            excess = median / others - 1.0
            rows.append(
                {
                    "cell_id": cell.cell_id,
                    "label": cell.label,
                    "rank": rank,
                    "host": hosts.get(rank, ""),
                    "median_busy_s": median,
                    "others_median_busy_s": others,
                    "excess": excess,
                    "straggler": bool(excess > options.straggler_threshold),
                }
            )
    columns = [
        "cell_id",
        "label",
        "rank",
        "host",
        "median_busy_s",
        "others_median_busy_s",
        "excess",
        "straggler",
    ]
    return pd.DataFrame(rows, columns=columns)
