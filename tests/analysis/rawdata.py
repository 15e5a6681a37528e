"""Independent reading of a results file (h5py + numpy only, no scalebench_analysis code),
used by the tests to recompute every number they check, following
schemas/results-layout.md."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import h5py
import numpy as np


@dataclass
class RawCell:
    cell_id: str
    attrs: dict
    spec: dict
    timings: np.ndarray | None  # (ranks, iterations, phases)
    phases: list
    warmup: int
    rank_metrics: dict  # name -> (ranks,) values
    summary: dict  # the `summary` attributes as stored ({} when absent)

    def replicas_in_sync(self, rel_tolerance: float) -> bool:
        """train: every rank reported a param_checksum equal to rank 0's within
        `rel_tolerance` (relative to the larger magnitude); inference, and a program cell
        whose program reports no param_checksum: True (results/cell_summary.cc)."""
        if self.mode != "train":
            return True
        checksums = self.rank_metrics.get("param_checksum")
        program = bool(self.spec.get("program", {}).get("command"))
        if program and (checksums is None or not np.any(np.isfinite(checksums))):
            return True  # a program cell is checked only when it reports param_checksum
        if checksums is None or not np.all(np.isfinite(checksums)):
            return False
        scale = np.maximum(np.abs(checksums), abs(checksums[0]))
        return bool(np.all(np.abs(checksums - checksums[0]) <= rel_tolerance * scale))

    @property
    def mode(self) -> str:
        return self.attrs["mode"]

    @property
    def ok(self) -> bool:
        return self.attrs["status"] == "ok" and self.timings is not None

    @property
    def batch(self) -> int:
        """The per-rank batch of the timed loop: the summary's `batch_size` (layout 1.4: for
        `batch_size: auto`, the batch the search chose), else the cell's attribute."""
        return int(self.summary.get("batch_size", self.attrs["batch_size"]))

    def phase(self, name: str) -> np.ndarray:
        """(ranks, measured iterations) seconds of one phase."""
        return self.timings[:, self.warmup :, self.phases.index(name)]

    def samples(self) -> np.ndarray:
        """train: slowest rank's step per measured iteration; infer: every batch time."""
        if self.mode == "train":
            step = self.phase("step")
            step = step[:, np.isfinite(step).any(axis=0)]
            return np.nanmax(step, axis=0)
        batch = self.phase("batch")
        return batch[np.isfinite(batch)]

    def throughput(self) -> float:
        """The layout's definition, recomputed from the timings."""
        batch, world = self.batch, int(self.attrs["world_size"])
        if self.mode == "train":
            return batch * world / float(np.median(self.samples()))
        # The layout: the ranks' `samples` metrics when every rank reports one (an
        # `iterations: auto` cell's spec has samples 0), else the spec's.
        reported = self.rank_metrics.get("samples")
        if reported is not None and np.all(np.isfinite(reported)):
            samples = float(np.sum(reported))
        else:
            samples = int(self.attrs["samples"])
        return samples / float(np.max(np.nansum(self.phase("batch"), axis=1)))

    def key(self, *drop: str) -> str:
        spec = {k: v for k, v in self.spec.items() if k not in drop + ("cell_id", "source")}
        return json.dumps(spec, sort_keys=True)


@dataclass
class RawFile:
    path: str
    root: dict
    cells: dict
    series: dict = field(default_factory=dict)  # series id -> `/series/<id>` attributes

    def ok_cells(self) -> list:
        return [c for c in self.cells.values() if c.ok]

    def series_members(self) -> dict:
        """series id -> the ids of its repetitions in repetition order, found from the
        specs alone: the cells with `repetitions` > 1 grouped by their spec without
        `repetition`; a group's id is the cell id of its repetition 0 (the cell whose spec
        has no `repetition`), None when that cell is not in the file."""
        groups = {}
        for cell in self.cells.values():
            if int(cell.spec.get("repetitions", 1)) > 1:
                groups.setdefault(cell.key("repetition"), []).append(cell)
        out = {}
        for members in groups.values():
            members.sort(key=lambda c: int(c.spec.get("repetition", 0)))
            first = members[0] if "repetition" not in members[0].spec else None
            out[first.cell_id if first else None] = [c.cell_id for c in members]
        return out


def text(value):
    return value.decode() if isinstance(value, bytes) else value


