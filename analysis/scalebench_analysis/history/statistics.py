"""The statistics of `scalebench history` (lines.py's module doc): the bootstrap intervals
of a point (`within-run`, `repetitions`) and the steps beyond noise between points."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pandas as pd

from ..read.loader import Results
from ..tables import verdict
from ..tables.quality import iteration_samples, summarised_phase
from .model import REPETITION_RESAMPLES, HistoryOptions, Point, Step

#: Values one bootstrap block draws at most (bounds the memory of the resampling).
_BLOCK_VALUES = 2_000_000


def _percentiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0
    low, high = np.percentile(values, [100 * tail, 100 * (1 - tail)])
    return float(low), float(high)


def bootstrap_medians(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """`resamples` medians of `values` resampled with replacement (n of n each), drawn in
    blocks of at most _BLOCK_VALUES values."""
    n = values.size
    block = max(1, _BLOCK_VALUES // n)
    out = np.empty(resamples)
    for start in range(0, resamples, block):
        k = min(block, resamples - start)
        out[start : start + k] = np.median(values[rng.integers(0, n, (k, n))], axis=1)
    return out


def _bootstrap_slowest_total(per_rank: list, resamples: int, rng) -> np.ndarray:
    """Per resample: the largest over ranks of the sum of that rank's values resampled
    with replacement (inference throughput's denominator)."""
    out = np.zeros(resamples)
    for values in per_rank:
        n = values.size
        block = max(1, _BLOCK_VALUES // n)
        for start in range(0, resamples, block):
            k = min(block, resamples - start)
            totals = values[rng.integers(0, n, (k, n))].sum(axis=1)
            out[start : start + k] = np.maximum(out[start : start + k], totals)
    return out


def within_run_interval(results: Results, cell: pd.Series, options: HistoryOptions):
    """(low, high) of the cell's figure from its own iterations (module doc: `within-run`);
    (NaN, NaN) with fewer than 2 samples. Deterministic: seeded by options.seed and the
    cell id."""
    cell_id, mode = cell["cell_id"], cell["mode"]
    samples = iteration_samples(results, cell_id, mode)
    if samples.size < 2:
        return math.nan, math.nan
    rng = np.random.default_rng([options.seed, zlib.crc32(cell_id.encode())])
    if options.metric == "time" or mode == "train":
        low, high = _percentiles(
            bootstrap_medians(samples, options.resamples, rng), options.confidence
        )
        if options.metric == "time":
            return low, high
        scale = float(cell["throughput_samples_per_s"]) * float(cell["median_s"])
        return scale / high, scale / low
    batches = results.timing_array(cell_id, summarised_phase(mode))
    per_rank = [row[np.isfinite(row)] for row in batches]
    per_rank = [row for row in per_rank if row.size]
    slowest = max(float(row.sum()) for row in per_rank)
    totals = _bootstrap_slowest_total(per_rank, options.resamples, rng)
    scale = float(cell["throughput_samples_per_s"]) * slowest
    low, high = _percentiles(scale / totals, options.confidence)
    return low, high


def repetition_interval(values: np.ndarray, seed_text: str, options: HistoryOptions):
    """(low, high): percentile bootstrap interval of the median of `values` (one figure
    per repetition cell), REPETITION_RESAMPLES draws seeded by options.seed and
    `seed_text`."""
    rng = np.random.default_rng([options.seed, zlib.crc32(seed_text.encode())])
    medians = bootstrap_medians(values, REPETITION_RESAMPLES, rng)
    return _percentiles(medians, options.confidence)


def intervals_apart(a: Point, b: Point) -> bool:
    """Both intervals exist and do not overlap."""
    bounds = (a.ci_low, a.ci_high, b.ci_low, b.ci_high)
    if not all(math.isfinite(x) for x in bounds):
        return False
    return b.ci_low > a.ci_high or b.ci_high < a.ci_low


def find_steps(points: list, threshold: float, metric: str, alpha: float = 0.05):
    """(the flagged steps between consecutive points, how many changes beyond the threshold
    were not judged): each pair judged over its runs by verdict.judge (Note [Runs are the
    unit of evidence]): a step is a significant change beyond the threshold; a pair with
    one run on a side is inconclusive, never a step."""
    steps, unjudged = [], 0
    for i in range(1, len(points)):
        a, b = points[i - 1], points[i]
        if not a.runs or not b.runs:
            continue
        row = verdict.judge(a.runs, b.runs, alpha)
        decided = verdict.decide(row, threshold, alpha)
        if decided == verdict.INCONCLUSIVE:
            unjudged += bool(abs(row["change"]) > threshold)
            continue
        if decided not in (verdict.REGRESSION, verdict.IMPROVEMENT):
            continue
        change = b.value / a.value - 1.0 if a.value else math.nan
        rose = decided == verdict.REGRESSION
        worse = rose if metric == "time" else not rose
        steps.append(
            Step(
                i - 1,
                i,
                change,
                "slower" if worse else "faster",
                row["ratio"],
                row["ci_low"],
                row["ci_high"],
                row["p_value"],
            )
        )
    return steps, unjudged
