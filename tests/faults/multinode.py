#!/usr/bin/env python3
"""Two nodes on one machine (issue 41 item 7; ../shared recipe in docs/reliability.md).

Open MPI launches through an rsh agent that runs each "node" in a new UTS namespace named
after its host (nodea, nodeb on 127.0.0.2 / 127.0.0.3, written into a private /etc/hosts of a
mount namespace of this test), so gethostname, MPI_Get_processor_name and the ranks' TCP
traffic are those of two hosts. mpirun -np 5: rank 0 and workers 1, 2 on nodea, workers 3, 4
on nodeb.

Scenarios (--scenario, or all):
  spans      a built-in DDP cell (MPI allreduce) and a gloo program cell of world size 4 span
             both nodes and complete; a world-2 built-in cell stays on one node; the file
             stores each rank's host; each program saw torchrun's variables of its node
             (NODE_RANK, LOCAL_RANK, LOCAL_WORLD_SIZE = 2, MASTER_ADDR = nodea). The
             analysis' straggler_nodes table of the file has, for each world-4 cell,
             one row per node with the ranks the file places on it.
  node_kill  every process of nodeb (its orted, ranks, supervisors, programs) SIGKILLed while
             a world-4 program cell runs: the job ends, nodea keeps no process of the cell
             (and no cell folder), and `--resume` completes the cell (sweeping nodeb's
             folder, whose owner died with the node).
Skipped (exit 77) with the reason where namespaces cannot be made (unshare --mount --uts
refused: not root, no user namespaces). Exit 0 on success, 1 with the reason.
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
    end_job,
    marked_processes,
    parent_of,
    start_job,
    text,
)

INSIDE = (
    "SCALEBENCH_MULTINODE_INSIDE"  # set when this script runs in its mount namespace
)
HOSTS = {"nodea": "127.0.0.2", "nodeb": "127.0.0.3"}
AGENT = """#!/bin/bash
# rsh agent: [options] host command... -> the command in a new UTS namespace named host.
while [[ $1 == -* ]]; do shift; done
host="$1"; shift
exec unshare --uts bash -c 'hostname "$0"; exec bash -c "$*"' "$host" "$@"
"""
PROGRAM = """import os, socket, sys, time
import scalebench_client as sb
import torch
import torch.distributed as dist

state = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
open(os.path.join(state, f"program.{rank}"), "w").write(f"{os.getpid()}\\n")
while os.environ.get("HOLD") and not os.path.exists(os.path.join(state, "release")):
    time.sleep(0.05)
for _ in range(int(os.environ["SCALEBENCH_WARMUP"]) + int(os.environ["SCALEBENCH_ITERATIONS"])):
    with sb.step():
        with sb.phase("allreduce"):
            t = torch.ones(1024)
            dist.all_reduce(t)
            assert t[0].item() == dist.get_world_size()
sb.metric("node_rank", int(os.environ["NODE_RANK"]))
sb.metric("local_rank", int(os.environ["LOCAL_RANK"]))
sb.metric("local_world_size", int(os.environ["LOCAL_WORLD_SIZE"]))
sb.metric("master_is_nodea", float(os.environ["MASTER_ADDR"] == "nodea"))
sb.metric("host_index", float(["nodea", "nodeb"].index(socket.gethostname())))
dist.destroy_process_group()
"""
MATRIX = """name: multinode
defaults: {{device: cpu, warmup: 1, iterations: 3, timeout_s: 150, cpu_threads: 1}}
sweep: {{modes: [train], batch_sizes: [8]}}
experiments:
{experiments}
"""
BUILT_IN = """  - {name: ddp, model: mlp, input_shape: [32], num_classes: 4, world_sizes: [2, 4]}
"""
PROGRAM_EXPERIMENT = """  - name: gloo
    world_sizes: [4]
    program:
      command: [{python}, {script}, {state}]
      env: {{PYTHONPATH: {client}, SB_FAULT_MARKER: "{marker}"{hold}}}
