#!/usr/bin/env python3
"""Nothing a program cell starts outlives its cell or the job (issue 41 item 1).

Real runs of the LibTorch `scalebench` under mpirun (-np 3: rank 0 and two workers) of one
2-rank program cell whose program (sh) starts a setsid daemon that ignores SIGTERM and then
waits for a release file. Every process of the cell carries a unique marker in its
environment; the run's TMPDIR is private, so its /tmp/scalebench-program-* folders are
those in it.

Scenarios (--scenario, or all):
  kill_worker  SIGKILL worker rank 1 while both programs and daemons run: the job ends, and
               no process with the marker and no cell folder remains; `--resume` (programs
               released) then completes the cell.
  kill_rank0   the same with SIGKILL of rank 0.
  daemon       the program double-forks a setsid daemon and exits 0: the cell is ok, the
               daemon is gone when the run ends, and the cell's record names it (each rank's
               program_output ends with the line naming it; metric
               program_leftover_processes = 1) and says what contained it
               (effective_program_containment).
  stale_folder a folder scalebench-program-<cell>-<pid> of a dead pid (a job whose ranks and
               supervisors were all SIGKILLed) is removed when the next run starts; one of a
               live pid is kept.
Each kill scenario prints the time from the kill to the last process and folder gone (the
figure of docs/reliability.md). Exit 0 on success, 1 with the reason.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from job_support import (
    Failure,
    cell_folders,
    command_line,
    end_job,
    kill_quietly,
    marked_processes,
    parent_of,
    start_job,
    text,
)

CLEAN_LIMIT_S = 20.0  # a bound on the wait, not the figure (printed)

MATRIX = """name: program-faults
defaults: {{device: cpu, warmup: 0, iterations: 1, timeout_s: 120, cpu_threads: 1}}
sweep: {{modes: [train], batch_sizes: [4], world_sizes: [2]}}
experiments:
  - name: held
    program:
      command: [sh, -c, {script}, {state}]
      env: {{SB_FAULT_MARKER: "{marker}"}}
"""

# $0 is the state folder. The daemon ignores SIGTERM (so only SIGKILL ends it), writes its
# pid, and sleeps; the program writes its pid and waits for $0/release.
HELD = (
    '\'(setsid sh -c "trap \\"\\" TERM; echo \\$\\$ > $0/daemon.$RANK; exec sleep 300" &); '
    "echo $$ > $0/program.$RANK; while [ ! -e $0/release ]; do sleep 0.05; done'"
)
DAEMON = (
    '\'(setsid sh -c "trap \\"\\" TERM; echo \\$\\$ > $0/daemon.$RANK; exec sleep 300" &); '
    "while [ ! -s $0/daemon.$RANK ]; do sleep 0.01; done; echo started'"
)


def rank_pid(mpirun_pid: int, rank: int) -> int:
    """The pid of MPI rank `rank` started by this mpirun."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if parent_of(int(entry)) != mpirun_pid:
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if f"OMPI_COMM_WORLD_RANK={rank}\0".encode() in f.read():
                    return int(entry)
        except (OSError, IndexError):
            continue
    raise Failure(f"no rank {rank} under mpirun {mpirun_pid}")


def wait_for(predicate, what: str, limit_s: float = 60.0):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise Failure(f"timed out after {limit_s} s waiting for {what}")


class Runner:
    def __init__(self, args, root: Path):
        self.binary = args.binary
        self.mpiexec = args.mpiexec
        self.root = root
        self.tmp = root / "tmp"  # the ranks' TMPDIR: the cell folders are made here
        self.tmp.mkdir()
        self.state = root / "state"
        self.state.mkdir()
        self.marker = "sbfault-" + uuid.uuid4().hex
        self.env = dict(
            os.environ,
            TMPDIR=str(self.tmp),
            OMPI_ALLOW_RUN_AS_ROOT="1",
            OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
            OMPI_MCA_rmaps_base_oversubscribe="1",
            OMP_NUM_THREADS="1",
        )

    def matrix(self, script: str) -> Path:
        path = self.root / "m.yaml"
        path.write_text(
            MATRIX.format(script=script, state=self.state, marker=self.marker)
        )
        return path

    def start(self, matrix: Path, out: Path, *extra: str) -> subprocess.Popen:
        launcher = [self.mpiexec, "-np", "3", "--oversubscribe"]
        return start_job(launcher, self.binary, matrix, out, self.env, *extra)

    def folders(self) -> list:
        return cell_folders(self.tmp)

    def info(self, out: Path) -> str:
        result = subprocess.run(
            [self.binary, "info", str(out)],
            check=False,
            capture_output=True,
            text=True,
            env=self.env,
        )
        return result.stdout + result.stderr

    def end(self, proc: subprocess.Popen) -> str:
        return end_job(proc, 90)

    def wait_clean(self, since: float) -> float:
        """Seconds from `since` until no marked process and no folder remain."""
        deadline = time.monotonic() + CLEAN_LIMIT_S
        while time.monotonic() < deadline:
            if not marked_processes(self.marker) and not self.folders():
                return time.monotonic() - since
            time.sleep(0.02)
        left = [f"{pid}: {command_line(pid)}" for pid in marked_processes(self.marker)]
        for pid in marked_processes(self.marker):
            kill_quietly(pid)
        raise Failure(
            f"{CLEAN_LIMIT_S} s after the kill, left: processes {left}, "
            f"folders {self.folders()}"
        )


