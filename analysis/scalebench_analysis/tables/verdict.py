"""Judging a difference between two measured things: the one statistic of every table that
says "faster", "slower" or "no evidence" (Note [Runs are the unit of evidence]).

Used by compare (between files and between branches), analyze --baseline / --baseline-branch
/ --baseline-file (the speedup tables), the ablation tables and history's steps.

Note [Runs are the unit of evidence]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The iterations of one run share one state of the machine (its load, its clocks, its page
cache): they are dependent samples of that state, not of the run-to-run variation. Testing
iterations as independent samples takes a change of the machine between two runs for an
effect of the code (issue 40: a branch 3 % slower called a 22 % improvement because the
data phase swung with the load between the two cells' time windows). So a *run* (one cell,
or one repetition of a repeated cell) contributes one number: a low percentile of its
measured steps (train) or batches (inference), run_statistic.JUDGED_PERCENTILE (Note [The
judged statistic] in run_statistic.py: interference only adds time, so a low percentile is
robust to it where the median is not); the repetitions of a cell are its runs.

* Two or more runs on each side: Welch's t test on the logarithms of the run medians. The
  estimate is the ratio of the geometric means new / base, its (1 - alpha) interval is
  exp(mean difference +- t(1 - alpha/2, df) * se) with Welch-Satterthwaite df, and the
  two-sided p-value comes from the same t statistic and df: p < alpha exactly when the
  interval excludes 1 (the p-value and the interval are one method and cannot disagree).
  A per-phase change (`forward +5.1 ms [4.8, 5.4]`) is the same test on the runs' judged
  figures of that phase on a linear scale (difference of the means, in seconds).
* Pairs of rounds: when the two sides are interleaved repeated cells of one results file
  with the same ok repetitions (runs.rounds_paired), repetition k of each ran in round k,
  next to each other (Note [Repetitions]): run k of one side is paired with run k of the
  other and the paired t test on the differences of the log run medians gives the
  estimate, its interval and the p-value (n - 1 degrees of freedom; again one method). A
  drift of the machine between rounds then cancels instead of widening the interval. Two
  files, `interleave: false` or a repetition missing on one side: Welch's test.
* One run on either side: the run-to-run variation is unknown, and no test can tell the
  machine from the code. The verdict is `inconclusive` ("one run per side, run-to-run
  variation unknown") with the remedy (remedies.more_runs). A results file stores no measured
  bound on the machine's drift (no canary workload), so nothing lifts this.
* Either side untrusted (quality.trust_table: too few samples, an auto cell short of its
  precision, replicas out of sync, a program's own checks): `inconclusive` with the reason
  and its remedy, whatever the test says (its figures are still shown).
* Runs untrusted only for their noise (a cv above the limit, a warm-up drift): weighed
  against the change (Note [Noise weighed against the change]).

Note [Noise weighed against the change]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A run whose cv is 30 % because a load switched on half-way still pins its low percentile:
its quiet steps are the low ones. What a noisy run does not know is its judged figure to
better than its own within-run interval (run_statistic.interval_rel, the 95 % interval of
that percentile from its order statistics): `spread`, the largest of those over the pair's
noisy runs. The pair is then decided only when the change's interval lies wholly beyond
+-spread (ci_low > 1 + spread, or ci_high < 1 / (1 + spread)): a change no single noisy
run's imprecision could make. Otherwise it is `inconclusive`, naming the runs and what
would fix them. Why not the old rule (any run with cv > 10 % makes its pair inconclusive):
a 2.6x slowdown with one run at cv 18 % was left undecided (issue 54), and under a
switching load most runs pass 10 %. Why not drop the rule: the t test assumes the runs'
figures are roughly normal, and a switching load makes them two-valued (loaded or not);
the weighing keeps the A/A false-verdict rate at or below alpha under that load
(docs/measurement.md#choosing-the-judged-statistic, the calibration table).

Verdicts (`decide`): significant (p, Holm-adjusted with --correction holm, below alpha) and
slower by more than the threshold: `regression`; faster by more than the threshold:
`improvement`; significant within the threshold: `within threshold`; not significant but
with the whole interval of the ratio inside +-threshold (ci_low >= 1 / (1 + threshold) and
ci_high <= 1 + threshold: equivalence, two one-sided tests, here at the stricter 1 - alpha
interval): `within threshold` too, an answer ("no change beyond the threshold") that lets
an A/A pair of `repetitions: auto` stop before its cap; else `not significant`.
Why a t test and not a permutation test over runs: with 3 runs a side a
permutation test has 20 arrangements, so its smallest two-sided p-value is 0.1 and it could
never reach alpha 0.05; a bootstrap of 3 values is as coarse. Welch's t test uses the
spread of the runs, accepts unequal variances, and holds for log-normal run medians (up
to the Welch-Satterthwaite approximation of its degrees of freedom).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from . import remedies
from .resolution import resolution
from .run_statistic import JUDGED_NAME

INCONCLUSIVE = "inconclusive"
REGRESSION = "regression"
IMPROVEMENT = "improvement"
WITHIN_THRESHOLD = "within threshold"
NOT_SIGNIFICANT = "not significant"
#: Why a pair with one run on a side gets no verdict, and what fixes it.
ONE_RUN = "one run per side, run-to-run variation unknown"
#: The remedy of a pair with one run a side (a cell run once; remedies.more_runs names more
#: when the cells already had repetitions).
REMEDY_ONE_RUN = remedies.more_runs(3, remedies.Settings())
#: Reasons of quality.trust_table that are the run's noise alone: weighed against the
#: change (Note [Noise weighed against the change]), not a verdict of their own.
NOISE_REASONS = ("cv ", "warm-up drift")


@dataclass(frozen=True)
class Noise:
    """The runs of a pair untrusted only for their noise (Note [Noise weighed against the
    change]): `reason` and `remedy` as untrusted_text gives them, `spread` the largest
    run_statistic.interval_rel of those runs (NaN: unknown, never cleared)."""

    reason: str
    remedy: str
    spread: float


@dataclass(frozen=True)
class Test:
    """Welch's t test of two samples of run figures (module doc). `estimate`: the ratio
    new / base of the geometric means (log scale) or the difference of the means (linear);
    `low`, `high`: its (1 - alpha) interval; `p_value`: two-sided."""

    estimate: float
    low: float
    high: float
    p_value: float


def _t_test(difference: float, se: float, df: float, alpha: float, back) -> Test:
    """The Test of an estimated `difference` with standard error `se` and `df` degrees of
    freedom: its two-sided p-value and (1 - alpha) interval from one t statistic, mapped
    back to the caller's scale by `back`. No spread (se 0): p 1 and a point interval when
    the difference is 0, else p 0."""
    if se == 0.0 or not math.isfinite(se):
        p = 1.0 if difference == 0.0 else 0.0
        point = float(back(difference))
        return Test(point, point, point, p)
    p = float(2.0 * stats.t.sf(abs(difference / se), df))
    half = float(stats.t.ppf(1.0 - alpha / 2.0, df)) * se
    return Test(
        float(back(difference)),
        float(back(difference - half)),
        float(back(difference + half)),
        p,
    )


def welch(base: np.ndarray, new: np.ndarray, alpha: float, log: bool = True) -> Test:
    """Welch's t test of `new` against `base` (each 2 or more finite values; positive when
    `log`). Both without spread: p 1 and a point interval when their means are equal, else
    p 0 and a point interval at the difference."""
    base, new = np.asarray(base, float), np.asarray(new, float)
    if base.size < 2 or new.size < 2:
        raise ValueError(f"welch needs 2 or more runs a side, got {base.size} and {new.size}")
    if log:
        base, new = np.log(base), np.log(new)
    back = np.exp if log else (lambda x: x)
    difference = float(new.mean() - base.mean())
    var_b, var_n = base.var(ddof=1) / base.size, new.var(ddof=1) / new.size
    se = math.sqrt(var_b + var_n)
    df = (var_b + var_n) ** 2 / (var_b**2 / (base.size - 1) + var_n**2 / (new.size - 1))
    return _t_test(difference, se, df, alpha, back)


def paired(base: np.ndarray, new: np.ndarray, alpha: float, log: bool = True) -> Test:
    """The paired t test of `new` against `base`, run k of one side paired with run k of the
    other (the same round of an interleaved run, Note [Repetitions]): the mean of the
    differences (of the logarithms when `log`) with its t interval and p-value, n - 1
    degrees of freedom. Each side 2 or more finite values, as many on both. Differences
    without spread: p 1 and a point interval when they are 0, else p 0."""
    base, new = np.asarray(base, float), np.asarray(new, float)
    if base.size != new.size or base.size < 2:
        raise ValueError(f"paired needs 2 or more pairs, got {base.size} and {new.size} runs")
    if log:
        base, new = np.log(base), np.log(new)
    back = np.exp if log else (lambda x: x)
    differences = new - base
    difference = float(differences.mean())
    se = float(differences.std(ddof=1)) / math.sqrt(differences.size)
    return _t_test(difference, se, differences.size - 1, alpha, back)


def is_noise(reason: str) -> bool:
    """True when every piece of a run's untrusted reason is its noise (NOISE_REASONS)."""
    pieces = [p for p in reason.split("; ") if p]
    return bool(pieces) and all(p.startswith(NOISE_REASONS) for p in pieces)


