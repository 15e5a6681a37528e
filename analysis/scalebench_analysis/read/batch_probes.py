"""The batch search of a `batch_size: auto` cell (layout 1.4): its `probes` and
`probe_times` datasets, and the `probes` and `probe_times` tables of Results."""

from __future__ import annotations

from dataclasses import dataclass

import h5py
import numpy as np
import pandas as pd

from .decoding import json_attr

#: Columns of the `probes` dataset (layout 1.4) in the order scalebench writes them.
PROBE_COLUMNS = ("batch", "median_s", "p99_s", "throughput_samples_per_s", "peak_memory_bytes")
PROBE_STATUSES = ("ok", "oom", "over_budget")
_PROBES_COLUMNS = ["cell_id", "probe", "batch", "status", *PROBE_COLUMNS[1:]]
_PROBE_TIMES_COLUMNS = ["cell_id", "probe", "batch", "iteration", "time_s"]


@dataclass(frozen=True)
class CellProbes:
    """A cell's `probes` and `probe_times` as stored (values, column names, statuses)."""

    values: np.ndarray  # (probes, columns)
    columns: list
    status: list
    times: np.ndarray  # (probes, probe_iterations), (probes, 0) without `probe_times`


def read_probes(group: h5py.Group) -> CellProbes | None:
    """The cell's `probes` (None without); ValueError/OSError/... naming what is wrong."""
    if "probes" not in group:
        return None
    dataset = group["probes"]
    values = np.asarray(dataset[()], dtype=float)
    columns = json_attr(dataset, "columns", None)
    status = json_attr(dataset, "status", None)
    if values.ndim != 2:
        raise ValueError(f"'probes' has shape {values.shape}, expected (probes, columns)")
    if not isinstance(columns, list) or len(columns) != values.shape[1] or "batch" not in columns:
        raise ValueError(f"'probes' columns {columns!r} do not match its shape {values.shape}")
    if not isinstance(status, list) or len(status) != values.shape[0]:
        raise ValueError(f"'probes' status {status!r} does not give one per row")
    unknown = sorted({str(s) for s in status} - set(PROBE_STATUSES))
    if unknown:
        raise ValueError(
            f"'probes' status {unknown[0]!r} is not one of {', '.join(PROBE_STATUSES)}"
        )
    times = np.empty((values.shape[0], 0))
    if "probe_times" in group:
        times = np.asarray(group["probe_times"][()], dtype=float)
        if times.ndim != 2 or times.shape[0] != values.shape[0]:
            raise ValueError(f"'probe_times' shape {times.shape} does not match 'probes'")
    return CellProbes(values, columns, status, times)


def probes_frame(read: list) -> pd.DataFrame:
    """The `probes` table of [(cell_id, CellProbes)] (file order)."""
    if not read:
        return pd.DataFrame(
            {
                c: pd.Series(dtype=object if c in ("cell_id", "status") else float)
                for c in _PROBES_COLUMNS
            }
        )
    frames = []
    for cell_id, probes in read:
        n = probes.values.shape[0]
        frame = pd.DataFrame(probes.values, columns=probes.columns)
        frame.insert(0, "cell_id", cell_id)
        frame.insert(1, "probe", np.arange(n))
        frame.insert(3, "status", probes.status)
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True)
    for name in PROBE_COLUMNS:
        if name not in out:
            out[name] = np.nan
    out["batch"] = out["batch"].astype("int64")
    rest = [c for c in out.columns if c not in _PROBES_COLUMNS]
    return out[_PROBES_COLUMNS + rest]


def probe_times_frame(read: list) -> pd.DataFrame:
    """The long `probe_times` table of [(cell_id, CellProbes)]: finite times only."""
    rows = {c: [] for c in _PROBE_TIMES_COLUMNS}
    for cell_id, probes in read:
        times = probes.times
        probe, iteration = np.nonzero(np.isfinite(times))
        batches = probes.values[:, probes.columns.index("batch")].astype(np.int64)
        rows["cell_id"].append(np.full(probe.size, cell_id, dtype=object))
        rows["probe"].append(probe.astype(np.int64))
        rows["batch"].append(batches[probe])
        rows["iteration"].append(iteration.astype(np.int64))
        rows["time_s"].append(times[probe, iteration])
    kinds = {"cell_id": object, "probe": np.int64, "batch": np.int64, "iteration": np.int64}
    return pd.DataFrame(
        {
            c: np.concatenate(v) if v else np.empty(0, dtype=kinds.get(c, float))
            for c, v in rows.items()
        },
        columns=_PROBE_TIMES_COLUMNS,
    )
