"""Damaged results files (issue 15, finding 6): a damaged cell is left out with one line
naming it, the readable cells are analysed, and nothing reaches the user as a traceback."""

import shutil

import h5py
import numpy as np
import pytest

import scalebench_analysis as sa
from scalebench_analysis.read.decoding import decode

from conftest import run_cli


def _first_ok_cell(path) -> str:
    with h5py.File(path, "r") as f:
        for cell_id, group in f["cells"].items():
            if decode(group.attrs["status"]) == "ok" and "timings" in group:
                return cell_id
    raise AssertionError("no ok cell with timings")


def _replace_attr(group, name, value) -> None:
    del group.attrs[name]
    group.attrs[name] = value


def _spec_not_json(group):
    _replace_attr(group, "spec", "{not json")


def _status_unknown(group):
    _replace_attr(group, "status", "exploded")


def _batch_size_text(group):
    _replace_attr(group, "batch_size", "sixteen")


def _spec_without_batch(group):
    _replace_attr(group, "spec", '{"experiment": "x", "mode": "train", "world_size": 1}')


def _timings_wrong_shape(group):
    del group["timings"]
    group.create_dataset("timings", data=np.zeros((2, 3)))


def _status_array(group):
    _replace_attr(group, "status", np.array([1, 2, 3]))


DAMAGE = {
    "spec_not_json": (_spec_not_json, "not valid JSON"),
    "status_unknown": (_status_unknown, "status 'exploded'"),
    "batch_size_text": (_batch_size_text, "'batch_size' is not an integer"),
    "spec_without_batch": (_spec_without_batch, "'batch_size' is missing"),
    "timings_wrong_shape": (_timings_wrong_shape, "timings shape"),
    "status_array": (_status_array, "status"),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_damaged_cell_is_left_out_and_named(kind, results_file, tmp_path):
    path = tmp_path / f"{kind}.h5"
    shutil.copy(results_file, path)
    cell_id = _first_ok_cell(path)
    damage, phrase = DAMAGE[kind]
    with h5py.File(path, "r+") as f:
        damage(f["cells"][cell_id])
        total = len(f["cells"])

    results = sa.load(path)
    assert list(results.damaged) == [cell_id]
    assert phrase in results.damaged[cell_id]
    assert cell_id not in set(results.cells["cell_id"])
    assert len(results.cells) == total - 1
    assert cell_id not in set(results.timings["cell_id"])

    done = run_cli("analyze", str(path), check_rc=0)
    assert "Traceback" not in done.stderr
    warnings = [line for line in done.stderr.splitlines() if cell_id in line]
    assert len(warnings) == 1 and "damaged cell" in warnings[0] and phrase in warnings[0]


def test_layout_version_not_a_string_is_refused_with_exit_2(results_file, tmp_path):
    path = tmp_path / "layout_int.h5"
    shutil.copy(results_file, path)
    with h5py.File(path, "r+") as f:
        _replace_attr(f, "scalebench_layout_version", np.int64(1))
    with pytest.raises(sa.ResultsFileError, match="is not a string"):
        sa.load(path)
    done = run_cli("analyze", str(path), check_rc=2)
    assert "Traceback" not in done.stderr


def test_truncated_file_is_refused_with_exit_2_and_one_line(results_file, tmp_path):
    path = tmp_path / "truncated.h5"
    data = open(results_file, "rb").read()
    path.write_bytes(data[: len(data) // 2])
    done = run_cli("analyze", str(path), subprocess_run=True)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
