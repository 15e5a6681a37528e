"""The measured inputs of a projection, read from one results file: per ok cell its phases
per rank and iteration, its exposed communication, its gradient bytes and the fraction of
backward at which its DDP buckets became ready (`bucket_times`, layout 1.5).
See Note [Projection model] in projection/__init__.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import h5py
import numpy as np

from ..read.decoding import json_attr
from ..read.loader import Results, open_file

#: The phases of a training step that are not compute: the whole step, and the wait for
#: the gradient allreduce (docs/ddp.md#what-comm_wait-measures).
STEP, COMM_WAIT, BACKWARD = "step", "comm_wait", "backward"
#: The last phase of an inference batch (the whole batch).
BATCH = "batch"
#: Bytes per gradient element when the size comes from `parameter_count`: DDP reduces the
#: parameters' gradients in their dtype, fp32 for the zoo models at every precision.
GRADIENT_ELEMENT_BYTES = 4


@dataclass(frozen=True)
class MeasuredCell:
    """One ok cell's measured inputs. Arrays are (ranks, measured iterations) seconds, NaN
    where a rank has no value; `compute` is the step without comm_wait (training) or the
    batch (inference), per rank and iteration."""

    cell_id: str
    config: str
    curve_label: str
    mode: str
    batch_size: int
    world_size: int
    hosts: int
    samples: int
    measured_step_s: float
    measured_p95_s: float
    throughput_samples_per_s: float
    phases: dict
    compute: np.ndarray
    exposed_s: float
    gradient_bytes: float
    gradient_source: str
    bucket_bytes: float
    first_bucket_bytes: float
    ready_curve: tuple | None


def curve_label(cell) -> str:
    """The label of a cell's curve: its label (read/cells.py) without batch and world size:
    the branch only where the cell has one, never a placeholder."""
    branch = f"{cell.branch}/" if cell.branch else ""
    setting = "" if cell.setting == "default" else f" [{cell.setting}]"
    return f"{branch}{cell.experiment}/{cell.mode}/{cell.precision}{setting}"


def exposed_comm_s(comm_wait: np.ndarray) -> float:
    """The communication backward did not hide: per iteration the least comm_wait of any
    rank (the rank that finished its compute last waits for the allreduce alone; the others
    also wait for it), the median over iterations. NaN without values."""
    if comm_wait.size == 0 or not np.isfinite(comm_wait).any():
        return float("nan")
    with np.errstate(all="ignore"):
        per_iteration = np.nanmin(comm_wait, axis=0)
    per_iteration = per_iteration[np.isfinite(per_iteration)]
    return float(np.median(per_iteration)) if per_iteration.size else float("nan")


def _bucket_launches(group: h5py.Group, backward_index: int, warmup: int):
    """(backward begin (ranks, iterations), bucket launches (ranks, iterations, buckets),
    bucket bytes) of the measured iterations, for _curve_from; None without bucket_times
    and phase_starts (layout 1.5, world size > 1)."""
    if "bucket_times" not in group or "phase_starts" not in group:
        return None
    sizes = np.asarray(json_attr(group["bucket_times"], "bucket_bytes", []), dtype=float)
    times = np.asarray(group["bucket_times"][()], dtype=float)
    starts = np.asarray(group["phase_starts"][()], dtype=float)
    if sizes.size == 0 or times.ndim != 4 or times.shape[2] != sizes.size:
        return None
    begin = starts[:, warmup:, backward_index]
    launched = times[:, warmup:, :, 0]
    return begin, launched, sizes


def _curve_from(begin, launched, sizes, backward) -> tuple:
    """(fraction of backward, fraction of gradient bytes ready) from the cell's own buckets:
    per bucket the median over ranks and iterations of (launched - backward begin) /
    backward, clipped to [0, 1] and made rising."""
    with np.errstate(all="ignore"):
        fractions = (launched - begin[:, :, None]) / backward[:, :, None]
        median = np.nanmedian(fractions.reshape(-1, sizes.size), axis=0)
    median = np.maximum.accumulate(np.clip(np.nan_to_num(median, nan=1.0), 0.0, 1.0))
    ready = np.cumsum(sizes) / sizes.sum()
    return np.concatenate(([0.0], median, [1.0])), np.concatenate(([0.0], ready, [1.0]))


def _gradient(results: Results, cell_id: str, bucket_sizes) -> tuple[float, str]:
    if bucket_sizes is not None and bucket_sizes.sum() > 0:
        return float(bucket_sizes.sum()), f"{bucket_sizes.size} DDP buckets of the cell"
    metrics = results.rank_metrics
    if "parameter_count" in metrics:
        values = metrics.loc[metrics.cell_id == cell_id, "parameter_count"].to_numpy(float)
        values = values[np.isfinite(values)]
        if values.size:
            count = float(np.max(values))
            return count * GRADIENT_ELEMENT_BYTES, f"parameter_count x {GRADIENT_ELEMENT_BYTES} B"
    return float("nan"), "unknown (no bucket_times, no parameter_count)"


def _array(results: Results, cell_id: str, phase: str) -> np.ndarray:
    return np.asarray(results.timing_array(cell_id, phase), dtype=float)


def measured_cells(results: Results) -> list[MeasuredCell]:
    """Every ok cell with timings, in the cells table's order."""
    cells = results.cells
    if cells.empty:
        return []
    ok = cells[(cells.status == "ok") & cells.cell_id.isin(list(results.raw))]
    out = []
    with open_file(results.source or results.path) as f:
        for cell in ok.itertuples():
            out.append(_measured(results, cell, f["cells"].get(cell.cell_id)))
    return out


