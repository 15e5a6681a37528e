"""A look of `repetitions: auto` (issue 52 deliver 2, Note [Adaptive repetitions] in
orchestrator/adaptive_rounds.h): which series of a results file still need another
round. `python -m scalebench_analysis decide` (output/decide_command.py) prints it for the
orchestrator.

Note [Deciding a series]
~~~~~~~~~~~~~~~~~~~~~~~~
A look r sees the runs of rounds 0 .. r-1 (repetition < r) of every cell, and judges each
series (the runs of one cell, keyed by the cell id of its repetition 0) whose spec has
`repetitions_auto`:

* A compared pair: with two or more branches in the file, each series of a non-baseline
  branch against the series of the baseline branch with the same spec apart from branch
  and commit (experiment, mode, batch, world, variant: runs.match_units, as compare
  --branches matches them). The baseline branch is the matrix's `baseline: {branch: B}`
  when its stored text names one, else the first branch of its `branches:` list, else
  the branch of the file's first cell. Each pair is judged as compare judges it
  (pairs.judged_row: the paired test of rounds on each run's 20th percentile, noisy runs
  weighed against the change; verdict.decide at compare's threshold), at the look's alpha
  of Note [The sequential test] (sequential.look_alpha). A series is decided when every
  pair it is in has a verdict of regression, improvement or within threshold.
* A series in no pair (one branch only, or no partner with ok runs) is decided when its
  resolution is at or below the threshold: the smallest change a comparison of two series
  with its between-run spread and runs could detect at compare's alpha (resolution.py, of
  Welch's interval of its runs' judged figures against themselves). Its spread is then
  known well enough to judge a later comparison; there is no verdict to protect, so the
  look's alpha does not apply.
* A series none of whose runs is ok is decided: more runs of a cell that fails every time
  decide nothing.

`not significant` and `inconclusive` are undecided: the series runs another round, until
its cap (`repetitions`, max_repetitions) or the budget. Only series of `repetitions_auto`
cells are listed; other cells take part as partners with their runs of the same rounds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from ..read.loader import Results
from . import pairs, quality, resolution, runs, verdict
from .compare import GateOptions, branch_view
from .sequential import look_alpha

#: Verdicts that decide a pair (Note [Deciding a series]).
DECIDING = (verdict.REGRESSION, verdict.IMPROVEMENT, verdict.WITHIN_THRESHOLD)
#: The fields of one branch's cells that a pair may differ in.
_PAIR_DROP = ("commit", "branch")
_BASELINE = re.compile(
    r"^baseline:\s*(?:\{[^}\n]*\bbranch:\s*([^,}\s]+)|\n(?:[ \t]+.*\n)*?[ \t]+branch:\s*(\S+))",
    re.M,
)
_TASK_BASELINE = re.compile(r"scalebench\.baseline\.branch=([^\s,;]+)")
_BRANCHES = re.compile(r"^branches:\s*(?:\[\s*([^\],\s]+)|\n[ \t]*-\s*(\S+))", re.M)


@dataclass(frozen=True)
class DecideOptions:
    """compare's threshold and alpha (their defaults), and the trust thresholds."""

    threshold: float = GateOptions.threshold
    alpha: float = GateOptions.alpha
    quality: quality.QualityOptions = field(default_factory=quality.QualityOptions)


@dataclass
class SeriesLook:
    """One `repetitions_auto` series at a look: its id, label, ok runs seen, its cap (the
    spec's `repetitions`), whether it is decided, and why (its pairs' verdicts, or its
    resolution)."""

    series_id: str
    label: str
    runs: int
    cap: int
    decided: bool = False
    why: list = field(default_factory=list)


def baseline_branch(results: Results) -> str:
    """The baseline branch of a file's pairs (Note [Deciding a series]); "" without cells."""
    branches = list(dict.fromkeys(results.cells.branch)) if len(results.cells) else []
    text = str(results.meta.get("matrix_text", "") or "")
    for pattern in (_BASELINE, _TASK_BASELINE, _BRANCHES):
        for match in pattern.finditer(text):
            named = next((g for g in match.groups() if g), "").strip("'\"")
            if named in branches:
                return named
    return branches[0] if branches else ""


def _up_to(results: Results, look: int) -> Results:
    """`results` with the runs of rounds 0 .. look-1 only."""
    cells = results.cells
    keep = cells[cells.repetition.fillna(0).astype(int) < look].reset_index(drop=True)
    return replace(results, cells=keep)


