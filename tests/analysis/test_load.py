"""load(): tidy tables, and refusal of files that are not scalebench results of layout 1.x."""

import shutil

import h5py
import numpy as np
import pytest

import scalebench_analysis as sa

from conftest import run_cli


def test_cells_table_has_spec_status_and_summary(results_file, raw):
    results = sa.load(results_file)
    assert results.layout_version.split(".")[0] == "1"
    cells = results.cells.set_index("cell_id")
    assert set(cells.index) == set(raw.cells)
    for cell_id, cell in raw.cells.items():
        row = cells.loc[cell_id]
        assert row.status == cell.attrs["status"]
        assert row.batch_size == cell.spec["batch_size"]
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
