"""What a comparison could see (issue 52 deliver 3): the smallest change it could have
detected at its alpha with the between-run spread it measured, and how many runs a side
a change of the threshold needs. Pure functions of a judged row's figures.

* resolution: half the width of the change's (1 - alpha) interval, exp(t * se) - 1 on the
  log scale: a change of that size or more reaches p < alpha with this spread, a smaller
  one cannot. Equal to sqrt(ci_high / ci_low) - 1 of verdict.judge's interval.
* runs needed: the smallest n runs a side at which a change of the threshold reaches
  p < alpha in 4 trials of 5 with the spread measured (the normal-theory power of the
  same t test: (t(1 - alpha/2, df) + t(0.8, df)) * se(n) <= log(1 + threshold), se(n) =
  sd * sqrt(2 / n) and df = 2n - 2 for Welch's test on equal sides, sd / sqrt(n) and
  n - 1 for pairs of rounds, where sd is the sd of the log differences).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

#: The most runs a side `runs_needed` reports; beyond it the answer is "a quieter machine".
MAX_RUNS = 200
#: The power `runs_needed` asks for: a change of the threshold found in 4 trials of 5.
POWER = 0.8


def resolution(ci_low: float, ci_high: float) -> float:
    """Relative half-width of a ratio's interval (module doc); NaN without one."""
    if not (ci_low > 0.0 and math.isfinite(ci_high)):
        return math.nan
    return math.sqrt(ci_high / ci_low) - 1.0


def log_spread(base, new, paired: bool) -> float:
    """The spread `runs_needed` uses: the sd of the log differences of paired runs, else
    the pooled sd of the log figures of the two sides (runs of each side about one mean).
    NaN below 2 runs a side."""
    b, n = np.log(np.asarray(base, float)), np.log(np.asarray(new, float))
    if b.size < 2 or n.size < 2:
        return math.nan
    if paired and b.size == n.size:
        return float(np.std(n - b, ddof=1))
    return math.sqrt((b.var(ddof=1) + n.var(ddof=1)) / 2.0)


def runs_needed(spread: float, threshold: float, alpha: float, paired: bool) -> int:
    """Runs a side for a change of `threshold` (module doc); MAX_RUNS + 1 when more than
    MAX_RUNS would be needed, 0 when the spread is unknown."""
    if not math.isfinite(spread):
        return 0
    target = math.log1p(threshold)
    for n in range(2, MAX_RUNS + 1):
        df = n - 1 if paired else 2 * n - 2
        se = spread / math.sqrt(n) if paired else spread * math.sqrt(2.0 / n)
        reach = (stats.t.ppf(1.0 - alpha / 2.0, df) + stats.t.ppf(POWER, df)) * se
        if reach <= target:
            return n
    return MAX_RUNS + 1
