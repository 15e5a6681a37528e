"""The synthetic cells of make_results.py: their specs and ids, their seeded per-rank,
per-iteration timings (a straggler, noise, warm-up drift), and the probes of two batch
searches (`batch_size: auto`).
"""

from __future__ import annotations

import json

import numpy as np

from reference_figures import batch_figures

TRAIN_PHASES = ["data", "h2d", "forward", "backward", "comm_wait", "optimizer", "step"]
INFER_PHASES = ["load", "h2d", "forward", "d2h", "batch"]
RANK_METRICS = [
    "final_loss",
    "param_checksum",
    "model_init_s",
    "first_iteration_s",
    "peak_rss_bytes",
    "parameter_count",
    "samples",
    "loop_wall_s",
]
WARMUP = 2
MEASURED = 20


def fnv1a64(text: str) -> int:
    value = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def make_spec(
    branch,
    mode,
    batch,
    world,
    precision="fp32",
    samples=0,
    experiment=None,
    model="mlp",
    input_shape=(64,),
    **settings,
):
    """A cell spec as to_json(CellSpec) writes it. `settings` are the settings that enter
    the spec only when not default (common/cell/cell_spec.cc canonical_json): the batch search's
    `min_batch`, `max_batch`, `memory_limit_mb`, ... of a `batch_size: auto` cell (batch 0)."""
    spec = {
        "branch": branch,
        "commit": {"main": "a" * 40, "feature": "b" * 40}[branch],
        "experiment": experiment or "mlp-" + mode,
        "model": {"zoo": model, "torchscript": ""},
        "input_shape": list(input_shape),
        "num_classes": 10,
        "mode": mode,
        "optimizer": {"name": "sgd", "lr": 0.01, "momentum": 0.0, "weight_decay": 0.0},
        "data": {"kind": "synthetic", "path": "", "inputs": "", "targets": ""},
        "checkpoint": "",
        "batch_size": batch,
        "world_size": world,
        "precision": precision,
        "channels_last": False,
        "tf32": False,
        "device": "cpu",
        "backend": "mpi",
        "bucket_bytes": 25 * 1024 * 1024,
        "first_bucket_bytes": 1024 * 1024,
        "warmup_iterations": WARMUP,
        "measured_iterations": MEASURED,
        "samples": samples,
        "seed": 7,
        "timeout_s": 600.0,
        **settings,
    }
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    spec["source"] = "quickstart.yaml:3"
    spec["cell_id"] = f"{fnv1a64(canonical):016x}"
    return spec


def _noise(rng, shape, sigma):
    return rng.lognormal(mean=0.0, sigma=sigma, size=shape)


def train_timings(rng, batch, world, per_sample_s, sigma=0.02, straggler=None, drift=0.0):
    """(world, WARMUP+MEASURED, phases) seconds of a DDP step; the slowest rank's compute
    sets everyone's step: faster ranks wait in comm_wait. `straggler`: a rank, or a list of
    ranks, computing 30 % slower."""
    iterations = WARMUP + MEASURED
    compute = (0.002 + batch * per_sample_s) * _noise(rng, (world, iterations), sigma)
    compute[:, :WARMUP] *= 3.0
    compute *= np.linspace(1.0 + drift, 1.0, iterations)[None, :]
    if straggler is not None:
        compute[straggler] *= 1.3
    comm = np.zeros_like(compute) if world == 1 else 0.004 * _noise(rng, compute.shape, 0.05)
    wait = comm + (compute.max(axis=0, keepdims=True) - compute)
    shares = {"data": 0.05, "h2d": 0.05, "forward": 0.3, "backward": 0.5, "optimizer": 0.1}
    out = np.empty((world, iterations, len(TRAIN_PHASES)))
    for i, name in enumerate(TRAIN_PHASES[:-1]):
        out[:, :, i] = wait if name == "comm_wait" else compute * shares[name]
    out[:, :, -1] = out[:, :, :-1].sum(axis=2)
    return out


