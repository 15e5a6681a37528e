"""The projection checked on simulated nodes (issue 51 item 5): `scalebench project`
fitted on 1 and 2 ranks of one node plus probes, against runs of 4 and 8 ranks on 1, 2 and
4 nodes, four bucket sizes and two link rates. A benchmark: it prints the errors and the
goals, and fails only when it cannot run.

    tests/perf/projection_check.py build/release            # the whole check, ~20 min here
    tests/perf/projection_check.py build/release --quick    # CI's short version, ~3 min

The workload is a replay (docs/replay.md) of ResNet-50's and the zoo transformer's layer
tables (docs/examples/replay/), their times x --time-scale (a faster device than the CPU
they were measured on) and their gradients x --parameter-scale (what 2 cores can reduce
between 8 ranks), with --jitter per rank and iteration: compute is a wait, so 8 ranks fit
on 2 cores and only the communication is real. Nodes are network namespaces joined by a
bridge, each node's link a tbf at the rate (tests/faults/netns_nodes.py); where namespaces
cannot be made (not root) the check runs on one node only, and says so.

Steps: per table, one job of worlds 1 and 2 on one node (the fit); the small probes: 2
workers on one node (the intra-node link) and, per rate, 2 workers on each of 2 nodes (the
inter-node link; --inter-probe-workers 2 for one a node); per world (4, 8), node count (1,
2, 4) and rate, a job of that world across those nodes and a probe of the same layout.
Then per measured cell: `project` (the Python API, as `scalebench project calib.h5 --probe
P.h5 --workers W --gpus-per-node W/nodes --fit-max-world 2` prints it) against the
measurement, once with the probe of the target's layout (the goals: compute, stragglers
and overlap extrapolated from worlds 1 and 2, the link measured where it will run), once
with the small probes (the link extrapolated too). Every job runs Open MPI's ring
allreduce (coll_tuned_allreduce_algorithm 4: the model's algorithm; the tuned component's
own choice switches algorithms by size and count) with mpi_yield_when_idle (waiting ranks
yield their core).

The goals (issue 51): step median |error| <= 3 %, 90th percentile <= 6 %; exposed
communication within 10 % of measured or 1 % of the step; the recommended bucket size's
measured step within 3 % of the best measured one in >= 90 % of the (table, world, nodes,
rate) groups; the 90 % interval of the p95 step covers the measured p95 in >= 85 % of the
cells. Output: a table per cell, the goals as TABLE| lines (tests/perf/run.sh), and with
--out DIR cells.csv, goals.json and table.md (docs/projection.md's table).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "faults"))
sys.path.insert(0, str(REPO / "analysis"))
sys.path.insert(0, str(REPO / "docs" / "examples" / "replay"))

import netns_nodes

MIB = 1 << 20
BUCKETS = (MIB // 4, MIB, 4 * MIB, 25 * MIB)
TABLES = {
    "resnet50": 0.05,
    "transformer": 0.02,
}  # table -> time scale (x the CPU's times)
MPI_OPTIONS = [
    "--mca", "mpi_yield_when_idle", "1",
    "--mca", "coll_tuned_use_dynamic_rules", "1",
    "--mca", "coll_tuned_allreduce_algorithm", "4",
]  # fmt: skip


@dataclass(frozen=True)
class Layout:
    """A job: `workers` ranks over `nodes` nodes at `rate_mbit` (None: one node, no link)."""

    workers: int
    nodes: int
    rate_mbit: float | None

    @property
    def name(self) -> str:
        rate = f"-{self.rate_mbit:g}mbit" if self.rate_mbit else ""
        return f"w{self.workers}-n{self.nodes}{rate}"


def write_tables(work: Path, args) -> dict:
    from make_table import rescale

    paths = {}
    for name, time_scale in TABLES.items():
        if args.quick and name != "resnet50":
            continue
        with open(
            REPO / "docs" / "examples" / "replay" / f"{name}.json", encoding="utf-8"
        ) as f:
            table = rescale(json.load(f), time_scale, args.parameter_scale, args.jitter)
        path = work / f"{name}.json"
        path.write_text(json.dumps(table, indent=1))
        paths[name] = path
    return paths


def write_matrix(path: Path, tables: dict, worlds: list, args) -> Path:
    buckets = [MIB, 25 * MIB] if args.quick else list(BUCKETS)
    lines = [
        "name: projection-check",
        "scheduling: exclusive",
        "defaults:",
        "  device: cpu",
        "  backend: mpi",
        f"  warmup: {args.warmup}",
        f"  iterations: {args.iterations}",
        "  seed: 0",
        "  timeout_s: 300",
        "sweep:",
        "  modes: [train]",
        "  batch_sizes: [8]",
        f"  world_sizes: [{', '.join(map(str, worlds))}]",
        f"  bucket_bytes: [{', '.join(map(str, buckets))}]",
        "experiments:",
    ]
    for name, table in tables.items():
        lines += [f"  - name: {name}", f"    model: {{replay: {table}}}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def node_list(layout: Layout, head_slot: bool) -> list:
    """Nodes of a job: rank 0 (the orchestrator) on the first, beside its workers."""
    per = layout.workers // layout.nodes
    names = [f"node{chr(ord('a') + i)}" for i in range(layout.nodes)]
    rate = layout.rate_mbit if layout.nodes > 1 else None
    return [
        netns_nodes.Node(n, per + (1 if i == 0 and head_slot else 0), rate)
        for i, n in enumerate(names)
    ]


def run_job(
    args, work: Path, layout: Layout, command: list, log: Path, namespaces: bool
) -> None:
    """`mpirun -np workers+1 scalebench <command>` over the layout's nodes."""
    env = dict(
        os.environ,
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMP_NUM_THREADS="1",
    )
    binary = str(Path(args.build) / "bin" / "scalebench")
    np_ = str(layout.workers + 1)
    start = time.monotonic()
    if namespaces:
        with netns_nodes.Nodes(node_list(layout, True), work) as nodes:
            argv = [
                "mpirun",
                *nodes.mpirun_args(),
                *MPI_OPTIONS,
                "-np",
                np_,
                binary,
                *command,
            ]
            done = subprocess.run(
                nodes.on_head(argv),
                check=False,
                env=env,
                capture_output=True,
                text=True,
                timeout=3600,
            )
    else:
        argv = ["mpirun", "--oversubscribe", *MPI_OPTIONS, "-np", np_, binary, *command]
        done = subprocess.run(
            argv, check=False, env=env, capture_output=True, text=True, timeout=3600
        )
    log.write_text(done.stdout + done.stderr)
    print(
        f"  {layout.name}: {' '.join(command[:1])} in {time.monotonic() - start:.0f} s",
        flush=True,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"{layout.name} failed (exit {done.returncode}); its log: {log}"
        )


