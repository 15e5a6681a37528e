"""Checks a scalebench results file for the Slurm end-to-end test (tests/slurm/run.sh).

  check_results.py FILE count-ok               print the number of cells with status ok
  check_results.py FILE all-ok N               every one of N expected cells is ok, run once
  check_results.py FILE snapshot OUT.json      save {cell_id: [status, finished_at]}
  check_results.py FILE resumed SNAP.json N    after a resume: all N cells ok, cells that were
                                               ok in SNAP kept their finished_at (not rerun),
                                               and the file records two runs (run_count == 2)
"""
import json
import sys

import h5py


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def cells(path):
    with h5py.File(path, "r") as f:
        group = f.get("cells", {})
        out = {
            cid: (text(g.attrs["status"]), text(g.attrs.get("finished_at", "")))
            for cid, g in group.items()
        }
        run_count = int(f.attrs.get("run_count", 0))
    return out, run_count


def fail(message):
    print(f"check_results: {message}", file=sys.stderr)
    sys.exit(1)


def check_all_ok(found, expected):
    bad = {cid: s for cid, (s, _) in found.items() if s != "ok"}
    if bad:
        fail(f"cells not ok: {bad}")
    if len(found) != expected:
        fail(f"{len(found)} cells in the file, the matrix has {expected}")


def main(argv):
    path, action = argv[1], argv[2]
    found, run_count = cells(path)
    if action == "count-ok":
        print(sum(1 for s, _ in found.values() if s == "ok"))
    elif action == "all-ok":
        check_all_ok(found, int(argv[3]))
        if run_count != 1:
            fail(f"run_count {run_count}, expected 1")
        print(f"{len(found)} cells ok")
    elif action == "snapshot":
        with open(argv[3], "w") as out:
            json.dump(found, out)
    elif action == "resumed":
        with open(argv[3]) as f:
            before = json.load(f)
        check_all_ok(found, int(argv[4]))
        rerun = [cid for cid, (s, t) in before.items() if s == "ok" and found[cid][1] != t]
        if rerun:
            fail(f"cells finished before the interrupt were run again: {rerun}")
        if run_count != 2:
            fail(f"run_count {run_count}, expected 2 (first job + one resume)")
        done_before = sum(1 for s, _ in before.values() if s == "ok")
        print(f"{len(found)} cells ok: {done_before} from the interrupted job, "
              f"{len(found) - done_before} from the resubmission")
    else:
        fail(f"unknown action {action}")


if __name__ == "__main__":
    main(sys.argv)
