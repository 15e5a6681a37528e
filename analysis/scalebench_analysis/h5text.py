"""Reading scalebench's HDF5 attributes as Python values: strings (fixed-length UTF-8 bytes
since layout 1.2, or str) and ISO 8601 times (with or without milliseconds)."""

from __future__ import annotations

from datetime import datetime

import numpy as np


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
