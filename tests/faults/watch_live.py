#!/usr/bin/env python3
"""`scalebench watch` follows a real sweep while it runs (issue 17).

Starts `scalebench watch` on a results file that does not exist yet and, once watch says
it is waiting for it, `mpirun -np 2 scalebench run` of three MLP training cells long enough
to report their progress (SCALEBENCH_PROGRESS_INTERVAL=0.2 s). Checks: watch showed cells running with
their ranks and a `measured k/n` progress, exits 0 by itself when the run ends, with a
final block of 3 ok cells; the run exits 0 and its file reads back (`scalebench info`).
Exit status 0 on success, 1 with the reason otherwise.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

MATRIX = """name: watched
defaults: {device: cpu, backend: mpi, warmup: 2, iterations: 300, cpu_threads: 1,
           timeout_s: 300}
experiments:
  - {name: mlp, model: mlp, input_shape: [512], num_classes: 10, modes: [train],
     batch_sizes: [32, 64, 128]}
"""


def fail(message: str) -> None:
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--binary", required=True, help="the real scalebench executable")
    parser.add_argument("--mpiexec", required=True)
    args = parser.parse_args()
    env = dict(os.environ, SCALEBENCH_PROGRESS_INTERVAL="0.2", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "m.yaml").write_text(MATRIX)
        out = root / "r.h5"
        watch = subprocess.Popen(
            [args.binary, "watch", str(out), "--interval", "0.2", "--timeout", "120"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        # The run starts once watch says it is waiting for the file: its interpreter's first
        # start in a fresh environment (bytecode compiled on import) took longer than the
        # whole run in a fresh clone, and watch then saw only the finished file (stop 45's
        # CI). A watch that never gets there is killed after 120 s.
        timer = threading.Timer(120, watch.kill)
        timer.start()
        waiting = watch.stderr.readline()
        timer.cancel()
        if "waiting for" not in waiting:
            watch.kill()
            fail(f"watch did not say it was waiting for the file: {waiting!r}")
        run = subprocess.run(
            [args.mpiexec, "-np", "2", "--oversubscribe", args.binary, "run",
             str(root / "m.yaml"), "-o", str(out), "--quiet"],
            capture_output=True, text=True, timeout=280, env=env)
        if run.returncode != 0:
            watch.kill()
            fail(f"the run exited {run.returncode}: {run.stderr[-2000:]}")
        try:
            shown, errors = watch.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            watch.kill()
            fail("watch did not exit within 60 s of the run's end")
        if watch.returncode != 0:
            fail(f"watch exited {watch.returncode}: {errors}")
        blocks = [b for b in shown.split("\n\n") if b.strip()]
        print(f"watch printed {len(blocks)} refreshes; the last:\n{blocks[-1]}")
        if not any("running:" in b and "on ranks 1" in b for b in blocks):
            fail("no refresh showed a running cell with its ranks:\n" + shown[-3000:])
        if not any("measured " in b and "/300" in b for b in blocks):
            fail("no refresh showed a cell's progress (measured k/300):\n" + shown[-3000:])
        if "(finished;" not in blocks[-1] or "3 ok" not in blocks[-1]:
            fail("the last refresh is not the finished run of 3 ok cells:\n" + blocks[-1])
        info = subprocess.run([args.binary, "info", str(out)], capture_output=True, text=True,
                              env=env)
        if info.returncode != 0 or "3 ok" not in info.stdout:
            fail(f"info of the watched run: {info.returncode} {info.stdout[-1000:]}")
    print("PASS")


if __name__ == "__main__":
    main()