def untrusted_text(reasons: dict, settings: remedies.Settings = remedies.DEFAULT):
    """(reason, remedy) of a pair with untrusted runs; `reasons`: side ("base" / "new") ->
    list of trust reasons of its runs ("" for a trusted run); `settings`: the cells' (the
    remedies fit their kind, remedies.py). ("", "") when all are trusted."""
    parts, found_remedies = [], []
    for side, found in reasons.items():
        unique = list(dict.fromkeys(r for r in found if r))
        if not unique:
            continue
        bad = sum(bool(r) for r in found)
        runs = f" ({bad} of {len(found)} runs)" if len(found) > 1 else ""
        parts.append(f"{side} untrusted{runs}: {'; '.join(unique)}")
        for reason in unique:
            for piece in reason.split("; "):
                remedy = remedies.for_reason(piece, settings)
                if remedy and remedy not in found_remedies:
                    found_remedies.append(remedy)
    return "; ".join(parts), "; ".join(found_remedies)


def _every_run_finite(base: np.ndarray, new: np.ndarray, base_runs, new_runs) -> bool:
    """True when `_finite` kept every run of both sides and they are as many: run k of one
    side can still be paired with run k of the other."""
    return base.size == new.size == len(base_runs) == len(new_runs)


def _finite(values) -> np.ndarray:
    array = np.asarray([v for v in values if v is not None], float)
    return array[np.isfinite(array)]


