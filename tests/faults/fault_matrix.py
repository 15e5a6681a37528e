#!/usr/bin/env python3
"""The fault matrix (issue 15): one injected fault per job, then --resume.

Each scenario arms SCALEBENCH_FAULT=<kind>:<point>:<rank>[:<n>] (Note [Fault injection] in
protocol/fault_injection.h) in `scalebench_fake run` with 2 workers (ranks 1 and 2: the
first and the last worker) and checks that:
  * the fault fired (its "scalebench-fault:" line is in the output);
  * the job ended within BOUND_S seconds with the documented exit status (EXPECTED below,
    the table of docs/reliability.md);
  * no process of the job is left behind;
  * the results file is readable and holds no cell twice; a fault inside a cell leaves
    exactly that cell failed (throw) or oom (oom), with the fault's phase;
  * `--resume --retry-failed` (no fault) then ends with status 0 and exactly the matrix's
    cells, each once, all ok.

Kinds: throw, oom, hang (in a collective), exit0, exit1, abort, sigkill, sigterm.
Points: worker hello, receive, setup, forward, backward, result; rank 0 start, dispatch,
write, finish. Per-cell points fire at their 2nd hit (a finished cell precedes them).

  fault_matrix.py --binary build/release/tests/mpi/scalebench_fake            # all 128
  fault_matrix.py --binary ... --sample 12 [--seed S]                          # CI subset
  fault_matrix.py --binary ... --only sigkill:write:0:2                        # one
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from orchestrator_faults import Failure, check, descendants

KINDS = ["throw", "oom", "hang", "exit0", "exit1", "abort", "sigkill", "sigterm"]
WORKER_POINTS = ["hello", "receive", "setup", "forward", "backward", "result"]
RANK0_POINTS = ["start", "dispatch", "write", "finish"]
ONCE = {"hello", "start", "finish"}  # reached once per job: fire at the 1st hit
CELL_POINTS = {"setup", "forward", "backward"}  # inside the runner: the cell fails alone
WORKERS = 2
BOUND_S = 45  # hang cases: timeout_s 2 + grace 1 + hang limit 3, plus start-up

MATRIX = """name: fault-matrix
defaults: {device: cpu, backend: mpi, warmup: 1, iterations: 3, timeout_s: 2}
sweep: {modes: [train, infer], batch_sizes: [4, 8], world_sizes: [1, 2]}
experiments:
  - {name: mlp, model: mlp, input_shape: [16], num_classes: 2}
