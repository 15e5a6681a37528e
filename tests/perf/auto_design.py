"""The `auto` design of verdict_calibration.py (issue 52 deliver 2): `repetitions: auto`'s
sequential test (Note [The sequential test] in
analysis/scalebench_analysis/tables/sequential.py) on the calibration's runs.

Per trial and scenario: interleaved rounds of one A run and one B run (each round's order
random), looked at after every round r = 3 .. --cap as `scalebench decide` looks (the
paired test of rounds on each run's judged figure at sequential.look_alpha(cap), verdict
as compare decides it under each trust rule); the trial stops at its first look with a
regression, improvement or within threshold. Reported per scenario and rule: A/A false
verdicts (a regression or improvement at any look), detection (a regression), a slower
branch called faster, the trials still undecided at the cap, the median runs a side to a
decision (undecided trials counted at the cap), and the A/A false verdicts as compare
reports them afterwards at alpha 0.05 over every run the looks left (a decided trial's
verdict stands at 0.05; an undecided one is judged again at 0.05).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "analysis"))

from scalebench_analysis.tables import verdict
from scalebench_analysis.tables.decide import DECIDING
from scalebench_analysis.tables.sequential import FIRST_LOOK, look_alpha

#: Trust rules reported (verdict_calibration.RULES): weighed is compare's, off the bound.
RULES = ("weighed", "off")
STATISTIC = "p20"
UNDECIDED = "undecided"


def one_trial(source, judge, delay_s, order, cap, threshold) -> dict:
    """rule -> (verdict at its stop or UNDECIDED, runs a side, compare's verdict after)."""
    a, b, out = [], [], {}
    alpha = look_alpha(cap)
    for r in range(1, cap + 1):
        if order.random() < 0.5:
            a.append(source.run(0.0))
            b.append(source.run(delay_s))
        else:
            b.append(source.run(delay_s))
            a.append(source.run(0.0))
        if r < FIRST_LOOK:
            continue
        for rule in RULES:
            if rule in out:
                continue
            found, _ = judge(a, b, STATISTIC, rule, threshold, True, alpha)
            if found in DECIDING:
                out[rule] = (found, r, found)
        if len(out) == len(RULES):
            return out
    for rule in RULES:
        if rule not in out:
            after, _ = judge(a, b, STATISTIC, rule, threshold, True, 0.05)
            out[rule] = (UNDECIDED, cap, after)
    return out


def run(args, source, quiet_s, scenarios, order, judge) -> None:
    """Runs --trials trials of every scenario and prints the table and TABLE| lines."""
    results = {(s, rule): [] for s, _ in scenarios for rule in RULES}
    for trial in range(args.trials):
        for scenario, fraction in scenarios:
            if hasattr(source, "new_trial"):
                source.new_trial()
            found = one_trial(
                source, judge, fraction * quiet_s, order, args.cap, args.threshold
            )
            for rule, outcome in found.items():
                results[(scenario, rule)].append(outcome)
        if (trial + 1) % max(1, args.trials // 10) == 0:
            print(f"auto: trial {trial + 1}/{args.trials} done", flush=True)
    _print(args, results, scenarios)


def _share(outcomes, wanted) -> str:
    hits = sum(v in wanted for v, _, _ in outcomes)
    return f"{hits}/{len(outcomes)}"


def _print(args, results, scenarios) -> None:
    alpha = look_alpha(args.cap)
    print(
        f"\nauto: looks after rounds {FIRST_LOOK}..{args.cap}, each at alpha {alpha:.4f}; "
        f"threshold {args.threshold:.0%}; statistic {STATISTIC}"
    )
    head = ["scenario", "rule", "false / found", "slower called faster", "undecided"]
    head += ["median runs a side", "A/A false after (compare at 0.05)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for scenario, fraction in scenarios:
        for rule in RULES:
            got = results[(scenario, rule)]
            wanted = (
                (verdict.REGRESSION, verdict.IMPROVEMENT)
                if not fraction
                else (verdict.REGRESSION,)
            )
            wrong = _share(got, (verdict.IMPROVEMENT,)) if fraction else "-"
            after = "-"
            if not fraction:
                bad = sum(f in wanted for _, _, f in got)
                after = f"{bad}/{len(got)}"
            median = float(np.median([r for _, r, _ in got]))
            cells = [
                scenario,
                rule,
                _share(got, wanted),
                wrong,
                _share(got, (UNDECIDED,)),
            ]
            cells += [f"{median:g}", after]
            print("| " + " | ".join(cells) + " |")
            if rule == "weighed":
                rate = sum(v in wanted for v, _, _ in got) / len(got)
                goal = {
                    0.0: ("<= 5%", rate <= 0.05),
                    0.05: (">= 80%", rate >= 0.8),
                }.get(fraction, (">= 95%", rate >= 0.95))
                what = "A/A false verdicts" if not fraction else f"{scenario} found"
                print(
                    f"TABLE|verdict_calibration|auto p20 weighed: {what}|{goal[0]}|{rate:.0%}|"
                    f"{'yes' if goal[1] else 'no'}"
                )