def infer_timings(rng, batch, world, per_sample_s, sigma=0.03, drift=0.0):
    """Sharded inference: rank r runs MEASURED - r batches (uneven shards), NaN padded."""
    iterations = WARMUP + MEASURED
    batch_s = (0.001 + batch * per_sample_s) * _noise(rng, (world, iterations), sigma)
    batch_s[:, :WARMUP] *= 2.0
    batch_s *= np.linspace(1.0 + drift, 1.0, iterations)[None, :]
    shares = [0.1, 0.1, 0.7, 0.1]
    out = np.empty((world, iterations, len(INFER_PHASES)))
    for i, share in enumerate(shares):
        out[:, :, i] = batch_s * share
    out[:, :, -1] = out[:, :, :-1].sum(axis=2)
    counts = [iterations - r for r in range(world)]
    for r, count in enumerate(counts):
        out[r, count:, :] = np.nan
    return out, counts


MIB = float(1 << 20)
#: Relative spread of a probe's measured iterations (their median is 1): p99 is 1.0292 x.
PROBE_SPREAD = np.array([0.99, 1.0, 1.0, 1.01, 1.03])


class AutoCell:
    """A planted `batch_size: auto` search: the probes in the order BatchSearch runs them
    (doubling, then bisecting to adjacent batches), each probe's median step time from
    `step_s(batch)` and peak memory from `memory(batch)` bytes; a probe fits when its peak
    is within `budget_bytes`, except the batches in `oom` (the allocator ran out first).
    Over-budget probes completed (times kept, throughput 0); oom ones did not (times NaN,
    median, p99 and throughput 0), as worker/batch_probe.cc stores them."""

    def __init__(
        self,
        world,
        step_s,
        memory,
        budget_bytes,
        oom=(),
        min_batch=1,
        max_batch=65536,
        safety_margin=0.1,
        latency_slo_ms=0.0,
    ):
        self.world, self.budget_bytes, self.step_s = world, float(budget_bytes), step_s
        rows, self.status, self.times = [], [], []
        ok, failed, batch = 0, 0, min_batch
        while batch:
            if batch in oom:
                state = "oom"
            else:
                state = "ok" if memory(batch) <= budget_bytes else "over_budget"
            times = step_s(batch) * PROBE_SPREAD
            if state == "oom":
                rows.append([batch, 0.0, 0.0, 0.0, memory(batch)])
                times = np.full(PROBE_SPREAD.size, np.nan)
            else:
                median, p99 = float(np.median(times)), float(np.percentile(times, 99))
                throughput = batch * world / median if state == "ok" else 0.0
                rows.append([batch, median, p99, throughput, memory(batch)])
            self.status.append(state)
            self.times.append(times)
            if state == "ok":  # common/cell/batch_search.cc BatchSearch::record
                ok = batch
            else:
                failed = batch
            if failed == 0:
                batch = (
                    (max_batch if batch > max_batch // 2 else 2 * batch) if batch < max_batch else 0
                )
            else:
                batch = ok + (failed - ok) // 2 if ok and failed - ok > 1 else 0
        self.probes = np.array(rows)
        self.figures = batch_figures(
            self.probes, self.status, budget_bytes, safety_margin, latency_slo_ms
        )
        self.recommended_batch = int(self.figures["recommended_batch"])


def plateau_search() -> AutoCell:
    """mlp-auto (1 worker, memory_limit_mb 512): throughput peaks at batch 64 and then
    falls slightly, so the knee (32) and the best (64) lie well below the boundary (109 fits,
    110 is over the budget): a throughput plateau. 112 runs out of memory outright."""

    def step_s(b):
        return (0.002 + 0.001 * b) * (1.0 + 0.0005 * max(0, b - 64))

    return AutoCell(1, step_s, lambda b: (20 + 4.5 * b) * MIB, 512 * MIB, oom=(112,))


def memory_bound_search() -> AutoCell:
    """cnn-auto (2 workers, min_batch 4, latency_slo_ms 100, the node's memory shared: a
    budget of 1 GiB per worker): throughput still rises at the boundary (54 fits, 55 does
    not), so the best batch is the largest that fit: memory-bound. 64 runs out of memory."""

    def step_s(b):
        return 0.02 + 0.0002 * b

    return AutoCell(
        2,
        step_s,
        lambda b: (64 + 17.5 * b) * MIB,
        1024 * MIB,
        oom=(64,),
        min_batch=4,
        latency_slo_ms=100.0,
    )
