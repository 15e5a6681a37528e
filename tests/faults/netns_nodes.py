#!/usr/bin/env python3
"""Simulated nodes on one machine, each in its own network namespace, for MPI jobs.

Used by the fault tests (partition.py: a node cut off mid-cell, issue 55) and by anything
that needs several "nodes" with links of a given rate (the projection's checks, issue 51).
Run as a script (`netns_nodes.py --self-test`) it checks itself: three nodes, a rate, a cut
and a restore, and that nothing is left.

API
---
``enter_private_namespaces()``
    Call first, before anything else of the script runs: re-executes the running script
    (``sys.argv``) as pid 1 of new mount and pid namespaces (``unshare --mount --pid --fork
    --kill-child --mount-proc``), or raises ``Unavailable``. Everything the nodes need
    lives there only: the named network namespaces (on a tmpfs over /run/netns), the
    node names in /etc/hosts (a bind mount), every process the job starts. Note
    [Cleanup the kernel does]: when the script ends, however it ends (SIGKILL included:
    ``--kill-child``), the kernel kills every process of the pid namespace, which frees
    the mount namespace, hence the network namespaces, their veths and qdiscs. Returns
    in the re-executed script (a no-op there); the outer process becomes ``unshare`` (exec), so
    killing it kills everything, and its exit status is the script's.

``Node(name, slots=1, rate_mbit=None)``
    A node: its host name (also its UTS host name and /etc/hosts entry), its MPI slots,
    the rate of its link in Mbit/s each way (None: unlimited).

``Nodes(nodes, work_dir)`` -- a context manager; ``__exit__`` always cleans up
    Makes a switch namespace with a bridge, a ``head`` namespace (where the launcher
    runs, like a login node; not in the hostfile) and one namespace per node, each
    joined to the bridge by a veth pair (``nic0`` inside the node, ``s<i>`` on the
    switch). A node's rate is a ``tbf`` on both ends of its veth: its egress and its
    ingress (``netem`` is absent on this kernel: no added delay). Addresses: a random
    ``10.X.Y.0/24`` per use (``.cidr``); the head is ``.1``, node i ``.2 + i``. Names:
    a random prefix per use (``.prefix``), so that two tests can run at once (each in
    its own private namespaces, so even equal names could not clash).

    ``.names``, ``.address(node)``, ``.hostfile`` (``name slots=N`` lines), ``.agent``
    (the rsh agent: a node's daemon runs in its network namespace and a UTS namespace
    named after it).
    ``.mpirun_args()``: what mpirun needs besides -np and the program: the hostfile, the
    agent, no tree spawn, ``btl self,tcp``, and ``btl_tcp_if_include`` /
    ``oob_tcp_if_include`` set to ``.cidr``.
    ``.on_head(argv)`` / ``.on_node(node, argv)``: ``argv`` wrapped to run there (its
    network namespace, a UTS namespace with that host name); pass to subprocess.
    ``.set_rate(node, rate_mbit)``: change a node's link rate (None: unlimited).
    ``.cut(node)``: a silent cut of the node's link both ways, in the switch (Note [A silent
    cut]): every frame to and from the node is dropped, no RST, no ICMP, both ends' links
    stay up; the peers see silence. ``.restore(node)``: the link back, at its rate.
    ``.processes(node)`` / ``.processes_of_head()``: pids of the live processes (not zombies)
    in that network namespace; ``.describe(pids)``: their command lines, for messages.
    ``.close()``: kills what is left in every namespace, deletes them, unmounts /etc/hosts.

``Unavailable``: namespaces cannot be made here (not root, no ``ip``, no veth or bridge or
tbf: tried once, in a throw-away namespace); its text is the reason. ``SetupError``: a step
failed all the same (a failure, not a skip). ``skip(reason)`` prints it and exits 77 (ctest's
SKIP_RETURN_CODE of the fault tests).

Example::

    enter_private_namespaces()
    with Nodes([Node("nodea", 3), Node("nodeb", 2, rate_mbit=200)], Path(tmp)) as nodes:
        job = subprocess.Popen(nodes.on_head(["mpirun", *nodes.mpirun_args(), "-np", "5",
                                              "scalebench", "run", ...]))
        nodes.cut("nodeb"); ...; nodes.restore("nodeb")
        assert not nodes.processes("nodeb")
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Self

_INSIDE = "SCALEBENCH_NETNS_NODES_INSIDE"  # set in the re-executed script
_HOSTS_MOUNTED = "/etc/hosts"
_NETNS_DIR = Path("/run/netns")
# A link's rate: a tbf whose bucket holds 10 ms at the rate and at least two full frames, with
# 400 ms of queue (200 mbit so took `scalebench probe`'s allreduce from ~1 to 0.012 GB/s).
_LATENCY = "400ms"
_MIN_BURST_BYTES = 3200
# Note [A silent cut]
# ~~~~~~~~~~~~~~~~~~~
# A cut takes the node's port off the switch's bridge (`ip link set s<i> nomaster`): frames
# from the node reach a port that forwards nowhere, frames to it have no port to leave by.
# The drop happens in the switch, outside both ends' network stacks, as on a real network.
# Dropping on the node's own interface instead (a tbf at 8 bit/s, as issue 55 first did) is
# seen by the sender's TCP as a local drop, and Open MPI's connections then failed with
# ETIMEDOUT within ~10 s (measured): a cut-off node's daemon noticed at once and ended its
# ranks, which a real cut never shows (TCP retransmits for ~15 minutes with Linux's
# defaults; measured here: no error within 60 s with the switch-side cut).
# What Nodes needs, tried in a throw-away network namespace before anything is made.
_PROBE = (
    "ip link add name pa type veth peer name pb && ip link add name br type bridge && "
    "ip link set pb master br && tc qdisc add dev pa root tbf rate 1mbit burst 3200 latency 1ms"
)

AGENT = """#!/bin/bash
# rsh agent of simulated nodes {prefix} (tests/faults/netns_nodes.py): [options] host
# command... -> the command in the host's network namespace and a UTS namespace named host.
while [[ $1 == -* ]]; do shift; done
host="$1"; shift
case "$host" in
{cases}
  *) echo "netns_nodes agent: unknown host '$host'" >&2; exit 255 ;;