def measure(args, work: Path, namespaces: bool) -> dict:
    """Runs every job; returns the files: calib, probes per rate, targets per layout."""
    tables = write_tables(work, args)
    files = {"intra": work / "probe-intra.h5", "calib": work / "calib.h5", "inter": {}}
    probe = ["probe", "--ops", "allreduce", "--min-bytes", "64K", "--max-bytes", "32M"]
    probe += ["--factor", "4", "--iterations", "10", "--warmup", "3"]
    one = Layout(2, 1, None)
    run_job(
        args,
        work,
        one,
        [*probe, "-o", str(files["intra"])],
        work / "probe-intra.log",
        namespaces,
    )
    matrix = write_matrix(work / "calib.yaml", tables, [1, 2], args)
    run_job(
        args,
        work,
        one,
        ["run", str(matrix), "-o", str(files["calib"])],
        work / "calib.log",
        namespaces,
    )
    layouts = []
    for workers in args.workers:
        layouts.append(Layout(workers, 1, None))
        if namespaces:
            for nodes in args.nodes:
                if nodes > 1 and workers % nodes == 0:
                    layouts += [Layout(workers, nodes, rate) for rate in args.rates]
    if namespaces:
        for rate in args.rates:
            path = work / f"probe-inter-{rate:g}.h5"
            pair = Layout(args.inter_probe_workers, 2, rate)
            run_job(
                args,
                work,
                pair,
                [*probe, "-o", str(path)],
                path.with_suffix(".log"),
                True,
            )
            files["inter"][rate] = path
    files["targets"], files["at_target"] = {}, {}
    for layout in layouts:
        matrix = write_matrix(
            work / f"{layout.name}.yaml", tables, [layout.workers], args
        )
        out = work / f"{layout.name}.h5"
        run_job(
            args,
            work,
            layout,
            ["run", str(matrix), "-o", str(out)],
            out.with_suffix(".log"),
            namespaces,
        )
        files["targets"][layout] = out
        at = work / f"probe-{layout.name}.h5"
        run_job(
            args,
            work,
            layout,
            [*probe, "-o", str(at)],
            at.with_suffix(".log"),
            namespaces,
        )
        files["at_target"][layout] = at
    return files


