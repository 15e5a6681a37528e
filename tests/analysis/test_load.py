"""load(): tidy tables, and refusal of files that are not scalebench results of layout 1.x."""

import json
import shutil

import h5py
import numpy as np
import pandas as pd
import pytest
from h5py import h5a, h5s, h5t

import scalebench_analysis as sa
from scalebench_analysis.read import timings as read_timings
from scalebench_analysis.read.decoding import attribute, attributes, decode, one_line

import rawdata
from conftest import run_cli


def test_cells_table_has_spec_status_and_summary(results_file, raw):
    results = sa.load(results_file)
    assert results.layout_version.split(".")[0] == "1"
    cells = results.cells.set_index("cell_id")
    assert set(cells.index) == set(raw.cells)
    for cell_id, cell in raw.cells.items():
        row = cells.loc[cell_id]
        assert row.status == cell.attrs["status"]
        assert row.batch_size == cell.batch  # the spec's; auto (0): the batch the loop ran
        assert row.batch_auto == (cell.spec["batch_size"] == 0)
        assert row.world_size == cell.spec["world_size"]
        assert row.spec == cell.spec
        if cell.ok:
            assert row.median_s == pytest.approx(np.median(cell.samples()), rel=1e-9)


def test_timings_long_table_matches_raw_values(results_file, raw):
    results = sa.load(results_file)
    timings = results.timings
    assert list(timings.columns) == ["cell_id", "rank", "iteration", "phase", "time_s", "warmup"]
    expected_rows = sum(
        int(np.isfinite(c.timings).sum()) for c in raw.cells.values() if c.timings is not None
    )
    assert len(timings) == expected_rows
    cell = max(raw.ok_cells(), key=lambda c: c.timings.shape[0])
    phase = cell.phases[-1]
    mine = timings[(timings.cell_id == cell.cell_id) & (timings.phase == phase)]
    for rank in range(cell.timings.shape[0]):
        values = cell.timings[rank, :, -1]
        values = values[np.isfinite(values)]
        got = mine[mine["rank"] == rank].sort_values("iteration")
        np.testing.assert_allclose(got.time_s.to_numpy(), values)
        assert got.warmup.to_numpy().tolist() == [i < cell.warmup for i in range(values.size)]


def _expected_timings(raw: rawdata.RawFile, left_out=()) -> dict:
    """The long table recomputed from the file (h5py + numpy, rawdata.py): every finite
    value of every cell with timings, cells in file order, each cell's values in (rank,
    iteration, phase) order."""
    columns = {name: [] for name in ("cell_id", "rank", "iteration", "phase", "time_s")}
    columns["warmup"] = []
    for cell in raw.cells.values():
        if cell.timings is None or cell.cell_id in left_out:
            continue
        for rank, iteration, phase in zip(*np.nonzero(np.isfinite(cell.timings))):
            columns["cell_id"].append(cell.cell_id)
            columns["rank"].append(int(rank))
            columns["iteration"].append(int(iteration))
            columns["phase"].append(cell.phases[phase])
            columns["time_s"].append(float(cell.timings[rank, iteration, phase]))
            columns["warmup"].append(bool(iteration < cell.warmup))
    return columns


def _assert_timings_equal(timings: pd.DataFrame, expected: dict) -> None:
    assert list(timings.columns) == list(expected)
    assert isinstance(timings.index, pd.RangeIndex) and timings.index.start == 0
    for name in ("cell_id", "phase"):
        column = timings[name]
        assert isinstance(column.dtype, pd.CategoricalDtype), name
        # Categories: exactly the values present (no empty groups), sorted (sorting and
        # grouping by them order as for strings), no missing values.
        assert list(column.cat.categories) == sorted(set(expected[name])), name
        assert column.notna().all(), name
        assert column.astype(object).tolist() == expected[name], name
    assert timings["rank"].dtype == np.int64 and timings["iteration"].dtype == np.int64
    assert timings["rank"].tolist() == expected["rank"]
    assert timings["iteration"].tolist() == expected["iteration"]
    assert timings["time_s"].dtype == np.float64
    np.testing.assert_array_equal(timings["time_s"].to_numpy(), np.array(expected["time_s"]))
    assert timings["warmup"].dtype == bool
    assert timings["warmup"].tolist() == expected["warmup"]


