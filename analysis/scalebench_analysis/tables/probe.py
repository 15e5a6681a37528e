"""Probe files: what `scalebench probe -o FILE` writes (docs/probe.md#the-probe-file).

`load_probe(path)` returns a `Probe` with

* ``rows``: one row per (operation, placement, size) as stored: ``operation`` (str),
  ``in_place`` and ``ok`` (bool), ``bytes`` and ``elements`` (int64), ``time_s``,
  ``algbw_gb_s``, ``busbw_gb_s``, ``max_error`` and ``baseline_time_s`` (float, NaN where
  not measured), plus two derived columns: ``table`` (the operation, with its placement
  for allreduce: ``allreduce (in place)``) and ``vs_mpi`` (time_s / baseline_time_s).
* ``meta``: the root attributes, ``hosts`` and ``devices`` decoded from JSON.

`failed_checks` counts the rows whose check failed; the tables and lines here are what
output/probe_render.py renders for `scalebench analyze` (and `report`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import h5py
import numpy as np
import pandas as pd

from ..errors import ProbeFileError
from ..read.decoding import decode, one_line, read_root_attributes
from ..read.loader import open_file

#: Root attribute that marks a probe file, and the major version of it this package reads.
PROBE_VERSION_ATTRIBUTE = "scalebench_probe_version"
SUPPORTED_PROBE_MAJOR = 1
#: The datasets of group /probe: the operation names and the numeric columns.
PROBE_NUMBERS = (
    "in_place",
    "bytes",
    "elements",
    "time_s",
    "algbw_gb_s",
    "busbw_gb_s",
    "max_error",
    "ok",
    "baseline_time_s",
)
PROBE_DATASETS = ("operation", *PROBE_NUMBERS)
_INTEGER_ROOT_ATTRS = ("world_size", "iterations", "warmup")
_JSON_ROOT_ATTRS = ("hosts", "devices")


@dataclass
class Probe:
    """Everything read from one probe file."""

    path: str
    version: str
    meta: dict
    rows: pd.DataFrame


def is_probe_file(path: str | os.PathLike) -> bool:
    """True when `path` is an HDF5 file whose root has `scalebench_probe_version`. False
    for anything else (missing, not HDF5, a results file), which `load` then judges."""
    path = os.fspath(path)
    try:
        if not os.path.isfile(path) or not h5py.is_hdf5(path):
            return False
        with h5py.File(path, "r") as f:
            return PROBE_VERSION_ATTRIBUTE in f.attrs
    except (OSError, ValueError, KeyError):
        return False


def check_probe_version(found, path: str) -> None:
    """Raises ProbeFileError unless `found` is a "MAJOR.MINOR" string with MAJOR 1."""
    if not isinstance(found, str):
        raise ProbeFileError(
            f"{path}: not a scalebench probe file (its root attribute {PROBE_VERSION_ATTRIBUTE} "
            f"is not a string)"
        )
    try:
        major = int(found.split(".")[0])
    except ValueError:
        raise ProbeFileError(
            f"{path}: malformed {PROBE_VERSION_ATTRIBUTE} {found!r}: required "
            f"{SUPPORTED_PROBE_MAJOR}.x"
        ) from None
    if major != SUPPORTED_PROBE_MAJOR:
        raise ProbeFileError(
            f"{path}: probe file version mismatch: required {SUPPORTED_PROBE_MAJOR}.x, found "
            f"{found} (use a scalebench_analysis release that reads probe files {major}.x)"
        )


def _read_meta(f: h5py.File, path: str) -> tuple[str, dict]:
    try:
        version = decode(f.attrs[PROBE_VERSION_ATTRIBUTE])
        names = list(f.attrs.keys())
    except (OSError, KeyError, ValueError, TypeError) as error:
        raise ProbeFileError(f"{path}: damaged root attributes: {one_line(error)}") from None
    check_probe_version(version, path)
    return version, read_root_attributes(f, names, _JSON_ROOT_ATTRS)


def _read_columns(f: h5py.File, path: str) -> dict:
    group = f.get("probe")
    if not isinstance(group, h5py.Group):
        raise ProbeFileError(f"{path}: damaged probe file: no group /probe")
    missing = [name for name in PROBE_DATASETS if name not in group]
    if missing:
        raise ProbeFileError(
            f"{path}: damaged probe file: /probe lacks dataset{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)}"
        )
    columns = {}
    try:
        for name in PROBE_DATASETS:
            dataset = group[name]
            if not isinstance(dataset, h5py.Dataset) or dataset.ndim != 1:
                raise ProbeFileError(f"{path}: damaged probe file: /probe/{name} is not 1-D")
            if name == "operation":
                if h5py.check_string_dtype(dataset.dtype) is None:
                    raise ProbeFileError(
                        f"{path}: damaged probe file: /probe/operation is not a string dataset"
                    )
                columns[name] = [str(text) for text in dataset.asstr()[()]]
            else:
                if dataset.dtype.kind not in "fiu":
                    raise ProbeFileError(
                        f"{path}: damaged probe file: /probe/{name} is not numeric"
                    )
                columns[name] = np.asarray(dataset[()], dtype=float)
    except (OSError, ValueError, TypeError, UnicodeDecodeError) as error:
        raise ProbeFileError(f"{path}: damaged probe file: {one_line(error)}") from None
    lengths = {name: len(values) for name, values in columns.items()}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{name} {n}" for name, n in lengths.items())
        raise ProbeFileError(
            f"{path}: damaged probe file: /probe datasets differ in length ({shown})"
        )
    for name in ("bytes", "elements"):
        if not np.all(np.isfinite(columns[name])):
            raise ProbeFileError(f"{path}: damaged probe file: /probe/{name} is not finite")
    return columns


def table_label(operation: str, in_place: bool) -> str:
    """The table a row belongs to: the operation, with its placement for allreduce."""
    if operation == "allreduce":
        return f"allreduce ({'in place' if in_place else 'out of place'})"
    return operation if in_place else f"{operation} (out of place)"


def load_probe(path: str | os.PathLike) -> Probe:
    """Reads a probe file. Raises ResultsFileError for a missing or non-HDF5 file and
    ProbeFileError for another major version or a missing / malformed dataset."""
    path = os.fspath(path)
    with open_file(path) as f:
        if PROBE_VERSION_ATTRIBUTE not in f.attrs:
            raise ProbeFileError(
                f"{path}: not a scalebench probe file (no root attribute {PROBE_VERSION_ATTRIBUTE})"
            )
        version, meta = _read_meta(f, path)
        columns = _read_columns(f, path)
    rows = pd.DataFrame(columns, columns=list(PROBE_DATASETS))
    rows["operation"] = rows["operation"].astype(object)
    for name in ("in_place", "ok"):
        rows[name] = rows[name] != 0
    for name in ("bytes", "elements"):
        rows[name] = rows[name].astype("int64")
    rows["table"] = [table_label(o, p) for o, p in zip(rows.operation, rows.in_place)]
    with np.errstate(divide="ignore", invalid="ignore"):
        rows["vs_mpi"] = rows.time_s / rows.baseline_time_s
    return Probe(path=path, version=version, meta=meta, rows=rows)


# --- figures -------------------------------------------------------------------------


def human_size(size: int) -> str:
    """8 -> '8 B', 4096 -> '4 KiB', 2**30 -> '1 GiB'; a size that is no whole number of the
    next unit stays in the smaller one (1536 -> '1536 B'), as the probe's own table."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value, unit = int(size), 0
    while value >= 1024 and value % 1024 == 0 and unit < len(units) - 1:
        value //= 1024
        unit += 1
    return f"{value} {units[unit]}"


