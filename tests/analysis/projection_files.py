"""Synthetic results and probe files whose answer is known exactly, for test_projection.py.

A law file's training cells compute for fixed phase times (no noise, unless `spread` asks
for per-rank draws), and their gradient allreduce follows a known ring law
(2(n-1) * latency + 2(n-1)/n * bytes / busbw, per link level): comm_wait is what that
law's buckets leave exposed after backward, computed here step by step (one bucket after
the other on one stream), independently of the analysis package's schedule module.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import h5py
import numpy as np

import make_results as mr
from synthetic_cells import MEASURED, TRAIN_PHASES, WARMUP, make_spec

MIB = 1 << 20
#: The synthetic model's gradient buckets (bytes) in launch order with the default caps
#: (1 MiB first, 25 MiB after): 60 MiB in all.
BUCKETS = [1 * MIB, 25 * MIB, 25 * MIB, 9 * MIB]
#: Fixed phase times (s) of a step at per-rank batch 16 (optimizer: batch-free).
PHASES_S = {"data": 0.001, "h2d": 0.0005, "forward": 0.005, "backward": 0.010, "optimizer": 0.002}


@dataclass(frozen=True)
class Law:
    """A ring allreduce law: seconds per ring step, bus bandwidth in bytes/s."""

    latency_s: float
    busbw: float

    def allreduce_s(self, nbytes: float, ranks: int) -> float:
        if ranks <= 1:
            return 0.0
        return 2 * (ranks - 1) * self.latency_s + 2 * (ranks - 1) / ranks * nbytes / self.busbw


INTRA = Law(20e-6, 10e9)
INTER = Law(50e-6, 2.5e9)


def exposed_s(law: Law, ranks: int, backward_s: float) -> float:
    """Bucket k becomes ready when backward has produced its last byte (bytes ready at an
    even rate), starts when ready and when bucket k-1 is done; exposed = last end - backward."""
    end, done = 0.0, 0.0
    for size in BUCKETS:
        done += size
        ready = backward_s * done / sum(BUCKETS)
        end = max(end, ready) + law.allreduce_s(size, ranks)
    return max(0.0, end - backward_s)


def _timings(
    world: int, law: Law, rng, spread: float, batch: int, forward_factor: float = 1.0
) -> np.ndarray:
    rows = WARMUP + MEASURED
    scale = batch / 16
    out = np.zeros((world, rows, len(TRAIN_PHASES)))
    for name, seconds in PHASES_S.items():
        factor = 1.0 if name == "optimizer" else scale
        factor *= forward_factor if name == "forward" else 1.0
        out[:, :, TRAIN_PHASES.index(name)] = seconds * factor
    if spread:
        draws = rng.uniform(1.0 - spread, 1.0 + spread, size=(world, rows))
        out[:, :, TRAIN_PHASES.index("forward")] *= draws
    compute = out.sum(axis=2)
    backward = PHASES_S["backward"] * scale
    wait = exposed_s(law, world, backward) + (compute.max(axis=0, keepdims=True) - compute)
    out[:, :, TRAIN_PHASES.index("comm_wait")] = wait if world > 1 else 0.0
    out[:, :, -1] = out[:, :, :-1].sum(axis=2)
    return out


def _bucket_times(group: h5py.Group) -> None:
    """Buckets launched when their last byte is ready (even rate over backward)."""
    del group["bucket_times"]
    starts = group["phase_starts"][()]
    timings = group["timings"][()]
    backward = TRAIN_PHASES.index("backward")
    ends = np.cumsum(BUCKETS) / sum(BUCKETS)
    world, rows, _ = timings.shape
    values = np.full((world, rows, len(BUCKETS), 2), np.nan)
    for b, fraction in enumerate(ends):
        values[:, :, b, 0] = starts[:, :, backward] + fraction * timings[:, :, backward]
    d = group.create_dataset("bucket_times", data=values)
    d.attrs["bucket_bytes"] = json.dumps(BUCKETS)
    d.attrs["columns"] = json.dumps(["launched_s", "completed_s"])


def write_law_file(
    path,
    worlds=(1, 2, 4, 8),
    gpus_per_node: int | None = None,
    spread: float = 0.0,
    batches=(16,),
    infer: bool = False,
    seed: int = 5,
    branch: str = "main",
    forward_factor: dict | None = None,
) -> str:
    """Training cells of the law at `worlds` (INTER's law for a world that spans nodes of
    `gpus_per_node`), optionally with an inference curve; returns `path` as str. `branch`
    "" writes cells without a branch; `forward_factor` maps a world to the factor its
    forward phase is slowed by (contention among the ranks)."""
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w", libver=("v110", "v110")) as f:
        mr._root_attrs(f, path)
        cells = f.create_group("cells")
        for world in worlds:
            nodes = 1 if not gpus_per_node else math.ceil(world / gpus_per_node)
            per_node = gpus_per_node or world
            hosts = [f"node{r // per_node}" for r in range(world)]
            law = INTER if nodes > 1 else INTRA
            for batch in batches:
                spec = make_spec("main", "train", batch, world, experiment="law")
                spec["branch"] = branch
                slowed = (forward_factor or {}).get(world, 1.0)
                timings = _timings(world, law, rng, spread, batch, slowed)
                mr._write_cell(
                    cells, spec, "ok", rng, timings, [WARMUP + MEASURED] * world, hosts=hosts
                )
                if world > 1:
                    _bucket_times(cells[spec["cell_id"]])
            if infer:
                spec = make_spec("main", "infer", 16, world, experiment="law-infer")
                timings = np.full((world, WARMUP + MEASURED, 5), 0.001)
                timings[:, :, -1] = 0.004
                mr._write_cell(
                    cells, spec, "ok", rng, timings, [WARMUP + MEASURED] * world, hosts=hosts
                )
        f.attrs["cell_count"] = np.int64(len(cells))
        mr.fix_strings(f)
    return str(path)


def write_law_probe(path, law: Law, world: int, hosts: int = 1) -> str:
    """A probe file of `world` workers on `hosts` hosts whose allreduce rows follow `law`
    exactly (8 B to 64 MiB, in place and out of place)."""
    sizes = [8 * 4**k for k in range(13)]
    rows = [(size, in_place) for in_place in (1.0, 0.0) for size in sizes]
    names = [f"node{r * hosts // world}" for r in range(world)]
    with h5py.File(path, "w") as f:
        attrs = {
            "scalebench_probe_version": "1.0",
            "tool_version": "0.1.0",
            "created": "2026-01-02T03:04:05Z",
            "backend": "mpi",
            "device": "cpu",
            "hosts": json.dumps(names),
            "devices": json.dumps(["cpu"] * world),
        }
        for name, value in attrs.items():
            f.attrs[name] = mr._fixed_string(value)
        f.attrs["world_size"] = np.int64(world)
        f.attrs["iterations"] = np.int64(20)
        f.attrs["warmup"] = np.int64(5)
        g = f.create_group("probe")
        g.create_dataset("operation", data=["allreduce"] * len(rows), dtype=h5py.string_dtype())
        times = np.array([law.allreduce_s(size, world) for size, _ in rows])
        sizes_f = np.array([float(size) for size, _ in rows])
        columns = {
            "in_place": [p for _, p in rows],
            "bytes": sizes_f,
            "elements": sizes_f // 4,
            "time_s": times,
            "algbw_gb_s": sizes_f / times / 1e9,
            "busbw_gb_s": sizes_f / times / 1e9 * 2 * (world - 1) / world,
            "max_error": np.zeros(len(rows)),
            "ok": np.ones(len(rows)),
            "baseline_time_s": np.full(len(rows), np.nan),
        }
        for name, values in columns.items():
            g.create_dataset(name, data=np.asarray(values, dtype=np.float64))
    return str(path)
