#!/usr/bin/env python3
"""Safety tests of `scalebench run` against scalebench_fake (issue 15, findings 1-3 and 8).

Scenarios (--scenario, or all):
  second_writer   a second `run --resume` and a `run --force` on the file of a live job are
                  refused with exit status 2 naming the holder (host, pid, start time); the
                  first job's file is intact and it completes; afterwards the lock is gone.
  file_mode       a results file restricted to 0600 stays 0600 after `--resume` rewrites it.
  log_paths       a --log-dir that is a regular file, and a rank-N.log that is a symbolic
                  link, are refused with exit status 2 before anything is written; the
                  link's target is untouched.
  bad_arguments   --retry-failed without --resume, -o equal to the matrix (even with
                  --force), -o a directory with --force: exit status 2 with a clear
                  message, nothing written; a newline in a path is shown escaped.
  disk_full       -o on a 160 KiB tmpfs: when it fills, the job ends with exit status 4 and
                  one line (path, free space, what was kept; no HDF5 stack); the file
                  holds the finished cells; with space again, --resume completes. Skipped
                  (exit 77) where a tmpfs cannot be mounted (not root).
  sigint          SIGINT to every rank (a terminal's Ctrl-C to a foreground job, srun's
                  double Ctrl-C) stops like SIGTERM: running cells finish, exit status 3;
                  a second SIGINT records the running cell `interrupted` and ends at once
                  with exit status 3; --resume then completes.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from orchestrator_faults import GRID, Failure, Runner, check, rank_pids


def wait_for_ok_cells(runner, out, proc, count=1, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        check(proc.poll() is None, "the first job ended too early")
        if out.exists() and runner.info(out)["counts"].get("ok", 0) >= count:
            return
        time.sleep(0.1)
    raise Failure(f"no {count} ok cell(s) in {out} after {timeout} s")


def scenario_second_writer(runner):
    matrix, out = runner.workdir / "grid.yaml", runner.workdir / "grid.h5"
    matrix.write_text(GRID)
    ids = runner.plan_ids(matrix)
    runner.env["SCALEBENCH_FAKE_CELL_S"] = "0.4"
    first = runner.start(matrix, out)
    wait_for_ok_cells(runner, out, first)
    holders = rank_pids(first, runner.binary)
    lock = Path(str(out) + ".lock")
    for extra in (["--resume"], ["--force"], ["--resume", "--retry-failed"]):
        status, output = runner.run(matrix, out, *extra, timeout=60)
        check(status == 2, f"second writer {extra}: expected exit 2, got {status}\n{output}")
        check("being written by another scalebench run" in output, f"{extra}: no reason\n{output}")
        check(any(f"pid {pid}," in output for pid in holders),
              f"{extra}: the holder's pid ({holders}) is not named\n{output}")
        check("started 20" in output and "host " in output, f"{extra}: no host/start\n{output}")
        check(out.exists(), f"{extra}: the live job's file is gone")
    check(lock.exists(), f"no lock file {lock} while the job runs")
    output, _ = first.communicate(timeout=180)
    check(first.returncode == 0, f"first job: exit {first.returncode}\n{output}")
    info = runner.info(out)
    check(sorted(c["cell_id"] for c in info["cells"]) == ids, "first job's cells differ")
    check(all(c["status"] == "ok" for c in info["cells"]), "first job: not all ok")
    check(info["provenance"]["run_count"] == 1, f"run_count {info['provenance']['run_count']}")
    check(not lock.exists(), "the lock file outlived the job")
    runner.env["SCALEBENCH_FAKE_CELL_S"] = "0.01"
    status, output = runner.run(matrix, out, "--resume")
    check(status == 0, f"--resume after the job: exit {status}\n{output}")
    print("second_writer: refused with the holder named; the first job completed")


def scenario_file_mode(runner):
    matrix, out = runner.workdir / "grid.yaml", runner.workdir / "grid.h5"
    matrix.write_text(GRID)
    runner.env["SCALEBENCH_FAKE_CELL_S"] = "0.01"
    status, output = runner.run(matrix, out)
    check(status == 0, f"run: exit {status}\n{output}")
    os.chmod(out, 0o600)
    status, output = runner.run(matrix, out, "--resume")
    check(status == 0, f"--resume: exit {status}\n{output}")
    mode = out.stat().st_mode & 0o7777
    check(mode == 0o600, f"mode after --resume: {oct(mode)}, expected 0o600")
    check(runner.info(out)["provenance"]["run_count"] == 2, "--resume did not rewrite the file")
    print("file_mode: 0600 kept across --resume")


def expect_refused(runner, matrix, out, extra, words, what):
    status, output = runner.run(matrix, out, *extra, timeout=60)
    check(status == 2, f"{what}: expected exit 2, got {status}\n{output}")
    for word in words:
        check(word in output, f"{what}: {word!r} not in the message\n{output}")
    check("Traceback" not in output and "terminate called" not in output, f"{what}: crash\n{output}")
    return output


def scenario_log_paths(runner):
    matrix, out = runner.workdir / "grid.yaml", runner.workdir / "grid.h5"
    matrix.write_text(GRID)
    not_a_dir = runner.workdir / "notadir"
    not_a_dir.write_text("keep\n")
    expect_refused(runner, matrix, out, ["--log-dir", str(not_a_dir)],
                   ["--log-dir", "is not a directory"], "--log-dir a file")
    check(not out.exists(), "--log-dir a file: a results file was written")
    check(not_a_dir.read_text() == "keep\n", "--log-dir a file: the file changed")
    logs, victim = runner.workdir / "logs", runner.workdir / "victim"
    logs.mkdir()
    victim.write_text("secret\n")
    (logs / "rank-1.log").symlink_to(victim)
    expect_refused(runner, matrix, out, ["--log-dir", str(logs)],
                   ["rank-1.log is a symbolic link"], "symlinked rank log")
    check(not out.exists(), "symlinked rank log: a results file was written")
    check(victim.read_text() == "secret\n", "the link's target was written to")
    check(sorted(p.name for p in runner.workdir.iterdir()) ==
          ["grid.yaml", "logs", "notadir", "victim"], "refused runs left files behind")
    print("log_paths: refused with exit 2, nothing written")


def scenario_bad_arguments(runner):
    matrix, out = runner.workdir / "grid.yaml", runner.workdir / "grid.h5"
    matrix.write_text(GRID)
    expect_refused(runner, matrix, out, ["--retry-failed"], ["--retry-failed", "--resume"],
                   "--retry-failed without --resume")
    check(not out.exists(), "--retry-failed without --resume wrote a file")
    expect_refused(runner, matrix, matrix, ["--force"], ["is the matrix file"], "-o the matrix")
    check(matrix.read_text() == GRID, "-o the matrix --force: the matrix was replaced")
    folder = runner.workdir / "folder"
    folder.mkdir()
    expect_refused(runner, matrix, folder, ["--force"], ["is a directory"], "-o a directory")
    check(folder.is_dir() and not any(folder.iterdir()), "-o a directory: it changed")
    newline = runner.workdir / "new\nline.h5"
    newline.write_text("not hdf5")
    output = expect_refused(runner, matrix, newline, [], ["new\\nline.h5"], "newline in -o")
    check(f"{newline}" not in output, f"the newline reached the message raw\n{output}")
    print("bad_arguments: each refused with exit 2 and a clear message")


class Skip(Exception):
    pass


def scenario_disk_full(runner):
    matrix = runner.workdir / "grid.yaml"
    matrix.write_text(GRID)
    ids = runner.plan_ids(matrix)
    small = runner.workdir / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(small)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        raise Skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        out = small / "grid.h5"
        runner.env["SCALEBENCH_FAKE_CELL_S"] = "0.01"
        status, output = runner.run(matrix, out, "--log-dir", str(runner.workdir / "logs"))
        check(status == 4, f"disk full: expected exit 4, got {status}\n{output}")
        lines = [line for line in output.splitlines() if "cannot update results file" in line]
        check(len(lines) == 1, f"expected the message once:\n{output}")
        for words in ("MiB free", "full", "unchanged", "--resume",
                      str(out)):
            check(words in lines[0], f"{words!r} not in the message: {lines[0]}")
        check("HDF5-DIAG" not in output and "H5F" not in output, f"HDF5 stack shown:\n{output}")
        info = runner.info(out)
        kept = [c for c in info["cells"] if c["status"] == "ok"]
        check(kept, "no finished cell was kept")
        check(not [p for p in small.iterdir() if ".tmp" in p.name], "temporary left behind")
        subprocess.run(["mount", "-o", "remount,size=8m", str(small)], check=True)
        status, output = runner.run(matrix, out, "--resume", "--log-dir",
                                    str(runner.workdir / "logs"))
        check(status == 0, f"--resume with space again: exit {status}\n{output}")
        info = runner.info(out)
        check(sorted(c["cell_id"] for c in info["cells"]) == ids, "cells differ after resume")
        check(all(c["status"] == "ok" for c in info["cells"]), "not all ok after resume")
        print(f"disk_full: exit 4 with {len(kept)}/{len(ids)} cells kept, one line; "
              "--resume completed")
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)


def signal_ranks(pids, signum):
    for pid in pids:
        os.kill(pid, signum)


def scenario_sigint(runner):
    matrix, out = runner.workdir / "grid.yaml", runner.workdir / "grid.h5"
    matrix.write_text(GRID)
    ids = runner.plan_ids(matrix)
    runner.env["SCALEBENCH_FAKE_CELL_S"] = "0.3"
    proc = runner.start(matrix, out)
    wait_for_ok_cells(runner, out, proc)
    signal_ranks(rank_pids(proc, runner.binary), signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    check(proc.returncode == 3, f"one SIGINT: expected exit 3, got {proc.returncode}\n{output}")
    info = runner.info(out)
    check({c["status"] for c in info["cells"]} <= {"ok"}, "one SIGINT: a cell did not finish")
    check(len(info["cells"]) < len(ids), "SIGINT came too late to stop anything")

    runner.env["SCALEBENCH_FAKE_CELL_S"] = "3"
    proc = runner.start(matrix, out, "--resume")
    deadline = time.time() + 60
    while time.time() < deadline and not any(
            c["status"] == "running" for c in runner.info(out)["cells"]):
        time.sleep(0.1)
    pids = rank_pids(proc, runner.binary)
    signal_ranks(pids, signal.SIGINT)
    time.sleep(0.3)
    start = time.time()
    signal_ranks(pids, signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    elapsed = time.time() - start
    check(proc.returncode == 3, f"two SIGINTs: expected exit 3, got {proc.returncode}\n{output}")
    check(elapsed < 2.5, f"two SIGINTs: the job took {elapsed:.1f} s to end (a cell is 3 s)")
    statuses = [c["status"] for c in runner.info(out)["cells"]]
    check("interrupted" in statuses and "running" not in statuses, f"statuses {statuses}")

    runner.env["SCALEBENCH_FAKE_CELL_S"] = "0.01"
    status, output = runner.run(matrix, out, "--resume")
    check(status == 0, f"--resume after SIGINT: exit {status}\n{output}")
    info = runner.info(out)
    check(sorted(c["cell_id"] for c in info["cells"]) == ids, "cells differ after resume")
    check(all(c["status"] == "ok" for c in info["cells"]), "not all ok after resume")
    print("sigint: one SIGINT finished the cell (exit 3), two interrupted it (exit 3)")


SCENARIOS = {"second_writer": scenario_second_writer, "file_mode": scenario_file_mode,
             "log_paths": scenario_log_paths, "bad_arguments": scenario_bad_arguments,
             "sigint": scenario_sigint, "disk_full": scenario_disk_full}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True, help="path of scalebench_fake")
    parser.add_argument("--mpiexec", default="mpiexec")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), action="append")
    args = parser.parse_args()
    failed = skipped = 0
    chosen = args.scenario or sorted(SCENARIOS)
    for name in chosen:
        with tempfile.TemporaryDirectory(prefix=f"scalebench_safety_{name}_") as workdir:
            try:
                SCENARIOS[name](Runner(args, workdir))
                print(f"PASS {name}")
            except Skip as reason:
                print(f"SKIP {name}: {reason}")
                skipped += 1
            except (Failure, subprocess.TimeoutExpired) as error:
                print(f"FAIL {name}: {error}")
                failed += 1
    if failed:
        return 1
    return 77 if skipped == len(chosen) else 0  # 77: ctest's SKIP_RETURN_CODE


if __name__ == "__main__":
    sys.exit(main())