def test_timings_long_table_is_every_finite_value_in_order(results_file, raw):
    results = sa.load(results_file)
    _assert_timings_equal(results.timings, _expected_timings(raw, left_out=results.damaged))


def test_timings_long_table_with_nan_holes_and_empty_parts(results_file, tmp_path):
    """NaN holes in a cell without padding, a phase NaN throughout (its name in no other
    cell) and a cell NaN throughout: the table still holds exactly the finite values, and
    neither that phase nor that cell is a category of its columns."""
    path = tmp_path / "holes.h5"
    shutil.copy(results_file, path)
    with h5py.File(path, "r+") as f:
        with_timings = [g for g in f["cells"].values() if "timings" in g]
        full = [g for g in with_timings if np.isfinite(g["timings"][()]).all()]
        if len(full) < 2:
            pytest.skip("needs two cells whose timings have no NaN")
        holes, empty = full[0]["timings"], full[1]["timings"]
        data = holes[()]
        data[0, 1, 2] = data[-1, -1, -1] = np.nan
        data[:, :, 0] = np.nan
        holes[...] = data
        phases = json.loads(decode(holes.attrs["phases"]))
        holes.attrs["phases"] = json.dumps(["only_in_this_cell"] + phases[1:])
        empty[...] = np.full(empty.shape, np.nan)
        empty_id = empty.parent.name.rsplit("/", 1)[-1]
    results = sa.load(path)
    timings = results.timings
    _assert_timings_equal(timings, _expected_timings(rawdata.read(path), results.damaged))
    assert "only_in_this_cell" not in timings["phase"].cat.categories
    assert empty_id in set(results.cells["cell_id"])
    assert empty_id not in timings["cell_id"].cat.categories
    # Grouping by both categoricals yields the (cell, phase) pairs present, no empty ones.
    sizes = timings.groupby(["cell_id", "phase"], observed=True).size()
    assert (sizes > 0).all() and sizes.sum() == len(timings)


def _add_attribute(obj, name: str, htype, data) -> None:
    """An attribute of file type `htype` holding `data` byte for byte (no conversion)."""
    space = h5s.create(h5s.SCALAR) if np.ndim(data) == 0 else h5s.create_simple(np.shape(data))
    attr = h5a.create(obj.id, name.encode(), htype, space)
    attr.write(np.asarray(data), mtype=htype)


def _fixed_string_type(size: int, pad, cset=h5t.CSET_UTF8):
    htype = h5t.C_S1.copy()
    htype.set_size(size)
    htype.set_strpad(pad)
    htype.set_cset(cset)
    return htype


