"""Reading scalebench results files (schemas/results-layout.md) into tidy pandas tables.

`load(path)` returns a `Results` with

* ``cells``: one row per cell: spec copies, the full spec (dict), status, reason, the
  summary attributes as stored (``count``, ``cv``, ``median_s``,
  ``throughput_samples_per_s``, ``phase_median_s_*``, the validity flags ``valid*`` and the
  thresholds they were judged by, ``min_valid_iterations``, ``max_valid_cv``,
  ``replica_checksum_rel_tolerance``; see LAYOUT_1_0_THRESHOLDS) and two derived keys:
  ``config`` (the spec without batch size and world size, as canonical JSON) and
  ``setting`` (a short label of the spec fields that vary across the file besides branch,
  experiment, mode, precision, batch and world size).
  Cells with an ``accuracy`` subgroup (layout 1.3, accuracy validation) add
  ``accuracy_verdict`` (``passed`` / ``failed``), ``accuracy_failed_checks`` (list of
  str), ``accuracy_kind``, ``accuracy_reference`` and ``accuracy_<name>`` for every number
  of the group (``accuracy_mae_rel``, ``accuracy_psnr_db``, ...); NaN in cells without
  one, and no such column at all in a file without any (layout 1.0 - 1.2). A group that
  cannot be read gives ``accuracy_problem`` instead (see ``problems``).
  Since layout 1.4 every complete cell's summary adds ``batch_size`` (the batch its timed
  loop ran: for ``batch_size: auto`` the recommended batch, so the ``batch_size`` column is
  that batch, the spec's 0 only for an auto cell without results), ``energy_j`` and
  ``samples_per_joule`` (NaN on the CPU), and auto cells the batch figures
  ``max_batch_ok``, ``oom_batch``, ``best_batch``, ``knee_batch``, ``slo_batch``,
  ``recommended_batch`` (nullable Int64, as stored: 0 = none for ``oom_batch`` and
  ``slo_batch``), ``memory_per_sample_bytes`` and ``memory_budget_bytes``. These columns
  are always present: NA / NaN in other cells and in older files. ``batch_auto`` is True
  for cells whose spec asks for ``batch_size: auto``.
  Since layout 1.5 (repetitions, Note [Repetitions]): ``repetition`` (which run of the cell,
  0-based; 0 in older files), ``repetitions`` (N of the matrix; 1 for a cell that is not
  repeated), ``series_id`` (the cell id of the cell's repetition 0: a cell's own id when it
  is not repeated; None for a repetition whose repetition 0 is not in a file without
  `/series`), and the label ends in `` rep k/N`` (1-based) for a repeated cell. Cells are
  sorted with their repetitions in order.
* ``series``: one row per `/series` group (layout 1.5; empty, with these columns, without
  one): its attributes as stored (``series_id``, ``metric``, ``repetitions``,
  ``completed``, ``cells`` and ``repetition_median_s`` as lists, ``median_s``,
  ``median_s_ci_low``/``_high``, ``throughput_samples_per_s``,
  ``throughput_ci_low``/``_high``, ``spread_rel``, ``disagree`` (bool), ...; series.COLUMNS)
  and the labelling columns of its repetition-0 cell (``label`` without the repetition,
  ``branch``, ``experiment``, ``mode``, ``precision``, ``setting``, ``batch_size``,
  ``world_size``). A damaged group is left out and listed in ``problems`` under its series
  id.
* ``probes``: one row per probe of the batch search of every ``batch_size: auto`` cell
  (layout 1.4), in the order run: ``cell_id``, ``probe`` (0, 1, ...), ``batch``,
  ``status`` (``ok``, ``oom``, ``over_budget``), ``median_s``, ``p99_s``,
  ``throughput_samples_per_s``, ``peak_memory_bytes`` as stored (0 for what a probe that did
  not fit or complete lacks). ``probe_times``: one row per measured iteration of a probe
  (``cell_id``, ``probe``, ``batch``, ``iteration``, ``time_s``), NaN (not completed)
  left out. Both empty, with these columns, in a file without auto cells.
* ``timings``: long table, one row per (cell_id, rank, iteration, phase) with ``time_s``
  and ``warmup`` (True for the first ``warmup_iterations`` iterations), cells in file order,
  each cell's rows in (rank, iteration, phase) order. NaN padding rows (past a rank's own
  iteration count) are dropped. ``cell_id`` and ``phase`` are categoricals whose categories
  are the values present, sorted: sorting and grouping order as for plain strings (pandas 2
  warns about groupby's default ``observed=False``: pass ``observed=True``).
* ``rank_metrics``: one row per (cell_id, rank) with every per-rank metric as a column,
  plus ``host`` and ``device_name``.
* ``meta``: the root attributes, JSON-valued ones decoded.
* ``damaged``: cell id -> one line saying why the cell was left out (an unreadable
  attribute or dataset, a spec that is not JSON, an unknown status, timings whose shape
  does not match their phases, ...). The other cells are read as usual; the CLI prints one
  warning line per damaged cell.
* ``problems``: cell id -> one line about a part of a cell that could not be read while
  the cell itself was kept (a damaged ``accuracy`` group: its accuracy shows as
  ``unreadable``; damaged ``probes``: the cell has none in ``probes``). The CLI prints one
  warning line per entry.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import h5py
import numpy as np
import pandas as pd

from ..errors import ResultsFileError
from .batch_probes import probe_times_frame, probes_frame, read_probes
from .cells import cell_row, cells_frame, check_cell
from .decoding import decode, json_attr, one_line, read_root_attributes
from .series import (
    COLUMNS,
    LABEL_COLUMNS,
    attach_labels,
    cell_series_ids,
    read_series,
    read_series_checked,
)
from .timings import cell_timings, timings_frame

#: Layout major version this package reads (any minor version of it).
SUPPORTED_LAYOUT_MAJOR = 1
VERSION_ATTRIBUTE = "scalebench_layout_version"

#: Root attributes stored as JSON text.
_JSON_ROOT_ATTRS = ("hosts", "devices", "argv", "environment", "matrix_warnings")


@dataclass
class Results:
    """Everything read from one results file. Tables are plain pandas DataFrames."""

    path: str
    layout_version: str
    meta: dict
    cells: pd.DataFrame
    timings: pd.DataFrame
    rank_metrics: pd.DataFrame
    raw: dict = field(default_factory=dict)
    damaged: dict = field(default_factory=dict)
    problems: dict = field(default_factory=dict)
    probes: pd.DataFrame = field(default_factory=lambda: probes_frame([]))
    probe_times: pd.DataFrame = field(default_factory=lambda: probe_times_frame([]))
    #: Layout 1.5: one row per `/series` group (series.read_series), empty without.
    series: pd.DataFrame = field(default_factory=lambda: read_series_frame(None))
    #: The file read, as given to `load` (kept by views of it, such as compare --branches'
    #: per-branch ones, whose `path` names the branch): two Results with the same source
    #: are cells of one run of the tool.
    source: str = ""

    def cell(self, cell_id: str) -> pd.Series:
        """The row of `cells` for `cell_id` (KeyError when absent)."""
        return self.cells.set_index("cell_id").loc[cell_id]

    def phases(self, cell_id: str) -> list:
        """Phase names of a cell's timings ([] when the cell has no timings)."""
        return self.raw[cell_id].phases if cell_id in self.raw else []

    def timing_array(self, cell_id: str, phase: str, measured_only: bool = True) -> np.ndarray:
        """(ranks, iterations) seconds of `phase` for a cell, NaN where a rank has no value.
        Empty (0, 0) when the cell has no timings or no such phase."""
        raw = self.raw.get(cell_id)
        if raw is None or phase not in raw.phases:
            return np.empty((0, 0))
        values = raw.data[:, :, raw.phases.index(phase)]
        return values[:, raw.warmup :] if measured_only else values