def read(path) -> RawFile:
    cells = {}
    with h5py.File(path, "r") as f:
        root = {k: text(v) for k, v in f.attrs.items()}
        for cell_id, group in f["cells"].items():
            attrs = {k: text(v) for k, v in group.attrs.items()}
            timings, phases, warmup = None, [], 0
            if "timings" in group:
                timings = group["timings"][()]
                phases = json.loads(text(group["timings"].attrs["phases"]))
                warmup = int(group["timings"].attrs["warmup_iterations"])
            summary = {}
            if "summary" in group:
                summary = {k: text(v) for k, v in group["summary"].attrs.items()}
            metrics = {}
            if "rank_metrics" in group:
                names = json.loads(text(group["rank_metrics"].attrs["names"]))
                values = group["rank_metrics"][()]
                metrics = {name: values[:, i] for i, name in enumerate(names)}
            cells[cell_id] = RawCell(
                cell_id, attrs, json.loads(attrs["spec"]), timings, phases, warmup, metrics, summary
            )
        series = {}
        for series_id, group in f["series"].items() if "series" in f else []:
            series[series_id] = {k: text(v) for k, v in group.attrs.items()}
    return RawFile(str(path), root, cells, series)


def splitmix64_stream(seed: int, count: int) -> np.ndarray:
    """`count` outputs of splitmix64 from `seed`, vectorised: the k-th state is
    seed + k * gamma (mod 2^64), so every output is a function of its index alone."""
    gamma = np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        index = np.arange(1, count + 1, dtype=np.uint64)
        z = np.uint64(seed) + index * gamma
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def bootstrap_median_interval(values, seed: int, resamples: int = 10000, confidence=0.95):
    """Reference of Note [Repetitions] (schemas/results-layout.md, `/series`): the
    percentile-bootstrap interval of the median, draws index = splitmix64 output mod n,
    n draws per resample in order; (nan, nan) for fewer than 2 values."""
    values = np.asarray([v for v in values if np.isfinite(v)], dtype=float)
    n = values.size
    if n < 2:
        return float("nan"), float("nan")
    draws = (splitmix64_stream(seed, resamples * n) % np.uint64(n)).astype(np.int64)
    medians = np.median(values[draws.reshape(resamples, n)], axis=1)
    tail = (1 - confidence) / 2
    return float(np.percentile(medians, 100 * tail)), float(
        np.percentile(medians, 100 * (1 - tail))
    )


def bootstrap_medians(values, seed: int, resamples: int = 10000) -> np.ndarray:
    """The `resamples` medians of the bootstrap of bootstrap_median_interval (finite
    values only; at least one): resample b is values[draws[b * n : (b + 1) * n] mod n]."""
    values = np.asarray([v for v in values if np.isfinite(v)], dtype=float)
    n = values.size
    draws = (splitmix64_stream(seed, resamples * n) % np.uint64(n)).astype(np.int64)
    return np.median(values[draws.reshape(resamples, n)], axis=1)


def fnv1a64(text: str) -> int:
    """FNV-1a 64 of the UTF-8 bytes of `text` (the series' bootstrap seed)."""
    value = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        value = ((value ^ byte) * 0x100000001B3) % 2**64
    return value


def series_reference(raw: RawFile, series_id: str, cell_ids: list) -> dict:
    """The `/series/<series_id>` figures recomputed from the summaries of its repetitions
    (`cell_ids`, repetition order) as schemas/results-layout.md defines them: the ok
    repetitions with a finite summary `median_s` count; median, bootstrap intervals
    (seed FNV-1a 64 of the series id; the throughput with a fresh stream of the same seed),
    spread and disagree. NaN where fewer values allow none."""
    counted = []
    for cell_id in cell_ids:
        cell = raw.cells[cell_id]
        median = float(cell.summary.get("median_s", np.nan))
        if cell.attrs["status"] == "ok" and np.isfinite(median):
            counted.append((median, float(cell.summary.get("throughput_samples_per_s", np.nan))))
    medians = np.array([m for m, _ in counted])
    rates = np.array([t for _, t in counted])
    seed = fnv1a64(series_id)
    low, high = bootstrap_median_interval(medians, seed)
    t_low, t_high = bootstrap_median_interval(rates, seed)
    median = float(np.median(medians)) if medians.size else np.nan
    finite_rates = rates[np.isfinite(rates)]
    spread = (medians.max() - medians.min()) / median if medians.size else np.nan
    return {
        "completed": len(counted),
        "median_s": median,
        "median_s_ci_low": low,
        "median_s_ci_high": high,
        "throughput_samples_per_s": float(np.median(finite_rates)) if finite_rates.size else np.nan,
        "throughput_ci_low": t_low,
        "throughput_ci_high": t_high,
        "spread_rel": spread,
        "disagree": bool(spread > 0.10),
        "bootstrap_seed": seed,
        "repetition_median_s": [
            float(raw.cells[c].summary["median_s"])
            if raw.cells[c].attrs["status"] == "ok"
            and np.isfinite(raw.cells[c].summary.get("median_s", np.nan))
            else None
            for c in cell_ids
        ],
    }