def kill_during_cell(runner: Runner, victim_rank: int) -> None:
    matrix = runner.matrix(HELD)
    out = runner.root / "r.h5"
    proc = runner.start(matrix, out)
    state = runner.state
    wait_for(
        lambda: all(
            (state / f"{kind}.{r}").exists()
            and (state / f"{kind}.{r}").read_text().endswith("\n")
            for kind in ("program", "daemon")
            for r in (0, 1)
        ),
        "both programs and daemons to start",
    )
    if not runner.folders():
        raise Failure("no cell folder in the run's TMPDIR while the cell runs")
    before = len(marked_processes(runner.marker))
    victim = rank_pid(proc.pid, victim_rank)
    killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    output = runner.end(proc)
    if proc.returncode == 0:
        raise Failure("the job exited 0 after SIGKILL of a rank:\n" + output[-2000:])
    seconds = runner.wait_clean(killed_at)
    print(
        f"SIGKILL of rank {victim_rank}: {before} marked processes (2 programs, 2 daemons "
        f"ignoring SIGTERM, their supervisors) and the cell folders gone {seconds:.2f} s "
        f"after the kill (job exit {proc.returncode})"
    )
    (state / "release").write_text("")
    resume = runner.start(matrix, out, "--resume", "--retry-failed")
    output = runner.end(resume)
    if resume.returncode != 0 or "1 ok" not in runner.info(out):
        raise Failure(
            f"--resume exited {resume.returncode}:\n{output[-2000:]}\n"
            + runner.info(out)
        )
    runner.wait_clean(time.monotonic())


def scenario_kill_worker(runner: Runner) -> None:
    kill_during_cell(runner, 1)


def scenario_kill_rank0(runner: Runner) -> None:
    kill_during_cell(runner, 0)


def scenario_daemon(runner: Runner) -> None:
    import h5py  # the project's venv (tests run with SCALEBENCH_PYTHON)

    matrix = runner.matrix(DAEMON)
    out = runner.root / "r.h5"
    proc = runner.start(matrix, out)
    output = runner.end(proc)
    if proc.returncode != 0:
        raise Failure(f"the run exited {proc.returncode}:\n{output[-3000:]}")
    if marked_processes(runner.marker):  # checked at once: ended with the cell
        raise Failure(f"daemons outlived the run: {marked_processes(runner.marker)}")
    if runner.folders():
        raise Failure(f"folders left: {runner.folders()}")
    daemons = {int((runner.state / f"daemon.{r}").read_text()) for r in (0, 1)}
    with h5py.File(out, "r") as f:
        cells = f["cells"]
        cell = cells[next(iter(cells))]
        if text(cell.attrs["status"]) != "ok":
            raise Failure(
                f"the cell is {text(cell.attrs['status'])}: "
                f"{text(cell.attrs.get('reason', ''))}"
            )
        containment = text(cell.attrs.get("effective_program_containment", ""))
        if containment not in ("cgroup", "subreaper"):
            raise Failure(f"effective_program_containment = {containment!r}")
        outputs = [text(o) for o in cell["program_output"][()]]
        named = {
            pid
            for pid in daemons
            if any(f"pid {pid} (sleep) sleep 300" in o for o in outputs)
        }
        if named != daemons:
            raise Failure(
                f"the daemons {sorted(daemons)} are not named in program_output:\n"
                + "\n---\n".join(outputs)
            )
        metrics = cell["rank_metrics"]
        names = json.loads(text(metrics.attrs["names"]))
        if "program_leftover_processes" not in names:
            raise Failure(f"no metric program_leftover_processes among {names}")
        values = list(metrics[()][:, names.index("program_leftover_processes")])
        if values != [1.0, 1.0]:
            raise Failure(f"program_leftover_processes = {values}")
    print(
        f"daemons {sorted(daemons)} ended with the cell and named; containment {containment}"
    )


def scenario_stale_folder(runner: Runner) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid is no one's now (reuse within the test is not a concern)
    stale = runner.tmp / f"scalebench-program-0123abcd-{dead.pid}"
    (stale / "rank0").mkdir(parents=True)
    (stale / "rank0" / "outputs.f32").write_bytes(b"\0" * 64)
    live = runner.tmp / f"scalebench-program-0123abcd-{os.getpid()}"
    live.mkdir()
    matrix = runner.matrix(DAEMON)
    proc = runner.start(matrix, runner.root / "r.h5")
    output = runner.end(proc)
    if proc.returncode != 0:
        raise Failure(f"the run exited {proc.returncode}:\n{output[-3000:]}")
    if stale.exists():
        raise Failure(f"{stale.name} (pid {dead.pid} dead) was not removed")
    if not live.exists():
        raise Failure(f"{live.name} (pid {os.getpid()} alive) was removed")
    print(f"{stale.name} removed at the run's start, {live.name} kept")


SCENARIOS = {
    "kill_worker": scenario_kill_worker,
    "kill_rank0": scenario_kill_rank0,
    "daemon": scenario_daemon,
    "stale_folder": scenario_stale_folder,
}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--binary", required=True, help="the real scalebench executable"
    )
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), action="append")
    args = parser.parse_args()
    failed = 0
    for name in args.scenario or sorted(SCENARIOS):
        with tempfile.TemporaryDirectory(prefix="sb-program-faults-") as tmp:
            runner = Runner(args, Path(tmp))
            try:
                SCENARIOS[name](runner)
                print(f"PASS {name}")
            except Failure as failure:
                failed += 1
                print(f"FAIL {name}: {failure}", file=sys.stderr)
            finally:
                for pid in marked_processes(runner.marker):
                    kill_quietly(pid)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