def judge(
    base_runs,
    new_runs,
    alpha: float,
    untrusted: tuple[str, str] = ("", ""),
    pairs: bool = False,
    noise: Noise | None = None,
    settings: remedies.Settings = remedies.DEFAULT,
) -> dict:
    """The figures of a pair from its runs' judged figures (seconds, one per run; Note [The
    judged statistic]): `n_base` and `n_new` (runs), `base_s` and `new_s` (median over the
    runs), `ratio` and `change` (the test's estimate: ratio of geometric means; with one run
    on a side the ratio of the two figures), `ci_low`, `ci_high`, `p_value` and
    `resolution` (resolution.resolution; NaN without a test), and `verdict` ("" when still
    to decide, see `decide`; `inconclusive` with one run on a side, an untrusted side, or
    noisy runs the change does not clear), `reason` and `remedy`. `untrusted`: (reason,
    remedy) of untrusted_text; `noise`: the runs untrusted for their noise alone, weighed
    against the change (Note [Noise weighed against the change]); `settings`: the cells'
    (remedies.py). Each side needs one run or more. `pairs`: run k of one side is paired
    with run k of the other (as many runs on both, every one finite): the paired test."""
    base, new = _finite(base_runs), _finite(new_runs)
    pairs = pairs and _every_run_finite(base, new, base_runs, new_runs)
    if base.size == 0 or new.size == 0:
        raise ValueError("judge needs one run or more on each side")
    row = {
        "n_base": int(base.size),
        "n_new": int(new.size),
        "base_s": float(np.median(base)),
        "new_s": float(np.median(new)),
        "ci_low": math.nan,
        "ci_high": math.nan,
        "p_value": math.nan,
        "resolution": math.nan,
        "verdict": "",
        "reason": "",
        "remedy": "",
    }
    if base.size >= 2 and new.size >= 2:
        test = paired(base, new, alpha) if pairs else welch(base, new, alpha)
        row.update(ratio=test.estimate, ci_low=test.low, ci_high=test.high, p_value=test.p_value)
        row["resolution"] = resolution(test.low, test.high)
    else:
        row["ratio"] = row["new_s"] / row["base_s"]
        row.update(verdict=INCONCLUSIVE, reason=_one_run_reason(base.size, new.size))
        row["remedy"] = remedies.more_runs(3, settings)
    row["change"] = row["ratio"] - 1.0
    if noise is not None and noise.reason:
        _weigh(row, noise, settings)
    if untrusted[0]:
        reason = "; ".join(r for r in (row["reason"], untrusted[0]) if r)
        remedy = "; ".join(r for r in (row["remedy"], untrusted[1]) if r)
        row.update(verdict=INCONCLUSIVE, reason=reason, remedy=remedy)
    return row


def clears(row: dict, spread: float) -> bool:
    """The change's interval lies wholly beyond +-spread (Note [Noise weighed against the
    change]); never with an unknown spread or interval."""
    if not math.isfinite(spread):
        return False
    return row["ci_low"] > 1.0 + spread or row["ci_high"] < 1.0 / (1.0 + spread)


