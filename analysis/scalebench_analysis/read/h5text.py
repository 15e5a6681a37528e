"""Reading a results file as trace and watch do: opened read-only without HDF5 file locks
(so a reader never holds up rank 0's writer), string attributes (fixed-length UTF-8 bytes
since layout 1.2, or str) and ISO 8601 times (with or without milliseconds)."""

from __future__ import annotations

from datetime import datetime

import h5py
import numpy as np

from ..errors import ResultsFileError


def open_results(path) -> h5py.File:
    """`path` opened read-only without file locks. ResultsFileError when HDF5 cannot read
    it or it has no /cells (not a scalebench results file)."""
    try:
        f = h5py.File(path, "r", locking=False)
    except OSError as error:
        raise ResultsFileError(f"{path} cannot be read as an HDF5 results file ({error})") from None
    if "cells" not in f:
        f.close()
        raise ResultsFileError(f"{path} is not a scalebench results file (no /cells)")
    return f


def text(value) -> str:
    """An HDF5 string attribute (bytes, str or a 0-d array of either) as str."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray):
        return text(value.item())
    return str(value)


def epoch_seconds(iso: str) -> float | None:
    """Unix seconds of an ISO 8601 UTC time ("2026-11-25T06:40:01Z", since layout 1.5 with
    milliseconds); None for ""."""
    if not iso:
        return None
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