esac
exec ip netns exec "$ns" unshare --uts bash -c 'hostname "$0"; exec bash -c "$*"' "$host" "$@"
"""


class Unavailable(Exception):
    """Network namespaces, veths, a bridge or tbf cannot be made here; the text says why."""


class SetupError(Exception):
    """A step of making the nodes failed where the probe said it could not: a failure of the
    test, not a skip."""


def skip(reason: str) -> None:
    print(f"SKIP: {reason}")
    sys.exit(77)


@dataclass(frozen=True)
class Node:
    name: str
    slots: int = 1
    rate_mbit: float | None = None


def _run(argv: list) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SetupError(f"`{' '.join(argv)}` failed: {result.stderr.strip()}")


def _in_own_mount_namespace() -> bool:
    try:
        return os.readlink("/proc/self/ns/mnt") != os.readlink("/proc/1/ns/mnt") or (
            os.getpid() == 1 and os.environ.get(_INSIDE) == "1"
        )
    except OSError:
        return False


def enter_private_namespaces() -> None:
    """Re-executes this script in private mount and pid namespaces (see the module's
    docstring), or raises Unavailable. In the re-executed script: returns."""
    if os.environ.get(_INSIDE) == "1":
        return
    if os.geteuid() != 0:
        raise Unavailable("network namespaces need root (ip netns add)")
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            raise Unavailable(f"`{tool}` is not installed")
    probe = subprocess.run(
        [
            "unshare",
            "--mount",
            "--pid",
            "--fork",
            "--mount-proc",
            "--net",
            "sh",
            "-c",
            _PROBE,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        raise Unavailable(
            "a network namespace with a veth pair, a bridge and a tbf qdisc cannot be made "
            "here: " + probe.stderr.strip()
        )
    command = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        sys.executable,
        *sys.argv,
    ]
    env = dict(os.environ, **{_INSIDE: "1"})
    sys.stdout.flush()
    sys.stderr.flush()
    # exec, not a child: whoever kills this process (ctest at its timeout) kills unshare,
    # whose --kill-child takes the whole pid namespace with it.
    os.execvpe(command[0], command, env)


def _net_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _live(pid: str) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


class Nodes:
    """See the module's docstring."""

    def __init__(self, nodes: list, work_dir: Path, head: str = "head"):
        if not nodes:
            raise ValueError("Nodes needs at least one node")
        names = [n.name for n in nodes] + [head]
        if len(set(names)) != len(names):
            raise ValueError(f"node names must differ (and from the head's): {names}")
        if not _in_own_mount_namespace():
            raise Unavailable(
                "call enter_private_namespaces() first: Nodes changes /etc/hosts and "
                "/run/netns only in a mount namespace of its own"
            )
        self.nodes = {n.name: n for n in nodes}
        self.names = [n.name for n in nodes]
        self.head = head
        self.work_dir = Path(work_dir)
        self.prefix = f"sb{os.getpid() & 0xFFFF:04x}{random.randrange(256):02x}"
        net = (random.randrange(64, 128), random.randrange(256))
        self._net = f"10.{net[0]}.{net[1]}"
        self.cidr = f"{self._net}.0/24"
        self._rates = {n.name: n.rate_mbit for n in nodes}
        self._made: list = []
        self._hosts_bound = False
        self.hostfile = self.work_dir / f"{self.prefix}.hostfile"
        self.agent = self.work_dir / f"{self.prefix}.agent.sh"

    # -- naming -------------------------------------------------------------------------

    def namespace(self, node: str) -> str:
        """The network namespace of `node` (or of the head)."""
        if node != self.head and node not in self.nodes:
            raise KeyError(f"no node {node!r}; nodes: {self.names}")
        return f"{self.prefix}-{node}"

    def address(self, node: str) -> str:
        if node == self.head:
            return f"{self._net}.1"
        return f"{self._net}.{2 + self.names.index(node)}"

    def _switch_port(self, node: str) -> str:
        return "s" + ("h" if node == self.head else str(self.names.index(node)))

    # -- set-up and clean-up -------------------------------------------------------------

    def __enter__(self) -> Self:
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _make(self) -> None:
        _NETNS_DIR.mkdir(parents=True, exist_ok=True)
        if not os.path.ismount(_NETNS_DIR) or not self._netns_is_ours():
            _run(["mount", "-t", "tmpfs", "-o", "mode=755", "sbnetns", str(_NETNS_DIR)])
            (_NETNS_DIR / ".scalebench").write_text(self.prefix)
        switch = f"{self.prefix}-sw"
        self._add_namespace(switch)
        _run(["ip", "-n", switch, "link", "add", "name", "br0", "type", "bridge"])
        _run(["ip", "-n", switch, "link", "set", "br0", "up"])
        for node in [self.head, *self.names]:
            ns = self.namespace(node)
            self._add_namespace(ns)
            port = self._switch_port(node)
            veth = [
                "name",
                "nic0",
                "type",
                "veth",
                "peer",
                "name",
                port,
                "netns",
                switch,
            ]
            _run(["ip", "-n", ns, "link", "add", *veth])
            _run(["ip", "-n", switch, "link", "set", port, "master", "br0", "up"])
            _run(
                [
                    "ip",
                    "-n",
                    ns,
                    "addr",
                    "add",
                    f"{self.address(node)}/24",
                    "dev",
                    "nic0",
                ]
            )
            _run(["ip", "-n", ns, "link", "set", "nic0", "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            if node != self.head:
                self.set_rate(node, self._rates[node])
        self._write_hosts()
        self._write_launch_files()

    def _netns_is_ours(self) -> bool:
        return (_NETNS_DIR / ".scalebench").exists()

    def _add_namespace(self, name: str) -> None:
        _run(["ip", "netns", "add", name])
        self._made.append(name)

    def _write_hosts(self) -> None:
        hosts = self.work_dir / f"{self.prefix}.hosts"
        lines = Path("/etc/hosts").read_text().splitlines()
        lines += [f"{self.address(n)} {n}" for n in [self.head, *self.names]]
        hosts.write_text("\n".join(lines) + "\n")
        _run(["mount", "--bind", str(hosts), _HOSTS_MOUNTED])
        self._hosts_bound = True

    def _write_launch_files(self) -> None:
        self.hostfile.write_text(
            "".join(f"{n} slots={self.nodes[n].slots}\n" for n in self.names)
        )
        cases = "\n".join(f"  {n}) ns={self.namespace(n)} ;;" for n in self.names)
        self.agent.write_text(AGENT.format(prefix=self.prefix, cases=cases))
        self.agent.chmod(0o755)

    def close(self) -> None:
        """Kills what is left in the namespaces, deletes them, unmounts /etc/hosts.
        Safe to call twice; never raises."""
        for name in reversed(self._made):
            for pid in self._pids_in(f"{_NETNS_DIR}/{name}"):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            subprocess.run(
                ["ip", "netns", "del", name], capture_output=True, check=False
            )
        self._made.clear()
        if self._hosts_bound:
            subprocess.run(["umount", _HOSTS_MOUNTED], capture_output=True, check=False)
            self._hosts_bound = False

    # -- running things ------------------------------------------------------------------

    def on_node(self, node: str, argv: list) -> list:
        """`argv` wrapped to run on `node` (or the head): its network namespace and a UTS
        namespace whose host name is the node's."""
        return [
            "ip", "netns", "exec", self.namespace(node), "unshare", "--uts", "bash", "-c",
            'hostname "$0"; exec "$@"', node, *[str(a) for a in argv],
        ]  # fmt: skip

    def on_head(self, argv: list) -> list:
        """`argv` wrapped to run on the head (where mpirun runs)."""
        return self.on_node(self.head, argv)

    def mpirun_args(self) -> list:
        """mpirun's options for these nodes (not -np, not the program)."""
        return [
            "--hostfile", str(self.hostfile),
            "--mca", "plm_rsh_agent", str(self.agent),
            "--mca", "plm_rsh_no_tree_spawn", "1",
            "--mca", "btl", "self,tcp",
            "--mca", "btl_tcp_if_include", self.cidr,
            "--mca", "oob_tcp_if_include", self.cidr,
        ]  # fmt: skip

    # -- links ---------------------------------------------------------------------------

    def _qdisc(self, node: str, qdisc: list | None) -> None:
        ends = [
            (self.namespace(node), "nic0"),
            (f"{self.prefix}-sw", self._switch_port(node)),
        ]
        for ns, dev in ends:
            if qdisc is None:
                delete = ["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"]
                subprocess.run(delete, capture_output=True, check=False)
            else:
                _run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", *qdisc])

    def set_rate(self, node: str, rate_mbit: float | None) -> None:
        """The node's link at `rate_mbit` Mbit/s each way (None: unlimited)."""
        self._rates[node] = rate_mbit
        if rate_mbit is None:
            self._qdisc(node, None)
            return
        burst = max(_MIN_BURST_BYTES, int(rate_mbit * 1e6 / 8 / 100))
        tbf = [
            "tbf",
            "rate",
            f"{rate_mbit}mbit",
            "burst",
            str(burst),
            "latency",
            _LATENCY,
        ]
        self._qdisc(node, tbf)

    def cut(self, node: str) -> None:
        """Silently drops every frame to and from `node` until restore() (Note [A silent
        cut])."""
        port = self._switch_port(node)
        _run(["ip", "-n", f"{self.prefix}-sw", "link", "set", port, "nomaster"])

    def restore(self, node: str) -> None:
        """The node's link back on the switch, at its rate (set_rate's or the Node's)."""
        port = self._switch_port(node)
        _run(["ip", "-n", f"{self.prefix}-sw", "link", "set", port, "master", "br0"])
        self.set_rate(node, self._rates[node])

    # -- processes -----------------------------------------------------------------------

    @staticmethod
    def _pids_in(netns_path: str) -> list:
        inode = _net_inode(netns_path)
        if inode is None:
            return []
        found = []
        for entry in os.listdir("/proc"):
            if (
                entry.isdigit()
                and entry != str(os.getpid())
                and _net_inode(f"/proc/{entry}/ns/net") == inode
                and _live(entry)
            ):
                found.append(int(entry))
        return found

    def processes(self, node: str) -> list:
        """Pids of the live processes in `node`'s network namespace."""
        return self._pids_in(f"{_NETNS_DIR}/{self.namespace(node)}")

    def processes_of_head(self) -> list:
        return self.processes(self.head)

    @staticmethod
    def describe(pids: list) -> str:
        """`pid: command line` of each, for a failure's message."""
        lines = []
        for pid in pids:
            try:
                raw = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                lines.append(f"{pid}: {raw.decode(errors='replace')}")
            except OSError:
                lines.append(f"{pid}: (gone)")
        return "\n".join(lines)


# -- self-test ---------------------------------------------------------------------------

_SERVER = """import socket, sys
s = socket.socket(); s.bind(("0.0.0.0", 5077)); s.listen()
print("ready", flush=True)
while True:
    c, _ = s.accept()
    while c.recv(1 << 16):
        pass
    c.close()
"""
_CLIENT = """import socket, sys, time
s = socket.create_connection((sys.argv[1], 5077), timeout=float(sys.argv[3]))
data = b"x" * (1 << 16); n = int(sys.argv[2]); start = time.monotonic()
for _ in range(n // len(data)):
    s.sendall(data)
s.shutdown(socket.SHUT_WR); s.recv(1)
print(f"{n / (time.monotonic() - start) / 1e6:.2f}")
"""


def _self_test() -> int:
    """Three nodes, nodec at 40 Mbit/s: a transfer to it runs near that rate and one to nodeb
    far above; cut, nodec cannot be reached; restored, it can; closed, nothing is left."""
    with tempfile.TemporaryDirectory(prefix="sb-netns-") as tmp:
        nodes_list = [
            Node("nodea", 2),
            Node("nodeb", 1),
            Node("nodec", 1, rate_mbit=40),
        ]
        with Nodes(nodes_list, Path(tmp)) as nodes:
            servers = {}
            for n in ("nodeb", "nodec"):
                servers[n] = subprocess.Popen(
                    nodes.on_node(n, [sys.executable, "-c", _SERVER]),
                    stdout=subprocess.PIPE,
                    text=True,
                )
                servers[n].stdout.readline()

            def send(
                to: str, size: int, timeout_s: float
            ) -> subprocess.CompletedProcess:
                argv = [sys.executable, "-c", _CLIENT, to, str(size), str(timeout_s)]
                return subprocess.run(
                    nodes.on_node("nodea", argv),
                    capture_output=True,
                    text=True,
                    check=False,
                )

            fast = send("nodeb", 64 << 20, 10)
            slow = send("nodec", 8 << 20, 10)
            if fast.returncode or slow.returncode:
                print(f"FAIL transfers: {fast.stderr} {slow.stderr}", file=sys.stderr)
                return 1
            fast_mbit, slow_mbit = float(fast.stdout) * 8, float(slow.stdout) * 8
            print(
                f"nodea->nodeb {fast_mbit:.0f} Mbit/s; nodea->nodec {slow_mbit:.1f} Mbit/s"
            )
            if not 20 <= slow_mbit <= 48 or fast_mbit < 4 * slow_mbit:
                print("FAIL: nodec's link is not near its 40 Mbit/s", file=sys.stderr)
                return 1
            nodes.cut("nodec")
            started = time.monotonic()
            cut = send("nodec", 1 << 16, 2)
            if cut.returncode == 0:
                print("FAIL: nodec answered through a cut link", file=sys.stderr)
                return 1
            print(f"cut: nodec silent ({time.monotonic() - started:.1f} s to give up)")
            nodes.restore("nodec")
            if send("nodec", 1 << 20, 10).returncode != 0:
                print("FAIL: nodec unreachable after restore", file=sys.stderr)
                return 1
            print("restored: nodec answers")
            if not nodes.processes("nodec") or nodes.processes("nodea"):
                print("FAIL: processes per node are wrong", file=sys.stderr)
                return 1
            made = list(nodes._made)
        left = subprocess.run(
            ["ip", "netns", "list"], check=False, capture_output=True, text=True
        ).stdout
        if any(name in left for name in made) or any(
            s.poll() is None for s in servers.values()
        ):
            print(f"FAIL: left after close: {left}", file=sys.stderr)
            return 1
    print("PASS netns_nodes: rates, cut, restore, nothing left")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--self-test", action="store_true", required=True)
    parser.parse_args()
    try:
        enter_private_namespaces()
        return _self_test()
    except Unavailable as reason:
        skip(str(reason))
    return 1


if __name__ == "__main__":
    sys.exit(main())