def check_layout_version(found: str, path: str) -> None:
    """Raises ResultsFileError unless `found` is "MAJOR.MINOR" with the supported MAJOR."""
    try:
        major = int(str(found).split(".")[0])
    except ValueError:
        raise ResultsFileError(
            f"{path}: malformed {VERSION_ATTRIBUTE} {found!r}: required "
            f"{SUPPORTED_LAYOUT_MAJOR}.x, found {found}"
        ) from None
    if major != SUPPORTED_LAYOUT_MAJOR:
        raise ResultsFileError(
            f"{path}: results layout version mismatch: required {SUPPORTED_LAYOUT_MAJOR}.x, "
            f"found {found} (use a scalebench_analysis release that reads layout {major}.x)"
        )


def open_file(path: str) -> h5py.File:
    if not os.path.exists(path):
        raise ResultsFileError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ResultsFileError(f"{path}: is a directory, expected a scalebench .h5 results file")
    if not h5py.is_hdf5(path):
        raise ResultsFileError(f"{path}: not a scalebench results file (not an HDF5 file)")
    try:
        return h5py.File(path, "r")
    except OSError as error:
        raise ResultsFileError(f"{path}: cannot open HDF5 file: {error}") from None


def _read_meta(f: h5py.File, path: str) -> tuple[str, dict]:
    try:
        names = list(f.attrs.keys())
        version = decode(f.attrs[VERSION_ATTRIBUTE]) if VERSION_ATTRIBUTE in names else None
    except (OSError, KeyError, ValueError, TypeError) as error:
        raise ResultsFileError(f"{path}: damaged root attributes: {one_line(error)}") from None
    if version is None:
        if "scalebench_probe_version" in names:
            raise ResultsFileError(
                f"{path}: a scalebench probe file, not a results file "
                f"(`scalebench analyze {path}` prints it)"
            )
        raise ResultsFileError(
            f"{path}: not a scalebench results file (no root attribute {VERSION_ATTRIBUTE})"
        )
    if not isinstance(version, str):
        raise ResultsFileError(
            f"{path}: not a scalebench results file (its root attribute {VERSION_ATTRIBUTE} "
            f"is not a string)"
        )
    check_layout_version(version, path)
    return version, read_root_attributes(f, names, _JSON_ROOT_ATTRS)