def _measured(results: Results, cell, group) -> MeasuredCell:
    names = results.phases(cell.cell_id)
    train = cell.mode == "train"
    last = STEP if train else BATCH
    if last not in names:
        last = names[-1]
    phases = {
        name: _array(results, cell.cell_id, name) for name in names if name not in (last, COMM_WAIT)
    }
    total = _array(results, cell.cell_id, last)
    comm = _array(results, cell.cell_id, COMM_WAIT) if COMM_WAIT in names else None
    compute = total - np.nan_to_num(comm) if comm is not None else total
    curve, bucket_sizes = None, None
    if train and group is not None and BACKWARD in names:
        found = _bucket_launches(group, names.index(BACKWARD), results.raw[cell.cell_id].warmup)
        if found is not None:
            begin, launched, bucket_sizes = found
            curve = _curve_from(begin, launched, bucket_sizes, phases[BACKWARD])
    gradient, source = _gradient(results, cell.cell_id, bucket_sizes) if train else (0.0, "")
    spec = cell.spec
    hosts = results.rank_metrics
    host_names = hosts.loc[hosts.cell_id == cell.cell_id, "host"] if "host" in hosts else []
    return MeasuredCell(
        cell_id=cell.cell_id,
        config=cell.config,
        curve_label=curve_label(cell),
        mode=cell.mode,
        batch_size=int(cell.batch_size),
        world_size=int(cell.world_size),
        hosts=max(1, len(set(host_names))),
        samples=int(spec.get("samples", 0) or 0),
        measured_step_s=float(getattr(cell, "median_s", math.nan)),
        measured_p95_s=float(getattr(cell, "p95_s", math.nan)),
        throughput_samples_per_s=float(getattr(cell, "throughput_samples_per_s", math.nan)),
        phases=phases,
        compute=compute,
        exposed_s=exposed_comm_s(comm) if comm is not None and cell.world_size > 1 else 0.0,
        gradient_bytes=gradient,
        gradient_source=source,
        bucket_bytes=float(spec.get("bucket_bytes", 25 << 20)),
        first_bucket_bytes=float(spec.get("first_bucket_bytes", 1 << 20)),
        ready_curve=curve,
    )
