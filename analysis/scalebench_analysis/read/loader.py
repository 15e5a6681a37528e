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

import json
import math
import os
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import h5py
import numpy as np
import pandas as pd
from h5py import h5a, h5s, h5t, h5z

from .errors import ResultsFileError

#: Layout major version this package reads (any minor version of it).
SUPPORTED_LAYOUT_MAJOR = 1
VERSION_ATTRIBUTE = "scalebench_layout_version"

#: Root attributes stored as JSON text.
_JSON_ROOT_ATTRS = ("hosts", "devices", "argv", "environment")
#: Spec fields that place a cell on a scaling / batch curve of its configuration. `samples`
#: (inference dataset size) is among them: throughput is per sample, so cells that differ
#: only in dataset size belong to the same curve.
CURVE_FIELDS = ("batch_size", "world_size", "samples")
#: Spec fields that are bookkeeping, not part of a configuration.
_NON_CONFIG_FIELDS = ("cell_id", "source")
#: Spec fields shown as their own columns (not repeated in the `setting` label).
_NAMED_FIELDS = (
    "branch",
    "commit",
    "experiment",
    "mode",
    "precision",
    "batch_size",
    "world_size",
    "samples",
    "cell_id",
    "source",
    "repetition",  # layout 1.5: shown as " rep k/N" in the label
    "repetitions",
)

STATUSES = ("ok", "failed", "oom", "timeout", "running", "skipped", "interrupted")

#: The validity thresholds of summaries that do not store them. Since layout 1.1 every
#: `summary` holds the thresholds its `valid_*` flags were judged by (scalebench defines
#: them once, in common/cell_summary.h); a layout 1.0 writer judged by these fixed values
#: (schemas/results-layout.md of 1.0), so a 1.0 summary is read as if it stored them. This
#: is a record of what 1.0 files mean, not a second definition: nothing re-judges a flag.
LAYOUT_1_0_THRESHOLDS = {
    "min_valid_iterations": 5,
    "max_valid_cv": 0.10,
    "replica_checksum_rel_tolerance": 1e-6,
}


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
    probes: pd.DataFrame = field(default_factory=lambda: _probes_frame([]))
    probe_times: pd.DataFrame = field(default_factory=lambda: _probe_times_frame([]))
    #: Layout 1.5: one row per `/series` group (series.read_series), empty without.
    series: pd.DataFrame = field(default_factory=lambda: read_series_frame(None))

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


@dataclass(frozen=True)
class RawTimings:
    """A cell's `timings` dataset as stored: (ranks, iterations, phases) seconds."""

    data: np.ndarray
    phases: list
    warmup: int


def _decode(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.generic):
        return value.item()
    return value


def _json_text(text, default):
    """`text` parsed as JSON; `default` when it is empty or not JSON."""
    try:
        return json.loads(text) if text else default
    except json.JSONDecodeError:
        return default


def _json_attr(obj, name, default):
    """Attribute `name` of an HDF5 object parsed as JSON (`default` when absent, empty or
    not JSON)."""
    if name not in obj.attrs:
        return default
    return _json_text(_attribute(obj, name), default)


# Note [Attribute fast path]
# h5py's `attrs[name]` costs about 70 us per attribute (dtype round trips, a conversion
# path per read), and a cell has about 60 of them: a quarter of load() before it read them
# this way. Most are scalar numbers and fixed-length strings (schemas/results-layout.md),
# which _attribute reads with the fewest low-level calls: numbers widened by HDF5 into an
# int64 / uint64 / float64 buffer (exact for every integer and float of up to 8 bytes),
# strings read as stored, less trailing NULs, and a NUL-terminated one (the C++ writer's)
# cut at its first NUL: what h5py gets from HDF5's conversion to its NUL-padded type (a
# space-padded string goes the slow way). Every other kind (variable-length strings,
# arrays, empty attributes, enums, ...) is read by `attrs[name]`. Either way the value is
# `_decode(attrs[name])`; test_load.py holds the two equal for every kind.
_FAST_CLASSES = (h5t.INTEGER, h5t.FLOAT, h5t.STRING)