def _rank_rows(cell_id: str, group: h5py.Group) -> list[dict]:
    if "rank_metrics" not in group:
        return []
    dataset = group["rank_metrics"]
    names = json_attr(dataset, "names", [])
    values = np.asarray(dataset[()], dtype=float)
    hosts = group["rank_hosts"].asstr()[()] if "rank_hosts" in group else []
    devices = group["rank_devices"].asstr()[()] if "rank_devices" in group else []
    rows = []
    for rank in range(values.shape[0]):
        row = {"cell_id": cell_id, "rank": rank}
        row.update({name: values[rank, i] for i, name in enumerate(names)})
        row["host"] = hosts[rank] if rank < len(hosts) else ""
        row["device_name"] = devices[rank] if rank < len(devices) else ""
        rows.append(row)
    return rows


#: What marks a cell damaged when it is read.
_CELL_ERRORS = (OSError, KeyError, ValueError, TypeError, IndexError, ResultsFileError)


def _read_cell(cell_id: str, group: h5py.Group, pool: ThreadPoolExecutor):
    """The cell's row, timings (CellTimings, None without) and rank rows; ValueError/
    OSError/... when any part is damaged (see check_cell). Its timings' own errors come
    with CellTimings.result(), before those of the parts read after them."""
    row, spec_text = cell_row(cell_id, group)
    check_cell(row, spec_text)
    if "loop_batch_size" in row:  # the summary's (layout 1.4): auto cells' chosen batch
        row["batch_size"] = row.pop("loop_batch_size")
    timings = cell_timings(cell_id, group, pool)
    try:
        ranks = _rank_rows(cell_id, group)
    except _CELL_ERRORS:
        if timings is not None:
            timings.result()  # a damaged `timings` is the reason, as it is read first
        raise
    probes = None
    if row["spec"].get("batch_size") == 0:  # only auto cells have probes: no cost to others
        try:
            probes = read_probes(group)
        except _CELL_ERRORS as error:
            probes = f"probes unreadable: {one_line(error)}"
    return row, timings, ranks, probes


