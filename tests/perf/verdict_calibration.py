"""Calibration of the verdicts (issue 40): how often does the analysis' judgement of a
difference (analysis/scalebench_analysis/tables/verdict.py, Note [Runs are the unit of
evidence]) call a change that is not there (A/A), and how often does it find one that is
(A/B: +3 % and +10 % of the step added to one phase), for four designs:

* one:         one run per side (A, B);
* three:       3 runs per side, one side after the other (AAA BBB);
* interleaved: 3 runs per side in rounds, each round's order random (AB BA AB), Welch's
               test over the runs;
* paired:      the interleaved design's runs judged as pairs (run k of A with run k of B,
               the paired t test: a drift between rounds cancels, at 2 degrees of freedom
               instead of about 4); no runs of its own;
* adaptive:    interleaved pairs, from 3 a side up to --max-pairs, judged after each pair
               at a per-look alpha of 0.016 (Pocock's constant boundary for up to 6 looks
               at an overall 0.05), stopping once decided: significant, or the interval
               inside +-threshold (no change that matters).

A *run* is a fresh Python process timing --iterations steps of a small numpy workload
(phases data, forward, backward; a step of about 10 ms on a 2-core VM) after --warmup
steps, as a cell is a fresh worker: it reports each phase's median and the step's cv. A
run whose cv exceeds --max-cv (10 %) is untrusted, as a fixed-count cell is
(quality.trust_table), and makes its pair inconclusive; --max-cv 1 judges every run, as for
cells that chose their own iterations (judged by their interval, not their cv). B adds a fixed wall-clock spin of 3 % or 10 % of the
quiet step (measured at the start) to its forward phase. Each pair is judged by
verdict.judge / verdict.decide at --threshold (2 % by default, so that +3 % can count) and
alpha 0.05; a detection is a `regression`, and "in forward" that the phase carrying it is
forward (the largest significant phase change, verdict.phase_change).

This is the statistic calibrated on this machine's real run-to-run variation, not the
scalebench binary: the runs are Python processes, not cells under mpirun (a matrix setting
that adds a known delay to one phase does not exist; a program cell whose script takes a
delay argument would be the way to do the same through `scalebench run`).

Run it under a switching background load (tests/under_load.sh: busy 2 s, idle 2 s):

    tests/under_load.sh .venv/bin/python tests/perf/verdict_calibration.py --trials 20

It prints one line per trial, then the table (docs/measurement.md#judging-a-difference
records one) and `TABLE|` lines for tests/perf/run.sh. --trials 2 --iterations 10 is a
quick check (about a minute).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

PHASES = ("data", "forward", "backward")
DESIGNS = ("one", "three", "interleaved", "paired", "adaptive")
SCENARIOS = (("A/A", 0.0), ("+3%", 0.03), ("+10%", 0.10))
LOOK_ALPHA = 0.016


# --- one run (a child process: numpy only) ---------------------------------------------


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def one_run(iterations: int, warmup: int, delay_s: float) -> dict:
    """Times `warmup + iterations` steps; returns the medians of each phase and of the step
    over the measured ones, and the step's cv."""
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
    step = np.array(times["step"])
    return {
        **{p: float(np.median(v)) for p, v in times.items()},
        "cv": float(step.std(ddof=1) / step.mean()),
    }


# --- the benchmark ------------------------------------------------------------------------

_ORDER = np.random.default_rng(20261128)


def run_round(args, delay_s: float, a: list, b: list) -> None:
    """One round of an interleaved design: a run of A and one of B, in an order drawn at
    random (AB or BA), as scalebench's dispatcher shuffles each round
    (orchestrator/dispatch_order.h)."""
    if _ORDER.random() < 0.5:
        a.append(run_once(args, 0.0))
        b.append(run_once(args, delay_s))
    else:
        b.append(run_once(args, delay_s))
        a.append(run_once(args, 0.0))