"""


def skip(reason: str) -> None:
    print(f"SKIP: {reason}")
    sys.exit(77)


def enter_namespace() -> None:
    """Re-runs this script in a mount namespace of its own, or skips."""
    probe = subprocess.run(
        ["unshare", "--mount", "--uts", "true"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        skip(
            "unshare --mount --uts is not permitted here (needs root or user namespaces): "
            + probe.stderr.strip()
        )
    env = dict(os.environ, **{INSIDE: "1"})
    command = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        sys.executable,
        *sys.argv,
    ]
    sys.exit(subprocess.run(command, env=env, check=False).returncode)


def private_hosts(root: Path) -> None:
    """nodea and nodeb in this mount namespace's /etc/hosts."""
    hosts = root / "hosts"
    lines = Path("/etc/hosts").read_text().splitlines()
    lines += [f"{address} {name}" for name, address in HOSTS.items()]
    hosts.write_text("\n".join(lines) + "\n")
    result = subprocess.run(
        ["mount", "--bind", str(hosts), "/etc/hosts"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        skip("cannot bind-mount a private /etc/hosts: " + result.stderr.strip())


def uts_of(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/uts")


def safe_uts(pid: int) -> str:
    try:
        return uts_of(pid)
    except OSError:
        return ""


class Cluster:
    def __init__(self, args, root: Path):
        self.args = args
        self.root = root
        self.state = root / "state"
        self.state.mkdir()
        self.tmp = root / "tmp"
        self.tmp.mkdir()
        self.marker = "sbnode-" + uuid.uuid4().hex
        agent = root / "agent.sh"
        agent.write_text(AGENT)
        agent.chmod(0o755)
        (root / "hostfile").write_text("nodea slots=3\nnodeb slots=2\n")
        (root / "program.py").write_text(PROGRAM)
        self.env = dict(
            os.environ,
            TMPDIR=str(self.tmp),
            OMPI_ALLOW_RUN_AS_ROOT="1",
            OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
            OMP_NUM_THREADS="1",
        )
        self.mpirun = [
            args.mpiexec,
            "--hostfile",
            str(root / "hostfile"),
            "--mca",
            "plm_rsh_agent",
            str(agent),
            "--mca",
            "plm_rsh_no_tree_spawn",
            "1",
            "--mca",
            "btl",
            "self,tcp",
            "-np",
            "5",
            "--map-by",
            "slot",
            "-x",
            "TMPDIR",
            "-x",
            "OMP_NUM_THREADS",
        ]

    def matrix(self, built_in: bool, hold: bool) -> Path:
        client = Path(self.args.source) / "program" / "client"
        experiments = (BUILT_IN if built_in else "") + PROGRAM_EXPERIMENT.format(
            python=self.args.python,
            script=self.root / "program.py",
            state=self.state,
            client=client,
            marker=self.marker,
            hold=', HOLD: "1"' if hold else "",
        )
        path = self.root / "m.yaml"
        path.write_text(MATRIX.format(experiments=experiments))
        return path

    def start(self, matrix: Path, out: Path, *extra: str) -> subprocess.Popen:
        return start_job(self.mpirun, self.args.binary, matrix, out, self.env, *extra)

    def end(self, proc: subprocess.Popen, limit_s: float = 150) -> str:
        return end_job(proc, limit_s)

    def folders(self) -> list:
        return cell_folders(self.tmp)


def scenario_spans(cluster: Cluster) -> None:
    import h5py

    out = cluster.root / "r.h5"
    proc = cluster.start(cluster.matrix(built_in=True, hold=False), out)
    output = cluster.end(proc)
    if proc.returncode != 0:
        raise Failure(f"the run exited {proc.returncode}:\n{output[-3000:]}")
    with h5py.File(out, "r") as f:
        cells = f["cells"]
        seen = {}
        for cell_id in cells:
            cell = cells[cell_id]
            status = text(cell.attrs["status"])
            if status != "ok":
                raise Failure(
                    f"cell {cell_id} is {status}: {text(cell.attrs.get('reason', ''))}"
                )
            hosts = [text(h) for h in cell["rank_hosts"][()]]
            spec = json.loads(text(cell.attrs["spec"]))
            world = int(spec.get("world_size", len(hosts)))
            kind = "program" if "program" in spec else "ddp"
            seen[(kind, world)] = hosts
            if world == 4 and sorted(hosts) != ["nodea", "nodea", "nodeb", "nodeb"]:
                raise Failure(
                    f"{kind} world 4 ran on {hosts}, not 2 + 2 ranks of two nodes"
                )
            if world == 2 and len(set(hosts)) != 1:
                raise Failure(f"{kind} world 2 fits one node but ran on {hosts}")
            if kind == "program":
                metrics = cell["rank_metrics"]
                names = json.loads(text(metrics.attrs["names"]))
                values = metrics[()]
                column = {n: values[:, names.index(n)] for n in names}
                for r, host in enumerate(hosts):
                    node = ["nodea", "nodeb"].index(host)
                    got = {
                        k: column[f"program_{k}"][r]
                        for k in (
                            "node_rank",
                            "local_world_size",
                            "master_is_nodea",
                            "host_index",
                        )
                    }
                    if got != {
                        "node_rank": node,
                        "local_world_size": 2,
                        "master_is_nodea": 1,
                        "host_index": node,
                    }:
                        raise Failure(f"rank {r} on {host} saw {got}")
                local = sorted(
                    (hosts[r], column["program_local_rank"][r]) for r in range(4)
                )
                if [lr for _, lr in local] != [0, 1, 0, 1]:
                    raise Failure(f"LOCAL_RANK per node: {local}")
    if set(seen) != {("ddp", 2), ("ddp", 4), ("program", 4)}:
        raise Failure(f"cells run: {sorted(seen)}")
    print("; ".join(f"{k} world {w}: {h}" for (k, w), h in sorted(seen.items())))
    check_straggler_nodes(cluster, out, [h for (_, w), h in seen.items() if w == 4])


def check_straggler_nodes(cluster: Cluster, out: Path, spanning: list) -> None:
    """The analysis' by-node table of a real two-node file: one row per node of each cell
    that spans both (and none for the one-node cell), with the ranks the file places there.
    Whether a node is flagged depends on this machine's load: printed, not checked."""
    sys.path.insert(0, str(Path(cluster.args.source) / "analysis"))
    import scalebench_analysis as sa
    from scalebench_analysis.tables.straggler_nodes import rank_ranges

    table = sa.analyze(str(out)).sections.get("straggler_nodes")
    if table is None:
        raise Failure("no straggler_nodes table for a file whose cells span two nodes")
    got = sorted(
        tuple(sorted(zip(rows.host, rows.ranks)))
        for _, rows in table.groupby("cell_id")
    )
    want = sorted(
        tuple(
            sorted(
                (node, rank_ranges(r for r, h in enumerate(hosts) if h == node))
                for node in set(hosts)
            )
        )
        for hosts in spanning
    )
    if got != want:
        raise Failure(f"straggler_nodes rows {got}, the file's hosts give {want}")
    print(
        "straggler_nodes: "
        + "; ".join(
            f"{r.host} ranks {r.ranks} busy {r.median_busy_s * 1e3:.2f} ms "
            f"({r.slowdown:+.0%}{', straggler' if r.straggler else ''})"
            for r in table.itertuples()
        )
    )


def scenario_node_kill(cluster: Cluster) -> None:
    matrix = cluster.matrix(built_in=False, hold=True)
    out = cluster.root / "r.h5"
    proc = cluster.start(matrix, out)
    deadline = time.monotonic() + 120
    while not all((cluster.state / f"program.{r}").exists() for r in range(4)):
        if time.monotonic() > deadline or proc.poll() is not None:
            os.killpg(proc.pid, signal.SIGKILL)
            raise Failure(
                "the programs did not start:\n" + proc.communicate()[0][-3000:]
            )
        time.sleep(0.1)
    programs = [int((cluster.state / f"program.{r}").read_text()) for r in range(4)]
    if len({uts_of(p) for p in programs}) != 2:
        raise Failure(f"the programs are not in two UTS namespaces: {programs}")
    victim = uts_of(programs[3])  # group rank 3 runs on nodeb (slot mapping)
    # program -> its supervisor -> its worker rank, whose pid names the cell's folder
    nodea_workers = [parent_of(parent_of(p)) for p in programs if uts_of(p) != victim]
    nodea_folders = tuple(f"-{pid}" for pid in nodea_workers)
    node_processes = [
        int(e)
        for e in os.listdir("/proc")
        if e.isdigit() and safe_uts(int(e)) == victim
    ]
    killed_at = time.monotonic()
    for pid in node_processes:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    output = cluster.end(proc, 90)
    if proc.returncode == 0:
        raise Failure("the job exited 0 after its node died:\n" + output[-2000:])
    while True:
        left = [p for p in marked_processes(cluster.marker) if safe_uts(p) != victim]
        folders = [f for f in cluster.folders() if f.endswith(nodea_folders)]
        if not left and not folders:
            break
        if time.monotonic() - killed_at > 20:
            raise Failure(
                f"20 s after the node's death, left on nodea: {left} {folders}"
            )
        time.sleep(0.05)
    seconds = time.monotonic() - killed_at
    print(
        f"nodeb ({len(node_processes)} processes) SIGKILLed: the job ended (exit "
        f"{proc.returncode}) and nodea held no process and no folder of the cell "
        f"{seconds:.2f} s after"
    )
    (cluster.state / "release").write_text("")
    resume = cluster.start(matrix, out, "--resume", "--retry-failed")
    output = cluster.end(resume)
    if resume.returncode != 0:
        raise Failure(f"--resume exited {resume.returncode}:\n{output[-3000:]}")
    if marked_processes(cluster.marker) or cluster.folders():
        raise Failure(
            f"after --resume: processes {marked_processes(cluster.marker)}, folders "
            f"{cluster.folders()}"
        )
    print("--resume completed the cell; no process and no folder left on either node")


SCENARIOS = {"spans": scenario_spans, "node_kill": scenario_node_kill}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--binary", required=True, help="the real scalebench executable"
    )
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument(
        "--python", required=True, help="a python with torch (the venv's)"
    )
    parser.add_argument(
        "--source", required=True, help="the source tree (program/client)"
    )
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), action="append")
    args = parser.parse_args()
    if os.environ.get(INSIDE) != "1":
        check = subprocess.run(
            [args.python, "-c", "import torch, h5py"],
            capture_output=True,
            text=True,
            check=False,
        )
        if check.returncode != 0:
            skip(
                f"{args.python} lacks torch or h5py (the project's venv has both): "
                + check.stderr.strip()[-300:]
            )
        enter_namespace()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="sb-multinode-") as tmp:
        private_hosts(Path(tmp))
        for name in args.scenario or sorted(SCENARIOS):
            root = Path(tmp) / name
            root.mkdir()
            cluster = Cluster(args, root)
            try:
                SCENARIOS[name](cluster)
                print(f"PASS {name}")
            except Failure as failure:
                failed += 1
                print(f"FAIL {name}: {failure}", file=sys.stderr)
            finally:
                for pid in marked_processes(cluster.marker):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