def _attribute(obj, name: str):
    """`_decode(obj.attrs[name])` of an HDF5 object, read the fast way where it can be
    (Note [Attribute fast path]). KeyError when there is no such attribute."""
    attr = h5a.open(obj.id, name.encode("utf-8"))
    htype = attr.get_type()
    kind = htype.get_class()
    if kind in _FAST_CLASSES and attr.get_space().get_simple_extent_type() == h5s.SCALAR:
        size = htype.get_size()
        if kind == h5t.STRING:
            pad = None if htype.is_variable_str() else htype.get_strpad()
            if pad in (h5t.STR_NULLTERM, h5t.STR_NULLPAD):
                buffer = np.empty((), dtype=f"S{size}")
                attr.read(buffer, mtype=htype)
                text = buffer.item()  # as stored, less trailing NULs
                if pad == h5t.STR_NULLTERM:
                    text = text.split(b"\0", 1)[0]
                return text.decode("utf-8")
        elif size <= 8:
            if kind == h5t.FLOAT:
                buffer, mtype = np.empty((), np.float64), h5t.NATIVE_DOUBLE
            elif htype.get_sign() == h5t.SGN_NONE:
                buffer, mtype = np.empty((), np.uint64), h5t.NATIVE_UINT64
            else:
                buffer, mtype = np.empty((), np.int64), h5t.NATIVE_INT64
            attr.read(buffer, mtype=mtype)
            return buffer.item()
    return _decode(obj.attrs[name])


def _attributes(obj):
    """(name, value) of every attribute of an HDF5 object, as `obj.attrs.items()` gives
    them (same order) with each value decoded (Note [Attribute fast path])."""
    for name in obj.attrs:
        yield name, _attribute(obj, name)


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


def _open(path: str) -> h5py.File:
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
        version = _decode(f.attrs[VERSION_ATTRIBUTE]) if VERSION_ATTRIBUTE in names else None
    except (OSError, KeyError, ValueError, TypeError) as error:
        raise ResultsFileError(f"{path}: damaged root attributes: {_one_line(error)}") from None
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


def read_root_attributes(f: h5py.File, names, json_names) -> dict:
    """Every root attribute of `names`, decoded (None when unreadable: shown as missing),
    those of `json_names` parsed from their JSON text (kept as text when it is not JSON).
    Shared by results files and probe files (probe.py)."""
    meta = {}
    for name in names:
        try:
            meta[name] = _decode(f.attrs[name])
        except (OSError, KeyError, ValueError, TypeError):
            meta[name] = None
    for name in json_names:
        text = meta.get(name)
        if isinstance(text, str) and text:
            try:
                meta[name] = json.loads(text)
            except json.JSONDecodeError:
                pass
    return meta


