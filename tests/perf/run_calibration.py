"""The verdicts' calibration through `scalebench run` itself (issue 52 deliver 4): the rates
of false verdicts and of detections, and the time a decision took, of whole runs of the
tool and `compare --branches`, not of a numpy model of them (verdict_calibration.py).

Each trial makes a git repository whose `main` runs a program cell (pure Python through
scalebench_client: data, forward, backward, each a loop of arithmetic; no framework, so a
cell starts in a fraction of a second) and whose other branches are `aa` (main's code under
another name: A/A) and `p<N>` for each --changes N: N % of main's step added to forward as
more of the same arithmetic (compute, so the load stretches it as it stretches the rest).
One `scalebench run` per trial runs every branch in interleaved rounds, then `compare
--branches main <b> --format json` judges each pair as a user's would (its trust rule, its
threshold 5 %, its alpha).

Designs (--designs): `three` (repetitions: 3, interleaved) and `auto` (repetitions: auto up
to --max-repetitions rounds: the run itself looks after each round and stops a series once
decided). Conditions (--conditions): `quiet`, and `load` (the run under tests/under_load.sh:
two busy processes switching 2 s on, 2 s off).

Printed per condition, design and change: trials, A/A false verdicts (a regression or an
improvement of `aa`), detections (`regression`), slower called faster (an `improvement` of a
`p<N>`), undecided, runs a side (median), the comparison's resolution (median: the smallest
change its runs could show, resolution.py), and the trial's wall time (median), then the
TABLE| lines of tests/perf/run.sh. A measurement, never pass/fail: exit 0 unless a run could
not be made.

Usage: run_calibration.py [--trials N] [--designs three,auto] [--conditions quiet,load]
  [--changes 5,10] [--max-repetitions N] [--build DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "analysis"))
from programfiles import program_repository, python_program_matrix, python_step_program

#: The program of every branch; FORWARD_EXTRA is the share of the step a branch adds.
PROGRAM = python_step_program(
    "\nFORWARD_EXTRA = 0.0\nDATA, FORWARD, BACKWARD = 2000, 6000, 6000\n"
    "EXTRA = int(FORWARD_EXTRA * (DATA + FORWARD + BACKWARD))\n",
    "work(DATA)",
    "work(FORWARD + EXTRA)",
    "work(BACKWARD)",
)
THRESHOLD = "5%"
DECIDED = ("regression", "improvement", "within threshold")


def branches(changes: list) -> dict:
    """name -> the program on that branch (None: main's commit)."""
    out = {"aa": None}
    for change in changes:
        out[f"p{change}"] = PROGRAM.replace(
            "FORWARD_EXTRA = 0.0", f"FORWARD_EXTRA = {change / 100}"
        )
    return out


def one_trial(args, design: str, condition: str, work: Path) -> dict:
    """One run of every branch and its comparisons: branch -> (verdict, runs a side), and
    the run's wall time."""
    names = ["main", *branches(args.changes)]
    repetitions = (
        {"repetitions": 3}
        if design == "three"
        else {"repetitions": "auto", "max_repetitions": args.max_repetitions}
    )
    matrix = python_program_matrix(
        "calibration",
        program_repository(work, "train.py", PROGRAM, branches(args.changes)),
        names,
        {"warmup": 5, "iterations": args.iterations, "cpu_threads": 1, **repetitions},
    )
    (work / "matrix.yaml").write_text(json.dumps(matrix))
    env = dict(
        os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"
    )
    env["SCALEBENCH_RUN_SUMMARY"] = "0"
    scalebench = str(Path(args.build) / "bin" / "scalebench")
    command = ["mpirun", "-np", "2", "--oversubscribe", scalebench, "run"]
    command += [str(work / "matrix.yaml"), "-o", str(work / "r.h5"), "--force", "-q"]
    if condition == "load":
        command = [str(REPO / "tests" / "under_load.sh"), *command]
    started = time.monotonic()
    done = subprocess.run(
        command, check=False, env=env, capture_output=True, text=True, timeout=3600
    )
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(
            f"scalebench run failed ({done.returncode}): {done.stderr[-2000:]}"
        )
    verdicts = {}
    for name in names[1:]:
        out = work / f"{name}.json"
        compare = [
            scalebench,
            "compare",
            str(work / "r.h5"),
            "--branches",
            "main",
            name,
        ]
        compare += ["--threshold", THRESHOLD, "--format", "json", "-o", str(out)]
        subprocess.run(
            compare, check=False, env=env, capture_output=True, text=True, timeout=600
        )
        (row,) = json.loads(out.read_text())["sections"]["regressions"]
        runs = max(int(row["n_base"]), int(row["n_new"]))
        verdicts[name] = (row["verdict"], runs, float(row.get("resolution") or "nan"))
    return {"verdicts": verdicts, "wall_s": wall}


def tally(trials: list, name: str) -> dict:
    found = [t["verdicts"][name] for t in trials]
    verdicts = [v for v, _, _ in found]
    resolutions = [r for _, _, r in found if math.isfinite(r)]
    return {
        "trials": len(found),
        "regression": verdicts.count("regression"),
        "improvement": verdicts.count("improvement"),
        "undecided": sum(v not in DECIDED for v in verdicts),
        "runs": statistics.median(n for _, n, _ in found),
        "resolution": statistics.median(resolutions) if resolutions else float("nan"),
        "wall_s": statistics.median(t["wall_s"] for t in trials),
    }


#: The issue's goals: (design, change %) -> the share of trials that must find it.
GOALS = {("auto", 10): 0.95, ("auto", 5): 0.80, ("three", 10): 0.80}


def table_line(condition: str, design: str, name: str, t: dict) -> str:
    """The TABLE| line of one row (tests/perf/run.sh): A/A false verdicts against 5 %, a
    change's detections against GOALS (no goal: "-")."""
    where = f"TABLE|run_calibration|{condition} {design}:"
    if name == "aa":
        false = t["regression"] + t["improvement"]
        met = "yes" if false <= 0.05 * t["trials"] else "no"
        return f"{where} A/A false verdicts|<= 5 %|{false}/{t['trials']}|{met}"
    goal = GOALS.get((design, int(name[1:])))
    met = (
        "-"
        if goal is None
        else ("yes" if t["regression"] >= goal * t["trials"] else "no")
    )
    shown = "-" if goal is None else f">= {goal:.0%}"
    return f"{where} +{name[1:]} % found|{shown}|{t['regression']}/{t['trials']}|{met}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--designs", default="three,auto")
    parser.add_argument("--conditions", default="quiet,load")
    parser.add_argument(
        "--changes", default="5,10", help="percent of the step, comma-separated"
    )
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--max-repetitions", type=int, default=20)
    parser.add_argument("--build", default=str(REPO / "build" / "release"))
    args = parser.parse_args()
    args.changes = [int(c) for c in args.changes.split(",") if c]
    print(f"load before: {os.getloadavg()[0]:.1f} (1-minute load average)")
    header = (
        "condition | design | branch | trials | A/A false or regression | improvement"
    )
    print(
        header + " | undecided | runs a side (median) | resolution (median) "
        "| wall s a trial (median)"
    )
    for condition in args.conditions.split(","):
        for design in args.designs.split(","):
            trials = []
            for _ in range(args.trials):
                with tempfile.TemporaryDirectory() as folder:
                    trials.append(one_trial(args, design, condition, Path(folder)))
            for name in trials[0]["verdicts"]:
                t = tally(trials, name)
                print(
                    f"{condition} | {design} | {name} | {t['trials']} | {t['regression']} | "
                    f"{t['improvement']} | {t['undecided']} | {t['runs']:g} | "
                    f"+-{t['resolution']:.1%} | {t['wall_s']:.0f}"
                )
                print(table_line(condition, design, name, t))
    print(f"load after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
