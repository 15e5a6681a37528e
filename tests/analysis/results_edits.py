"""Edits of a written results file for the tests: repetitions added (layout 1.5: a training
cell of 5 repetitions that disagree, an inference cell of 3 that agree, with their `/series`
groups), a copy with one cell slowed down or one phase delayed, phases renamed, the series
rewritten from the cells.
"""

from __future__ import annotations

import json
import shutil

import h5py
import numpy as np

from make_results import _text_attr, _write_cell, fix_strings, write_summary
from reference_figures import series_interval
from synthetic_cells import (
    MEASURED,
    WARMUP,
    fnv1a64,
    infer_timings,
    make_spec,
    train_timings,
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