def _one_line(error: BaseException) -> str:
    """The first line of an exception's message (h5py's can span several)."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


#: Spec fields every cell's spec has, with their type.
_REQUIRED_SPEC_FIELDS = {"experiment": str, "mode": str, "batch_size": int, "world_size": int}
#: Cell attributes read as integers by _cells_frame.
_INTEGER_CELL_ATTRS = (
    "batch_size",
    "world_size",
    "warmup_iterations",
    "measured_iterations",
    "samples",
    "seed",
)


def _check_cell(row: dict, spec_text) -> None:
    """Raises ValueError naming what is wrong with a cell row read by _cell_row."""
    status = row.get("status")
    if not isinstance(status, str) or status not in STATUSES:
        shown = repr(status) if isinstance(status, str) else "of the wrong type"
        raise ValueError(f"status {shown} is not one of {', '.join(STATUSES)}")
    if not isinstance(spec_text, str):
        raise ValueError("attribute 'spec' is missing or not a string")
    try:
        spec = json.loads(spec_text)
    except json.JSONDecodeError:
        raise ValueError("attribute 'spec' is not valid JSON") from None
    if not isinstance(spec, dict):
        raise ValueError("attribute 'spec' is not a JSON object")
    for name, kind in _REQUIRED_SPEC_FIELDS.items():
        value = spec.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"spec field {name!r} is missing or not a {kind.__name__}")
    for name in (*_INTEGER_CELL_ATTRS, "loop_batch_size"):
        value = row.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            what = "summary attribute 'batch_size'" if name == "loop_batch_size" else None
            raise ValueError(f"{what or f'attribute {name!r}'} is not an integer: {value!r}")


#: Text attributes of the `accuracy` subgroup (layout 1.3); `failed_checks` is a JSON list.
_ACCURACY_TEXT_ATTRS = ("verdict", "failed_checks", "kind", "reference")
#: Numeric attributes of the `accuracy` subgroup named by schemas/results-layout.md (any
#: other number a later minor version adds is read as well).
ACCURACY_NUMBERS = (
    "tolerance",
    "validation_samples",
    "elements",
    "mae",
    "mse",
    "rmse",
    "max_abs_error",
    "mean_rel_error",
    "max_rel_error",
    "reference_range",
    "mae_rel",
    "psnr_db",
    "cosine_similarity",
    "ssim",
    "steps",
    "max_loss_rel_deviation",
    "final_loss",
    "reference_final_loss",
    "param_rel_distance",
)
ACCURACY_VERDICTS = ("passed", "failed")


def _read_accuracy(accuracy) -> dict:
    """The attributes of an `accuracy` subgroup as `accuracy_<name>` columns; ValueError
    naming what is wrong when the group does not follow the layout."""
    if not isinstance(accuracy, h5py.Group):
        raise ValueError("'accuracy' is not a group")
    columns = {}
    for name, value in _attributes(accuracy):
        if name in _ACCURACY_TEXT_ATTRS:
            if not isinstance(value, str):
                raise ValueError(f"attribute {name!r} is not a string")
        elif name in ACCURACY_NUMBERS or not isinstance(value, str):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"attribute {name!r} is not a number: {value!r}")
        columns[f"accuracy_{name}"] = value
    verdict = columns.get("accuracy_verdict")
    if verdict is None:
        raise ValueError("no attribute 'verdict'")
    if verdict not in ACCURACY_VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not one of {', '.join(ACCURACY_VERDICTS)}")
    text = columns.get("accuracy_failed_checks", "")
    try:
        checks = json.loads(text) if text else []
    except json.JSONDecodeError:
        raise ValueError("attribute 'failed_checks' is not valid JSON") from None
    if not isinstance(checks, list) or not all(isinstance(c, str) for c in checks):
        raise ValueError("attribute 'failed_checks' is not a JSON list of strings")
    columns["accuracy_failed_checks"] = checks
    return columns


def _accuracy_columns(group: h5py.Group) -> dict:
    """The cell's `accuracy` subgroup as columns ({} without one, as in files before layout
    1.3). A group that cannot be read gives only `accuracy_problem`: one line saying why;
    the cell itself is kept (load() lists it in `problems`)."""
    try:
        if "accuracy" not in group:
            return {}
        return _read_accuracy(group["accuracy"])
    except (OSError, KeyError, ValueError, TypeError, AttributeError) as error:
        return {"accuracy_problem": _one_line(error)}


def _cell_row(cell_id: str, group: h5py.Group) -> tuple[dict, object]:
    """The cell's row, and its `spec` attribute as stored (None when absent) for
    _check_cell. Every attribute is read once (Note [Attribute fast path])."""
    attributes = dict(_attributes(group))
    row = {"cell_id": cell_id}
    row.update((k, v) for k, v in attributes.items() if k not in ("spec", "ranks"))
    row["spec"] = _json_text(attributes["spec"], {}) if "spec" in attributes else {}
    row["ranks"] = _json_text(attributes["ranks"], []) if "ranks" in attributes else []
    if "summary" in group:
        row.update(LAYOUT_1_0_THRESHOLDS)
        summary = dict(_attributes(group["summary"]))
        if "batch_size" in summary:  # layout 1.4: the loop's batch; _read_cell takes it
            row["loop_batch_size"] = summary.pop("batch_size")
        row.update(summary)
    row.update(_accuracy_columns(group))
    return row, attributes.get("spec")


#: Columns of the `probes` dataset (layout 1.4) in the order scalebench writes them.
PROBE_COLUMNS = ("batch", "median_s", "p99_s", "throughput_samples_per_s", "peak_memory_bytes")
PROBE_STATUSES = ("ok", "oom", "over_budget")
#: Summary attributes of a `batch_size: auto` cell (layout 1.4): integers, then floats.
BATCH_FIGURES = (
    "max_batch_ok",
    "oom_batch",
    "best_batch",
    "knee_batch",
    "slo_batch",
    "recommended_batch",
)
_BATCH_FLOATS = ("memory_per_sample_bytes", "memory_budget_bytes", "energy_j", "samples_per_joule")
_PROBES_COLUMNS = ["cell_id", "probe", "batch", "status", *PROBE_COLUMNS[1:]]
_PROBE_TIMES_COLUMNS = ["cell_id", "probe", "batch", "iteration", "time_s"]


@dataclass(frozen=True)
class _CellProbes:
    """A cell's `probes` and `probe_times` as stored (values, column names, statuses)."""

    values: np.ndarray  # (probes, columns)
    columns: list
    status: list
    times: np.ndarray  # (probes, probe_iterations), (probes, 0) without `probe_times`


