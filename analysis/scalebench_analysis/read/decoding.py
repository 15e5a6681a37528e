"""Decoding HDF5 attributes as load() reads them: the fast path of scalar numbers and
strings (Note [Attribute fast path]), JSON-valued attributes, root attributes, and the
one-line form of an h5py error message. Shared by results files (loader.py and the modules
that read a cell's parts) and probe files (tables/probe.py)."""

from __future__ import annotations

import json

import h5py
import numpy as np
from h5py import h5a, h5s, h5t


def decode(value):
    """An attribute's value as h5py gives it, decoded: bytes as str, a numpy scalar as the
    Python number."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.generic):
        return value.item()
    return value


def json_text(text, default):
    """`text` parsed as JSON; `default` when it is empty or not JSON."""
    try:
        return json.loads(text) if text else default
    except json.JSONDecodeError:
        return default


def json_attr(obj, name, default):
    """Attribute `name` of an HDF5 object parsed as JSON (`default` when absent, empty or
    not JSON)."""
    if name not in obj.attrs:
        return default
    return json_text(attribute(obj, name), default)


# Note [Attribute fast path]
# h5py's `attrs[name]` costs about 70 us per attribute (dtype round trips, a conversion
# path per read), and a cell has about 60 of them: a quarter of load() before it read them
# this way. Most are scalar numbers and fixed-length strings (schemas/results-layout.md),
# which attribute reads with the fewest low-level calls: numbers widened by HDF5 into an
# int64 / uint64 / float64 buffer (exact for every integer and float of up to 8 bytes),
# strings read as stored, less trailing NULs, and a NUL-terminated one (the C++ writer's)
# cut at its first NUL: what h5py gets from HDF5's conversion to its NUL-padded type (a
# space-padded string goes the slow way). Every other kind (variable-length strings,
# arrays, empty attributes, enums, ...) is read by `attrs[name]`. Either way the value is
# `decode(attrs[name])`; test_load.py holds the two equal for every kind.
_FAST_CLASSES = (h5t.INTEGER, h5t.FLOAT, h5t.STRING)


def attribute(obj, name: str):
    """`decode(obj.attrs[name])` of an HDF5 object, read the fast way where it can be
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
    return decode(obj.attrs[name])


def attributes(obj):
    """(name, value) of every attribute of an HDF5 object, as `obj.attrs.items()` gives
    them (same order) with each value decoded (Note [Attribute fast path])."""
    for name in obj.attrs:
        yield name, attribute(obj, name)


def read_root_attributes(f: h5py.File, names, json_names) -> dict:
    """Every root attribute of `names`, decoded (None when unreadable: shown as missing),
    those of `json_names` parsed from their JSON text (kept as text when it is not JSON).
    Shared by results files and probe files (tables/probe.py)."""
    meta = {}
    for name in names:
        try:
            meta[name] = decode(f.attrs[name])
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


def one_line(error: BaseException) -> str:
    """The first line of an exception's message (h5py's can span several)."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