@pytest.mark.parametrize("track_order", [False, True])
def test_attribute_fast_path_reads_what_h5py_reads(tmp_path, track_order, monkeypatch):
    """Note [Attribute fast path]: every kind of attribute, read the fast way or not, gives
    `decode(attrs[name])`, in the order of `attrs`."""
    with h5py.File(tmp_path / "attrs.h5", "w", track_order=track_order) as f:
        a = f.create_group("g").attrs
        a["i8"], a["i16"], a["i64"] = np.int8(-3), np.int16(-300), np.int64(-(2**62))
        a["u8"], a["u64"] = np.uint8(200), np.uint64(2**64 - 1)
        a["i32_be"] = np.array(-7, dtype=">i4")
        a["f16"], a["f32"], a["f64"] = np.float16(0.1), np.float32(0.1), 0.1
        a["f64_be"] = np.array(1 / 3, dtype=">f8")
        a["nan"], a["inf"] = np.nan, -np.inf
        a["vlen"], a["vlen_empty"] = "variable length é", ""
        a["fixed"] = np.array("fixed é".encode(), dtype=h5py.string_dtype("utf-8", 9))
        a["fixed_ascii"] = np.array(b"ascii", dtype=h5py.string_dtype("ascii", 5))
        a["array"], a["one_element"] = np.array([1, 2, 3]), np.array([0.5])
        a["strings"] = np.array([b"a", b"bc"], dtype=h5py.string_dtype("utf-8", 2))
        a["empty"] = h5py.Empty("f8")
        a["bool"] = np.bool_(True)
        a["compound"] = np.array((1, 2.0), dtype=[("x", "i4"), ("y", "f8")])
        a["f128"] = np.longdouble(1) / 3
        group = f["g"]
        for name, pad, data in (
            ("nullterm", h5t.STR_NULLTERM, b"abc\0"),
            ("nullterm_full", h5t.STR_NULLTERM, b"abcd"),
            ("nullterm_after_nul", h5t.STR_NULLTERM, b"ab\0z"),
            ("nullpad", h5t.STR_NULLPAD, b"ab\0\0"),
            ("nullpad_inner_nul", h5t.STR_NULLPAD, b"a\0b\0"),
            ("spacepad", h5t.STR_SPACEPAD, b"ab  "),
        ):
            _add_attribute(group, name, _fixed_string_type(4, pad), np.array(data, dtype="S4"))
        _add_attribute(
            group,
            "ascii_nullterm",
            _fixed_string_type(3, h5t.STR_NULLTERM, h5t.CSET_ASCII),
            np.array(b"ok\0", dtype="S3"),
        )
        expected = {name: decode(value) for name, value in group.attrs.items()}
        got = dict(attributes(group))
        assert list(got) == list(expected) == list(group.attrs)
        for name, value in expected.items():
            assert type(got[name]) is type(value), name
            if isinstance(value, np.ndarray):
                assert got[name].dtype == value.dtype and got[name].tolist() == value.tolist()
            elif isinstance(value, float) and np.isnan(value):
                assert np.isnan(got[name]), name
            else:
                assert got[name] == value, name
            assert type(attribute(group, name)) is type(value), name
        assert got["nullterm_after_nul"] == "ab" and got["nullpad_inner_nul"] == "a\0b"
        assert got["u64"] == 2**64 - 1 and got["f32"] == float(np.float32(0.1))
        # Which went the slow way (h5py's attrs[name]): none of the numbers and
        # NUL-terminated or NUL-padded strings.
        slow = []
        getitem = h5py.AttributeManager.__getitem__
        monkeypatch.setattr(
            h5py.AttributeManager,
            "__getitem__",
            lambda attrs, name: slow.append(name) or getitem(attrs, name),
        )
        dict(attributes(group))
        expected_slow = ["array", "bool", "compound", "empty", "one_element", "spacepad"]
        expected_slow += ["strings", "vlen", "vlen_empty"]
        if np.dtype(np.longdouble).itemsize > 8:  # else it is a float64 like any other
            expected_slow.append("f128")
        assert sorted(slow) == sorted(expected_slow)
        with pytest.raises(KeyError):
            attribute(group, "missing")


#: `timings` layouts (create_dataset keywords; chunks "rank": one chunk per rank, as the
#: C++ writer stores them) and whether load() decompresses them in its worker thread (Note
#: [Timings decompressed in a thread]; chunks of any size, see threaded_small_chunks); h5py
#: reads the others.
TIMINGS_LAYOUTS = {
    "cpp_writer": ({"chunks": "rank", "shuffle": True, "compression": "gzip"}, True),
    "gzip_edge_chunks": ({"chunks": (1, 7, 2), "compression": "gzip"}, True),
    "shuffle_only": ({"chunks": (1, 5, 3), "shuffle": True}, False),
    "chunked_no_filter": ({"chunks": (1, 3, 1)}, False),
    "contiguous": ({}, False),
    "fletcher32": ({"chunks": (1, 4, 2), "compression": "gzip", "fletcher32": True}, False),
    "float32": ({"chunks": (1, 4, 2), "compression": "gzip", "dtype": "<f4"}, False),
    "big_endian": ({"chunks": (1, 4, 2), "compression": "gzip", "dtype": ">f8"}, False),
}