def _read_probes(group: h5py.Group) -> _CellProbes | None:
    """The cell's `probes` (None without); ValueError/OSError/... naming what is wrong."""
    if "probes" not in group:
        return None
    dataset = group["probes"]
    values = np.asarray(dataset[()], dtype=float)
    columns = _json_attr(dataset, "columns", None)
    status = _json_attr(dataset, "status", None)
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
    return _CellProbes(values, columns, status, times)


def _probes_frame(read: list) -> pd.DataFrame:
    """The `probes` table of [(cell_id, _CellProbes)] (file order)."""
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


def _probe_times_frame(read: list) -> pd.DataFrame:
    """The long `probe_times` table of [(cell_id, _CellProbes)]: finite times only."""
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


# Note [Timings decompressed in a thread]
# Decompressing the `timings` datasets (gzip after shuffle, one chunk per rank in the C++
# writer's files) is a third of load(), and HDF5 does it under h5py's lock and the GIL, so
# nothing else can run meanwhile. For that layout (float64 little-endian, chunked, every
# chunk written, deflate with or without shuffle before it), load() instead reads each chunk
# as stored (H5Dread_chunk: no decompression) and a worker thread undoes the filters with
# zlib (which releases the GIL) and numpy, while the main thread reads the next cells'
# attributes. Only chunks of at least _THREADED_MIN_CHUNK_BYTES: the worker needs the GIL
# between chunks, and with many small ones (h5py's automatic chunking, as in the synthetic
# files of the tests and tests/perf/analysis_load.py) the two threads take turns and it
# gains nothing. Any other dataset, and one whose chunks cannot be read or decompressed that
# way, is read by h5py (`dataset[()]`) as before, so its values, or the error that marks the
# cell damaged, are h5py's. test_load.py holds the two ways equal.
_THREADED_FILTERS = ((h5z.FILTER_DEFLATE,), (h5z.FILTER_SHUFFLE, h5z.FILTER_DEFLATE))
_THREADED_MIN_CHUNK_BYTES = 64 * 1024
_FLOAT64 = np.dtype("<f8")