def run_once(args, delay_s: float) -> dict:
    command = [
        sys.executable,
        __file__,
        "--child",
        "--iterations",
        str(args.iterations),
    ]
    command += ["--warmup", str(args.warmup), "--delay-s", repr(delay_s)]
    one_thread = {
        k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    }
    env = {**os.environ, **one_thread}  # one core a run, as a cell with cpu_threads: 1
    done = subprocess.run(
        command, capture_output=True, text=True, check=True, timeout=300, env=env
    )
    return json.loads(done.stdout)


def judge(
    a_runs: list, b_runs: list, args, alpha: float, pairs: bool = False
) -> tuple[str, dict]:
    """(verdict, judged row) of B against A over their runs, as compare judges them."""
    from scalebench_analysis.tables import verdict

    reasons = {
        side: [
            f"cv {r['cv']:.1%} > {args.max_cv:.0%}" if r["cv"] > args.max_cv else ""
            for r in runs
        ]
        for side, runs in (("base", a_runs), ("new", b_runs))
    }
    row = verdict.judge(
        [r["step"] for r in a_runs],
        [r["step"] for r in b_runs],
        alpha,
        verdict.untrusted_text(reasons),
        pairs=pairs,
    )
    return verdict.decide(row, args.threshold, alpha), row


def carried_by(a_runs: list, b_runs: list, alpha: float) -> str:
    from scalebench_analysis.tables import verdict

    changes = [
        (p, verdict.phase_change([r[p] for r in a_runs], [r[p] for r in b_runs], alpha))
        for p in PHASES
    ]
    changed = [(p, c) for p, c in changes if c["changed"] and c["delta_s"] > 0]
    return max(changed, key=lambda pc: pc[1]["delta_s"])[0] if changed else ""


