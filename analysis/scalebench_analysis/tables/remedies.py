"""The remedies a comparison prints: each one a setting the tool accepts for that cell's
kind, addressing the cause it names (issue 54 row 2, issue 52 deliver 3).

Contract (tests/analysis/test_remedies.py walks every remedy text against it):

* settings are named in backticks, as `name: value` or `name` alone;
* a program cell (spec `program.command`) runs its own loop of `{steps}` iterations, so
  `iterations: auto` and `warmup: auto` are never offered for it (matrix/expand.cc refuses
  them); it gets numbers;
* `repetitions: N` always names more repetitions than the cell already had; for a
  `repetitions: auto` cell (stopped at its cap undecided) the remedy is a higher cap,
  `max_repetitions: N`, more than its cap;
* more runs when the spread between runs dominates, more iterations only when the spread
  within a run does (Kalibera & Jones: each level's repetitions follow from its variance;
  `spread_cause`).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The interleaving note of every `repetitions` remedy.
_INTERLEAVED = (
    "interleaved, the default with repetitions, so that a drift of the machine hits both sides"
)
#: Warm-up steps an auto warm-up takes at most (Note [Warmup auto]); a fixed count beyond it
#: is the remedy when the auto rule stopped too early.
_WARMUP_AUTO_CAP = 50


@dataclass(frozen=True)
class Settings:
    """What the compared cells ran with, as far as a remedy needs it: `program` (either side
    a program cell), the largest `repetitions` (with `repetitions: auto` its cap,
    max_repetitions), `iterations` (0: auto) and `warmup` (-1: auto) of the two sides'
    specs, `repetitions_auto` (either side)."""

    program: bool = False
    repetitions: int = 1
    iterations: int = 10
    warmup: int = 1
    repetitions_auto: bool = False

    @classmethod
    def of(cls, *specs: dict) -> Settings:
        def number(spec, key, default):
            value = spec.get(key, default)
            return int(value) if isinstance(value, (int, float)) else default

        program = any(bool((s.get("program") or {}).get("command")) for s in specs)
        return cls(
            program=program,
            repetitions=max(number(s, "repetitions", 1) for s in specs),
            iterations=max(number(s, "measured_iterations", 10) for s in specs),
            warmup=max(number(s, "warmup_iterations", 1) for s in specs),
            repetitions_auto=any(bool(s.get("repetitions_auto", False)) for s in specs),
        )


#: The settings of a cell nothing is known about: a built-in cell, run once.
DEFAULT = Settings()


def more_runs(needed: int, settings: Settings) -> str:
    """`repetitions: N` with N the runs a side `needed`, at least 3 and more than the cells
    had."""
    n = max(int(needed), 3, settings.repetitions + 1)
    if settings.repetitions_auto:  # it stopped at its cap undecided: a higher cap
        return f"let `repetitions: auto` run on to {n} rounds (`max_repetitions: {n}`)"
    return f"run each side {n} times (`repetitions: {n}`, {_INTERLEAVED})"


def more_iterations(settings: Settings) -> str:
    """Longer runs: `iterations: auto` for a built-in cell of fixed count, a number four
    times the current one (half the within-run interval) otherwise."""
    if settings.iterations == 0:  # already auto: its precision is ci_width's
        return "a smaller `ci_width`, with the `max_seconds` it then needs"
    more = 4 * settings.iterations
    if settings.program:
        return f"longer runs (`iterations: {more}`, a number: a program cell runs its own loop)"
    return f"longer runs (`iterations: auto`, or `iterations: {more}`)"


def more_warmup(settings: Settings) -> str:
    """More warm-up: `warmup: auto` for a built-in cell of fixed warm-up, else a number."""
    if settings.program:
        more = max(2 * settings.warmup, settings.warmup + 5)
        return f"more warm-up (`warmup: {more}`, a number: a program cell runs its own loop)"
    if settings.warmup < 0:  # auto stopped, yet the steps still drifted
        return f"a fixed warm-up beyond the auto rule's cap (`warmup: {2 * _WARMUP_AUTO_CAP}`)"
    return f"more warm-up (`warmup: auto`, or `warmup: {max(2 * settings.warmup, 5)}`)"


def for_reason(piece: str, settings: Settings) -> str:
    """The remedy of one of quality.trust_table's reasons ("" when the reason names its own,
    as an auto cell's or a program check's do). A cv is weighed, not remedied here (its
    remedy follows the spread that dominates: `spread_cause`)."""
    if piece.startswith("only "):
        return more_iterations(settings)
    if piece.startswith("warm-up drift"):
        return more_warmup(settings)
    if piece.startswith("replicas out of sync"):
        return "check the data-parallel setup: the replicas' weights differ"
    if piece.startswith("no summary"):
        return "rerun the cell (`scalebench run --resume`): its summary was not written"
    return ""


def spread_cause(between_sd: float, within_se: float) -> str:
    """ "between" when the spread between runs dominates, "within" when a run's own
    imprecision makes up half or more of it. `between_sd`: sd of the log judged figures of
    one side's runs (pooled); `within_se`: a run's standard error of its judged figure,
    relative (root mean square over the runs). Observed between-run variance = the
    machine's state + the within-run error; more iterations shrink only the second."""
    if not within_se > 0.0:
        return "between"
    if not between_sd > 0.0:
        return "within"
    return "within" if within_se**2 >= 0.5 * between_sd**2 else "between"