def _stored_chunks(dataset: h5py.Dataset):
    """(filters, [(chunk offset, filter mask, bytes as stored)]) of a dataset
    _decompress_chunks reads (Note [Timings decompressed in a thread]); None for any other
    dataset, or when its chunks cannot be read as stored."""
    try:
        chunk = dataset.chunks
        if chunk is None or dataset.dtype != _FLOAT64:
            return None
        if math.prod(chunk) * _FLOAT64.itemsize < _THREADED_MIN_CHUNK_BYTES:
            return None
        plist = dataset.id.get_create_plist()
        pipeline = [plist.get_filter(i) for i in range(plist.get_nfilters())]
        filters = tuple(code for code, _flags, _values, _name in pipeline)
        if filters not in _THREADED_FILTERS or any(
            code == h5z.FILTER_SHUFFLE and tuple(values) != (_FLOAT64.itemsize,)
            for code, _flags, values, _name in pipeline
        ):
            return None
        count = dataset.id.get_num_chunks()
        if count != math.prod(-(-n // c) for n, c in zip(dataset.shape, chunk)):
            return None  # chunks never written read as the fill value: h5py's way
        pieces = []
        for index in range(count):
            offset = dataset.id.get_chunk_info(index).chunk_offset
            mask, stored = dataset.id.read_direct_chunk(offset)
            pieces.append((offset, mask, stored))
        return filters, pieces
    except Exception:  # any trouble: h5py reads it, and says what is wrong
        return None


def _decompress_chunks(shape: tuple, chunk: tuple, filters: tuple, pieces: list) -> np.ndarray:
    """The dataset's values from its chunks as stored (_stored_chunks), the filters undone
    last to first as HDF5 does; zlib.error or ValueError when a chunk does not decompress
    to a full chunk. Runs in load()'s worker thread."""
    data = np.empty(shape, _FLOAT64)
    values = math.prod(chunk)
    for offset, mask, stored in pieces:
        buffer = stored
        for index in reversed(range(len(filters))):
            if mask & (1 << index):  # filter skipped for this chunk (optional deflate)
                continue
            if filters[index] == h5z.FILTER_DEFLATE:
                buffer = zlib.decompress(buffer, bufsize=values * _FLOAT64.itemsize)
            else:  # shuffle: byte k of every value stored together
                bytes_ = np.frombuffer(buffer, np.uint8).reshape(_FLOAT64.itemsize, values)
                buffer = bytes_.T.tobytes()
        block = np.frombuffer(buffer, _FLOAT64).reshape(chunk)
        region = tuple(slice(o, min(o + c, n)) for o, c, n in zip(offset, chunk, shape))
        data[region] = block[tuple(slice(0, r.stop - r.start) for r in region)]
    return data


@dataclass
class _CellTimings:
    """A cell's `timings` as read by _cell_timings: the values, or their decompression in
    load()'s worker thread (Note [Timings decompressed in a thread])."""

    cell_id: str
    dataset: h5py.Dataset
    phases: object
    warmup: int
    data: np.ndarray | Future

    def result(self) -> RawTimings:
        """The RawTimings; ResultsFileError, OSError, ... when the dataset is damaged."""
        data = self.data
        if isinstance(data, Future):
            try:
                data = data.result()
            except (zlib.error, ValueError):  # h5py reads it, and says what is wrong
                data = np.asarray(self.dataset[()], dtype=float)
        phases = self.phases
        if data.ndim != 3 or data.shape[2] != len(phases):
            raise ResultsFileError(
                f"cell {self.cell_id}: timings shape {data.shape} does not match phases {phases}"
            )
        if not isinstance(phases, list) or not all(isinstance(p, str) for p in phases):
            raise ResultsFileError(f"cell {self.cell_id}: timings phases {phases} are not strings")
        return RawTimings(data, phases, self.warmup)


def _cell_timings(cell_id: str, group: h5py.Group, pool: ThreadPoolExecutor) -> _CellTimings | None:
    """The cell's `timings` dataset (None without one), decompressed in `pool` where it can
    be; load() turns those of every cell into the long table at once (_timings_frame)."""
    if "timings" not in group:
        return None
    dataset = group["timings"]
    phases = _json_attr(dataset, "phases", [])
    warmup = int(
        _attribute(dataset, "warmup_iterations") if "warmup_iterations" in dataset.attrs else 0
    )
    stored = _stored_chunks(dataset)
    if stored is None:
        data = np.asarray(dataset[()], dtype=float)
    else:
        data = pool.submit(_decompress_chunks, dataset.shape, dataset.chunks, *stored)
    return _CellTimings(cell_id, dataset, phases, warmup, data)


#: Columns of the long `timings` table.
_TIMINGS_COLUMNS = ["cell_id", "rank", "iteration", "phase", "time_s", "warmup"]


def _code_type(categories: list) -> type:
    """The integer type pandas keeps the codes of a categorical of `categories` in: codes
    made in it are not converted again (10^7 of them)."""
    for kind in (np.int8, np.int16, np.int32):
        if len(categories) < np.iinfo(kind).max:
            return kind
    return np.int64


def _timings_frame(raw: dict) -> pd.DataFrame:
    """The long `timings` table of every cell's RawTimings (`raw`, in file order): each
    cell's finite values in (rank, iteration, phase) order. Built once for all cells with
    numpy into preallocated columns, `cell_id` and `phase` as codes of the sorted values
    present (a DataFrame per cell with columns of Python strings, then a concat, took 2 s
    per 10^6 timing rows; docs/performance.md)."""
    if not raw:
        return pd.DataFrame(columns=_TIMINGS_COLUMNS)
    finite, counts, seen = {}, {}, set()
    for cell_id, t in raw.items():
        mask = np.isfinite(t.data)
        counts[cell_id] = int(np.count_nonzero(mask))
        if counts[cell_id] == t.data.size:
            seen.update(t.phases)
        else:  # NaN padding: only these cells need their mask again
            finite[cell_id] = mask
            seen.update(p for p, any_finite in zip(t.phases, mask.any(axis=(0, 1))) if any_finite)
    cell_names = sorted(cell_id for cell_id, count in counts.items() if count)
    phase_names = sorted(seen)
    cell_code = {name: code for code, name in enumerate(cell_names)}
    phase_code = {name: code for code, name in enumerate(phase_names)}
    total = sum(counts.values())
    cell = np.empty(total, _code_type(cell_names))
    rank = np.empty(total, np.int64)
    iteration = np.empty(total, np.int64)
    phase = np.empty(total, _code_type(phase_names))
    time_s = np.empty(total, np.float64)
    warmup = np.empty(total, bool)
    patterns = {}  # (iterations, phases, warmup) -> one rank's iteration, phase, warmup
    start = 0
    for cell_id, t in raw.items():
        count = counts[cell_id]
        if not count:
            continue
        rows = slice(start, start + count)
        start += count
        cell[rows] = cell_code[cell_id]
        # A phase that is NaN throughout has no code; its -1 is never used.
        codes = np.array([phase_code.get(p, -1) for p in t.phases], dtype=phase.dtype)
        ranks, iterations, phases = t.data.shape
        if cell_id in finite:  # the finite values only
            index = np.flatnonzero(finite[cell_id])
            time_s[rows] = t.data.ravel()[index]
            rank[rows] = index // (iterations * phases)
            iteration[rows] = index // phases % iterations
            phase[rows] = codes[index % phases]
            warmup[rows] = iteration[rows] < t.warmup
            continue
        # Every (rank, iteration, phase): one rank's pattern copied to every rank.
        key = (iterations, codes.tobytes(), t.warmup)
        if key not in patterns:
            patterns[key] = (
                np.repeat(np.arange(iterations), phases),
                np.tile(codes, iterations),
                np.repeat(np.arange(iterations) < t.warmup, phases),
            )
        per_rank = (ranks, iterations * phases)
        time_s[rows] = t.data.ravel()
        rank[rows].reshape(per_rank)[...] = np.arange(ranks)[:, None]
        iteration[rows].reshape(per_rank)[...] = patterns[key][0]
        phase[rows].reshape(per_rank)[...] = patterns[key][1]
        warmup[rows].reshape(per_rank)[...] = patterns[key][2]
    columns = {
        "cell_id": pd.Categorical.from_codes(cell, categories=cell_names),
        "rank": rank,
        "iteration": iteration,
        "phase": pd.Categorical.from_codes(phase, categories=phase_names),
        "time_s": time_s,
        "warmup": warmup,
    }
    return pd.DataFrame(columns, columns=_TIMINGS_COLUMNS, copy=False)


def _rank_rows(cell_id: str, group: h5py.Group) -> list[dict]:
    if "rank_metrics" not in group:
        return []
    dataset = group["rank_metrics"]
    names = _json_attr(dataset, "names", [])
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


def _flatten_spec(spec: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in spec.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten_spec(value, name + "."))
        else:
            flat[name] = json.dumps(value) if isinstance(value, list) else value
    return flat


def config_key(spec: dict, drop: tuple = CURVE_FIELDS) -> str:
    """Canonical JSON of `spec` without bookkeeping fields and the fields in `drop`."""
    reduced = {k: v for k, v in spec.items() if k not in drop and k not in _NON_CONFIG_FIELDS}
    return json.dumps(reduced, sort_keys=True, separators=(",", ":"))


def _setting_labels(specs: list[dict]) -> list[str]:
    """Per cell, the spec fields that vary among the cells of its own (experiment, mode):
    what tells two otherwise alike cells apart (e.g. ``channels_last=True``). Fields that
    differ only between experiments (model, input shape, optimizer) are the experiment's
    own and not repeated."""
    flats = [_flatten_spec(s) for s in specs]
    groups: dict = {}
    for index, spec in enumerate(specs):
        groups.setdefault((spec.get("experiment"), spec.get("mode")), []).append(index)
    labels = ["default"] * len(specs)
    for members in groups.values():
        group = [flats[i] for i in members]
        keys = sorted({k for f in group for k in f})
        varying = [
            k
            for k in keys
            if k not in _NAMED_FIELDS
            and k.split(".")[0] not in _NAMED_FIELDS
            and len({json.dumps(f.get(k), sort_keys=True) for f in group}) > 1
        ]
        for i in members:
            labels[i] = " ".join(f"{k}={flats[i].get(k)}" for k in varying) or "default"
    return labels


def _batch_text(batch: int, auto: bool) -> str:
    """A label's batch: the number; `auto:<batch the loop ran>` (as `scalebench info` shows
    it) for a `batch_size: auto` cell, `auto` when it has no results."""
    if not auto:
        return str(batch)
    return f"auto:{batch}" if batch else "auto"


def _cells_frame(rows: list[dict]) -> pd.DataFrame:
    cells = pd.DataFrame(rows)
    if cells.empty:
        return pd.DataFrame(
            columns=[
                "cell_id",
                "branch",
                "experiment",
                "mode",
                "precision",
                "batch_size",
                "world_size",
                "status",
                "spec",
                "repetition",
                "repetitions",
            ]
        )
    for name in (
        "batch_size",
        "world_size",
        "warmup_iterations",
        "measured_iterations",
        "samples",
        "seed",
    ):
        if name in cells:
            cells[name] = cells[name].astype("int64")
    # Layout 1.4: the batch figures of auto cells (NA elsewhere) and the energy figures.
    for name in BATCH_FIGURES:
        cells[name] = cells[name] if name in cells else pd.Series(pd.NA, index=cells.index)
        cells[name] = cells[name].astype("Int64")
    for name in _BATCH_FLOATS:
        cells[name] = cells[name].astype(float) if name in cells else np.nan
    cells["batch_auto"] = [s.get("batch_size") == 0 for s in cells["spec"]]
    # Layout 1.5, Note [Repetitions]: which run of the cell (0 and 1 for older files).
    cells["repetition"] = [int(s.get("repetition", 0)) for s in cells["spec"]]
    cells["repetitions"] = [int(s.get("repetitions", 1)) for s in cells["spec"]]
    cells["global_batch"] = cells["batch_size"] * cells["world_size"]
    cells["config"] = [config_key(s) for s in cells["spec"]]
    cells["setting"] = _setting_labels(list(cells["spec"]))
    cells["label"] = [
        f"{r.branch or '-'}/{r.experiment}/{r.mode}/b{_batch_text(r.batch_size, r.batch_auto)}"
        f"/w{r.world_size}/{r.precision}"
        + ("" if r.setting == "default" else f" [{r.setting}]")
        + (f" rep {r.repetition + 1}/{r.repetitions}" if r.repetitions > 1 else "")
        for r in cells.itertuples()
    ]
    return cells.sort_values(
        [
            "branch",
            "experiment",
            "mode",
            "precision",
            "setting",
            "world_size",
            "batch_size",
            "repetition",
        ],
        kind="stable",
    ).reset_index(drop=True)


#: What marks a cell damaged when it is read.
_CELL_ERRORS = (OSError, KeyError, ValueError, TypeError, IndexError, ResultsFileError)


def _read_cell(cell_id: str, group: h5py.Group, pool: ThreadPoolExecutor):
    """The cell's row, timings (_CellTimings, None without) and rank rows; ValueError/
    OSError/... when any part is damaged (see _check_cell). Its timings' own errors come
    with _CellTimings.result(), before those of the parts read after them."""
    row, spec_text = _cell_row(cell_id, group)
    _check_cell(row, spec_text)
    if "loop_batch_size" in row:  # the summary's (layout 1.4): auto cells' chosen batch
        row["batch_size"] = row.pop("loop_batch_size")
    timings = _cell_timings(cell_id, group, pool)
    try:
        ranks = _rank_rows(cell_id, group)
    except _CELL_ERRORS:
        if timings is not None:
            timings.result()  # a damaged `timings` is the reason, as it is read first
        raise
    probes = None
    if row["spec"].get("batch_size") == 0:  # only auto cells have probes: no cost to others
        try:
            probes = _read_probes(group)
        except _CELL_ERRORS as error:
            probes = f"probes unreadable: {_one_line(error)}"
    return row, timings, ranks, probes


def read_series_frame(f: h5py.File | None) -> pd.DataFrame:
    """The `/series` table of Note [Repetitions] (series.py) without the labelling columns;
    empty for None or a file without it."""
    from .series import COLUMNS, LABEL_COLUMNS, read_series

    return read_series(f) if f is not None else pd.DataFrame(columns=COLUMNS + LABEL_COLUMNS)


def _with_series(f: h5py.File, cells: pd.DataFrame, problems: dict) -> pd.DataFrame:
    """The `series` table of Results (one row per readable `/series` group, labelled by
    its repetition-0 cell: series.attach_labels), and the cells' `series_id` column added
    to `cells` (series.cell_series_ids). A damaged group is left out and listed in
    `problems` under its series id."""
    from . import series as repeated

    try:
        table, damaged = repeated.read_series_checked(f)
    except (OSError, KeyError, ValueError, TypeError) as error:
        table, damaged = read_series_frame(None), {"series": f"/series unreadable: {error}"}
    for series_id, problem in damaged.items():
        problems[series_id] = "; ".join(filter(None, (problems.get(series_id), problem)))
    ids = repeated.cell_series_ids(cells, table) if len(cells) else []
    cells["series_id"] = pd.Series(ids, index=cells.index, dtype=object)  # None kept
    return repeated.attach_labels(table, cells)


def load(path: str | os.PathLike) -> Results:
    """Reads a scalebench results file. Raises ResultsFileError (file missing, not a
    scalebench file, layout major version mismatch, no readable /cells). A damaged cell is
    left out and listed in `damaged` with the reason; a cell whose `accuracy` group alone
    is damaged is kept and listed in `problems`."""
    path = os.fspath(path)
    with _open(path) as f, ThreadPoolExecutor(max_workers=1) as pool:
        version, meta = _read_meta(f, path)
        cells, rows, rank_rows, raw, damaged, problems = [], [], [], {}, {}, {}
        probes = []
        try:
            cells_group = f.get("cells")
            cell_ids = list(cells_group.keys()) if cells_group is not None else []
        except (OSError, KeyError, ValueError) as error:
            raise ResultsFileError(
                f"{path}: damaged: its /cells group cannot be read ({_one_line(error)})"
            ) from None
        for cell_id in cell_ids:
            try:
                cells.append((cell_id, *_read_cell(cell_id, cells_group[cell_id], pool)))
            except _CELL_ERRORS as error:
                cells.append((cell_id, _one_line(error), None, None, None))
        # Then, in file order again, the timings decompressed meanwhile.
        for cell_id, row, timings, ranks, cell_probes in cells:
            try:
                raw_timings = timings.result() if timings is not None else None
            except _CELL_ERRORS as error:
                row = _one_line(error)
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
        cells_table = _cells_frame(rows)
        series = _with_series(f, cells_table, problems)
    return Results(
        path=path,
        layout_version=version,
        meta=meta,
        cells=cells_table,
        timings=_timings_frame(raw),
        rank_metrics=pd.DataFrame(rank_rows),
        raw=raw,
        damaged=damaged,
        problems=problems,
        probes=_probes_frame(probes),
        probe_times=_probe_times_frame(probes),
        series=series,
    )