"""  # 8 cells; every worker runs at least 2 training cells


def expected_status(kind, point, rank):
    """The documented exit status of the faulty job (docs/reliability.md, fault matrix)."""
    if kind in ("exit0", "exit1"):
        return 1  # mpirun: a rank ended without MPI_Finalize
    if kind == "abort":
        return 134  # mpirun reports the rank's signal: 128 + SIGABRT
    if kind == "sigkill":
        return 137  # 128 + SIGKILL
    if kind == "hang":
        return 4  # rank 0's watchdogs: --hang-limit (cell, hello) or Note [Rank 0 watchdog]
    if kind == "sigterm":
        if rank != 0:
            return 0  # workers ignore stop signals (Note [Stop signals])
        return 0 if point == "finish" else 3  # rank 0 stops dispatching; nothing left: 0
    # throw / oom
    if rank != 0 and point in CELL_POINTS:
        return 1  # the cell is failed / oom, the sweep goes on
    return 4  # outside a cell: the rank's error ends the job


def scenarios():
    result = []
    for kind in KINDS:
        for rank in (1, WORKERS):
            result += [(kind, point, rank) for point in WORKER_POINTS]
        result += [(kind, point, 0) for point in RANK0_POINTS]
    return result


def spec_text(kind, point, rank):
    return f"{kind}:{point}:{rank}" + ("" if point in ONCE else ":2")


def session_processes(sid):
    """Live (non-zombie) processes of session `sid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


class Job:
    def __init__(self, binary, mpiexec, workdir):
        self.binary, self.mpiexec, self.workdir = binary, mpiexec, Path(workdir)
        self.matrix = self.workdir / "matrix.yaml"
        self.matrix.write_text(MATRIX)
        self.env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        self.env.pop("SCALEBENCH_FAULT", None)

    def run(self, out, *extra, fault=None):
        """Runs the job; returns (status, output, seconds). Checks nothing is left behind."""
        env = dict(self.env)
        if fault:
            env["SCALEBENCH_FAULT"] = fault
        command = [self.mpiexec, "-np", str(WORKERS + 1), "--oversubscribe", "--bind-to", "none",
                   self.binary, "run", str(self.matrix), "-o", str(out), "--quiet",
                   "--hang-limit", "3", "--watchdog-grace", "1", *extra]
        start = time.time()
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            output, _ = proc.communicate(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            for pid in [proc.pid] + descendants(proc.pid):
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            proc.communicate()
            raise Failure(f"the job did not end within {BOUND_S} s") from None
        seconds = time.time() - start
        deadline = time.time() + 10
        while session_processes(proc.pid) and time.time() < deadline:
            time.sleep(0.05)
        left = session_processes(proc.pid)
        check(not left, f"processes left behind: {left}")
        return proc.returncode, output, seconds

    def info(self, out):
        result = subprocess.run([self.binary, "info", str(out), "--format", "json"],
                                capture_output=True, text=True, env=self.env, check=False)
        check(result.returncode == 0, f"info failed ({result.returncode}): {result.stderr}")
        return json.loads(result.stdout)

    def plan_ids(self):
        result = subprocess.run([self.binary, "plan", str(self.matrix), "--format", "json"],
                                capture_output=True, text=True, env=self.env, check=True)
        plan = json.loads(result.stdout)
        cells = plan["cells"] if isinstance(plan, dict) else plan
        return sorted(cell["cell_id"] for cell in cells)


def run_scenario(job, kind, point, rank, ids):
    fault = spec_text(kind, point, rank)
    out = job.workdir / "results.h5"
    status, output, seconds = job.run(out, fault=fault)
    check(f"scalebench-fault: {kind} at {point} on rank {rank}" in output,
          f"the fault did not fire:\n{output}")
    want = expected_status(kind, point, rank)
    check(status == want, f"exit status {status}, documented {want}\n{output}")
    if point == "hello" and want != 0:  # the job ended before rank 0 opened anything
        check(not out.exists(), "a results file was written before every worker reported")
        status, output, _ = job.run(out)
        check(status == 0, f"the run after it: exit {status}\n{output}")
        check(sorted(c["cell_id"] for c in job.info(out)["cells"]) == ids, "cells differ")
        return f"exit {want} in {seconds:4.1f} s, nothing written; a new run completes"
    check(out.exists(), "no results file")
    cells = job.info(out)["cells"]
    present = [c["cell_id"] for c in cells]
    check(len(set(present)) == len(present), "a cell is stored twice")
    check(set(present) <= set(ids), "a cell that is not in the matrix")
    if kind in ("throw", "oom") and rank != 0 and point in CELL_POINTS:
        bad = [c for c in cells if c["status"] != "ok"]
        want_status = "failed" if kind == "throw" else "oom"
        check(len(bad) == 1 and bad[0]["status"] == want_status and
              bad[0].get("failed_phase") == point,
              f"expected one {want_status} cell in phase {point}: {bad}")
        check(len(cells) == len(ids), "the sweep did not go on")
    done = sum(c["status"] == "ok" for c in cells)

    status, output, _ = job.run(out, "--resume", "--retry-failed")
    check(status == 0, f"--resume: exit {status}\n{output}")
    cells = job.info(out)["cells"]
    present = sorted(c["cell_id"] for c in cells)
    check(present == ids, f"after --resume: {len(present)} cells, the matrix has {len(ids)}")
    check(all(c["status"] == "ok" for c in cells), "after --resume: not all cells ok")
    return f"exit {want} in {seconds:4.1f} s, {done}/{len(ids)} ok before the resume"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True, help="path of scalebench_fake")
    parser.add_argument("--mpiexec", default="mpiexec")
    parser.add_argument("--sample", type=int, help="run this many random scenarios")
    parser.add_argument("--seed", type=int, help="seed of --sample (default: random, printed)")
    parser.add_argument("--only", action="append", help="kind:point:rank (repeatable)")
    args = parser.parse_args()
    chosen = scenarios()
    if args.only:
        wanted = {tuple(o.split(":")[:3]) for o in args.only}
        chosen = [s for s in chosen if (s[0], s[1], str(s[2])) in wanted]
        check(len(chosen) == len(wanted), f"unknown scenario in {args.only}")
    elif args.sample:
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
        print(f"fault matrix: {args.sample} of {len(chosen)} scenarios, seed {seed} "
              f"(repeat with --sample {args.sample} --seed {seed})")
        chosen = random.Random(seed).sample(chosen, args.sample)
    failed = []
    with tempfile.TemporaryDirectory(prefix="scalebench_fault_matrix_") as root:
        ids = Job(args.binary, args.mpiexec, root).plan_ids()
        for kind, point, rank in chosen:
            name = spec_text(kind, point, rank)
            workdir = Path(root) / name.replace(":", "_")
            workdir.mkdir()
            try:
                print(f"PASS {name:22} {run_scenario(Job(args.binary, args.mpiexec, workdir), kind, point, rank, ids)}", flush=True)
            except Failure as error:
                print(f"FAIL {name}: {error}", flush=True)
                failed.append(name)
    print(f"fault matrix: {len(chosen) - len(failed)}/{len(chosen)} scenarios passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
