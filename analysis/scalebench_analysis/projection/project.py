"""`project(results path, probe paths, options)`: the whole projection of a results file,
with the inputs it used, what it lacked, and its check against the file's larger worlds.
See Note [Projection model] in projection/__init__.py."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ..errors import UsageError
from ..read.loader import load
from ..tables.probe import load_probe
from .check import Check, check
from .comm import fit_probe
from .inputs import measured_cells
from .model import MIB, Curve, ProjectionOptions, curves, infer_rows, train_rows


@dataclass(frozen=True)
class Projection:
    """Rows: one per (curve, per-rank batch, workers); `inputs`: one line per input;
    `missing`: one line per input the projection lacked, with what to run."""

    path: str
    options: ProjectionOptions
    rows: pd.DataFrame
    inputs: list
    missing: list
    check: Check
    largest_fit_world: int
    curves: list


def _curve_values(curve: Curve) -> dict:
    """A curve's inputs as values, for a stored projection (Note [Stored projections])."""
    values = {
        "curve": curve.label,
        "mode": curve.mode,
        "cells": [
            {"cell_id": c.cell_id, "world_size": c.world_size, "batch_size": c.batch_size}
            for c in curve.cells
        ],
        "notes": list(curve.notes),
    }
    comm = curve.comm
    if comm is None:
        return values
    values.update(
        {
            "gradient_bytes": comm.gradient_bytes if math.isfinite(comm.gradient_bytes) else None,
            "gradient_source": comm.gradient_source,
            "first_bucket_bytes": comm.first_bucket_bytes,
            "bucket_bytes": comm.bucket_bytes,
            "ready_curve": {
                "backward_fraction": [float(v) for v in comm.curve[0]],
                "bytes_fraction": [float(v) for v in comm.curve[1]],
                "source": comm.curve_source,
            },
            "links": [
                {
                    "level": link.level,
                    "step_latency_s": link.step_latency_s,
                    "bus_bandwidth_bytes_per_s": link.bus_bandwidth_bytes_per_s,
                    "fitted_world": link.fitted_world,
                    "source": link.source,
                }
                for link in comm.links.values()
            ],
            "overhead_s": comm.overhead_s,
        }
    )
    return values


def _curve_inputs(curve: Curve) -> list[str]:
    cells = ", ".join(f"w{c.world_size} b{c.batch_size}" for c in curve.cells)
    lines = [f"{curve.label}: compute from the per-rank, per-iteration times of {cells}"]
    comm = curve.comm
    if comm is None:
        return lines
    if math.isfinite(comm.gradient_bytes):
        lines.append(
            f"  gradient {comm.gradient_bytes / MIB:.3f} MiB ({comm.gradient_source}); "
            f"buckets {comm.first_bucket_bytes / MIB:g} MiB first, "
            f"{comm.bucket_bytes / MIB:g} MiB after; ready: {comm.curve_source}"
        )
    for link in comm.links.values():
        lines.append("  " + link.describe())
    if comm.overhead_s > 0:
        lines.append(
            f"  + {comm.overhead_s * 1e3:.3f} ms per step that the measured comm_wait holds "
            f"beyond the modelled allreduces (gradient division and copies)"
        )
    return lines


def _check_workers(workers: Sequence[int]) -> tuple:
    if not workers:
        raise UsageError("--workers needs at least one worker count, e.g. --workers 4,8,64")
    bad = [w for w in workers if w < 1]
    if bad:
        raise UsageError(f"--workers: worker counts must be >= 1, got {bad}")
    return tuple(sorted(set(workers)))


def project(path: str, probe_paths: Sequence[str], options: ProjectionOptions) -> Projection:
    """Projects the ok cells of the results file at `path` to `options.workers`. Raises
    ResultsFileError / ProbeFileError for unreadable files and UsageError for bad options
    or a file with nothing to project."""
    options = ProjectionOptions(
        _check_workers(options.workers), options.gpus_per_node, options.fit_max_world
    )
    if options.gpus_per_node is not None and options.gpus_per_node < 1:
        raise UsageError(f"--gpus-per-node must be >= 1, got {options.gpus_per_node}")
    results = load(path)
    probe_links = [fit_probe(load_probe(p)) for p in probe_paths]
    cells = measured_cells(results)
    if not cells:
        statuses = results.cells.status.value_counts().to_dict() if len(results.cells) else {}
        shown = ", ".join(f"{n} {s}" for s, n in statuses.items()) or "no cells"
        raise UsageError(
            f"{path}: no ok cell with timings to project from ({shown}); run the matrix's "
            f"training cells at 1 and 2 workers first"
        )
    found = curves(cells, probe_links, options)
    rows = []
    for curve in found:
        rows.extend(
            train_rows(curve, options) if curve.mode == "train" else infer_rows(curve, options)
        )
    inputs = [line for curve in found for line in _curve_inputs(curve)]
    missing = sorted({note for curve in found for note in curve.notes})
    for curve in found:
        if curve.comm is None:
            continue
        for workers in options.workers:
            note = curve.comm.missing(workers, options.gpus_per_node)
            if note:
                missing.append(note)
                break
    if any(
        curve.comm is not None
        and curve.comm.links
        and not curve.comm.has_latency(max(options.workers), options.gpus_per_node)
        for curve in found
    ):
        missing.append(
            "best bucket size: the link fit has no latency term (cells of one world size, no "
            "probe), so it is not chosen; pass --probe or measure two world sizes >= 2"
        )
    if not any(c.mode == "train" for c in cells):
        missing.append("no ok training cell: only inference is projected")
    if not probe_links:
        missing.append(
            "no probe file: communication fitted from the cells' own comm_wait; "
            "`scalebench probe -o probe.h5` measures it per message size (--probe)"
        )
    largest = max(c.world_size for curve in found for c in curve.cells)
    return Projection(
        path,
        options,
        pd.DataFrame(rows),
        inputs,
        missing,
        check(cells, probe_links, options.gpus_per_node),
        largest,
        [_curve_values(curve) for curve in found],
    )
