#!/usr/bin/env python3
"""Fault tests of `scalebench run` against scalebench_fake (the CLI with the fake CellRunner).

Scenarios (--scenario, or all):
  hang            a cell that never returns: rank 0's watchdog records it as `timeout`
                  (the cells before it stay ok), waits --hang-limit more, and the job ends
                  with exit status 4 and a message naming the cell and --resume.
  slow            a single-worker cell whose one iteration outlasts timeout_s + grace: it
                  is recorded as `timeout` when it returns and the sweep goes on (Note
                  [Late cells]); the job ends with exit status 1, the other cells ok.
  sigkill_resume  SIGKILL the whole mpirun job at 10 random moments, each time followed by
                  `--resume`; then a last --resume completes: exactly the matrix's cells,
                  each once, all ok, the file readable after every kill.
  sigterm_resume  SIGTERM to every rank (as srun delivers it): exit status 3, no cell left
                  `running`; then --resume completes with status 0.
The results file is inspected with `scalebench info --format json`, and with h5py
(dataset shapes) when h5py is importable.
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKERS = 3
CELL_SECONDS = "0.12"  # SCALEBENCH_FAKE_CELL_S: each ok cell sleeps this long

GRID = """name: faults
defaults: {device: cpu, backend: mpi, warmup: 1, iterations: 5, timeout_s: 60}
sweep: {modes: [train, infer], batch_sizes: [4, 8, 16], world_sizes: [1, 2]}
experiments:
  - {name: mlp, model: mlp, input_shape: [16], num_classes: 2}
  - {name: mlp-wide, model: mlp, input_shape: [32], num_classes: 2}
"""  # 24 cells

HANG = """name: hang
defaults: {device: cpu, backend: mpi, warmup: 1, iterations: 5, timeout_s: 1}
sweep: {modes: [train], batch_sizes: [4], world_sizes: [2]}
experiments:
  - {name: a-ok, model: mlp, input_shape: [16], num_classes: 2}
  - {name: b-hang, model: mlp, input_shape: [16], num_classes: 2}
"""

SLOW = """name: slow
defaults: {device: cpu, backend: mpi, warmup: 1, iterations: 5, timeout_s: 1}
sweep: {modes: [train], batch_sizes: [4], world_sizes: [1]}
experiments:
  - {name: a-ok, model: mlp, input_shape: [16], num_classes: 2}
  - {name: b-sleep, model: mlp, input_shape: [16], num_classes: 2}
  - {name: c-ok, model: mlp, input_shape: [16], num_classes: 2}
