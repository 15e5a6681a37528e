"""Natural order of names (issue 53): `e2` before `e10`, `resnet18` before `resnet101`, the
order a person expects of experiments numbered in a sweep. Text compares as text, each run of
digits as its number."""

from __future__ import annotations

import re

import pandas as pd

_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple:
    """The sort key of `text`: its text and digit runs alternating, the digits as numbers
    (text at even positions, numbers at odd ones, so any two keys compare)."""
    parts = _DIGITS.split(text)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))


def natural_column(column: pd.Series) -> pd.Series:
    """A `sort_values(key=...)` function: a text column as the rank of each value in natural
    order (NaN stays NaN, sorted last), any other column as it is. Ranks rather than keys:
    pandas sorts several columns by factorizing each, which tuples do not survive."""
    if not (column.dtype == object or pd.api.types.is_string_dtype(column)):
        return column
    values = sorted(column.dropna().unique(), key=lambda v: natural_key(str(v)))
    return column.map({v: rank for rank, v in enumerate(values)})