def _row_of(frame, cell):
    """The projected row of a measured cell's curve and batch, or None."""
    found = frame[
        (frame.curve == cell.curve_label) & (frame.batch_size == cell.batch_size)
    ]
    return None if found.empty else found.iloc[0]


def compare(files: dict) -> list:
    """Per measured target cell, the projection's figures against the measured ones."""
    from scalebench_analysis.projection.inputs import measured_cells
    from scalebench_analysis.projection.model import ProjectionOptions
    from scalebench_analysis.projection.project import project
    from scalebench_analysis.read.loader import load

    rows = []
    for layout, path in files["targets"].items():
        small = [str(files["intra"])]
        if layout.nodes > 1:
            small.append(str(files["inter"][layout.rate_mbit]))
        per_node = layout.workers // layout.nodes if layout.nodes > 1 else None
        options = ProjectionOptions((layout.workers,), per_node, 2)
        # The link probed at the target's own layout (the goals), and extrapolated from the
        # small probes (2 workers on one node; 2 a node on 2 nodes): the error it adds.
        at_target = [str(files["at_target"][layout])]
        projected = project(str(files["calib"]), at_target, options).rows
        extrapolated = project(str(files["calib"]), small, options).rows
        for cell in measured_cells(load(str(path))):
            row = _row_of(projected, cell)
            far = _row_of(extrapolated, cell)
            if row is None or far is None:
                continue
            rows.append(
                {
                    "table": cell.curve_label.split("/")[0],
                    "bucket_mib": cell.bucket_bytes / MIB,
                    "workers": layout.workers,
                    "nodes": layout.nodes,
                    "hosts": cell.hosts,
                    "rate_mbit": layout.rate_mbit,
                    "step_projected_s": float(row.step_s),
                    "step_measured_s": cell.measured_step_s,
                    "step_error": float(row.step_s) / cell.measured_step_s - 1,
                    "comm_projected_s": float(row.comm_exposed_s),
                    "comm_measured_s": cell.exposed_s,
                    "p95_low_s": float(row.step_p95_low_s),
                    "p95_high_s": float(row.step_p95_high_s),
                    "p95_measured_s": cell.measured_p95_s,
                    "straggler_projected_s": float(row.straggler_s),
                    "step_error_small_probes": float(far.step_s) / cell.measured_step_s
                    - 1,
                    "comm_projected_small_probes_s": float(far.comm_exposed_s),
                }
            )
    return rows


