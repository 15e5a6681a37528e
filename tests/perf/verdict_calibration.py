"""Calibration of the verdicts (issues 40, 52, 54): how often does the analysis' judgement of
a difference (analysis/scalebench_analysis/tables/verdict.py, Note [Runs are the unit of
evidence]) call a change that is not there (A/A), find one that is there (A/B: a fixed
delay of --scenarios' sizes added to the forward phase), and call a slower branch faster,
for each statistic a run could be judged by (the median, the 20th and 10th percentiles
and the minimum of its measured steps, Note [The judged statistic] in run_statistic.py)
and each trust rule:

* cv10:    a run whose cv exceeds 10 % is untrusted and its pair inconclusive (the rule of
           fixed-count cells before issue 54);
* off:     every run judged, whatever its noise;
* weighed: runs above 10 % are weighed against the change (Note [Noise weighed against the
           change] in verdict.py): decided only when the change's interval clears their
           judged figure's own within-run interval. The rule compare uses.

Designs (--designs):

* three:       3 runs a side, one side after the other (AAA BBB), Welch's test;
* interleaved: 3 runs a side in rounds, each round's order random (AB BA AB), Welch's test;
* paired:      the interleaved design's runs judged as pairs of rounds (what compare
               --branches does), no runs of its own.
* auto:        `repetitions: auto` (auto_design.py): rounds until a look of the sequential
               test decides, at most --cap runs a side; its own table
               (docs/repetitions.md#repetitions-auto).

A *run* is a fresh Python process timing --iterations steps of a small numpy workload
(phases data, forward, backward; a step of about 10 ms on a 2-core VM) after --warmup
steps, as a cell is a fresh worker; it reports every measured step of every phase, and the
parent computes each statistic from the same runs, so the statistics are compared on
identical data. With --model the runs are drawn from verdict_model.py's switching one-sided
load instead (no processes: thousands of trials in seconds).

Run it under a switching background load (tests/under_load.sh: busy 2 s, idle 2 s):

    tests/under_load.sh .venv/bin/python tests/perf/verdict_calibration.py --trials 10
    .venv/bin/python tests/perf/verdict_calibration.py --model --trials 1000 --iterations 200

It prints the table (docs/measurement.md#choosing-the-judged-statistic records them) and
`TABLE|` lines for tests/perf/run.sh. --trials 2 --iterations 10 is a quick check.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "analysis"))
sys.path.insert(0, str(HERE))

import auto_design
from scalebench_analysis.tables import run_statistic, verdict
from verdict_model import LoadModel, Machine

PHASES = ("data", "forward", "backward")
DESIGNS = ("three", "interleaved", "paired", "auto")
STATISTICS = {"median": 50.0, "p20": 20.0, "p10": 10.0, "min": 0.0}
RULES = ("cv10", "off", "weighed")
MAX_CV = 0.10
ALPHA = 0.05


# --- one run (a child process: numpy only) ---------------------------------------------


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def one_run(iterations: int, warmup: int, delay_s: float) -> dict:
    """Times `warmup + iterations` steps; returns every measured step's time of each phase
    and of the step."""
    rng = np.random.default_rng()
    weights = rng.standard_normal((256, 256))
    times = {p: [] for p in (*PHASES, "step")}
    for i in range(warmup + iterations):
        start = time.perf_counter()
        batch = np.sort(rng.standard_normal((64, 2048)), axis=1)[:, :256]
        t_data = time.perf_counter()
        hidden = batch @ weights
        for _ in range(6):
            hidden = np.tanh(hidden @ weights)
        _spin(delay_s)
        t_forward = time.perf_counter()
        grad = hidden
        for _ in range(8):
            grad = grad @ weights.T
        t_backward = time.perf_counter()
        if i >= warmup:
            times["data"].append(t_data - start)
            times["forward"].append(t_forward - t_data)
            times["backward"].append(t_backward - t_forward)
            times["step"].append(t_backward - start)
    return {"samples": times}


# --- where runs come from -----------------------------------------------------------------


class ProcessRuns:
    """Runs as fresh processes of this script (`--child`), one BLAS thread each."""

    def __init__(self, args) -> None:
        self.args = args

    def run(self, delay_s: float) -> dict:
        args = self.args
        command = [
            sys.executable,
            __file__,
            "--child",
            "--iterations",
            str(args.iterations),
        ]
        command += ["--warmup", str(args.warmup), "--delay-s", repr(delay_s)]
        one_thread = {
            k: "1"
            for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
        }
        env = {
            **os.environ,
            **one_thread,
        }  # one core a run, as a cell with cpu_threads: 1
        done = subprocess.run(
            command, capture_output=True, text=True, check=True, timeout=600, env=env
        )
        return json.loads(done.stdout)


class ModelRuns:
    """Runs drawn from verdict_model.py; a new Machine (clock, load phase) per trial."""

    def __init__(self, args, rng: np.random.Generator) -> None:
        self.args, self.rng = args, rng
        self.model = LoadModel(run_sd=args.model_run_sd)
        self.machine = Machine(self.model, rng, loaded=not args.model_quiet)

    def new_trial(self) -> None:
        self.machine = Machine(self.model, self.rng, loaded=not self.args.model_quiet)

    def run(self, delay_s: float) -> dict:
        return self.machine.run(self.args.iterations, self.args.warmup, delay_s)


# --- the benchmark ------------------------------------------------------------------------


def design_runs(source, design: str, delay_s: float, order: np.random.Generator):
    """(A runs, B runs) of one design: 3 a side, sequential or in rounds of random order
    (as scalebench's dispatcher shuffles each round, orchestrator/dispatch_order.h)."""
    a, b = [], []
    if design == "three":
        a += [source.run(0.0) for _ in range(3)]
        b += [source.run(delay_s) for _ in range(3)]
        return a, b
    for _ in range(3):
        if order.random() < 0.5:
            a.append(source.run(0.0))
            b.append(source.run(delay_s))
        else:
            b.append(source.run(delay_s))
            a.append(source.run(0.0))
    return a, b


def _cv(run: dict) -> float:
    step = np.asarray(run["samples"]["step"])
    return float(step.std(ddof=1) / step.mean())


def judge(
    a_runs,
    b_runs,
    statistic: str,
    rule: str,
    threshold: float,
    pairs: bool,
    alpha=ALPHA,
):
    """(verdict, row) of B against A, each run judged by `statistic`, under `rule`, at
    `alpha`."""
    percent = STATISTICS[statistic]
    figures = {
        side: [run_statistic.judged_value(r["samples"]["step"], percent) for r in runs]
        for side, runs in (("base", a_runs), ("new", b_runs))
    }
    reasons = {
        side: [
            f"cv {_cv(r):.1%} > {MAX_CV:.0%}" if _cv(r) > MAX_CV else "" for r in runs
        ]
        for side, runs in (("base", a_runs), ("new", b_runs))
    }
    untrusted, noise = ("", ""), None
    if rule == "cv10":
        untrusted = verdict.untrusted_text(reasons)
    elif rule == "weighed" and any(r for found in reasons.values() for r in found):
        spreads = [
            run_statistic.interval_rel(r["samples"]["step"], percent)
            for side, runs in (("base", a_runs), ("new", b_runs))
            for r, why in zip(runs, reasons[side])
            if why
        ]
        noise = verdict.Noise(verdict.untrusted_text(reasons)[0], "", max(spreads))
    row = verdict.judge(figures["base"], figures["new"], alpha, untrusted, pairs, noise)
    return verdict.decide(row, threshold, alpha), row


def carried_by(a_runs, b_runs, statistic: str) -> str:
    """The phase with the largest significant slowdown, each run's phase judged by
    `statistic`."""
    percent = STATISTICS[statistic]

    def figures(runs, phase):
        return [run_statistic.judged_value(r["samples"][phase], percent) for r in runs]

    changes = [
        (p, verdict.phase_change(figures(a_runs, p), figures(b_runs, p), ALPHA))
        for p in PHASES
    ]
    changed = [(p, c) for p, c in changes if c["changed"] and c["delta_s"] > 0]
    return max(changed, key=lambda pc: pc[1]["delta_s"])[0] if changed else ""


def _tally_one(t: dict, decided: str, fraction: float, carried: str) -> None:
    t["n"] += 1
    t["inc"] += decided == verdict.INCONCLUSIVE
    if fraction == 0.0:
        t["hit"] += decided in (verdict.REGRESSION, verdict.IMPROVEMENT)
    else:
        t["hit"] += decided == verdict.REGRESSION
        t["wrong"] += decided == verdict.IMPROVEMENT
        t["phase"] += decided == verdict.REGRESSION and carried == "forward"


def main() -> int:
    args = _parser().parse_args()
    if args.child:
        print(json.dumps(one_run(args.iterations, args.warmup, args.delay_s)))
        return 0
    rng = np.random.default_rng(args.seed)
    order = np.random.default_rng(20261128)
    if args.model:
        source = ModelRuns(args, rng)
        quiet = source.model.step_s
    else:
        source = ProcessRuns(args)
        quiet = float(
            np.median([np.median(source.run(0.0)["samples"]["step"]) for _ in range(5)])
        )
    scenarios = [
        (s, float(s.strip("+%")) / 100.0 if s != "A/A" else 0.0) for s in args.scenarios
    ]
    if "auto" in args.designs:
        auto_design.run(args, source, quiet, scenarios, order, judge)
    designs = [d for d in args.designs if d in DESIGNS and d != "auto"]
    if not designs:
        return 0
    print(
        f"{'model' if args.model else 'processes'}: step {quiet * 1e3:.2f} ms; threshold "
        f"{args.threshold:.0%}, {args.trials} trials, {args.iterations} iterations a run",
        flush=True,
    )
    keys = [
        (d, s, st, r)
        for d in designs
        for s, _ in scenarios
        for st in STATISTICS
        for r in RULES
    ]
    tally = {k: {"n": 0, "hit": 0, "wrong": 0, "inc": 0, "phase": 0} for k in keys}
    noisy, runs_seen, spreads = 0, 0, {st: [] for st in STATISTICS}
    for trial in range(args.trials):
        for scenario, fraction in scenarios:
            if args.model:
                source.new_trial()
            made = {}
            for design in designs:
                if design == "paired":
                    a, b = made.get("interleaved") or design_runs(
                        source, "interleaved", fraction * quiet, order
                    )
                else:
                    a, b = made[design] = design_runs(
                        source, design, fraction * quiet, order
                    )
                if design != "paired":
                    noisy += sum(_cv(r) > MAX_CV for r in a + b)
                    runs_seen += len(a) + len(b)
                for statistic, percent in STATISTICS.items():
                    if fraction == 0.0 and design != "paired":
                        logs = np.log(
                            [
                                run_statistic.judged_value(
                                    r["samples"]["step"], percent
                                )
                                for r in a + b
                            ]
                        )
                        spreads[statistic].append(float(np.std(logs, ddof=1)))
                    carried = carried_by(a, b, statistic) if fraction else ""
                    for rule in RULES:
                        decided, _ = judge(
                            a, b, statistic, rule, args.threshold, design == "paired"
                        )
                        _tally_one(
                            tally[(design, scenario, statistic, rule)],
                            decided,
                            fraction,
                            carried,
                        )
        if not args.model or (trial + 1) % max(1, args.trials // 10) == 0:
            print(f"trial {trial + 1}/{args.trials} done", flush=True)
    _print_table(args, tally, designs, scenarios, noisy / max(runs_seen, 1), spreads)
    return 0


def _print_table(args, tally, designs, scenarios, noisy_share, spreads) -> None:
    print()
    print(f"runs with cv > {MAX_CV:.0%}: {noisy_share:.0%}")
    print(
        "spread between runs of one code (sd of the log judged figures of 6 A/A runs, rms "
        "over trials): "
        + ", ".join(
            f"{st} {np.sqrt(np.mean(np.square(v))):.3f}"
            for st, v in spreads.items()
            if v
        )
    )
    ab = [s for s, f in scenarios if f]
    head = ["design", "statistic", "rule", "A/A false", "A/A inconcl."]
    head += [f"{s} found" for s in ab] + [
        f"{ab[-1]} in forward" if ab else "",
        "slower called faster",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for design in designs:
        for statistic in STATISTICS:
            for rule in RULES:
                aa = (
                    tally[(design, "A/A", statistic, rule)]
                    if ("A/A", 0.0) in scenarios
                    else None
                )
                cells = [design, statistic, rule]
                cells += (
                    [f"{aa['hit']}/{aa['n']}", f"{aa['inc']}/{aa['n']}"]
                    if aa
                    else ["-", "-"]
                )
                wrong = 0
                for s in ab:
                    t = tally[(design, s, statistic, rule)]
                    cells.append(f"{t['hit']}/{t['n']}")
                    wrong += t["wrong"]
                if ab:
                    last = tally[(design, ab[-1], statistic, rule)]
                    cells.append(f"{last['phase']}/{last['n']}")
                cells.append(str(wrong))
                print("| " + " | ".join(cells) + " |")
                if aa and rule == "weighed" and statistic == "p20":
                    rate = aa["hit"] / aa["n"]
                    print(
                        f"TABLE|verdict_calibration|{design} p20 weighed: A/A false verdicts|"
                        f"<= 5%|{rate:.0%}|{'yes' if rate <= 0.05 else 'no'}"
                    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--trials", type=int, default=10, help="trials per design and scenario"
    )
    parser.add_argument(
        "--iterations", type=int, default=30, help="measured steps a run"
    )
    parser.add_argument("--warmup", type=int, default=5, help="warm-up steps a run")
    parser.add_argument(
        "--threshold", type=float, default=0.02, help="judged threshold"
    )
    parser.add_argument(
        "--designs", nargs="+", default=["interleaved", "paired"], choices=DESIGNS
    )
    parser.add_argument(
        "--scenarios",
        nargs="+",
        default=["A/A", "+5%", "+10%"],
        help="A/A and the delays added to forward, as percentages of the quiet step",
    )
    parser.add_argument(
        "--model", action="store_true", help="runs from verdict_model.py"
    )
    parser.add_argument(
        "--model-quiet", action="store_true", help="--model without the load"
    )
    parser.add_argument(
        "--model-run-sd",
        type=float,
        default=0.02,
        help="--model: sd of a run's own state",
    )
    parser.add_argument(
        "--seed", type=int, default=52, help="--model: the seed of the draws"
    )
    parser.add_argument(
        "--cap",
        type=int,
        default=20,
        help="auto: the most runs a side (max_repetitions)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--delay-s", type=float, default=0.0, help=argparse.SUPPRESS)
    return parser


if __name__ == "__main__":
    sys.exit(main())