"""


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


class Runner:
    def __init__(self, args, workdir):
        self.binary = args.binary
        self.mpiexec = args.mpiexec
        self.workdir = Path(workdir)
        self.env = dict(os.environ, SCALEBENCH_FAKE_CELL_S=CELL_SECONDS,
                        OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    def command(self, matrix, out, *extra):
        return [self.mpiexec, "-np", str(WORKERS + 1), "--oversubscribe", "--bind-to", "none",
                self.binary, "run", str(matrix), "-o", str(out), "--quiet", *extra]

    def start(self, matrix, out, *extra):
        return subprocess.Popen(self.command(matrix, out, *extra), env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)

    def run(self, matrix, out, *extra, timeout=120):
        proc = self.start(matrix, out, *extra)
        output, _ = proc.communicate(timeout=timeout)
        return proc.returncode, output

    def info(self, out):
        result = subprocess.run([self.binary, "info", str(out), "--format", "json"],
                                capture_output=True, text=True, env=self.env, check=False)
        check(result.returncode == 0, f"info failed ({result.returncode}): {result.stderr}")
        return json.loads(result.stdout)

    def plan_ids(self, matrix):
        result = subprocess.run([self.binary, "plan", str(matrix), "--format", "json"],
                                capture_output=True, text=True, env=self.env, check=True)
        plan = json.loads(result.stdout)
        cells = plan["cells"] if isinstance(plan, dict) else plan
        return sorted(cell["cell_id"] for cell in cells)


def descendants(pid):
    """Every live process below `pid` (by /proc parent links)."""
    children = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def rank_pids(proc, binary):
    name = Path(binary).name[:15]
    pids = []
    for pid in descendants(proc.pid):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == name:
                pids.append(pid)
        except OSError:
            pass
    return pids


def kill_job(proc):
    """SIGKILL mpirun and every process it started, all at once."""
    victims = [proc.pid] + descendants(proc.pid)
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.communicate()
    deadline = time.time() + 10
    while time.time() < deadline and any(Path(f"/proc/{pid}").exists() and
                                         "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3]
                                         for pid in victims if Path(f"/proc/{pid}/stat").exists()):
        time.sleep(0.05)


def check_h5(out, ids):
    try:
        import h5py  # noqa: PLC0415 (optional)
    except ImportError:
        return
    with h5py.File(out, "r") as f:
        check(sorted(f["cells"].keys()) == ids, "h5py: cell groups differ from the matrix")
        for cell_id in ids:
            group = f["cells"][cell_id]
            status = group.attrs["status"]  # fixed-length strings (layout 1.2) read as bytes
            status = status.decode() if isinstance(status, bytes) else status
            check(status == "ok", f"h5py: {cell_id} not ok ({status!r})")
            spec = json.loads(group.attrs["spec"])
            check(group["timings"].shape[0] == spec["world_size"], f"h5py: {cell_id} shape")


def scenario_hang(runner):
    matrix, out = runner.workdir / "hang.yaml", runner.workdir / "hang.h5"
    matrix.write_text(HANG)
    start = time.time()
    status, output = runner.run(matrix, out, "--watchdog-grace", "1", "--hang-limit", "2",
                                timeout=90)
    check(status == 4, f"hung cell: expected exit 4, got {status}\n{output}")
    check("timed out" in output, f"no clear timeout message:\n{output}")
    check("b-hang" in output and "--resume" in output, f"message names no cell/--resume:\n{output}")
    cells = runner.info(out)["cells"]
    by_name = {c["spec"]["experiment"]: c for c in cells}
    check(by_name["a-ok"]["status"] == "ok", f"a-ok: {by_name['a-ok']}")
    check(by_name["b-hang"]["status"] == "timeout", f"b-hang: {by_name['b-hang']}")
    check("no result within timeout_s" in by_name["b-hang"]["reason"], "timeout reason")
    print(f"hang: timeout recorded, exit 4 after {time.time() - start:.1f} s")


def scenario_slow(runner):
    matrix, out = runner.workdir / "slow.yaml", runner.workdir / "slow.h5"
    matrix.write_text(SLOW)
    status, output = runner.run(matrix, out, "--watchdog-grace", "0", "--hang-limit", "60",
                                timeout=90)
    check(status == 1, f"slow cell: expected exit 1 (a cell timed out), got {status}\n{output}")
    by_name = {c["spec"]["experiment"]: c for c in runner.info(out)["cells"]}
    check(by_name["b-sleep"]["status"] == "timeout", f"b-sleep: {by_name['b-sleep']}")
    check("came back later" in by_name["b-sleep"]["reason"], f"reason: {by_name['b-sleep']}")
    for name in ("a-ok", "c-ok"):
        check(by_name[name]["status"] == "ok", f"{name}: {by_name[name]}")
    print("slow: the late cell is timeout, the sweep went on")


def scenario_sigkill_resume(runner, kills=10):
    matrix, out = runner.workdir / "grid.yaml", runner.workdir / "grid.h5"
    matrix.write_text(GRID)
    ids = runner.plan_ids(matrix)
    rng = random.Random(int(os.environ.get("SCALEBENCH_FAULT_SEED", "12345")))
    for attempt in range(kills):
        proc = runner.start(matrix, out, "--resume")
        time.sleep(rng.uniform(0.3, 2.5))
        finished = proc.poll() is not None
        kill_job(proc)
        if out.exists():
            info = runner.info(out)  # readable after every kill
            present = sorted(c["cell_id"] for c in info["cells"])
            check(set(present) <= set(ids), f"kill {attempt}: unknown cells {present}")
            counts = info["counts"]
        else:
            counts = {}
        print(f"kill {attempt}: {'(already finished) ' if finished else ''}counts {counts}")
    status, output = runner.run(matrix, out, "--resume")
    check(status == 0, f"final --resume: exit {status}\n{output}")
    info = runner.info(out)
    present = [c["cell_id"] for c in info["cells"]]
    check(sorted(present) == ids, f"cells differ from the matrix: {len(present)} vs {len(ids)}")
    check(len(set(present)) == len(present), "duplicated cells")
    check(all(c["status"] == "ok" for c in info["cells"]), "not all cells ok")
    stale = [p.name for p in out.parent.iterdir() if p.name.startswith(out.name + ".tmp")]
    check(not stale, f"stale temporaries left: {stale}")
    check_h5(out, ids)
    print(f"sigkill_resume: {len(ids)} cells ok after {kills} kills, "
          f"run_count {info['provenance'].get('run_count')}")


def scenario_sigterm_resume(runner):
    matrix, out = runner.workdir / "term.yaml", runner.workdir / "term.h5"
    matrix.write_text(GRID)
    ids = runner.plan_ids(matrix)
    proc = runner.start(matrix, out)
    deadline = time.time() + 60
    while time.time() < deadline and not (out.exists() and runner.info(out)["counts"].get("ok")):
        time.sleep(0.1)
    pids = rank_pids(proc, runner.binary)
    check(len(pids) == WORKERS + 1, f"expected {WORKERS + 1} rank processes, found {pids}")
    for pid in pids:  # like srun: every task gets the signal
        os.kill(pid, signal.SIGTERM)
    output, _ = proc.communicate(timeout=120)
    check(proc.returncode == 3, f"SIGTERM: expected exit 3, got {proc.returncode}\n{output}")
    info = runner.info(out)
    statuses = {c["status"] for c in info["cells"]}
    check(statuses <= {"ok"}, f"after SIGTERM: statuses {statuses} (running cells must finish)")
    check(len(info["cells"]) < len(ids), "SIGTERM came too late to interrupt anything")
    done_before = len(info["cells"])
    status, output = runner.run(matrix, out, "--resume")
    check(status == 0, f"--resume after SIGTERM: exit {status}\n{output}")
    info = runner.info(out)
    check(sorted(c["cell_id"] for c in info["cells"]) == ids, "cells differ after resume")
    check(all(c["status"] == "ok" for c in info["cells"]), "not all ok after resume")
    print(f"sigterm_resume: exit 3 with {done_before}/{len(ids)} done, resume completed")


SCENARIOS = {"hang": scenario_hang, "slow": scenario_slow,
             "sigkill_resume": scenario_sigkill_resume,
             "sigterm_resume": scenario_sigterm_resume}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--binary", required=True, help="path of scalebench_fake")
    parser.add_argument("--mpiexec", default="mpiexec")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), action="append")
    args = parser.parse_args()
    failed = 0
    for name in args.scenario or sorted(SCENARIOS):
        with tempfile.TemporaryDirectory(prefix=f"scalebench_faults_{name}_") as workdir:
            try:
                SCENARIOS[name](Runner(args, workdir))
                print(f"PASS {name}")
            except (Failure, subprocess.TimeoutExpired) as error:
                print(f"FAIL {name}: {error}")
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
