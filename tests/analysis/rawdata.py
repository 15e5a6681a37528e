"""Independent reading of a results file (h5py + numpy only, no scalebench_analysis code),
used by the tests to recompute every number they check, following
schemas/results-layout.md."""

from __future__ import annotations

import json
from dataclasses import dataclass

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
        `rel_tolerance` (relative to the larger magnitude); inference: True."""
        if self.mode != "train":
            return True
        checksums = self.rank_metrics.get("param_checksum")
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

    def ok_cells(self) -> list:
        return [c for c in self.cells.values() if c.ok]


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def read(path) -> RawFile:
    cells = {}
    with h5py.File(path, "r") as f:
        root = {k: _text(v) for k, v in f.attrs.items()}
        for cell_id, group in f["cells"].items():
            attrs = {k: _text(v) for k, v in group.attrs.items()}
            timings, phases, warmup = None, [], 0
            if "timings" in group:
                timings = group["timings"][()]
                phases = json.loads(_text(group["timings"].attrs["phases"]))
                warmup = int(group["timings"].attrs["warmup_iterations"])
            summary = {}
            if "summary" in group:
                summary = {k: _text(v) for k, v in group["summary"].attrs.items()}
            metrics = {}
            if "rank_metrics" in group:
                names = json.loads(_text(group["rank_metrics"].attrs["names"]))
                values = group["rank_metrics"][()]
                metrics = {name: values[:, i] for i, name in enumerate(names)}
            cells[cell_id] = RawCell(
                cell_id, attrs, json.loads(attrs["spec"]), timings, phases, warmup, metrics, summary
            )
    return RawFile(str(path), root, cells)


def _splitmix64_stream(seed: int, count: int) -> np.ndarray:
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
    draws = (_splitmix64_stream(seed, resamples * n) % np.uint64(n)).astype(np.int64)
    medians = np.median(values[draws.reshape(resamples, n)], axis=1)
    tail = (1 - confidence) / 2
    return float(np.percentile(medians, 100 * tail)), float(
        np.percentile(medians, 100 * (1 - tail))
    )