def design_runs(
    args, design: str, delay_s: float, previous: tuple | None = None
) -> tuple[str, list, list]:
    """Runs one design; returns (verdict, A runs, B runs). `previous`: the interleaved
    design's (verdict, A runs, B runs) of this trial, which the paired design judges."""
    a, b = [], []
    if design == "paired":
        a, b = list(previous[1]), list(previous[2])
        return judge(a, b, args, 0.05, pairs=True)[0], a, b
    if design == "one":
        a.append(run_once(args, 0.0))
        b.append(run_once(args, delay_s))
    elif design == "three":
        a += [run_once(args, 0.0) for _ in range(3)]
        b += [run_once(args, delay_s) for _ in range(3)]
    else:
        for _ in range(3):
            run_round(args, delay_s, a, b)
    if design != "adaptive":
        return judge(a, b, args, 0.05)[0], a, b
    while True:
        decided, row = judge(a, b, args, LOOK_ALPHA)
        inside = (1 - args.threshold) < row["ci_low"] and row["ci_high"] < (
            1 + args.threshold
        )
        if (
            decided in ("regression", "improvement")
            or inside
            or len(a) >= args.max_pairs
        ):
            return decided, a, b
        run_round(args, delay_s, a, b)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--trials", type=int, default=20, help="trials per design and scenario"
    )
    parser.add_argument(
        "--iterations", type=int, default=30, help="measured steps a run"
    )
    parser.add_argument("--warmup", type=int, default=5, help="warm-up steps a run")
    parser.add_argument(
        "--threshold", type=float, default=0.02, help="judged threshold"
    )
    parser.add_argument(
        "--max-pairs", type=int, default=8, help="adaptive: most runs a side"
    )
    parser.add_argument(
        "--max-cv",
        type=float,
        default=0.10,
        help="a run above this cv is untrusted, its pair inconclusive (a fixed-count cell's "
        "10 %% limit; 1 judges every run, as cells that chose their iterations are)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--delay-s", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_run(args.iterations, args.warmup, args.delay_s)))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "analysis"))
    quiet = float(np.median([run_once(args, 0.0)["step"] for _ in range(5)]))
    print(
        f"step {quiet * 1e3:.2f} ms (median of 5 runs); threshold {args.threshold:.0%}, "
        f"max cv {args.max_cv:.0%}, {args.trials} trials, {args.iterations} iterations a run"
    )
    tally = {
        (d, s): {
            "n": 0,
            "hit": 0,
            "phase": 0,
            "inc": 0,
            "runs": 0,
            "noisy": 0,
            "s": 0.0,
        }
        for d in DESIGNS
        for s, _ in SCENARIOS
    }
    spreads = []  # per A/A trial of 6 runs: sd of the log run medians
    for trial in range(args.trials):
        for scenario, fraction in SCENARIOS:
            done, seconds = {}, {}
            for design in DESIGNS:
                start = time.perf_counter()
                done[design] = design_runs(
                    args, design, fraction * quiet, done.get("interleaved")
                )
                # the paired design's runs are the interleaved design's: its time too
                seconds[design] = (
                    time.perf_counter()
                    - start
                    + (seconds["interleaved"] if design == "paired" else 0.0)
                )
                decided, a, b = done[design]
                if fraction == 0.0 and design in ("three", "interleaved"):
                    # A/A: six runs of one code, the run-to-run spread of this trial
                    spreads.append(
                        float(np.std(np.log([r["step"] for r in a + b]), ddof=1))
                    )
                t = tally[(design, scenario)]
                t["s"] += seconds[design]
                t["n"] += 1
                t["runs"] += len(a) + len(b)
                t["noisy"] += sum(r["cv"] > 0.10 for r in a + b)
                t["inc"] += decided == "inconclusive"
                if fraction == 0.0:
                    t["hit"] += decided in ("regression", "improvement")
                elif decided == "regression":
                    t["hit"] += 1
                    t["phase"] += carried_by(a, b, 0.05) == "forward"
                print(
                    f"trial {trial + 1} {scenario:>4} {design:>11}: {decided} "
                    f"({len(a)}+{len(b)} runs)",
                    flush=True,
                )
    print()
    spread = math.sqrt(float(np.mean(np.square(spreads)))) if spreads else math.nan
    print(
        f"run-to-run spread (sd of the log step medians of one code's 6 runs, pooled over "
        f"{len(spreads)} A/A trials): {spread:.3f}; 3 runs a side resolve about "
        f"{2.3 * spread:.0%} (2.3 x the spread, docs/measurement.md)"
    )
    head = (
        "design",
        "runs/trial",
        "A/A false",
        "+3% found",
        "+10% found",
        "+10% in forward",
        "A/A inconcl.",
        "runs cv>10%",
        "s/trial",
    )
    print(" | ".join(head))
    for design in DESIGNS:
        aa, b3, b10 = (tally[(design, s)] for s, _ in SCENARIOS)
        runs = sum(t["runs"] for t in (aa, b3, b10)) / sum(
            t["n"] for t in (aa, b3, b10)
        )
        noisy = sum(t["noisy"] for t in (aa, b3, b10)) / sum(
            t["runs"] for t in (aa, b3, b10)
        )
        seconds = sum(t["s"] for t in (aa, b3, b10)) / sum(
            t["n"] for t in (aa, b3, b10)
        )
        row = (
            design,
            f"{runs:.1f}",
            f"{aa['hit']}/{aa['n']}",
            f"{b3['hit']}/{b3['n']}",
            f"{b10['hit']}/{b10['n']}",
            f"{b10['phase']}/{b10['n']}",
            f"{aa['inc']}/{aa['n']}",
            f"{noisy:.0%}",
            f"{seconds:.1f}",
        )
        print(" | ".join(row))
        rate = aa["hit"] / aa["n"] if aa["n"] else math.nan
        print(
            f"TABLE|verdict_calibration|{design}: A/A false verdicts|<= 5%|{rate:.0%}|"
            f"{'yes' if rate <= 0.05 else 'no'}"
        )
        found = b10["hit"] / b10["n"] if b10["n"] else math.nan
        print(
            f"TABLE|verdict_calibration|{design}: +10% detected|>= 95% (interleaved)|"
            f"{found:.0%}|{'yes' if found >= 0.95 else 'no'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
