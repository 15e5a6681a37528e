"""The statistic a run is judged by (Note [The judged statistic]) and how precisely one run
pins it: one definition for compare's verdicts, their trust rule and the calibration
benchmark (tests/perf/verdict_calibration.py imports it).

Note [The judged statistic]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
Interference on a shared machine is additive: another process, an interrupt, a page fault
only ever adds time to a step, never takes it away (Chen & Revels, "Robust benchmarking in
noisy environments", 2016, the basis of BenchmarkTools.jl's `judge`). A run's median moves
with the fraction of its steps that met a busy machine; a low quantile of its steps moves
only when nearly all of them did. So a run is judged by the JUDGED_PERCENTILE-th percentile
of its measured steps (train: the slowest rank's step per iteration; inference: every
batch; per phase the same samples of that phase, quality.iteration_samples), while the
tables keep calling the median the step time and show the judged figure beside it.

Why the 20th percentile and not the median or the minimum: the calibration benchmark
(tests/perf/verdict_calibration.py, docs/measurement.md#choosing-the-judged-statistic)
judged the same runs by each under a switching one-sided load. Where each run was loaded
for a different share of its steps, the median's spread between runs was 12 times the
p20's, it found +10 % in 2-7 of 200 trials against the p20's 154-195, and it called a
slower side faster; the minimum had the same power as p10 and p20 but the most A/A false
verdicts (one sample decides it, and a quiet run's minimum is a rare fast step); the p20
is pinned by twice the samples of the p10, so its within-run interval (below, what the
trust rule weighs) is the narrower. Where every run saw the same share of load they all
agree. A run loaded throughout has a loaded p20: no statistic of one run tells that load
from the code, only more runs, interleaved, do.

Percentiles interpolate linearly between order statistics (numpy's default, as the C++
summary's p50..p99 do). The within-run precision of a percentile is its distribution-free
95 % interval from order statistics (the binomial's normal approximation, as Note
[Iterations auto] does for the median): the samples of rank floor(np - z*sqrt(np(1-p)))
and ceil(1 + np + z*sqrt(np(1-p))), p at least 1/n so that the minimum has an interval.
"""

from __future__ import annotations

import math

import numpy as np

#: The percentile of a run's measured steps that the verdicts compare (Note [The judged
#: statistic]); 0 is the minimum, 50 the median.
JUDGED_PERCENTILE = 20
#: The column a table shows the judged figure under, beside the median.
JUDGED_NAME = f"p{JUDGED_PERCENTILE}"
_Z95 = 1.959963984540054


def judged_value(samples, percent: float = JUDGED_PERCENTILE) -> float:
    """The `percent`-th percentile of the finite `samples` (seconds); NaN without any."""
    values = np.asarray(samples, float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan
    return float(np.percentile(values, percent))


def interval_rel(samples, percent: float = JUDGED_PERCENTILE) -> float:
    """Half the width of the 95 % distribution-free interval of the `percent`-th percentile
    of `samples` over the percentile (module doc): how precisely this one run pins its
    judged figure (0.02: +-2 %). NaN below 2 finite samples or a percentile of 0."""
    values = np.sort(np.asarray(samples, float))
    values = values[np.isfinite(values)]
    n = values.size
    if n < 2:
        return math.nan
    p = max(percent / 100.0, 1.0 / n)
    center, half = n * p, _Z95 * math.sqrt(n * p * (1.0 - p))
    low = min(n, max(1, math.floor(center - half)))
    high = min(n, max(1, math.ceil(1.0 + center + half)))
    value = judged_value(values, percent)
    if not value > 0.0:
        return math.nan
    return float((values[high - 1] - values[low - 1]) / (2.0 * value))