def _auto(unit: runs.Unit) -> bool:
    return bool(unit.spec.get("repetitions_auto", False))


def _cap(unit: runs.Unit) -> int:
    return int(unit.spec.get("repetitions", 1) or 1)


def _judge_pair(base, b: runs.Unit, new, n: runs.Unit, options: DecideOptions) -> str:
    """The verdict of one pair at the look's alpha (Note [The sequential test])."""
    row = pairs.judged_row(base, b, new, n, options.alpha)  # at its looks' alpha
    return verdict.decide(row, options.threshold, row["alpha"])


def _by_resolution(side: pairs.Side, unit: runs.Unit, options: DecideOptions) -> tuple:
    """(decided, why) of a series in no pair: its resolution against the threshold."""
    ok = runs.ok_runs(unit)
    figures = [side.figure(c, unit.mode)[0] for c in ok]
    if not all(math.isfinite(f) for f in figures):
        figures = runs.run_figures(unit, ok)
    if len(figures) < 2:
        return False, f"{len(figures)} ok run: no spread between runs yet"
    test = verdict.welch(figures, figures, options.alpha)
    resolved = resolution.resolution(test.low, test.high)
    relation = "<=" if resolved <= options.threshold else ">"
    why = f"resolution +-{resolved:.1%} {relation} threshold {options.threshold:.0%}"
    return bool(resolved <= options.threshold), why


def _pair_verdicts(sides: dict, units: dict, base_name: str, options: DecideOptions) -> dict:
    """unit id -> [(verdict, text)] of every judged pair with a `repetitions_auto` side:
    each series of another branch against its match on `base_name`."""
    verdicts: dict = {}
    for branch in units:
        if branch == base_name:
            continue
        for b_id, n_id, _ in runs.match_units(units[base_name], units[branch], _PAIR_DROP):
            b, n = units[base_name].get(b_id), units[branch].get(n_id)
            if b is None or n is None or not (_auto(b) or _auto(n)):
                continue
            if not runs.ok_runs(b) or not runs.ok_runs(n):
                continue
            found = _judge_pair(sides[base_name], b, sides[branch], n, options)
            verdicts.setdefault(b_id, []).append((found, f"{found} ({branch} vs {base_name})"))
            verdicts.setdefault(n_id, []).append((found, f"{found} (vs {base_name})"))
    return verdicts


def look_at(results: Results, look: int, options: DecideOptions = DecideOptions()) -> list:
    """SeriesLook of every `repetitions_auto` series of `results` at look `look` (Note
    [Deciding a series]), branch by branch in file order."""
    seen = _up_to(results, look)
    sides, units = {}, {}
    for branch in dict.fromkeys(seen.cells.branch):
        view = branch_view(seen, branch)
        sides[branch] = pairs.Side(view, quality.trust_table(view, options.quality))
        units[branch] = runs.units_of(view)
    verdicts = _pair_verdicts(sides, units, baseline_branch(seen), options)
    out = []
    for branch, found in units.items():
        for unit_id, unit in found.items():
            if not _auto(unit):
                continue
            ok = runs.ok_runs(unit)
            one = SeriesLook(unit_id, unit.label, len(ok), _cap(unit))
            if not ok:
                one.decided, one.why = True, [f"no ok run of {len(unit.cells)}"]
            elif unit_id in verdicts:
                one.decided = all(v in DECIDING for v, _ in verdicts[unit_id])
                one.why = [text for _, text in verdicts[unit_id]]
            else:
                one.decided, why = _by_resolution(sides[branch], unit, options)
                one.why = [why]
            out.append(one)
    return out


def look_json(looked: list, look: int, options: DecideOptions = DecideOptions()) -> dict:
    """The orchestrator's answer: {"undecided": [series id, ...], "summary": one line}."""
    decided = [s for s in looked if s.decided]
    undecided = [s for s in looked if not s.decided]
    cap = max((s.cap for s in looked), default=0)
    alpha = f" (a look's alpha {look_alpha(cap, options.alpha):.2g})" if looked else ""
    summary = f"{len(decided)} of {len(looked)} series decided after {look} runs{alpha}"
    parts = [f"{s.label}: {'; '.join(s.why)}" for s in decided[:3]]
    parts += [f"undecided {s.label}: {'; '.join(s.why)}" for s in undecided[:3]]
    if parts:
        summary += ": " + " | ".join(parts)
    if len(decided) > 3 or len(undecided) > 3:
        summary += " | ..."
    return {"undecided": [s.series_id for s in undecided], "summary": summary}
