"""The slowest of N ranks: quantiles of the maximum of N independent draws from a measured
distribution (Note [Projection model] in projection/__init__.py)."""

from __future__ import annotations

import numpy as np


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
