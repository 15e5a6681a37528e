#!/usr/bin/env python3
"""A node cut off mid-cell (issue 55): the job ends in bounded time and nothing of scalebench
is left on either node.

Two simulated nodes, each in its own network namespace (netns_nodes.py): nodea (rank 0 and
workers 1, 2; mpirun runs there, as in a batch script) and nodeb (workers 3, 4). A world-4
cell whose ranks talk across both nodes all the time (the fake runner's "chatty" cell: an
MPI_Allreduce every 50 ms) runs first; 0.5 s into it nodeb's link is cut silently (Note [A
silent cut] in netns_nodes.py). Then, checked:
  * rank 0 records the cell `timeout` naming the ranks that stopped answering, ends the job
    after --hang-limit, and the job (mpirun) is over within timeout_s + --watchdog-grace +
    --hang-limit + the launcher guard's 10 s (Note [Launcher guard]) + MARGIN_S after the
    cell started, with exit status 137 (the guard ended mpirun, which waited for nodeb's
    daemon) or 4 (mpirun ended by itself);
  * nodea keeps no process at all; nodeb keeps no scalebench process once the cell's worker
    deadline has passed (Note [Worker deadline]: its ranks end themselves, exit 124). Open
    MPI's daemon on nodeb is not scalebench's: it is reported (it lives until its TCP gives
    up) and ended with the namespaces.
Scenarios (--scenario, or both):
  cut        the link stays cut: `--resume` on nodea alone runs the cells not yet run (the
             timed-out cell stays `timeout`; it needs both nodes).
  transient  the link comes back after the job: nodeb's ranks end, and `--resume
             --retry-failed` on both nodes reruns the timed-out cell, which succeeds.
Skipped (exit 77) with the reason where network namespaces cannot be made. Exit 0 on
success, 1 with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from job_support import Failure
from netns_nodes import (
    Node,
    Nodes,
    SetupError,
    Unavailable,
    enter_private_namespaces,
    skip,
)

TIMEOUT_S = 8  # the cells' timeout_s; the chatty cell talks for half of it
GRACE_S = 2  # --watchdog-grace
HANG_LIMIT_S = 4  # --hang-limit
LAUNCHER_GRACE_S = 10  # kLauncherEndGraceS (protocol/launcher_guard.h)
WORKER_MARGIN_S = 30  # kWorkerDeadlineMarginS (protocol/worker_loop.h)
# What this shared 2-core machine may add to a bound: process start-up, polling, a loaded
# scheduler. Measured figures are printed; only the bounds are checked.
MARGIN_S = 20
CUT_AFTER_S = (
    0.5  # after the file shows the cell running (polling lags on a loaded machine)
)

MATRIX = f"""name: partition
defaults: {{device: cpu, backend: mpi, warmup: 1, iterations: 3, timeout_s: {TIMEOUT_S}}}
sweep: {{modes: [train], batch_sizes: [8]}}
experiments:
  - {{name: a-chatty, model: mlp, input_shape: [16], num_classes: 2, world_sizes: [4]}}
  - {{name: b-rest, model: mlp, input_shape: [16], num_classes: 2, world_sizes: [2]}}
"""


def scalebench_processes(nodes: Nodes, node: str, binary: str) -> list:
    """The node's processes that are scalebench (its ranks, a launcher guard)."""
    name = os.path.basename(binary)
    found = []
    for pid in nodes.processes(node):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except OSError:
            continue
        if exe == name:
            found.append(pid)
    return found


