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
* ``timings``: long table, one row per (cell_id, rank, iteration, phase) with ``time_s``
  and ``warmup`` (True for the first ``warmup_iterations`` iterations). NaN padding rows
  (past a rank's own iteration count) are dropped.
* ``rank_metrics``: one row per (cell_id, rank) with every per-rank metric as a column,
  plus ``host`` and ``device_name``.
* ``meta``: the root attributes, JSON-valued ones decoded.
* ``damaged``: cell id -> one line saying why the cell was left out (an unreadable
  attribute or dataset, a spec that is not JSON, an unknown status, timings whose shape
  does not match their phases, ...). The other cells are read as usual; the CLI prints one
  warning line per damaged cell.
* ``problems``: cell id -> one line about a part of a cell that could not be read while
  the cell itself was kept (a damaged ``accuracy`` group: its accuracy shows as
  ``unreadable``). The CLI prints one warning line per entry.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import h5py
import numpy as np
import pandas as pd

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


def _json_attr(attrs, name, default):
    if name not in attrs:
        return default
    text = _decode(attrs[name])
    try:
        return json.loads(text) if text else default
    except json.JSONDecodeError:
        return default


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
    for name in _INTEGER_CELL_ATTRS:
        value = row.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"attribute {name!r} is not an integer: {value!r}")


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
    for name, value in accuracy.attrs.items():
        value = _decode(value)
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


def _cell_row(cell_id: str, group: h5py.Group) -> dict:
    attrs = group.attrs
    row = {"cell_id": cell_id}
    for name, value in attrs.items():
        if name in ("spec", "ranks"):
            continue
        row[name] = _decode(value)
    row["spec"] = _json_attr(attrs, "spec", {})
    row["ranks"] = _json_attr(attrs, "ranks", [])
    if "summary" in group:
        row.update(LAYOUT_1_0_THRESHOLDS)
        row.update({name: _decode(value) for name, value in group["summary"].attrs.items()})
    row.update(_accuracy_columns(group))
    return row


def _cell_timings(cell_id: str, group: h5py.Group) -> tuple[pd.DataFrame | None, RawTimings]:
    if "timings" not in group:
        return None, None
    dataset = group["timings"]
    phases = _json_attr(dataset.attrs, "phases", [])
    warmup = int(_decode(dataset.attrs.get("warmup_iterations", 0)))
    data = np.asarray(dataset[()], dtype=float)
    if data.ndim != 3 or data.shape[2] != len(phases):
        raise ResultsFileError(
            f"cell {cell_id}: timings shape {data.shape} does not match phases {phases}"
        )
    ranks, iterations, _ = np.indices(data.shape)
    phase_index = np.broadcast_to(np.arange(len(phases)), data.shape)
    frame = pd.DataFrame(
        {
            "cell_id": cell_id,
            "rank": ranks.ravel(),
            "iteration": iterations.ravel(),
            "phase": np.asarray(phases, dtype=object)[phase_index.ravel()],
            "time_s": data.ravel(),
        }
    )
    frame["warmup"] = frame["iteration"] < warmup
    return frame[np.isfinite(frame["time_s"])], RawTimings(data, list(phases), warmup)


def _rank_rows(cell_id: str, group: h5py.Group) -> list[dict]:
    if "rank_metrics" not in group:
        return []
    dataset = group["rank_metrics"]
    names = _json_attr(dataset.attrs, "names", [])
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
    cells["global_batch"] = cells["batch_size"] * cells["world_size"]
    cells["config"] = [config_key(s) for s in cells["spec"]]
    cells["setting"] = _setting_labels(list(cells["spec"]))
    cells["label"] = [
        f"{r.branch or '-'}/{r.experiment}/{r.mode}/b{r.batch_size}/w{r.world_size}/{r.precision}"
        + ("" if r.setting == "default" else f" [{r.setting}]")
        for r in cells.itertuples()
    ]
    return cells.sort_values(
        ["branch", "experiment", "mode", "precision", "setting", "world_size", "batch_size"],
        kind="stable",
    ).reset_index(drop=True)


def _read_cell(cell_id: str, group: h5py.Group):
    """The cell's row, timings, raw timings and rank rows; ValueError/OSError/... when any
    part is damaged (see _check_cell)."""
    row = _cell_row(cell_id, group)
    _check_cell(row, _decode(group.attrs["spec"]) if "spec" in group.attrs else None)
    frame, raw_timings = _cell_timings(cell_id, group)
    return row, frame, raw_timings, _rank_rows(cell_id, group)


def load(path: str | os.PathLike) -> Results:
    """Reads a scalebench results file. Raises ResultsFileError (file missing, not a
    scalebench file, layout major version mismatch, no readable /cells). A damaged cell is
    left out and listed in `damaged` with the reason; a cell whose `accuracy` group alone
    is damaged is kept and listed in `problems`."""
    path = os.fspath(path)
    with _open(path) as f:
        version, meta = _read_meta(f, path)
        rows, timing_frames, rank_rows, raw, damaged, problems = [], [], [], {}, {}, {}
        try:
            cells_group = f.get("cells")
            cell_ids = list(cells_group.keys()) if cells_group is not None else []
        except (OSError, KeyError, ValueError) as error:
            raise ResultsFileError(
                f"{path}: damaged: its /cells group cannot be read ({_one_line(error)})"
            ) from None
        for cell_id in cell_ids:
            try:
                row, frame, raw_timings, ranks = _read_cell(cell_id, cells_group[cell_id])
            except (OSError, KeyError, ValueError, TypeError, IndexError) as error:
                damaged[cell_id] = _one_line(error)
                continue
            except ResultsFileError as error:
                damaged[cell_id] = _one_line(error)
                continue
            rows.append(row)
            if "accuracy_problem" in row:
                problems[cell_id] = f"accuracy group unreadable: {row['accuracy_problem']}"
            if frame is not None:
                timing_frames.append(frame)
                raw[cell_id] = raw_timings
            rank_rows.extend(ranks)
    timings = (
        pd.concat(timing_frames, ignore_index=True)
        if timing_frames
        else pd.DataFrame(columns=["cell_id", "rank", "iteration", "phase", "time_s", "warmup"])
    )
    return Results(
        path=path,
        layout_version=version,
        meta=meta,
        cells=_cells_frame(rows),
        timings=timings,
        rank_metrics=pd.DataFrame(rank_rows),
        raw=raw,
        damaged=damaged,
        problems=problems,
    )