def _quantile(values: list, q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = q * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def goals(rows: list) -> dict:
    errors = [abs(r["step_error"]) for r in rows]
    comm_ok = [
        abs(r["comm_projected_s"] - r["comm_measured_s"])
        <= max(0.10 * r["comm_measured_s"], 0.01 * r["step_measured_s"])
        for r in rows
    ]
    covered = [r["p95_low_s"] <= r["p95_measured_s"] <= r["p95_high_s"] for r in rows]
    groups: dict = {}
    for r in rows:
        groups.setdefault(
            (r["table"], r["workers"], r["nodes"], r["rate_mbit"]), []
        ).append(r)
    bucket_ok = []
    for members in groups.values():
        if len(members) < 2:
            continue
        chosen = min(members, key=lambda r: r["step_projected_s"])
        best = min(r["step_measured_s"] for r in members)
        bucket_ok.append(chosen["step_measured_s"] <= best * 1.03)
    share = lambda flags: sum(flags) / len(flags) if flags else math.nan
    return {
        "cells": len(rows),
        "step_median_abs_error": _quantile(errors, 0.5),
        "step_p90_abs_error": _quantile(errors, 0.9),
        "comm_within_goal": share(comm_ok),
        "bucket_groups": len(bucket_ok),
        "bucket_within_3pct": share(bucket_ok),
        "p95_covered": share(covered),
    }


def report(rows: list, found: dict, out: Path | None, note: str) -> None:
    def ms(v):
        return "-" if v is None or not math.isfinite(v) else f"{v * 1e3:.1f}"

    header = (
        "| table | bucket MiB | workers | nodes | rate Mbit/s | step projected / measured ms "
        "| error | exposed comm projected / measured ms | p95 90 % interval / measured ms "
        "| small probes: error, exposed comm ms |"
    )
    lines = [header, "|" + "---|" * 10]
    for r in sorted(
        rows,
        key=lambda r: (
            r["table"],
            r["workers"],
            r["nodes"],
            r["rate_mbit"] or 0,
            r["bucket_mib"],
        ),
    ):
        lines.append(
            f"| {r['table']} | {r['bucket_mib']:g} | {r['workers']} | {r['nodes']} | "
            f"{r['rate_mbit'] or '-'} | {ms(r['step_projected_s'])} / {ms(r['step_measured_s'])} "
            f"| {r['step_error']:+.1%} | {ms(r['comm_projected_s'])} / {ms(r['comm_measured_s'])} "
            f"| {ms(r['p95_low_s'])}-{ms(r['p95_high_s'])} / {ms(r['p95_measured_s'])} "
            f"| {r['step_error_small_probes']:+.1%}, {ms(r['comm_projected_small_probes_s'])} |"
        )
    print("\n".join(lines))
    print(note)
    figures = [
        ("step median |error|", "<= 3 %", found["step_median_abs_error"], found["step_median_abs_error"] <= 0.03),
        ("step p90 |error|", "<= 6 %", found["step_p90_abs_error"], found["step_p90_abs_error"] <= 0.06),
        ("exposed comm within 10 % or 1 % of step", "all cells", found["comm_within_goal"], found["comm_within_goal"] >= 1.0),
        ("best bucket within 3 % of best", ">= 90 % of groups", found["bucket_within_3pct"], found["bucket_within_3pct"] >= 0.9),
        ("p95 interval covers measured", ">= 85 % of cells", found["p95_covered"], found["p95_covered"] >= 0.85),
    ]  # fmt: skip
    for figure, goal, value, met in figures:
        print(
            f"TABLE|projection_check|{figure}|{goal}|{value:.1%}|{'yes' if met else 'no'}"
        )
    if out:
        out.mkdir(parents=True, exist_ok=True)
        import csv

        with open(out / "cells.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        (out / "goals.json").write_text(json.dumps({**found, "note": note}, indent=1))
        (out / "table.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build", help="build folder holding bin/scalebench")
    parser.add_argument("--quick", action="store_true", help="CI's short version")
    parser.add_argument(
        "--workers", type=lambda t: [int(v) for v in t.split(",")], default=None
    )
    parser.add_argument(
        "--nodes", type=lambda t: [int(v) for v in t.split(",")], default=[1, 2, 4]
    )
    parser.add_argument(
        "--rates", type=lambda t: [float(v) for v in t.split(",")], default=None
    )
    parser.add_argument("--iterations", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument(
        "--inter-probe-workers",
        type=int,
        default=4,
        help="workers of the probe across 2 nodes (4: 2 a node; 2: 1 a node)",
    )
    parser.add_argument("--parameter-scale", type=float, default=0.125)
    parser.add_argument("--jitter", type=float, default=0.03)
    parser.add_argument(
        "--out", type=Path, default=None, help="write cells.csv, goals.json, table.md"
    )
    parser.add_argument("--work", type=Path, default=None, help="keep the runs here")
    parser.add_argument(
        "--one-node", action="store_true", help="no namespaces: one node only"
    )
    args = parser.parse_args()
    args.build = str(Path(args.build).resolve())
    args.workers = args.workers or ([4] if args.quick else [4, 8])
    args.rates = args.rates or ([1000.0] if args.quick else [2000.0, 500.0])
    args.nodes = [1, 2] if args.quick and args.nodes == [1, 2, 4] else args.nodes
    args.iterations = args.iterations or (15 if args.quick else 20)
    namespaces = not args.one_node
    if namespaces:
        try:
            netns_nodes.enter_private_namespaces()
        except netns_nodes.Unavailable as why:
            print(f"simulated nodes unavailable ({why}): one node only", flush=True)
            namespaces = False
    work = args.work or Path(tempfile.mkdtemp(prefix="sb-projection-check-"))
    work.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(
        f"projection_check: work folder {work}; load average {load[0]:.1f} at the start",
        flush=True,
    )
    started = time.monotonic()
    files = measure(args, work, namespaces)
    rows = compare(files)
    if not rows:
        raise SystemExit("no measured cell could be compared with its projection")
    end = os.getloadavg()
    note = (
        f"{len(rows)} cells, {'simulated nodes (network namespaces)' if namespaces else 'one node only'}, "
        f"{time.monotonic() - started:.0f} s; load average {load[0]:.1f} at the start, {end[0]:.1f} at the end"
    )
    report(rows, goals(rows), args.out, note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