def read_series_frame(f: h5py.File | None) -> pd.DataFrame:
    """The `/series` table of Note [Repetitions] (series.py) without the labelling columns;
    empty for None or a file without it."""
    return read_series(f) if f is not None else pd.DataFrame(columns=COLUMNS + LABEL_COLUMNS)


def _with_series(f: h5py.File, cells: pd.DataFrame, problems: dict) -> pd.DataFrame:
    """The `series` table of Results (one row per readable `/series` group, labelled by
    its repetition-0 cell: series.attach_labels), and the cells' `series_id` column added
    to `cells` (series.cell_series_ids). A damaged group is left out and listed in
    `problems` under its series id."""
    try:
        table, damaged = read_series_checked(f)
    except (OSError, KeyError, ValueError, TypeError) as error:
        table, damaged = read_series_frame(None), {"series": f"/series unreadable: {error}"}
    for series_id, problem in damaged.items():
        problems[series_id] = "; ".join(filter(None, (problems.get(series_id), problem)))
    ids = cell_series_ids(cells, table) if len(cells) else []
    cells["series_id"] = pd.Series(ids, index=cells.index, dtype=object)  # None kept
    return attach_labels(table, cells)


def load(path: str | os.PathLike) -> Results:
    """Reads a scalebench results file. Raises ResultsFileError (file missing, not a
    scalebench file, layout major version mismatch, no readable /cells). A damaged cell is
    left out and listed in `damaged` with the reason; a cell whose `accuracy` group alone
    is damaged is kept and listed in `problems`."""
    path = os.fspath(path)
    with open_file(path) as f, ThreadPoolExecutor(max_workers=1) as pool:
        version, meta = _read_meta(f, path)
        cells, rows, rank_rows, raw, damaged, problems = [], [], [], {}, {}, {}
        probes = []
        try:
            cells_group = f.get("cells")
            cell_ids = list(cells_group.keys()) if cells_group is not None else []
        except (OSError, KeyError, ValueError) as error:
            raise ResultsFileError(
                f"{path}: damaged: its /cells group cannot be read ({one_line(error)})"
            ) from None
        for cell_id in cell_ids:
            try:
                cells.append((cell_id, *_read_cell(cell_id, cells_group[cell_id], pool)))
            except _CELL_ERRORS as error:
                cells.append((cell_id, one_line(error), None, None, None))
        # Then, in file order again, the timings decompressed meanwhile.
        for cell_id, row, timings, ranks, cell_probes in cells:
            try:
                raw_timings = timings.result() if timings is not None else None
            except _CELL_ERRORS as error:
                row = one_line(error)
            if isinstance(row, str):  # why the cell is damaged
                damaged[cell_id] = row
                continue
            rows.append(row)
            if "accuracy_problem" in row:
                problems[cell_id] = f"accuracy group unreadable: {row['accuracy_problem']}"
            if isinstance(cell_probes, str):
                problems[cell_id] = cell_probes
            elif cell_probes is not None:
                probes.append((cell_id, cell_probes))
            if raw_timings is not None:
                raw[cell_id] = raw_timings
            rank_rows.extend(ranks)
        cells_table = cells_frame(rows)
        series = _with_series(f, cells_table, problems)
    return Results(
        path=path,
        layout_version=version,
        meta=meta,
        cells=cells_table,
        timings=timings_frame(raw),
        rank_metrics=pd.DataFrame(rank_rows),
        raw=raw,
        damaged=damaged,
        problems=problems,
        probes=probes_frame(probes),
        probe_times=probe_times_frame(probes),
        series=series,
        source=str(path),
    )