class Partition:
    def __init__(self, args, nodes: Nodes, root: Path):
        self.args = args
        self.nodes = nodes
        self.root = root
        self.matrix = root / "m.yaml"
        self.matrix.write_text(MATRIX)
        self.out = root / "r.h5"
        self.env = dict(
            os.environ,
            TMPDIR=str(root),
            OMPI_ALLOW_RUN_AS_ROOT="1",
            OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
            OMP_NUM_THREADS="1",
        )

    def start(self, hosts: list, ranks: int, *extra: str) -> subprocess.Popen:
        """scalebench run under mpirun on nodea, over `hosts`."""
        slots = ",".join(f"{h}:{self.nodes.nodes[h].slots}" for h in hosts)
        command = [
            self.args.mpiexec, *self.nodes.mpirun_args(), "--host", slots,
            "-np", str(ranks), "--map-by", "slot", "-x", "TMPDIR", "-x", "OMP_NUM_THREADS",
            self.args.binary, "run", str(self.matrix), "-o", str(self.out), "--quiet",
            "--watchdog-grace", str(GRACE_S), "--hang-limit", str(HANG_LIMIT_S), *extra,
        ]  # fmt: skip
        return subprocess.Popen(
            self.nodes.on_node("nodea", command),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.env,
        )

    def info(self) -> dict:
        result = subprocess.run(
            [self.args.binary, "info", str(self.out), "--format", "json"],
            capture_output=True,
            text=True,
            env=self.env,
            check=False,
        )
        if result.returncode != 0:
            raise Failure(f"info exited {result.returncode}: {result.stderr.strip()}")
        return {c["spec"]["experiment"]: c for c in json.loads(result.stdout)["cells"]}

    def wait_running(self, job: subprocess.Popen) -> float:
        """Waits until the chatty cell is `running` in the file; returns that moment."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and job.poll() is None:
            if self.out.exists():
                try:
                    cells = self.info()
                except (Failure, json.JSONDecodeError, KeyError):
                    cells = {}
                if cells.get("a-chatty", {}).get("status") == "running":
                    return time.monotonic()
            time.sleep(0.1)
        job.kill()
        raise Failure("the chatty cell never ran:\n" + job.communicate()[0][-3000:])

    def cut_mid_cell(self) -> tuple:
        """Runs the job, cuts nodeb mid-cell; returns (started, ended, status, output)."""
        job = self.start(["nodea", "nodeb"], 5)
        started = self.wait_running(job)
        time.sleep(CUT_AFTER_S)
        self.nodes.cut("nodeb")
        bound_s = TIMEOUT_S + GRACE_S + HANG_LIMIT_S + LAUNCHER_GRACE_S + MARGIN_S
        try:
            output = job.communicate(timeout=bound_s - (time.monotonic() - started))[0]
        except subprocess.TimeoutExpired:
            job.kill()
            raise Failure(
                f"the job did not end within {bound_s} s of the cell's start:\n"
                + job.communicate()[0][-3000:]
            ) from None
        ended = time.monotonic()
        status = 128 - job.returncode if job.returncode < 0 else job.returncode
        print(
            f"job over {ended - started:.1f} s after the cell started (bound {bound_s} s), "
            f"exit status {status}"
        )
        if status not in (4, 137):
            raise Failure(f"exit status {status}, not 4 or 137:\n{output[-3000:]}")
        if status == 137 and "did not end within" not in output:
            raise Failure(
                "mpirun was ended without the guard's line:\n" + output[-3000:]
            )
        return started, ended, status, output

    def check_file(self) -> None:
        cells = self.info()
        chatty = cells.get("a-chatty", {})
        reason = chatty.get("reason", "")
        if chatty.get("status") != "timeout" or "ranks 1,2,3,4" not in reason:
            raise Failure(f"the cut cell is {chatty.get('status')}: {reason!r}")
        if cells.get("b-rest", {}).get("status") not in (None, "running"):
            raise Failure(f"b-rest ran although the job was over: {cells['b-rest']}")
        print(f"file complete: a-chatty timeout ({reason})")

    def check_nothing_left(self, started: float) -> None:
        """nodea at once; nodeb's scalebench ranks by their deadline (+ MARGIN_S)."""
        until = time.monotonic() + 5
        while self.nodes.processes("nodea") and time.monotonic() < until:
            time.sleep(0.1)
        if left := self.nodes.processes("nodea"):
            raise Failure("left on nodea:\n" + self.nodes.describe(left))
        deadline_s = TIMEOUT_S + GRACE_S + HANG_LIMIT_S + WORKER_MARGIN_S
        until = started + deadline_s + MARGIN_S
        while scalebench_processes(self.nodes, "nodeb", self.args.binary):
            if time.monotonic() > until:
                left = scalebench_processes(self.nodes, "nodeb", self.args.binary)
                raise Failure(
                    f"{deadline_s + MARGIN_S} s after the cell started, left on nodeb:\n"
                    + self.nodes.describe(left)
                )
            time.sleep(0.2)
        print(
            f"nodeb's scalebench ranks gone {time.monotonic() - started:.1f} s after the "
            f"cell started (their deadline: {deadline_s} s); left there, not scalebench's: "
            + (self.nodes.describe(self.nodes.processes("nodeb")) or "nothing")
        )

    def resume(self, hosts: list, ranks: int, *extra: str) -> tuple:
        job = self.start(hosts, ranks, "--resume", *extra)
        try:
            output = job.communicate(timeout=120)[0]
        except subprocess.TimeoutExpired:
            job.kill()
            raise Failure(
                "--resume did not end:\n" + job.communicate()[0][-3000:]
            ) from None
        return job.returncode, output


def scenario_cut(run: Partition) -> None:
    started, _, _, _ = run.cut_mid_cell()
    run.check_file()
    run.check_nothing_left(started)
    status, output = run.resume(["nodea"], 3)
    cells = run.info()
    got = {name: cell["status"] for name, cell in cells.items()}
    if status != 1 or got != {"a-chatty": "timeout", "b-rest": "ok"}:
        raise Failure(
            f"--resume on nodea exited {status}, cells {got}:\n{output[-3000:]}"
        )
    print(
        "--resume on nodea alone ran the rest: b-rest ok, a-chatty stays timeout (exit 1)"
    )


def scenario_transient(run: Partition) -> None:
    started, _, _, _ = run.cut_mid_cell()
    run.check_file()
    run.nodes.restore("nodeb")
    restored = time.monotonic()
    run.check_nothing_left(started)
    print(
        f"link restored; nodeb's ranks gone {time.monotonic() - restored:.1f} s after"
    )
    status, output = run.resume(["nodea", "nodeb"], 5, "--retry-failed")
    got = {name: cell["status"] for name, cell in run.info().items()}
    if status != 0 or got != {"a-chatty": "ok", "b-rest": "ok"}:
        raise Failure(
            f"--resume --retry-failed exited {status}, cells {got}:\n{output[-3000:]}"
        )
    print("--resume --retry-failed across both nodes: a-chatty and b-rest ok")


SCENARIOS = {"cut": scenario_cut, "transient": scenario_transient}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--binary", required=True, help="scalebench_fake (its chatty cell)"
    )
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), action="append")
    args = parser.parse_args()
    try:
        enter_private_namespaces()
    except Unavailable as reason:
        skip(str(reason))
    failed = 0
    for name in args.scenario or sorted(SCENARIOS):
        with tempfile.TemporaryDirectory(prefix=f"sb-partition-{name}-") as tmp:
            root = Path(tmp)
            try:
                with Nodes([Node("nodea", 3), Node("nodeb", 2)], root) as nodes:
                    SCENARIOS[name](Partition(args, nodes, root))
                print(f"PASS {name}")
            except (Failure, SetupError) as failure:
                failed += 1
                print(f"FAIL {name}: {failure}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
