"""Model FLOPs utilisation (MFU) per cell: the model FLOP/s a cell achieved over the peak of
its device at the precision it ran, as PaLM (Chowdhery et al. 2022, appendix B) and
torchtitan define it: model FLOPs only (forward, and backward = 2 x forward for training),
never recomputation or other work the implementation adds.

* ``flops_per_sample``: the cell's model FLOPs per sample: the rank metric
  ``train_flops_per_sample`` (training: 3 x forward) or ``flops_per_sample`` (inference),
  which the worker reports for zoo models (analytic) and for AOTInductor packages exported by
  ``python -m scalebench_client.export`` (``torch.utils.flop_counter``); absent otherwise.
* ``achieved_tflops``: ``flops_per_sample`` x the cell's throughput (samples/s, all ranks),
  in TFLOP/s.
* ``precision_used``: bf16 / fp16 as the cell ran (effective), tf32 for an fp32 cell whose
  effective tf32 is true, else fp32.
* ``peak_tflops`` and ``mfu``: the peak of ``data/peak_flops.json`` (datasheet figures,
  dense) for the device (the rank's CUDA device name, matched by the longest key it
  contains) times the world size, and achieved / peak. Never guessed: NaN on a CPU, on a
  device the table does not know, or without FLOPs; the row still shows achieved FLOP/s.
"""

from __future__ import annotations

import json
import math
from importlib import resources

import numpy as np
import pandas as pd

from ..errors import UsageError
from ..read.loader import Results
from .startup import rank_medians

COLUMNS = [
    "label",
    "cell_id",
    "device",
    "precision_used",
    "flops_per_sample",
    "achieved_tflops",
    "peak_tflops",
    "mfu",
]


def default_peaks() -> dict:
    """The shipped table: device key -> {precision: FLOP/s, source}."""
    text = resources.files("scalebench_analysis").joinpath("data/peak_flops.json").read_text()
    return json.loads(text)["devices"]


def load_peaks(path: str | None) -> dict:
    """The shipped table, with the entries of the user's file `path` (same shape) added or
    replacing; UsageError naming what is wrong with that file."""
    peaks = default_peaks()
    if not path:
        return peaks
    try:
        with open(path) as f:
            extra = json.load(f)
    except (OSError, json.JSONDecodeError) as error:
        raise UsageError(f"--peak-flops {path}: {error}") from None
    devices = extra.get("devices") if isinstance(extra, dict) else None
    if not isinstance(devices, dict):
        raise UsageError(
            f'--peak-flops {path}: expected {{"devices": {{"<device name part>": '
            '{"bf16": 1.0e15, "fp32": ...}}}} (docs/metrics.md#mfu)'
        )
    for name, entry in devices.items():
        bad = [
            k
            for k, v in (entry.items() if isinstance(entry, dict) else [])
            if k != "source" and not (isinstance(v, (int, float)) and v > 0)
        ]
        if not isinstance(entry, dict) or bad:
            raise UsageError(
                f"--peak-flops {path}: device {name!r}: every precision must map to a FLOP/s "
                f"number > 0 (wrong: {', '.join(bad) or 'not an object'})"
            )
        peaks[name] = entry
    return peaks


def peak_for(device: str, precision: str, peaks: dict) -> float:
    """The peak FLOP/s of one device of that name at `precision`, NaN when unknown."""
    matches = [key for key in peaks if key.lower() in device.lower()]
    if not matches:
        return math.nan
    entry = peaks[max(matches, key=len)]
    value = entry.get(precision)
    return float(value) if isinstance(value, (int, float)) else math.nan


def _precision_used(cell) -> str:
    precision = str(getattr(cell, "effective_precision", "") or getattr(cell, "precision", ""))
    if precision in ("bf16", "fp16"):
        return precision
    tf32 = str(getattr(cell, "effective_tf32", "")).lower()
    return "tf32" if tf32 in ("true", "1") else "fp32"


def mfu_table(results: Results, peaks: dict | None = None) -> pd.DataFrame:
    """One row per ok cell whose model FLOPs are known (see the module's doc). Vectorised
    over the cells (issue 53): the medians of one groupby, a peak looked up once per
    (device, precision)."""
    peaks = default_peaks() if peaks is None else peaks
    metrics = ["train_flops_per_sample", "flops_per_sample"]
    ranks = results.rank_metrics
    cells = results.cells[results.cells.status == "ok"]
    if not len(ranks) or not any(m in ranks for m in metrics) or not len(cells):
        return pd.DataFrame(columns=COLUMNS)
    medians = rank_medians(results, metrics)
    train = (cells["mode"] == "train").to_numpy()
    flops = np.where(
        train,
        cells.cell_id.map(medians["train_flops_per_sample"]).astype(float),
        cells.cell_id.map(medians["flops_per_sample"]).astype(float),
    )
    known = ~np.isnan(flops)
    cells, flops = cells[known], flops[known]
    named = ranks[ranks.device_name.astype(bool)] if "device_name" in ranks else ranks.iloc[0:0]
    first_device = named.groupby("cell_id", sort=False).device_name.first()
    devices = cells.cell_id.map(first_device).fillna("").astype(str)
    precisions = [_precision_used(cell) for cell in cells.itertuples()]
    found: dict = {}
    peak_each = [
        found.setdefault((d, p), peak_for(d, p, peaks)) for d, p in zip(devices, precisions)
    ]
    world = cells.world_size.to_numpy() if "world_size" in cells else 1
    peak = np.asarray(peak_each, dtype=float) * world
    throughput = (
        cells.throughput_samples_per_s.to_numpy(dtype=float)
        if "throughput_samples_per_s" in cells
        else np.full(len(cells), math.nan)
    )
    achieved = flops * throughput
    with np.errstate(divide="ignore", invalid="ignore"):
        mfu = np.where(peak > 0, achieved / peak, math.nan)
    table = pd.DataFrame(
        {
            "label": cells.label.to_numpy(),
            "cell_id": cells.cell_id.to_numpy(),
            "device": devices.to_numpy(),
            "precision_used": precisions,
            "flops_per_sample": flops,
            "achieved_tflops": achieved / 1e12,
            "peak_tflops": peak / 1e12,
            "mfu": mfu,
        }
    )
    return table.reindex(columns=COLUMNS)
