"""A cell's `timings` dataset: read, decompressed in load()'s worker thread where it can
be (Note [Timings decompressed in a thread]), and the long `timings` table of every cell."""

from __future__ import annotations

import math
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import h5py
import numpy as np
import pandas as pd
from h5py import h5z

from ..errors import ResultsFileError
from .decoding import attribute, json_attr


@dataclass(frozen=True)
class RawTimings:
    """A cell's `timings` dataset as stored: (ranks, iterations, phases) seconds."""

    data: np.ndarray
    phases: list
    warmup: int


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


def stored_chunks(dataset: h5py.Dataset):
    """(filters, [(chunk offset, filter mask, bytes as stored)]) of a dataset
    decompress_chunks reads (Note [Timings decompressed in a thread]); None for any other
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


def decompress_chunks(shape: tuple, chunk: tuple, filters: tuple, pieces: list) -> np.ndarray:
    """The dataset's values from its chunks as stored (stored_chunks), the filters undone
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


# Note [Open datasets]
# load() reads every cell before it collects their timings (their decompression overlaps the
# reading of the next cells). A CellTimings that kept its h5py Dataset kept the dataset open
# in HDF5 (its object, chunk cache and index: about 85 KB) until the last cell was read: at
# 10^4 cells 0.85 GB of the 1.2 GB peak of `analyze` (issue 53). A dataset read in place is
# dropped at once; one whose decompression runs in the worker thread is kept only for the
# fallback of a chunk that does not decompress, and only sweeps of long cells (chunks of
# 64 KB and more) have those.


@dataclass
class CellTimings:
    """A cell's `timings` as read by cell_timings: the values, or their decompression in
    load()'s worker thread (Note [Timings decompressed in a thread])."""

    cell_id: str
    dataset: h5py.Dataset | None  # only while its decompression runs (Note [Open datasets])
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


def cell_timings(cell_id: str, group: h5py.Group, pool: ThreadPoolExecutor) -> CellTimings | None:
    """The cell's `timings` dataset (None without one), decompressed in `pool` where it can
    be; load() turns those of every cell into the long table at once (timings_frame)."""
    if "timings" not in group:
        return None
    dataset = group["timings"]
    phases = json_attr(dataset, "phases", [])
    warmup = int(
        attribute(dataset, "warmup_iterations") if "warmup_iterations" in dataset.attrs else 0
    )
    stored = stored_chunks(dataset)
    if stored is None:
        data = np.asarray(dataset[()], dtype=float)
        dataset = None  # read: closed now, see Note [Open datasets]
    else:
        data = pool.submit(decompress_chunks, dataset.shape, dataset.chunks, *stored)
    return CellTimings(cell_id, dataset, phases, warmup, data)


#: Columns of the long `timings` table.
_TIMINGS_COLUMNS = ["cell_id", "rank", "iteration", "phase", "time_s", "warmup"]


def _code_type(categories: list) -> type:
    """The integer type pandas keeps the codes of a categorical of `categories` in: codes
    made in it are not converted again (10^7 of them)."""
    for kind in (np.int8, np.int16, np.int32):
        if len(categories) < np.iinfo(kind).max:
            return kind
    return np.int64


def timings_frame(raw: dict) -> pd.DataFrame:
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