@pytest.fixture
def threaded_small_chunks(monkeypatch):
    """The worker thread takes chunks of any size (the tests' are small)."""
    monkeypatch.setattr(read_timings, "_THREADED_MIN_CHUNK_BYTES", 0)


def _rewrite_timings(group, layout: dict) -> h5py.Dataset:
    """Rewrites the group's `timings` with the same values and attributes in `layout`."""
    layout = dict(layout)
    data, attrs = group["timings"][()], dict(group["timings"].attrs.items())
    del group["timings"]
    if layout.get("chunks") == "rank":
        layout["chunks"] = (1, *data.shape[1:])
    data = data.astype(layout.pop("dtype", "<f8"))
    dataset = group.create_dataset("timings", data=data, **layout)
    for name, value in attrs.items():
        dataset.attrs[name] = value
    return dataset


def _bits(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)


@pytest.mark.parametrize("layout", sorted(TIMINGS_LAYOUTS))
def test_timings_decompressed_in_thread_as_h5py_reads_them(layout, tmp_path, threaded_small_chunks):
    rng = np.random.default_rng(1)
    data = rng.lognormal(-5, 1, size=(2, 23, 7))
    data[1, 20:, :] = np.nan  # padding
    with h5py.File(tmp_path / "layout.h5", "w") as f:
        group = f.create_group("cell")
        group.create_dataset("timings", data=data)
        dataset = _rewrite_timings(group, TIMINGS_LAYOUTS[layout][0])
        stored = read_timings.stored_chunks(dataset)
        assert (stored is not None) == TIMINGS_LAYOUTS[layout][1]
        if stored is not None:
            got = read_timings.decompress_chunks(dataset.shape, dataset.chunks, *stored)
            np.testing.assert_array_equal(_bits(got), _bits(dataset[()]))


def test_timings_chunks_skipping_deflate_and_unwritten_chunks(tmp_path, threaded_small_chunks):
    """A chunk whose optional deflate was skipped (stored shuffled only) is read as HDF5
    reads it; a dataset with a chunk never written is left to h5py (fill value)."""
    values = np.arange(2 * 4 * 3, dtype=np.float64).reshape(2, 4, 3) / 7
    with h5py.File(tmp_path / "chunks.h5", "w") as f:
        dataset = f.create_dataset(
            "skipped", data=values, chunks=(1, 4, 3), shuffle=True, compression="gzip"
        )
        shuffled = values[1].reshape(-1).view(np.uint8).reshape(-1, 8).T.tobytes()
        dataset.id.write_direct_chunk((1, 0, 0), shuffled, filter_mask=0b10)
        assert dataset.id.get_chunk_info(1).filter_mask == 0b10
        stored = read_timings.stored_chunks(dataset)
        got = read_timings.decompress_chunks(dataset.shape, dataset.chunks, *stored)
        np.testing.assert_array_equal(_bits(got), _bits(values))
        np.testing.assert_array_equal(_bits(dataset[()]), _bits(values))
        partial = f.create_dataset(
            "partial", shape=(2, 4, 3), chunks=(1, 4, 3), dtype="<f8", compression="gzip"
        )
        partial[0] = values[0]
        assert read_timings.stored_chunks(partial) is None


def test_timings_small_chunks_are_left_to_h5py(tmp_path):
    """Chunks under _THREADED_MIN_CHUNK_BYTES are read by h5py; one rank's chunk of the C++
    writer (8 bytes x iterations x phases, up to 1 MiB) at least that large is not."""
    with h5py.File(tmp_path / "sizes.h5", "w") as f:
        small = f.create_dataset(
            "small", data=np.ones((2, 1000, 7)), chunks=(1, 1000, 7), compression="gzip"
        )
        large = f.create_dataset(
            "large", data=np.ones((2, 5000, 7)), chunks=(1, 5000, 7), compression="gzip"
        )
        assert read_timings.stored_chunks(small) is None
        assert read_timings.stored_chunks(large) is not None


