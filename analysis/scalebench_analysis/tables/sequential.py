"""The sequential test of `repetitions: auto` (issue 52 deliver 2): the alpha each look
judges at, so that looking after every round does not raise the A/A false-verdict rate
above the alpha of one comparison.

Note [The sequential test]
~~~~~~~~~~~~~~~~~~~~~~~~~~
A series of a `repetitions: auto` cell is looked at after each of its rounds r =
FIRST_LOOK .. cap (cap: the spec's `repetitions`, max_repetitions), and stops at the first
look at which its comparisons are decided. Judging every look at alpha 0.05 would give an
A/A pair 18 chances of a false verdict (23 % of A/A pairs are significant at some look).
So every look uses one constant alpha, the Pocock boundary: the largest per-look alpha at
which the chance that an A/A pair is significant at *any* look r = FIRST_LOOK .. cap
stays at `alpha`.

It is computed, not tabled: the looks' test is the paired t test of rounds (verdict.paired)
on the run figures' log differences, whose p-values do not depend on the sd of those
differences, so the boundary is the `alpha`-quantile of the smallest p-value over the
looks of PAIRS_DRAWN seeded A/A series of standard normal differences (deterministic; its
standard error on the resulting A/A rate is 0.1 percentage point). For the default
cap of 20 (18 looks) it is 0.0078; for a cap of 5, 0.023; of 40, 0.0054.

Why Pocock and not the others (normal theory, paired differences of sd 3 % and 6 %, the
median runs a side to a decision; the calibration of the rule on the load model is in
docs/repetitions.md#repetitions-auto, tests/perf/verdict_calibration.py --designs auto):

* Bonferroni (alpha / looks, 0.0028 at 18 looks) holds the A/A rate at 2 %, wasting the
  rest: +5 % at a spread of 6 % takes 17 runs a side instead of 13, and is found by the
  cap in 67 % of series instead of 80 %.
* O'Brien-Fleming-like spending saves alpha for the last look (more power at the cap when
  the spread is large) but spends almost none at the first ones: +10 % at a spread of 3 %
  takes 7 runs a side instead of 4, and what `repetitions: auto` saves is the runs of the
  changes that are clear early.
* Pocock's constant decides a large change at the first look and keeps the A/A rate at
  `alpha` whatever the cap.

What it does not cover: the looks' runs are judged as compare judges them (the 20th
percentile of each run's steps, runs untrusted for their noise weighed against the
change); a switching load makes those figures two-valued rather than normal, and the
calibration measures the rate under that load (the table). A pair judged by Welch's test
(a run missing on one side) has more degrees of freedom and is looked at with the same
alpha (conservative).
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import stats

#: The first look: rounds 0, 1, 2 always run (kMinAdaptiveRounds of
#: orchestrator/adaptive_rounds.h).
FIRST_LOOK = 3
#: A/A series drawn to place the boundary.
PAIRS_DRAWN = 50000
_SEED = 52


@functools.lru_cache(maxsize=64)
def look_alpha(cap: int, alpha: float = 0.05) -> float:
    """The alpha of every look of a series of at most `cap` runs (Note [The sequential
    test]); `alpha` itself when at most one look is possible (cap <= FIRST_LOOK)."""
    looks = np.arange(FIRST_LOOK, int(cap) + 1)
    if looks.size <= 1:
        return float(alpha)
    rng = np.random.default_rng(_SEED)
    d = rng.standard_normal((PAIRS_DRAWN, int(cap)))
    total, squares = np.cumsum(d, axis=1), np.cumsum(d * d, axis=1)
    smallest = np.ones(PAIRS_DRAWN)
    for n in looks:
        mean = total[:, n - 1] / n
        var = (squares[:, n - 1] - n * mean * mean) / (n - 1)
        t = mean / np.sqrt(var / n)
        smallest = np.minimum(smallest, 2.0 * stats.t.sf(np.abs(t), n - 1))
    return float(np.quantile(smallest, alpha))
