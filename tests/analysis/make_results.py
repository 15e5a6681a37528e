"""A writer of synthetic scalebench results files that follows schemas/results-layout.md.

Used when no real results file is given (SCALEBENCH_RESULTS_FILE unset). It writes the
layout exactly as the C++ writer does (test_summary.py checks it against the C++ layout
golden tests/data/results/layout_v1.txt): root provenance attributes, one group per cell
with the spec copies, status, timings (rank x iteration x phase, NaN-padded), per-rank
metrics, hosts and devices, and the `summary` subgroup computed from the timings with
the rules of common/results/cell_summary.cc and the thresholds of
common/results/cell_summary.h (read from the header). That second implementation of the
summary lives here, in the test helper only: the analysis package reads the summary from the
file. Timings are drawn from a
seeded numpy RNG.

The synthetic matrix: branches main and feature (feature ~15% faster), train and infer,
per-rank batch 16 and 32, world sizes 1 and 2, plus a bf16 setting, an oom, a failed and
a skipped cell, one straggler rank, one noisy cell and one cell with warm-up drift. When
the layout golden has an `accuracy` group (layout 1.3), the ok training cells of 2 ranks
get a passed one; `add_accuracy` plants a chosen group into any cell of a written file.
Layout 1.5 repetitions (add_repetitions): a training cell of 5 repetitions that disagree
(one runs 25 % slower) and an inference cell of 3 that agree, with their `/series` groups.

Run as a script to write a file: python make_results.py out.h5
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

import h5py
import numpy as np

REPO = Path(__file__).resolve().parents[2]


def cpp_constant(header: str, name: str) -> str:
    """The literal value of `inline constexpr ... name = value;` in the C++ header (the one
    definition: read, not copied, so the synthetic file cannot drift from the C++ writer)."""
    text = (REPO / header).read_text()
    found = re.search(rf"\b{name}\s*=\s*\"?([^\";]+)\"?\s*;", text)
    if found is None:
        raise RuntimeError(f"{header}: no constant {name}")
    return found.group(1)


#: The layout version written: kResultsLayoutVersion of common/results/store.h.
LAYOUT_VERSION = cpp_constant("common/results/store.h", "kResultsLayoutVersion")
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


def cpp_thresholds() -> dict:
    """The validity thresholds of common/results/cell_summary.h, typed as the summary stores
    them."""

    def value(name):
        return cpp_constant("common/results/cell_summary.h", name)

    return {
        "min_valid_iterations": np.int64(value("kMinValidIterations")),
        "max_valid_cv": np.float64(value("kMaxValidCv")),
        "replica_checksum_rel_tolerance": np.float64(value("kReplicaChecksumRelTolerance")),
    }


def _statistics(values: np.ndarray) -> dict:
    """common/cell/stats.cc summarize(): NaN-free values; std (n-1) and cv NaN below 2 values,
    everything but count NaN for none."""
    values = values[np.isfinite(values)]
    count, nan = values.size, float("nan")
    mean = float(np.mean(values)) if count else nan
    std = float(np.std(values, ddof=1)) if count > 1 else nan
    p = np.percentile(values, [50, 90, 95, 99]) if count else [nan] * 4
    return {
        "count": np.int64(count),
        "mean_s": mean,
        "median_s": float(np.median(values)) if count else nan,
        "std_s": std,
        "min_s": float(values.min()) if count else nan,
        "max_s": float(values.max()) if count else nan,
        "p50_s": p[0],
        "p90_s": p[1],
        "p95_s": p[2],
        "p99_s": p[3],
        "cv": std / mean,
    }


def median_interval(values: np.ndarray) -> tuple[float, float]:
    """common/cell/adaptive_stop.cc median_interval(): the order statistics of 1-based ranks
    floor(n/2 - 1.96 sqrt(n)/2) and ceil(1 + n/2 + 1.96 sqrt(n)/2); NaN below 2 values."""
    values = np.sort(values[np.isfinite(values)])
    n = values.size
    if n < 2:
        return float("nan"), float("nan")
    spread = 1.959963984540054 * np.sqrt(n) / 2.0
    lower = int(max(1.0, np.floor(n / 2.0 - spread)))
    upper = int(min(float(n), np.ceil(1.0 + n / 2.0 + spread)))
    return float(values[lower - 1]), float(values[upper - 1])


def _metric(rank_metrics, names, name) -> np.ndarray:
    return (
        rank_metrics[:, names.index(name)]
        if name in names
        else np.full(rank_metrics.shape[0], np.nan)
    )


def summary_of(
    timings,
    phases,
    warmup,
    mode,
    batch,
    world,
    samples,
    measured_iterations,
    rank_metrics,
    names,
    figures=None,
):
    """The `summary` attributes with the names, types and values that
    common/results/cell_summary.cc + common/results/cells.cc write (schemas/results-layout.md).
    `batch` is the batch the loop ran; `figures` the batch figures of a `batch_size: auto`
    cell (batch_figures), None for any other."""
    measured = timings[:, warmup:, :]
    metric = "step" if mode == "train" else "batch"
    main = measured[:, :, phases.index(metric)]
    if mode == "train":
        rows = np.isfinite(main).any(axis=0)
        values = np.nanmax(main[:, rows], axis=0)
    else:
        values = main[np.isfinite(main)]
    out = {"metric": metric, "batch_size": np.int64(batch), **(figures or {})}
    out.update(_statistics(values))
    out["median_ci_low_s"], out["median_ci_high_s"] = median_interval(values)
    median = out["median_s"]
    if mode == "train":
        throughput = batch * world / median if median > 0 else float("nan")
    else:
        reported = _metric(rank_metrics, names, "samples")
        if np.all(np.isfinite(reported)):
            samples = float(np.sum(reported))
        elif samples <= 0:
            samples = batch * world * measured_iterations
        slowest = float(np.max(np.nansum(main, axis=1)))
        throughput = samples / slowest if slowest > 0 else float("nan")
    out["throughput_samples_per_s"] = throughput
    out["samples_per_s_per_worker"] = throughput / world
    for i, name in enumerate(phases):
        column = measured[:, :, i]
        rows = np.isfinite(column).any(axis=0)
        out[f"phase_median_s_{name}"] = (
            float(np.median(np.nanmean(column[:, rows], axis=0))) if rows.any() else float("nan")
        )
    out["peak_memory_bytes"] = float("nan")
    for name in ("peak_allocated_bytes", "peak_rss_bytes"):
        peak = _metric(rank_metrics, names, name)
        if np.isfinite(peak).any():
            out["peak_memory_bytes"] = float(np.nanmax(peak))
            break
    # common/results/cell_summary.cc: the group's last loss, and Note [CPU oversubscription].
    losses = _metric(rank_metrics, names, "final_loss")
    out["final_loss_mean"] = float(np.mean(losses)) if mode == "train" else float("nan")
    load = (
        _metric(rank_metrics, names, "node_workers")
        * (
            _metric(rank_metrics, names, "cpu_threads")
            + _metric(rank_metrics, names, "mpi_comm_threads")
        )
        / _metric(rank_metrics, names, "node_cores")
    )
    out["cpu_threads_per_core"] = float(np.max(load)) if np.all(np.isfinite(load)) else float("nan")
    # Note [GPU energy]: NaN unless every rank measured one (never on the CPU).
    energy = _metric(rank_metrics, names, "gpu_energy_j")
    out["energy_j"] = float(np.sum(energy)) if np.all(np.isfinite(energy)) else float("nan")
    if mode == "train":
        done = batch * world * measured_iterations
    else:
        done = throughput * float(np.max(np.nansum(main, axis=1)))  # the samples counted
    out["samples_per_joule"] = done / out["energy_j"] if out["energy_j"] > 0 else float("nan")
    thresholds = cpp_thresholds()
    in_sync = True
    if mode == "train":
        checksums = _metric(rank_metrics, names, "param_checksum")
        scale = np.maximum(np.abs(checksums), abs(checksums[0]))
        in_sync = bool(
            np.all(np.isfinite(checksums))
            and np.all(
                np.abs(checksums - checksums[0])
                <= thresholds["replica_checksum_rel_tolerance"] * scale
            )
        )
    flags = {
        "valid_enough_iterations": out["count"] >= thresholds["min_valid_iterations"],
        "valid_cv": bool(out["cv"] <= thresholds["max_valid_cv"]),
        "valid_replicas_in_sync": in_sync,
    }
    out.update({k: np.int8(v) for k, v in flags.items()})
    out["valid"] = np.int8(all(flags.values()))
    out.update(thresholds)
    return out


#: kKneeFraction of common/cell/batch_search.h: the knee is the smallest batch within it of
#: the best.
KNEE_FRACTION = float(cpp_constant("common/cell/batch_search.h", "kKneeFraction"))
PROBE_COLUMNS = ["batch", "median_s", "p99_s", "throughput_samples_per_s", "peak_memory_bytes"]


def batch_figures(probes, status, budget_bytes, safety_margin=0.1, latency_slo_ms=0.0) -> dict:
    """The summary's batch figures of a `batch_size: auto` cell from its probes (rows of
    PROBE_COLUMNS) and their statuses, with the rules of batch_figures() in
    common/cell/batch_search.cc, typed as the summary stores them."""
    rows = [dict(zip(PROBE_COLUMNS, row)) for row in np.asarray(probes, dtype=float)]
    fit = sorted((r for r, s in zip(rows, status) if s == "ok"), key=lambda r: r["batch"])
    failed = [r["batch"] for r, s in zip(rows, status) if s != "ok"]
    out = dict.fromkeys(
        ("max_batch_ok", "oom_batch", "best_batch", "knee_batch", "slo_batch", "recommended_batch"),
        0,
    )
    out["oom_batch"] = min(failed) if failed else 0
    slope = float("nan")
    if fit:
        out["max_batch_ok"] = fit[-1]["batch"]
        best = fit[0]
        for r in fit:
            if r["throughput_samples_per_s"] > best["throughput_samples_per_s"]:
                best = r
        out["best_batch"] = best["batch"]
        out["knee_batch"] = next(
            r["batch"]
            for r in fit
            if r["throughput_samples_per_s"] >= KNEE_FRACTION * best["throughput_samples_per_s"]
        )
        slo_s = latency_slo_ms / 1000.0
        meeting = [r["batch"] for r in fit if slo_s > 0 and r["p99_s"] <= slo_s]
        out["slo_batch"] = meeting[-1] if meeting else 0
        cap = (1.0 - safety_margin) * budget_bytes
        chosen = None
        for r in fit:
            within = budget_bytes <= 0 or r["peak_memory_bytes"] <= cap
            if within and (slo_s <= 0 or r["p99_s"] <= slo_s):
                if (
                    chosen is None
                    or r["throughput_samples_per_s"] > chosen["throughput_samples_per_s"]
                ):
                    chosen = r
        out["recommended_batch"] = (chosen or fit[0])["batch"]
        if len(fit) >= 2:
            x = np.array([r["batch"] for r in fit])
            y = np.array([r["peak_memory_bytes"] for r in fit])
            slope = float(np.sum((x - x.mean()) * (y - y.mean())) / np.sum((x - x.mean()) ** 2))
    figures = {k: np.int64(v) for k, v in out.items()}
    figures["memory_per_sample_bytes"] = np.float64(slope)
    figures["memory_budget_bytes"] = np.float64(budget_bytes)
    return figures


def _probe_figures(group: h5py.Group, spec: dict, metrics, names) -> dict | None:
    """The batch figures of a cell with `probes` (None without)."""
    if "probes" not in group:
        return None
    status = json.loads(group["probes"].attrs["status"])
    budget = float(np.min(_metric(metrics, names, "memory_budget_bytes")))
    return batch_figures(
        group["probes"][()],
        status,
        budget,
        spec.get("safety_margin", 0.1),
        spec.get("latency_slo_ms", 0.0),
    )


def write_summary(group: h5py.Group) -> None:
    """(Re)writes `group/summary` from the group's timings, rank_metrics and probes."""
    timings = group["timings"][()]
    phases = json.loads(group["timings"].attrs["phases"])
    names = json.loads(group["rank_metrics"].attrs["names"])
    metrics = group["rank_metrics"][()]
    a = group.attrs
    spec = json.loads(a["spec"])
    batch = int(a["batch_size"])
    if batch == 0:  # batch_size auto: the batch the search chose (rank 0's metric)
        batch = int(_metric(metrics, names, "batch_size")[0])
    summary = summary_of(
        timings,
        phases,
        int(group["timings"].attrs["warmup_iterations"]),
        a["mode"].decode() if isinstance(a["mode"], bytes) else a["mode"],
        batch,
        int(a["world_size"]),
        int(a["samples"]),
        int(a["measured_iterations"]),
        metrics,
        names,
        _probe_figures(group, spec, metrics, names),
    )
    if "summary" in group:
        del group["summary"]
    sub = group.create_group("summary")
    for key, value in summary.items():
        if isinstance(value, str):
            sub.attrs[key] = _fixed_string(value)
        else:
            sub.attrs[key] = value if isinstance(value, np.integer) else np.float64(value)


