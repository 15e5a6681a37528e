"""What scalebench's C++ computes from a cell's timings, again in numpy: the summary's
statistics and thresholds (results/cell_summary.{h,cc}, the thresholds read from the
header), the batch search's figures (common/cell/batch_search.h) and the series' bootstrap
interval of the median (common/cell/repetition_stats.cc). make_results.py writes the
synthetic files' summaries with it; the tests compare the C++ and the analysis against it.
"""

from __future__ import annotations

import re
from pathlib import Path

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


def cpp_thresholds() -> dict:
    """The validity thresholds of results/cell_summary.h, typed as the summary stores
    them."""

    def value(name):
        return cpp_constant("results/cell_summary.h", name)

    return {
        "min_valid_iterations": np.int64(value("kMinValidIterations")),
        "max_valid_cv": np.float64(value("kMaxValidCv")),
        "max_valid_drift": np.float64(value("kMaxValidDrift")),
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
    stop_reason=None,
):
    """The `summary` attributes with the names, types and values that
    results/cell_summary.cc + results/cells.cc write (schemas/results-layout.md).
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
    # results/cell_summary.cc: the group's last loss, and Note [CPU oversubscription].
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
    # The warm-up drift of the per-iteration series (train: slowest rank; inference: rank
    # mean): median(first half) / median(second half) - 1, NaN below 4 iterations.
    rows = np.isfinite(main).any(axis=0)
    series = np.nanmax(main[:, rows], axis=0) if mode == "train" else np.nanmean(main[:, rows], 0)
    half = series.size // 2
    out["drift"] = (
        float(np.median(series[:half]) / np.median(series[-half:]) - 1.0)
        if half >= 2
        else float("nan")
    )
    flags = {
        "valid_enough_iterations": out["count"] >= thresholds["min_valid_iterations"],
        # iterations auto (stop_reason precise/budget/cap): judged by its interval, not its cv
        "valid_cv": (
            stop_reason == "precise"
            if stop_reason in ("precise", "budget", "cap")
            else bool(out["cv"] <= thresholds["max_valid_cv"])
        ),
        "valid_drift": not (abs(out["drift"]) > thresholds["max_valid_drift"]),
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