def failed_checks(probe: Probe) -> int:
    """How many rows' check failed (WRONG)."""
    return int((~probe.rows.ok).sum())


def tables(probe: Probe) -> dict:
    """Table label -> its rows, in the file's order of first appearance."""
    return {label: frame for label, frame in probe.rows.groupby("table", sort=False)}


def display_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One operation's rows as text: size, time (µs), algbw, busbw (GB/s), check, and the
    plain-MPI time and ratio where any row of it was measured."""

    def number(value, spec):
        return "-" if value is None or not math.isfinite(value) else format(value, spec)

    shown = {
        "size": [human_size(b) for b in frame.bytes],
        "time (µs)": [number(t * 1e6, ".2f") for t in frame.time_s],
        "algbw (GB/s)": [number(v, ".3f") for v in frame.algbw_gb_s],
        "busbw (GB/s)": [number(v, ".3f") for v in frame.busbw_gb_s],
        "check": ["ok" if ok else "WRONG" for ok in frame.ok],
    }
    if np.isfinite(frame.baseline_time_s).any():
        shown["mpi (µs)"] = [number(t * 1e6, ".2f") for t in frame.baseline_time_s]
        shown["vs mpi"] = [
            number(r, ".2f") + ("x" if math.isfinite(r) else "") for r in frame.vs_mpi
        ]
    return pd.DataFrame(shown, index=range(len(frame)))


def summary_table(probe: Probe) -> pd.DataFrame:
    """Per table: the peak busbw among rows whose check passed and the size it was
    reached at (NaN / "-" when no row passed), and the rows whose check failed."""
    rows = []
    for label, frame in tables(probe).items():
        good = frame[frame.ok & np.isfinite(frame.busbw_gb_s)]
        if len(good):
            best = good.loc[good.busbw_gb_s.idxmax()]
            peak, at_bytes, size = float(best.busbw_gb_s), int(best.bytes), human_size(best.bytes)
        else:
            peak, at_bytes, size = math.nan, -1, "-"
        rows.append(
            {
                "table": label,
                "peak_busbw_gb_s": peak,
                "peak_bytes": at_bytes,
                "peak_size": size,
                "rows": len(frame),
                "wrong": int((~frame.ok).sum()),
            }
        )
    return pd.DataFrame(
        rows, columns=["table", "peak_busbw_gb_s", "peak_bytes", "peak_size", "rows", "wrong"]
    )


def header_line(probe: Probe) -> str:
    """backend, device, world size, iterations / warm-up, hosts."""
    meta = probe.meta
    hosts = meta.get("hosts")
    if isinstance(hosts, list):
        counts: dict = {}
        for host in hosts:
            counts[str(host)] = counts.get(str(host), 0) + 1
        hosts = ", ".join(f"{h} ({n} ranks)" if n > 1 else h for h, n in counts.items())
    world = meta.get("world_size", "?")
    return (
        f"backend {meta.get('backend', '?')}, device {meta.get('device', '?')}, "
        f"world size {world}, {meta.get('iterations', '?')} timed calls after "
        f"{meta.get('warmup', '?')} warm-up per size, hosts {hosts or '?'}"
    )


def provenance_line(probe: Probe) -> str:
    meta = probe.meta
    return (
        f"probe file {probe.path} (version {probe.version}), scalebench "
        f"{meta.get('tool_version', '?')}, created {meta.get('created', '?')}"
    )


def summary_lines(probe: Probe) -> list[str]:
    """One line per table (peak busbw and its size) and the check line."""
    lines = []
    for row in summary_table(probe).itertuples():
        if math.isfinite(row.peak_busbw_gb_s):
            lines.append(
                f"{row.table}: peak busbw {row.peak_busbw_gb_s:.3f} GB/s at {row.peak_size}"
            )
        else:
            lines.append(f"{row.table}: no correct result")
    lines.append(check_line(probe))
    return lines


def check_line(probe: Probe) -> str:
    wrong, total = failed_checks(probe), len(probe.rows)
    if wrong == 0:
        return f"check: every result exact ({total} rows)"
    bad = probe.rows[~probe.rows.ok]
    which = ", ".join(f"{t} {human_size(b)}" for t, b in zip(bad.table, bad.bytes))
    return (
        f"check: {wrong} of {total} results WRONG ({which}): the collective is broken on this "
        f"allocation; do not trust its training numbers"
    )


def one_worker_note(probe: Probe) -> list[str]:
    if probe.meta.get("world_size") == 1:
        return ["one worker: the collectives move nothing between ranks (busbw 0)"]
    return []
