"""The compute side of a projection: which measured cell stands for a target world and
batch, and its per-rank, per-iteration times scaled to another per-rank batch.
See Note [Projection model] in projection/__init__.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .inputs import MeasuredCell

#: Phases whose time does not grow with the batch: the optimizer updates the parameters
#: once per step, whatever the batch.
BATCH_FREE_PHASES = ("optimizer",)


@dataclass(frozen=True)
class ComputeSamples:
    """A reference cell's compute at a per-rank batch: the pooled per-rank, per-iteration
    compute times (seconds, finite), each phase's mean, and backward's median."""

    reference: MeasuredCell
    batch: float
    compute: np.ndarray
    phase_mean_s: dict
    backward_s: float
    iterations: int


def reference_cell(cells: list[MeasuredCell], batch: float, world: int) -> MeasuredCell:
    """The cell whose compute stands for `world` ranks at per-rank `batch`: of the largest
    measured world not above `world` (world 1 stands for world 1 only when a larger one
    was measured: it lacks the slowdown of compute under communication), the one whose
    batch is nearest in ratio."""
    worlds = sorted({c.world_size for c in cells})
    below = [w for w in worlds if w <= world] or worlds[:1]
    chosen = below[-1]
    candidates = [c for c in cells if c.world_size == chosen]
    return min(candidates, key=lambda c: (abs(math.log(c.batch_size / batch)), c.batch_size))


def _phase_median(cell: MeasuredCell, phase: str) -> float:
    values = cell.phases.get(phase)
    if values is None or values.size == 0:
        return float("nan")
    with np.errstate(all="ignore"):
        per_iteration = np.nanmean(values, axis=0)
    per_iteration = per_iteration[np.isfinite(per_iteration)]
    return float(np.median(per_iteration)) if per_iteration.size else float("nan")


def batch_law(cells: list[MeasuredCell], phase: str, world: int) -> tuple[float, float]:
    """(fixed seconds, seconds per sample) of `phase` at `world`: a least-squares line
    through the phase medians of the cells of that world over their batches; through the
    origin (all per sample) with one batch; all fixed for the BATCH_FREE_PHASES."""
    points = [(c.batch_size, _phase_median(c, phase)) for c in cells if c.world_size == world]
    points = [(b, t) for b, t in points if math.isfinite(t)]
    if not points:
        return float("nan"), float("nan")
    batches = np.array([b for b, _ in points], dtype=float)
    times = np.array([t for _, t in points])
    if phase in BATCH_FREE_PHASES:
        return float(np.mean(times)), 0.0
    if np.unique(batches).size < 2:
        return 0.0, float(np.mean(times / batches))
    slope, fixed = np.polyfit(batches, times, 1)
    if fixed < 0 or slope < 0:  # noise: keep the line through the origin
        return 0.0, float(np.sum(times * batches) / np.sum(batches**2))
    return float(fixed), float(slope)


def compute_at(cells: list[MeasuredCell], batch: float, world: int) -> ComputeSamples:
    """The reference cell's compute (reference_cell) scaled to per-rank `batch`: each
    phase by its batch law's ratio, the whole compute by the ratio of the sums of the
    phases' means."""
    ref = reference_cell(cells, batch, world)
    means, scaled = {}, {}
    for phase, values in ref.phases.items():
        mean = float(np.nanmean(values)) if np.isfinite(values).any() else 0.0
        fixed, per_sample = batch_law(cells, phase, ref.world_size)
        at_ref = fixed + per_sample * ref.batch_size
        ratio = (fixed + per_sample * batch) / at_ref if at_ref > 0 else 1.0
        means[phase] = mean
        scaled[phase] = mean * (ratio if math.isfinite(ratio) else 1.0)
    total = sum(means.values())
    factor = sum(scaled.values()) / total if total > 0 else batch / ref.batch_size
    compute = ref.compute[np.isfinite(ref.compute)] * factor
    backward_ratio = scaled.get("backward", 0.0) / means["backward"] if means.get("backward") else 0
    backward = _phase_median(ref, "backward") * backward_ratio if "backward" in means else 0.0
    iterations = int(ref.compute.shape[-1]) if ref.compute.ndim else 0
    return ComputeSamples(ref, batch, compute, scaled, float(np.nan_to_num(backward)), iterations)
