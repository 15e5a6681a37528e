"""What the fault scripts that start real `scalebench run` jobs share (program_faults.py,
multinode.py): the processes a job leaves, by a marker in their environment; the job started
in a process session of its own and ended within a bound; the program cells' folders."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path


class Failure(Exception):
    """A scenario's check failed; main() prints it and exits 1."""


def text(value) -> str:
    """An HDF5 string (fixed-length strings come back as bytes)."""
    if hasattr(value, "tobytes") and not isinstance(value, (bytes, str)):
        value = value.tobytes()
    return value.decode().rstrip("\0") if isinstance(value, bytes) else str(value)


def marked_processes(marker: str) -> list:
    """Pids of live processes (not zombies) whose environment or command line holds the
    marker: a program cell's processes carry it in their environment (the matrix's env)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            state = (
                Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            )
            if state in (b"Z", b"X"):
                continue
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if marker.encode() in environ or marker.encode() in cmdline:
            found.append(int(entry))
    return found


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])


def kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def command_line(pid: int) -> str:
    """A process's command line, or "(gone)" when it ended meanwhile."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "(gone)"
    return raw.replace(b"\0", b" ").decode(errors="replace")


def start_job(
    launcher: list, binary: str, matrix: Path, out: Path, env: dict, *extra: str
):
    """`<launcher> <binary> run <matrix> -o <out> --quiet <extra>` in a process session of its
    own (so that end_job can kill everything it started), output captured."""
    return subprocess.Popen(
        [*launcher, binary, "run", str(matrix), "-o", str(out), "--quiet", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )


def end_job(proc: subprocess.Popen, limit_s: float) -> str:
    """The job's output once it ended; a job still running after `limit_s` is killed with
    its whole session and fails the scenario."""
    try:
        return proc.communicate(timeout=limit_s)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output = proc.communicate()[0]
        raise Failure(
            f"the job did not end within {limit_s} s:\n" + output[-3000:]
        ) from None


def cell_folders(tmp: Path) -> list:
    """The program cells' folders left under the ranks' TMPDIR (Note [Program folder sweep])."""
    return sorted(p.name for p in tmp.glob("scalebench-program-*"))
