"""The slowest of N ranks: quantiles of the maximum of N independent draws from a measured
distribution (Note [Projection model] in projection/__init__.py)."""

from __future__ import annotations

import numpy as np
from scipy.stats import norm


def quantile_of_max(samples: np.ndarray, ranks: int, q: float = 0.5) -> float:
    """The q-quantile of the maximum of `ranks` independent draws from the empirical
    distribution of `samples` (NaN left out): the samples' quantile at q ** (1 / ranks),
    linearly interpolated, so never beyond the largest sample. NaN without samples."""
    values = np.asarray(samples, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan")
    if ranks < 1:
        raise ValueError(f"ranks must be >= 1, got {ranks}")
    return float(np.quantile(values, q ** (1.0 / ranks)))


def beyond_samples(samples: np.ndarray, ranks: int, q: float = 0.5) -> bool:
    """Whether the quantile asked lies past the (n - 0.5) / n point of n samples: the
    largest sample bounds it, and the slowest rank of `ranks` may be slower than any
    iteration measured."""
    count = int(np.isfinite(np.asarray(samples, dtype=float)).sum())
    return count > 0 and q ** (1.0 / ranks) > (count - 0.5) / count


#: The level of the p95 interval, and the draws it is estimated from.
P95_INTERVAL_LEVEL = 0.90
P95_INTERVAL_DRAWS = 400


def p95_interval(
    samples: np.ndarray,
    ranks: int,
    iterations: int,
    level: float = P95_INTERVAL_LEVEL,
    draws: int = P95_INTERVAL_DRAWS,
    seed: int = 0,
) -> tuple[float, float]:
    """The interval that holds, with probability `level`, the 95th percentile over a run of
    `iterations` iterations of the slowest of `ranks` ranks: a predictive interval. The
    compute times are taken as lognormal (the slowest of 8 ranks sits at the 0.994 quantile,
    past what 40 samples show: the plain resample never passes its slowest sample, and the
    interval sat too low in 2 of 3 trials; a normal misses skewed times). Per draw, the
    log-times are resampled with replacement and their mean and sd taken (what the inputs
    do not pin down); a run of `iterations` values is drawn, each the slowest of `ranks`
    lognormals of that mean and sd (exp(mean + sd * Phi^-1(u ** (1 / ranks))), u uniform),
    and its 95th percentile taken. The interval is the (1 - level) / 2 and (1 + level) / 2
    quantiles over the draws. Seeded: the same inputs give the same interval. Heavy,
    skewed tails (rare long stalls) lie beyond it: docs/projection.md. (NaN, NaN) without
    positive samples or iterations."""
    values = np.asarray(samples, dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    if values.size == 0 or iterations < 1:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    logs = rng.choice(np.log(values), size=(draws, values.size))
    mean = logs.mean(axis=1)
    sd = logs.std(axis=1, ddof=1) if values.size > 1 else np.zeros(draws)
    u = rng.random((draws, iterations)) ** (1.0 / max(1, ranks))
    run = np.exp(mean[:, None] + sd[:, None] * norm.ppf(u))
    p95 = np.quantile(run, 0.95, axis=1)
    low, high = np.quantile(p95, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)
