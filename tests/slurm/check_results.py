"""Checks a scalebench results file for the Slurm end-to-end test (tests/slurm/run.sh).

  check_results.py FILE count-ok               print the number of cells with status ok
  check_results.py FILE all-ok N               every one of N expected cells is ok, run once
  check_results.py FILE snapshot OUT.json      save {cell_id: [status, finished_at]}
  check_results.py FILE resumed SNAP.json N    after a resume: all N cells ok, cells that were
                                               ok in SNAP kept their finished_at (not rerun),
                                               and the file records two runs (run_count == 2)
  check_results.py FILE spans-nodes N NODE...  all N cells ok, each with one rank on each
                                               NODE, every NODE in the root `hosts`, and the
                                               analysis' straggler_nodes table one row per
                                               node of each cell (tests/slurm/two_nodes.sh)
"""
import json
import sys
from pathlib import Path

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


def check_spans_nodes(path, found, expected, nodes):
    """Every cell ran one rank on each of `nodes` (world size == number of nodes), and the
    analysis (the repository's analysis/ package) places them so."""
    check_all_ok(found, expected)
    with h5py.File(path, "r") as f:
        hosts = json.loads(text(f.attrs["hosts"]))
        per_cell = {
            cid: sorted(text(h) for h in g["rank_hosts"][()]) for cid, g in f["cells"].items()
        }
    if not set(nodes) <= set(hosts):
        fail(f"root attribute hosts {hosts}, expected {nodes} among them")
    wrong = {cid: h for cid, h in per_cell.items() if h != sorted(nodes)}
    if wrong:
        fail(f"cells whose ranks are not one on each of {nodes}: {wrong}")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "analysis"))
    import scalebench_analysis as sa

    table = sa.analyze(path).sections.get("straggler_nodes")
    rows = {} if table is None else table.groupby("cell_id").host.apply(sorted).to_dict()
    if rows != {cid: sorted(nodes) for cid in per_cell}:
        fail(f"straggler_nodes rows per cell {rows}, expected {sorted(nodes)} for each cell")
    for cid, h in sorted(per_cell.items()):
        print(f"cell {cid}: ranks on {', '.join(h)}")


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
    elif action == "spans-nodes":
        check_spans_nodes(path, found, int(argv[3]), argv[4:])
    else:
        fail(f"unknown action {action}")


if __name__ == "__main__":
    main(sys.argv)
