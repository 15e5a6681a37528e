"""The projection of every curve of a results file to other worker counts: the predicted
step with its parts, throughput, scaling efficiency, the bottleneck and the best bucket
size (training); latency and throughput at N shards (inference).
See Note [Projection model] in projection/__init__.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm

from .comm import LinkFit
from .compute import compute_at
from .inputs import MeasuredCell
from .links import Communication, communication
from .stragglers import beyond_samples, p95_interval, quantile_of_max

MIB = float(1 << 20)
#: Bucket caps tried for the best bucket size (MiB), besides the cell's own.
BUCKET_CANDIDATES_MIB = (0.25, 0.5, 1, 2, 4, 8, 16, 25, 32, 64, 128, 256)
#: Two steps within this fraction are equal when choosing the best bucket size: the
#: largest such cap wins (fewer collectives to launch).
BUCKET_TIE = 0.001
#: The growth of the forward phase between the smallest and the largest fit world above
#: which contention_notes says the ranks contend (run-to-run noise stays below it).
CONTENTION = 0.10
#: The parts of a predicted step besides the compute phases, in console order.
STRAGGLER, EXPOSED = "straggler", "comm_exposed"


@dataclass(frozen=True)
class ProjectionOptions:
    """What to project: worker counts (each >= 1), workers per node (None: all on one
    node), and the largest measured world used as input (None: every world)."""

    workers: tuple
    gpus_per_node: int | None = None
    fit_max_world: int | None = None


@dataclass
class Curve:
    """One curve's inputs (its cells up to the fit world) and, for training, its
    communication model."""

    label: str
    mode: str
    cells: list
    measured: list
    comm: Communication | None = None
    notes: list = field(default_factory=list)

    @property
    def fit_worlds(self) -> list:
        return sorted({c.world_size for c in self.cells})


def curves(
    cells: Sequence[MeasuredCell], probe_links: Sequence[LinkFit], options: ProjectionOptions
) -> list[Curve]:
    """The measured cells grouped by configuration, each group's inputs being its cells of
    worlds up to `options.fit_max_world`; `measured` keeps every cell (for the check)."""
    groups: dict = {}
    for cell in cells:
        groups.setdefault(cell.config, []).append(cell)
    out = []
    for members in groups.values():
        limit = options.fit_max_world or max(c.world_size for c in members)
        fit = [c for c in members if c.world_size <= limit]
        if not fit:
            continue
        curve = Curve(fit[0].curve_label, fit[0].mode, fit, members)
        if curve.mode == "train":
            curve.comm = communication(fit, probe_links)
            curve.notes.extend(curve.comm.notes)
            curve.notes.extend(contention_notes(curve.label, fit))
        out.append(curve)
    return out


def contention_notes(label: str, cells: Sequence[MeasuredCell]) -> list[str]:
    """Per batch, a note when the forward phase (no gradient allreduce in flight) of the
    largest fit world is more than CONTENTION slower than at the smallest: the ranks
    contend for the machine (cores, memory bandwidth, PCIe), which the model holds at the
    largest fit world's level; a contention that grows with more workers per node is not
    projected (docs/projection.md#a-real-run-on-two-cores)."""
    notes = []
    for batch in sorted({c.batch_size for c in cells}):
        at = [c for c in cells if c.batch_size == batch and "forward" in c.phases]
        if len(at) < 2:
            continue
        low, high = min(at, key=lambda c: c.world_size), max(at, key=lambda c: c.world_size)
        if low.world_size == high.world_size:
            continue
        with np.errstate(all="ignore"):
            ratio = np.nanmedian(high.phases["forward"]) / np.nanmedian(low.phases["forward"])
        if math.isfinite(ratio) and ratio > 1 + CONTENTION:
            notes.append(
                f"{label} b{batch}: forward is {ratio:.2f}x slower at {high.world_size} "
                f"workers than at {low.world_size} (no allreduce runs then): the ranks contend "
                f"for the machine (cores, memory bandwidth); the projection keeps compute at "
                f"the {high.world_size}-worker level and misses contention that grows with "
                f"more workers a node; measure the largest world a node holds"
            )
    return notes


def _measured_at(curve: Curve, batch: int, workers: int) -> MeasuredCell | None:
    found = [c for c in curve.measured if c.batch_size == batch and c.world_size == workers]
    return found[0] if found else None


def _reference(curve: Curve, batch: int) -> MeasuredCell:
    """The measured cell of the smallest fit world at per-rank `batch` (efficiencies)."""
    return min((c for c in curve.cells if c.batch_size == batch), key=lambda c: c.world_size)


def train_step(curve: Curve, batch: float, workers: int, gpus_per_node, bucket_bytes=None):
    """(median step, p95 step, parts) of `workers` ranks at per-rank `batch`."""
    samples = compute_at(curve.cells, batch, workers)
    median = quantile_of_max(samples.compute, workers, 0.5)
    p95 = quantile_of_max(samples.compute, workers, 0.95)
    typical = float(np.median(samples.compute))
    means = samples.phase_mean_s
    total = sum(means.values())
    parts = {p: (v * typical / total if total > 0 else v) for p, v in means.items()}
    parts[STRAGGLER] = max(0.0, median - typical)
    exposed = curve.comm.exposed_s(samples.backward_s, workers, gpus_per_node, bucket_bytes)
    parts[EXPOSED] = exposed
    return median + exposed, p95 + exposed, parts, samples


def best_bucket(curve: Curve, batch: int, workers: int, gpus_per_node) -> tuple[float, float]:
    """(bucket cap in bytes, median step) that minimise the step, over the candidates and
    the cell's own cap; ties go to the largest cap. NaN, NaN with one worker (no buckets) and
    for a link without a latency term (the smallest cap would always win)."""
    if workers <= 1 or not curve.comm.has_latency(workers, gpus_per_node):
        return float("nan"), float("nan")
    caps = sorted({curve.comm.bucket_bytes, *(m * MIB for m in BUCKET_CANDIDATES_MIB)})
    steps = [train_step(curve, batch, workers, gpus_per_node, cap)[0] for cap in caps]
    finite = [s for s in steps if math.isfinite(s)]
    if not finite:
        return curve.comm.bucket_bytes, float("nan")
    best = min(finite)
    cap, step = max((c, s) for c, s in zip(caps, steps) if s <= best * (1 + BUCKET_TIE))
    return cap, step


def _bottleneck(parts: dict, step: float) -> str:
    if not parts or not math.isfinite(step):
        return "-"
    return max(parts.items(), key=lambda item: item[1])[0]


def train_rows(curve: Curve, options: ProjectionOptions) -> list[dict]:
    rows = []
    for batch in sorted({c.batch_size for c in curve.cells}):
        ref = _reference(curve, batch)
        ref_throughput_per_worker = ref.throughput_samples_per_s / ref.world_size
        global_batch = batch * ref.world_size
        for workers in options.workers:
            step, p95, parts, samples = train_step(curve, batch, workers, options.gpus_per_node)
            throughput = batch * workers / step
            cap, best_step = best_bucket(curve, batch, workers, options.gpus_per_node)
            low, high = p95_interval(samples.compute, workers, samples.iterations)
            exposed = parts[EXPOSED]
            row = {
                "curve": curve.label,
                "mode": "train",
                "batch_size": batch,
                "workers": workers,
                "nodes": curve.comm.nodes(workers, options.gpus_per_node),
                "step_s": step,
                "step_p95_s": p95,
                "step_p95_low_s": low + exposed,
                "step_p95_high_s": high + exposed,
                **{f"{name}_s": value for name, value in parts.items()},
                "throughput_samples_per_s": throughput,
                "weak_efficiency": throughput / workers / ref_throughput_per_worker,
                "bottleneck": _bottleneck(parts, step),
                "bucket_mib": curve.comm.bucket_bytes / MIB,
                "best_bucket_mib": cap / MIB,
                "best_bucket_step_s": best_step,
                "reference_world": samples.reference.world_size,
                "beyond_samples": beyond_samples(samples.compute, workers),
            }
            row.update(_strong(curve, global_batch, workers, options, ref))
            row.update(_versus_measured(_measured_at(curve, batch, workers), step, "step"))
            rows.append(row)
    return rows


def _strong(curve, global_batch, workers, options, ref) -> dict:
    """Strong scaling: the global batch of the reference cell split over `workers`."""
    per_rank = global_batch / workers
    if per_rank < 1:
        return {"strong_batch": per_rank, "strong_step_s": math.nan, "strong_efficiency": math.nan}
    step = train_step(curve, per_rank, workers, options.gpus_per_node)[0]
    ideal = ref.throughput_samples_per_s * workers / ref.world_size
    return {
        "strong_batch": per_rank,
        "strong_step_s": step,
        "strong_efficiency": global_batch / step / ideal,
    }


def _versus_measured(cell: MeasuredCell | None, predicted: float, what: str) -> dict:
    if cell is None:
        return {"measured": math.nan, "error": math.nan}
    value = cell.measured_step_s if what == "step" else cell.throughput_samples_per_s
    return {"measured": value, "error": predicted / value - 1.0 if value > 0 else math.nan}


def infer_rows(curve: Curve, options: ProjectionOptions) -> list[dict]:
    """Sharded inference: every shard runs its batches alone; the slowest shard's total
    (k batches: k * mean + sqrt(k) * sd * z, z the median of the largest of N standard
    normals) sets the throughput. k: the reference's dataset split over N shards, or its
    batches per rank when it had no fixed dataset."""
    rows = []
    for batch in sorted({c.batch_size for c in curve.cells}):
        ref = _reference(curve, batch)
        for workers in options.workers:
            at = compute_at(curve.cells, batch, workers)
            samples = at.compute
            mean, sd = (
                float(np.mean(samples)),
                float(np.std(samples, ddof=1)) if samples.size > 1 else 0.0,
            )
            if ref.samples > 0:
                per_shard = math.ceil(ref.samples / (workers * batch))
            else:
                per_shard = max(1, int(np.isfinite(ref.compute).sum(axis=1).max()))
            z = float(norm.ppf(0.5 ** (1.0 / workers))) if workers > 1 else 0.0
            slowest = per_shard * mean + math.sqrt(per_shard) * sd * z
            processed = ref.samples if ref.samples > 0 else per_shard * batch * workers
            throughput = processed / slowest
            ideal = ref.throughput_samples_per_s * workers / ref.world_size
            row = {
                "curve": curve.label,
                "mode": "infer",
                "batch_size": batch,
                "workers": workers,
                "latency_s": float(np.median(samples)),
                "latency_p95_s": float(np.quantile(samples, 0.95)),
                "throughput_samples_per_s": throughput,
                "weak_efficiency" if ref.samples <= 0 else "strong_efficiency": throughput / ideal,
                "reference_world": at.reference.world_size,
            }
            measured = _measured_at(curve, batch, workers)
            row.update(_versus_measured(measured, throughput, "throughput"))
            rows.append(row)
    return rows