def test_load_with_every_timings_layout(results_file, tmp_path, monkeypatch, threaded_small_chunks):
    """A file whose cells store their timings in every layout of TIMINGS_LAYOUTS gives the
    long table and raw arrays h5py reads, through the worker thread where it can."""
    path = tmp_path / "layouts.h5"
    shutil.copy(results_file, path)
    layouts = sorted(TIMINGS_LAYOUTS)
    with h5py.File(path, "r+") as f:
        groups = [g for g in f["cells"].values() if "timings" in g]
        for index, group in enumerate(groups):
            _rewrite_timings(group, TIMINGS_LAYOUTS[layouts[index % len(layouts)]][0])
    threaded = []
    decompress = read_timings.decompress_chunks
    monkeypatch.setattr(
        read_timings,
        "decompress_chunks",
        lambda *args: threaded.append(args[0]) or decompress(*args),
    )
    results = sa.load(path)
    assert not results.damaged and threaded
    raw = rawdata.read(path)
    _assert_timings_equal(results.timings, _expected_timings(raw))
    for cell in raw.cells.values():
        if cell.timings is not None:
            got = results.raw[cell.cell_id].data
            assert got.dtype == np.float64
            np.testing.assert_array_equal(_bits(got), _bits(cell.timings))


def test_timings_chunk_that_does_not_decompress_marks_the_cell_damaged(
    results_file, tmp_path, threaded_small_chunks
):
    """The cell is left out with h5py's own words for it, as before the worker thread; also
    when a part read after the timings (rank_metrics) is damaged too: the timings are read
    first, so theirs is the reason."""
    path = tmp_path / "bad_chunk.h5"
    shutil.copy(results_file, path)
    with h5py.File(path, "r+") as f:
        groups = [g for g in f["cells"].values() if "timings" in g and "rank_metrics" in g]
        expected = {}
        for group in groups[:2]:
            dataset = _rewrite_timings(group, TIMINGS_LAYOUTS["cpp_writer"][0])
            dataset.id.write_direct_chunk((0, 0, 0), b"not a zlib stream", filter_mask=0)
            with pytest.raises(OSError) as error:
                dataset[()]
            expected[group.name.rsplit("/", 1)[-1]] = one_line(error.value)
        del groups[1]["rank_metrics"]
        groups[1]["rank_metrics"] = np.array([b"not", b"numbers"])
        total = len(f["cells"])
    results = sa.load(path)
    assert results.damaged == {k: expected[k] for k in sorted(expected)}
    assert not set(expected) & set(results.cells["cell_id"])
    assert len(results.cells) == total - 2


def _copy_with_version(src, dst, version):
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        f.attrs["scalebench_layout_version"] = version
    return str(dst)


def test_major_version_mismatch_is_refused(results_file, tmp_path):
    future = _copy_with_version(results_file, tmp_path / "v2.h5", "2.0")
    with pytest.raises(sa.ResultsFileError, match=r"required 1\.x, found 2\.0"):
        sa.load(future)
    done = run_cli("analyze", future, check_rc=2, subprocess_run=True)
    assert "required 1.x, found 2.0" in done.stderr


def test_newer_minor_version_is_read(results_file, tmp_path):
    minor = _copy_with_version(results_file, tmp_path / "v1_7.h5", "1.7")
    assert sa.load(minor).layout_version == "1.7"


@pytest.mark.parametrize("kind", ["missing", "not_hdf5", "no_version"])
def test_clear_errors_exit_2(kind, tmp_path):
    path = tmp_path / "bad.h5"
    if kind == "not_hdf5":
        path.write_text("branch,experiment\nmain,x\n")
    elif kind == "no_version":
        with h5py.File(path, "w") as f:
            f.create_group("cells")
    expected = {
        "missing": "no such file",
        "not_hdf5": "not an HDF5 file",
        "no_version": "not a scalebench results file",
    }[kind]
    for command in (
        ["analyze", str(path)],
        ["report", str(path), "-o", str(tmp_path / "r.html")],
        ["compare", str(path), str(path)],
    ):
        done = run_cli(*command, check_rc=2)
        assert expected in done.stderr