def cpp_timings_layout(shape) -> dict:
    """create_dataset keywords that store `timings` of `shape` as the C++ writer does
    (common/results/cells.cc): one chunk per rank of at most 1 MiB, shuffle + gzip level 4.
    _write_cell's default is h5py's automatic chunking with gzip alone."""
    rows = min(shape[1], max(1, (1 << 20) // (8 * shape[2])))
    return {
        "chunks": (1, rows, shape[2]),
        "shuffle": True,
        "compression": "gzip",
        "compression_opts": 4,
    }


def _write_cell(
    cells,
    spec,
    status,
    rng,
    timings=None,
    counts=None,
    reason="",
    layout=None,
    auto=None,
    hosts=None,
):
    """One cell group; `auto` (AutoCell) for a `batch_size: auto` cell: its probes, and the
    per-rank metrics of the search (`batch_size`, `memory_budget_bytes`, `batch_search_s`).
    `hosts`: each rank's host (default: two ranks a node, node0, node0, node1, ...)."""
    g = cells.create_group(spec["cell_id"])
    g.attrs["spec"] = json.dumps(spec)
    for key in ("branch", "commit", "experiment", "mode", "precision", "device", "backend"):
        g.attrs[key] = spec[key]
    g.attrs["model"] = spec["model"]["zoo"]
    g.attrs["commit_date"] = "2025-12-31T12:00:00+00:00"
    g.attrs["dirty"] = np.int8(0)
    for key in (
        "batch_size",
        "world_size",
        "warmup_iterations",
        "measured_iterations",
        "samples",
        "seed",
    ):
        g.attrs[key] = np.int64(spec[key])
    g.attrs["status"] = status
    g.attrs["failed_phase"] = "" if status in ("ok", "skipped", "running") else "forward"
    g.attrs["reason"] = reason
    index = len(cells) - 1
    started, finished = _cell_times(index)
    g.attrs["started_at"] = "" if status == "skipped" else started
    g.attrs["finished_at"] = "" if status in ("skipped", "running") else finished
    world = spec["world_size"]
    g.attrs["ranks"] = json.dumps([] if status == "skipped" else list(range(1, world + 1)))
    if timings is None:
        return
    phases = TRAIN_PHASES if spec["mode"] == "train" else INFER_PHASES
    layout = layout or {"chunks": True, "compression": "gzip"}
    d = g.create_dataset("timings", data=timings, **layout)
    d.attrs["phases"] = json.dumps(phases)
    d.attrs["warmup_iterations"] = np.int64(WARMUP)
    d.attrs["iterations_per_rank"] = json.dumps(counts)
    # Layout 1.5: when each phase began (Note [Shared cell clock]), DDP buckets.
    starts = phase_starts_of(timings)
    s = g.create_dataset("phase_starts", data=starts, **layout)
    s.attrs["phases"] = json.dumps(phases)
    if spec["mode"] == "train" and world > 1:
        write_bucket_times(g, timings, starts)
    batch = auto.recommended_batch if auto else spec["batch_size"]
    names = RANK_METRICS + (AUTO_RANK_METRICS if auto else []) + TIMELINE_RANK_METRICS
    metrics = np.full((world, len(names)), np.nan)
    metrics[:, 0] = 2.3 + rng.normal(0, 0.01)
    metrics[:, 1] = 1234.5678
    metrics[:, 2] = 0.05
    metrics[:, 3] = timings[:, 0, -1]
    metrics[:, 4] = 2.0e8 + batch * 1.0e6 + np.arange(world) * 1.0e6
    metrics[:, 5] = 50_000
    metrics[:, 6] = [batch * (c - WARMUP) for c in counts]
    metrics[:, 7] = np.nansum(timings[:, WARMUP:, -1], axis=1)
    if spec["mode"] == "infer":
        metrics[:, 0] = np.nan
    metrics[:, -1] = _cell_origin(index) + 0.0001 * np.arange(world)  # loop_origin_epoch_s
    if auto:
        metrics[:, len(RANK_METRICS)] = batch
        metrics[:, len(RANK_METRICS) + 1] = auto.budget_bytes
        metrics[:, len(RANK_METRICS) + 2] = 1.5
        write_probes(g, auto.probes, auto.status, auto.times)
    m = g.create_dataset("rank_metrics", data=metrics)
    m.attrs["names"] = json.dumps(names)
    hosts = list(hosts) if hosts is not None else [f"node{r // 2}" for r in range(world)]
    g.create_dataset("rank_hosts", data=hosts, dtype=h5py.string_dtype("utf-8"))
    g.create_dataset("rank_devices", data=["cpu"] * world, dtype=h5py.string_dtype("utf-8"))
    write_summary(g)


#: Per-rank metrics of every cell with timings since layout 1.5 (after the others).
TIMELINE_RANK_METRICS = ["loop_origin_epoch_s"]
#: The synthetic run's cells start here (2026-01-01T00:00:00Z), one every 2 minutes.
ORIGIN_EPOCH_S = 1767225600.0
#: Gradient buckets of the synthetic DDP cells (bytes), in launch order.
BUCKET_BYTES = [1 << 20, 3 << 20]


def _iso_ms(epoch_s: float) -> str:
    """ISO 8601 UTC with milliseconds, as the C++ writes times since layout 1.5."""
    moment = datetime.fromtimestamp(epoch_s, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _cell_origin(index: int) -> float:
    """The synthetic run places cell `index` (file order) 2 minutes after the previous."""
    return ORIGIN_EPOCH_S + 120.0 * index


def _cell_times(index: int) -> tuple[str, str]:
    """`started_at` / `finished_at` of cell `index`: dispatched 0.25 s before its origin,
    its result in 60 s later (every synthetic cell is shorter)."""
    origin = _cell_origin(index)
    return _iso_ms(origin - 0.25), _iso_ms(origin + 60.0)


def phase_starts_of(timings: np.ndarray) -> np.ndarray:
    """Begin times consistent with `timings` as the C++ timer records them: iterations follow
    each other 50 us apart from a 0.01 s origin, the phases run back to back inside their
    iteration (the last phase spans it); NaN where the timing is NaN."""
    world, rows, phases = timings.shape
    starts = np.full(timings.shape, np.nan)
    for r in range(world):
        t = 0.01
        for i in range(rows):
            if np.isnan(timings[r, i, -1]):
                continue
            starts[r, i, -1] = t
            inner = t
            for p in range(phases - 1):
                starts[r, i, p] = inner
                inner += timings[r, i, p]
            t += timings[r, i, -1] + 50e-6
    return starts


def write_bucket_times(group, timings: np.ndarray, starts: np.ndarray) -> None:
    """`bucket_times` (world, rows, buckets, 2): each bucket launched during backward and
    completed by the end of comm_wait, as the MPI backend records them."""
    backward, comm_wait = TRAIN_PHASES.index("backward"), TRAIN_PHASES.index("comm_wait")
    world, rows, _ = timings.shape
    values = np.full((world, rows, len(BUCKET_BYTES), 2), np.nan)
    for b in range(len(BUCKET_BYTES)):
        share = (b + 1) / (len(BUCKET_BYTES) + 1)
        values[:, :, b, 0] = starts[:, :, backward] + share * timings[:, :, backward]
        values[:, :, b, 1] = starts[:, :, comm_wait] + share * timings[:, :, comm_wait]
    d = group.create_dataset("bucket_times", data=values)
    d.attrs["bucket_bytes"] = json.dumps(BUCKET_BYTES)
    d.attrs["columns"] = json.dumps(["launched_s", "completed_s"])


#: Per-rank metrics of a `batch_size: auto` cell besides RANK_METRICS (layout 1.4).
AUTO_RANK_METRICS = ["batch_size", "memory_budget_bytes", "batch_search_s"]


def write_probes(group: h5py.Group, probes, status, times) -> None:
    """The `probes` and `probe_times` datasets as common/results/cells.cc write_probes()
    writes them (contiguous float64, JSON `columns` and `status`)."""
    d = group.create_dataset("probes", data=np.asarray(probes, dtype=np.float64))
    d.attrs["columns"] = json.dumps(PROBE_COLUMNS)
    d.attrs["status"] = json.dumps(list(status))
    group.create_dataset("probe_times", data=np.asarray(times, dtype=np.float64))


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


def _root_attrs(f, path):
    a = f.attrs
    a["scalebench_layout_version"] = LAYOUT_VERSION
    a["tool_version"], a["tool_commit"], a["tool_dirty"] = "0.1.0", "c" * 40, np.int8(0)
    a["build_type"] = "Release"
    for lib, ver in (
        ("torch", "2.5.1"),
        ("cuda", ""),
        ("nccl", ""),
        ("mpi", "Open MPI 4.1"),
        ("hdf5", "1.14.0"),
    ):
        a[f"{lib}_version"] = ver
    a["hosts"] = json.dumps(["node0"])
    a["devices"] = json.dumps(
        [
            {
                "rank": r,
                "host": "node0",
                "device": "cpu",
                "cpu": "Synthetic CPU @ 2.0GHz",
                "cores": 16,
            }
            for r in (1, 2)
        ]
    )
    a["mpi_thread_level"] = "MPI_THREAD_MULTIPLE"
    a["mpi_size"] = np.int64(3)
    a["argv"] = json.dumps(["scalebench", "run", "quickstart.yaml", "-o", str(path)])
    a["matrix_path"] = "quickstart.yaml"
    a["matrix_hash"] = "0123456789abcdef"
    a["matrix_text"] = "# synthetic matrix written by tests/analysis/make_results.py\n"
    # Layout 1.6: the matrix's warnings, repeated by the overview (a stand-in task file).
    a["matrix_warnings"] = json.dumps(
        ["tasks.csv:1:1: warning: every row runs scalebench's built-in stand-in model (unet3d)"]
    )
    a["environment"] = json.dumps({"OMP_NUM_THREADS": "1"})
    a["start_time"], a["end_time"] = "2026-01-01T00:00:00Z", "2026-01-01T00:30:00Z"
    a["run_count"] = np.int64(1)
    # Layout 1.5: the writer's commits, the order seed of the interleaved repetitions.
    a["commit_log"] = json.dumps(
        [[ORIGIN_EPOCH_S + 1.0, 0.004, 3], [ORIGIN_EPOCH_S + 9.0, 0.005, 4]]
    )
    a["order_seed"] = str(fnv1a64("0123456789abcdef"))


def _fixed_string(value: str) -> np.ndarray:
    """A fixed-length, NUL-terminated UTF-8 string as the C++ writer stores every string
    since layout 1.2 (Note [Fixed-length strings] in common/hdf5/wrappers.cc)."""
    data = value.encode("utf-8")
    return np.array(data, dtype=h5py.string_dtype("utf-8", len(data) + 1))


def fix_strings(f: h5py.File) -> None:
    """Rewrites every variable-length string attribute and dataset of `f` fixed-length."""
    objects = [f]
    f.visititems(lambda _name, obj: objects.append(obj))
    for obj in objects:
        for name in list(obj.attrs):
            if h5py.check_string_dtype(obj.attrs.get_id(name).dtype) is None:
                continue
            if obj.attrs.get_id(name).get_type().is_variable_str():
                value = obj.attrs[name]
                obj.attrs[name] = _fixed_string(value if isinstance(value, str) else value.decode())
    for name in ("rank_hosts", "rank_devices"):
        for obj in objects:
            if isinstance(obj, h5py.Group) and name in obj:
                values = [v.decode() if isinstance(v, bytes) else v for v in obj[name][()]]
                width = max([len(v.encode()) for v in values] + [0]) + 1
                del obj[name]
                kind = h5py.string_dtype("utf-8", width)
                obj.create_dataset(name, data=np.array([v.encode() for v in values], dtype=kind))


#: The `accuracy` subgroup (layout 1.3) as the C++ writer stores it: these attributes are
#: int64, `verdict`, `failed_checks` (JSON list), `kind` and `reference` fixed-length
#: strings, every other attribute float64 (schemas/results-layout.md).
ACCURACY_INTEGERS = ("validation_samples", "elements", "steps")
ACCURACY_LAYOUT_VERSION = "1.3"
ACCURACY_REFERENCE = "fp32, every optimization switch off, same weights and inputs"


def write_accuracy(
    group: h5py.Group, verdict: str, failed_checks=(), kind: str = "inference", **numbers
) -> None:
    """(Re)writes `group/accuracy` of a cell: the verdict, the failed checks, the kind and
    the given numbers (mae=..., psnr_db=float("inf"), steps=..., ...)."""
    if "accuracy" in group:
        del group["accuracy"]
    sub = group.create_group("accuracy")
    sub.attrs["verdict"] = _fixed_string(verdict)
    sub.attrs["failed_checks"] = _fixed_string(json.dumps(list(failed_checks)))
    sub.attrs["kind"] = _fixed_string(kind)
    sub.attrs["reference"] = _fixed_string(ACCURACY_REFERENCE)
    for name, value in numbers.items():
        sub.attrs[name] = np.int64(value) if name in ACCURACY_INTEGERS else np.float64(value)


def add_accuracy(path, cell_id: str, verdict: str, failed_checks=(), **kwargs) -> None:
    """Adds an `accuracy` group to one cell of the file at `path` (see write_accuracy) and
    marks the file layout 1.3, the first to have one."""
    with h5py.File(path, "r+") as f:
        write_accuracy(f["cells"][cell_id], verdict, failed_checks, **kwargs)
        version = f.attrs["scalebench_layout_version"]
        version = version.decode() if isinstance(version, bytes) else version
        if tuple(map(int, version.split("."))) < (1, 3):
            f.attrs["scalebench_layout_version"] = _fixed_string(ACCURACY_LAYOUT_VERSION)


#: The golden listing of the C++ store's layout test (tests/unit/common/
#: results_store_layout_test.cc), which test_summary.py holds the synthetic file to.
LAYOUT_GOLDEN = REPO / "tests" / "data" / "results" / "layout_v1.txt"
#: A passed training `accuracy` group (values made up; only names and types matter to the
#: golden).
TRAINING_ACCURACY = {
    "tolerance": 0.01,
    "steps": WARMUP + MEASURED,
    "validation_samples": 32,
    "max_loss_rel_deviation": 0.0002,
    "final_loss": 2.3005,
    "reference_final_loss": 2.3,
    "param_rel_distance": 0.0001,
}


def golden_lists_accuracy() -> bool:
    """Whether the layout golden's ok cell (a training cell of 2 ranks) has an `accuracy`
    group: since layout 1.3 the C++ layout test validates it, and the synthetic file then
    plants one on its ok training cells of 2 ranks to match."""
    return any(
        line.startswith("/cells/<ok-cell>/accuracy ")
        for line in LAYOUT_GOLDEN.read_text().splitlines()
    )


def write_results(path, seed: int = 20240601, repetitions: bool = False) -> str:
    """Writes the synthetic results file to `path` and returns `path` as str; with
    `repetitions`, the repeated cells and `/series` of add_repetitions too (the file under
    test of conftest.py has them)."""
    rng = np.random.default_rng(seed)
    per_sample = {"main": 0.0010, "feature": 0.00085}
    specs = []
    plant_accuracy = golden_lists_accuracy()
    with h5py.File(path, "w", libver=("v110", "v110")) as f:
        _root_attrs(f, path)
        cells = f.create_group("cells")
        for branch in ("main", "feature"):
            for world in (1, 2):
                for batch in (16, 32):
                    spec = make_spec(branch, "train", batch, world)
                    noisy = branch == "feature" and batch == 32 and world == 1
                    straggler = 1 if (branch == "main" and batch == 16 and world == 2) else None
                    t = train_timings(
                        rng,
                        batch,
                        world,
                        per_sample[branch],
                        sigma=0.25 if noisy else 0.02,
                        straggler=straggler,
                    )
                    _write_cell(cells, spec, "ok", rng, t, [WARMUP + MEASURED] * world)
                    if plant_accuracy and world == 2:
                        write_accuracy(
                            cells[spec["cell_id"]], "passed", kind="training", **TRAINING_ACCURACY
                        )
                    specs.append(spec)
                    samples = batch * sum(MEASURED - r for r in range(world))
                    spec = make_spec(branch, "infer", batch, world, samples=samples)
                    if branch == "feature" and batch == 32 and world == 2:
                        _write_cell(cells, spec, "failed", rng, reason="forward: shape mismatch")
                        continue
                    drift = 0.3 if (branch == "main" and batch == 16 and world == 1) else 0.0
                    t, counts = infer_timings(
                        rng, batch, world, per_sample[branch] / 3, drift=drift
                    )
                    _write_cell(cells, spec, "ok", rng, t, counts)
        for batch in (16, 32):
            spec = make_spec("main", "train", batch, 1, precision="bf16")
            t = train_timings(rng, batch, 1, per_sample["main"] / 1.4)
            _write_cell(cells, spec, "ok", rng, t, [WARMUP + MEASURED])
        _write_cell(
            cells,
            make_spec("main", "train", 64, 1),
            "oom",
            rng,
            reason="CUDA out of memory. Tried to allocate 2.00 GiB",
        )
        _write_cell(cells, make_spec("feature", "train", 64, 1), "skipped", rng)
        for experiment, model, shape, search, settings in (
            ("mlp-auto", "mlp", (64,), plateau_search(), {"memory_limit_mb": 512.0}),
            (
                "cnn-auto",
                "resnet18",
                (3, 64, 64),
                memory_bound_search(),
                {"min_batch": 4, "latency_slo_ms": 100.0},
            ),
        ):
            spec = make_spec(
                "main",
                "train",
                0,
                search.world,
                experiment=experiment,
                model=model,
                input_shape=shape,
                **settings,
            )
            batch = search.recommended_batch  # the timed loop's step as the probe's
            t = train_timings(rng, batch, search.world, (search.step_s(batch) - 0.002) / batch)
            _write_cell(cells, spec, "ok", rng, t, [WARMUP + MEASURED] * search.world, auto=search)
        f.attrs["cell_count"] = np.int64(len(cells))  # layout 1.5
        fix_strings(f)
    if repetitions:
        add_repetitions(path)
    return str(path)


def add_multinode_cell(path, hosts, slow_ranks=(), batch: int = 16, seed: int = 41) -> str:
    """Adds to the file at `path` an ok training cell of len(hosts) ranks (experiment
    `mlp-nodes`, per-rank `batch`) whose rank r ran on hosts[r] and whose `slow_ranks`
    compute 30 % slower (train_timings' straggler); returns its cell id. The root attribute
    `hosts` gains the new hosts."""
    rng = np.random.default_rng(seed)
    world = len(hosts)
    spec = make_spec("main", "train", batch, world, experiment="mlp-nodes")
    timings = train_timings(rng, batch, world, 0.001, straggler=list(slow_ranks) or None)
    with h5py.File(path, "r+") as f:
        cells = f["cells"]
        _write_cell(cells, spec, "ok", rng, timings, [WARMUP + MEASURED] * world, hosts=hosts)
        f.attrs["cell_count"] = np.int64(len(cells))
        known = json.loads(_text_attr(f, "hosts"))
        f.attrs["hosts"] = json.dumps(known + [h for h in dict.fromkeys(hosts) if h not in known])
        fix_strings(f)
    return spec["cell_id"]


def splitmix64(state: int) -> tuple[int, int]:
    """(new state, output) of splitmix64, as common/cell/repetition_stats.cc."""
    mask = 0xFFFFFFFFFFFFFFFF
    state = (state + 0x9E3779B97F4A7C15) & mask
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return state, z ^ (z >> 31)


def series_interval(values, seed: int, resamples: int = 10000, confidence: float = 0.95):
    """The percentile-bootstrap interval of the median as the C++ computes it (one draw at a
    time; tests/analysis/rawdata.py has an independent vectorised version)."""
    values = [v for v in values if not np.isnan(v)]
    if len(values) < 2:
        return float("nan"), float("nan")
    state, medians = seed, []
    for _ in range(resamples):
        sample = []
        for _ in range(len(values)):
            state, draw = splitmix64(state)
            sample.append(values[draw % len(values)])
        medians.append(float(np.median(sample)))
    tail = (1.0 - confidence) / 2.0
    return float(np.percentile(medians, 100 * tail)), float(
        np.percentile(medians, 100 * (1 - tail))
    )


#: Repeated cells of add_repetitions: (mode, world, repetitions, slowdown per repetition).
REPEATED = (("train", 2, 5, (1.0, 1.02, 0.99, 1.25, 1.01)), ("infer", 1, 3, (1.0, 1.03, 0.98)))


def repeated_series_ids() -> list[str]:
    """The series ids add_repetitions writes (the cell ids of the repetitions 0), in
    REPEATED order."""
    return [
        make_spec(
            "main",
            mode,
            16,
            world,
            experiment="mlp-repeated-" + mode,
            samples=16 * world * MEASURED if mode == "infer" else 0,
            repetitions=repetitions,
        )["cell_id"]
        for mode, world, repetitions, _ in REPEATED
    ]


def add_repetitions(path) -> list[str]:
    """Adds two repeated cells (layout 1.5, Note [Repetitions]) to the file at `path`: a
    DDP training cell of 5 repetitions whose 4th runs 25 % slower (its series disagrees) and
    an inference cell of 3 that agree; every repetition a complete cell with its own
    timings and summary, and the `/series` groups. Returns the series ids. A file that has
    `/series` already (write_results adds them) is left as it is."""
    with h5py.File(path, "r") as f:
        if "series" in f:
            return repeated_series_ids()
    rng = np.random.default_rng(99)
    series_ids = []
    with h5py.File(path, "r+") as f:
        cells = f["cells"]
        series_group = f.require_group("series")
        for mode, world, repetitions, slowdowns in REPEATED:
            figures = []
            ids = []
            for k, slowdown in enumerate(slowdowns):
                extra = {"repetitions": repetitions}
                if k > 0:
                    extra["repetition"] = k
                samples = 16 * world * MEASURED if mode == "infer" else 0
                spec = make_spec(
                    "main",
                    mode,
                    16,
                    world,
                    experiment="mlp-repeated-" + mode,
                    samples=samples,
                    **extra,
                )
                if mode == "train":
                    t = train_timings(rng, 16, world, 0.0008 * slowdown)
                    counts = [WARMUP + MEASURED] * world
                else:
                    t, counts = infer_timings(rng, 16, world, 0.0003 * slowdown)
                _write_cell(cells, spec, "ok", rng, t, counts)
                summary = cells[spec["cell_id"]]["summary"].attrs
                figures.append((summary["median_s"], summary["throughput_samples_per_s"]))
                ids.append(spec["cell_id"])
            series_id = ids[0]
            seed = fnv1a64(series_id)
            medians = [m for m, _ in figures]
            throughputs = [t for _, t in figures]
            low, high = series_interval(medians, seed)
            t_low, t_high = series_interval(throughputs, seed)
            median = float(np.median(medians))
            s = series_group.create_group(series_id)
            s.attrs["metric"] = "step" if mode == "train" else "batch"
            s.attrs["repetitions"] = np.int64(repetitions)
            s.attrs["completed"] = np.int64(len(medians))
            s.attrs["cells"] = json.dumps(ids)
            s.attrs["repetition_median_s"] = json.dumps([float(m) for m in medians])
            s.attrs["median_s"] = median
            s.attrs["median_s_ci_low"], s.attrs["median_s_ci_high"] = low, high
            s.attrs["throughput_samples_per_s"] = float(np.median(throughputs))
            s.attrs["throughput_ci_low"], s.attrs["throughput_ci_high"] = t_low, t_high
            spread = (max(medians) - min(medians)) / median
            s.attrs["spread_rel"] = spread
            s.attrs["disagree"] = np.int8(spread > 0.10)
            s.attrs["max_spread_rel"] = 0.10
            s.attrs["confidence"] = 0.95
            s.attrs["bootstrap_resamples"] = np.int64(10000)
            s.attrs["bootstrap_seed"] = str(seed)
            series_ids.append(series_id)
        f.attrs["cell_count"] = np.int64(len(cells))
        fix_strings(f)
    return series_ids


def copy_with_slowdown(src, dst, cell_id, factor: float) -> str:
    """Copies `src` to `dst` and multiplies every timing of `cell_id` (a cell id, or a list
    of them: every repetition of a series) by `factor` (summaries, and `/series` when the
    file has it, recomputed), leaving every other cell byte-for-byte identical."""
    shutil.copyfile(src, dst)
    ids = [cell_id] if isinstance(cell_id, str) else list(cell_id)
    with h5py.File(dst, "r+") as f:
        for one in ids:
            group = f["cells"][one]
            data = group["timings"][()] * factor
            group["timings"][...] = data
            write_summary(group)
        has_series = "series" in f and len(ids) > 1
    if has_series:
        rewrite_series(dst)
    return str(dst)


def copy_with_phase_delay(src, dst, cell_ids, phase: str, delay_s: float) -> str:
    """Copies `src` to `dst` and adds `delay_s` to every iteration of `phase` in each cell of
    `cell_ids`, and to the cell's total (its last phase: `step` or `batch`); summaries and
    `/series` recomputed. A known delay in one phase, as a branch that slows it would add."""
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        for cell_id in cell_ids:
            group = f["cells"][cell_id]
            phases = json.loads(_text_attr(group["timings"], "phases"))
            data = group["timings"][()]
            data[:, :, phases.index(phase)] += delay_s
            data[:, :, -1] += delay_s
            group["timings"][...] = data
            write_summary(group)
        has_series = "series" in f
    if has_series:
        rewrite_series(dst)
    return str(dst)


def rename_phases(path, cell_ids, names: dict) -> None:
    """Renames the phases of the cells `cell_ids` in the file at `path` (old -> new name):
    a program cell's own phase names (its total keeps its name: the summary reads it)."""
    with h5py.File(path, "r+") as f:
        for cell_id in cell_ids:
            for dataset in ("timings", "phase_starts"):
                d = f["cells"][cell_id][dataset]
                phases = json.loads(_text_attr(d, "phases"))
                d.attrs["phases"] = json.dumps([names.get(p, p) for p in phases])
        fix_strings(f)


def rewrite_series(path) -> None:
    """Recomputes every `/series` group of the file at `path` from the repetitions it lists,
    as the C++ writer does at the end of a run (common/cell/repetition_stats.cc summarize_series):
    a repetition counts when it is `ok` with a finite summary `median_s`; with fewer than
    two the intervals are NaN, with none the median and spread too. For tests that change
    repetitions (their timings, their status) after add_repetitions."""
    nan = float("nan")
    with h5py.File(path, "r+") as f:
        for series_id, group in f["series"].items():
            ids = json.loads(_text_attr(group, "cells"))
            medians, throughputs, per_cell = [], [], []
            for cell_id in ids:
                cell = f["cells"][cell_id]
                summary = cell["summary"].attrs if "summary" in cell else {}
                median = float(summary.get("median_s", nan))
                if _text_attr(cell, "status") == "ok" and np.isfinite(median):
                    medians.append(median)
                    throughputs.append(float(summary.get("throughput_samples_per_s", nan)))
                    per_cell.append(median)
                else:
                    per_cell.append(None)
            seed = fnv1a64(series_id)
            low, high = series_interval(medians, seed)
            t_low, t_high = series_interval(throughputs, seed)
            median = float(np.median(medians)) if medians else nan
            spread = (max(medians) - min(medians)) / median if medians else nan
            a = group.attrs
            a["completed"] = np.int64(len(medians))
            a["repetition_median_s"] = json.dumps(per_cell)
            a["median_s"], a["median_s_ci_low"], a["median_s_ci_high"] = median, low, high
            finite = [t for t in throughputs if np.isfinite(t)]
            a["throughput_samples_per_s"] = float(np.median(finite)) if finite else nan
            a["throughput_ci_low"], a["throughput_ci_high"] = t_low, t_high
            a["spread_rel"] = spread
            a["disagree"] = np.int8(bool(spread > 0.10))
        fix_strings(f)


def _text_attr(obj, name: str) -> str:
    value = obj.attrs[name]
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


if __name__ == "__main__":
    print(write_results(sys.argv[1] if len(sys.argv) > 1 else "synthetic_results.h5"))