def _weigh(row: dict, noise: Noise, settings: remedies.Settings) -> None:
    """Weighs noisy runs against the row's change (Note [Noise weighed against the change]):
    a note when the change clears their spread, else `inconclusive` with the reason and
    the noise's remedy (more warm-up for a drift; pairs.finish adds runs or iterations by
    the spread that dominates)."""
    spread = f"+-{noise.spread:.1%}" if math.isfinite(noise.spread) else "unknown"
    warmup = remedies.more_warmup(settings) if "warm-up drift" in noise.reason else ""
    if row["verdict"]:  # one run a side: already inconclusive
        row["reason"] = f"{row['reason']}; {noise.reason}"
        row["remedy"] = "; ".join(r for r in (row["remedy"], warmup) if r)
        return
    if clears(row, noise.spread):
        row["reason"] = f"{noise.reason}; weighed: the change clears their {JUDGED_NAME}'s {spread}"
        return
    row.update(
        verdict=INCONCLUSIVE,
        noise_undecided=True,
        reason=(
            f"{noise.reason}; the change [{row['ci_low'] - 1:+.1%}, {row['ci_high'] - 1:+.1%}] "
            f"does not clear those runs' own {JUDGED_NAME} interval {spread}"
        ),
        remedy="; ".join(r for r in (noise.remedy, warmup) if r),
    )


def _one_run_reason(n_base: int, n_new: int) -> str:
    if n_base == 1 and n_new == 1:
        return ONE_RUN
    side = "base" if n_base == 1 else "new"
    return f"one run on the {side} side, run-to-run variation unknown"


def decide(row: dict, threshold: float, alpha: float, p_adjusted: float | None = None) -> str:
    """The verdict of a judged row (module doc): its own when already given
    (`inconclusive`), else from `p_adjusted` (the row's p-value when None), its `change`
    and the threshold."""
    if row.get("verdict"):
        return row["verdict"]
    p = row["p_value"] if p_adjusted is None else p_adjusted
    if not p < alpha:
        low, high = row.get("ci_low", math.nan), row.get("ci_high", math.nan)
        if low >= 1.0 / (1.0 + threshold) and high <= 1.0 + threshold:  # equivalence
            return WITHIN_THRESHOLD
        return NOT_SIGNIFICANT
    if row["change"] > threshold:
        return REGRESSION
    if -row["change"] > threshold:
        return IMPROVEMENT
    return WITHIN_THRESHOLD


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjustment of the p-values `p` (family-wise error)."""
    order = np.argsort(p)
    adjusted = np.empty_like(p)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (p.size - rank) * p[index]))
        adjusted[index] = running
    return adjusted


def phase_change(base_runs, new_runs, alpha: float, pairs: bool = False) -> dict:
    """The change of one phase between two sides from its run medians (seconds): `base_s`,
    `new_s` (medians over runs), `delta_s` (difference of the means; of the medians with one
    run on a side), `ci_low_s`, `ci_high_s`, `p_value` (NaN without a test) and `changed`
    (p < alpha). `pairs`: as judge's."""
    base, new = _finite(base_runs), _finite(new_runs)
    pairs = pairs and _every_run_finite(base, new, base_runs, new_runs)
    out = {
        "base_s": float(np.median(base)) if base.size else math.nan,
        "new_s": float(np.median(new)) if new.size else math.nan,
        "delta_s": math.nan,
        "ci_low_s": math.nan,
        "ci_high_s": math.nan,
        "p_value": math.nan,
        "changed": False,
    }
    if base.size and new.size:
        out["delta_s"] = out["new_s"] - out["base_s"]
    if base.size >= 2 and new.size >= 2:
        test = (paired if pairs else welch)(base, new, alpha, log=False)
        out.update(delta_s=test.estimate, ci_low_s=test.low, ci_high_s=test.high)
        out.update(p_value=test.p_value, changed=bool(test.p_value < alpha))
    return out


def _ms(value: float, digits: int) -> str:
    return f"{value * 1e3:.{digits}f}"


def phase_text(phase: str, change: dict) -> str:
    """ "forward +5.1 ms [4.8, 5.4]": a phase's change with its interval (ms)."""
    scale = max(abs(change["delta_s"]), abs(change["ci_high_s"] - change["ci_low_s"]))
    digits = 1 if scale >= 1e-3 else 3
    sign = "+" if change["delta_s"] >= 0 else "-"
    text = f"{phase} {sign}{_ms(abs(change['delta_s']), digits)} ms"
    if math.isfinite(change["ci_low_s"]):
        text += f" [{_ms(change['ci_low_s'], digits)}, {_ms(change['ci_high_s'], digits)}]"
    return text
