"""The per-cell summary is computed once, by scalebench (C++), and read by the analysis
package: count, cv, the validity flags and their thresholds come from the file."""

import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

import scalebench_analysis as sa

import make_results
import reference_figures
import results_edits
from conftest import run_cli

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "results" / "layout_v1.txt"
THRESHOLDS = ("min_valid_iterations", "max_valid_cv", "replica_checksum_rel_tolerance")


def _type_name(type_id) -> str:
    if isinstance(type_id, h5py.h5t.TypeStringID):
        return "vlen-utf8-string" if type_id.is_variable_str() else "fixed-string"
    kind = "int" if isinstance(type_id, h5py.h5t.TypeIntegerID) else "float"
    return f"{kind}{8 * type_id.get_size()}"


def _listing(path, renames: dict) -> set:
    """Every object and attribute with its type, as tests/unit/common/
    results_store_layout_test.cc lists them, cell ids replaced by role names."""
    lines = set()

    def add(name, obj):
        shown = "/" + name if name else "/"
        for cell_id, role in renames.items():
            shown = shown.replace(cell_id, f"<{role}>")
        if isinstance(obj, h5py.Dataset):
            lines.add(f"{shown} dataset {_type_name(obj.id.get_type())} rank {obj.ndim}")
        else:
            lines.add(f"{shown} group")
        for attribute in obj.attrs:
            lines.add(f"{shown} @{attribute} {_type_name(obj.attrs.get_id(attribute).get_type())}")

    with h5py.File(path, "r") as f:
        add("", f)
        f.visititems(add)
    return {
        line for line in lines if "<" in line or line.startswith("/ ") or line == "/cells group"
    }


def test_synthetic_file_follows_the_cpp_layout_golden(tmp_path):
    """make_results.py writes what the C++ store writes: same objects, names and types."""
    path = make_results.write_results(tmp_path / "synthetic.h5")
    results_edits.add_repetitions(path)
    raw_cells = {c.cell_id: c for c in sa.load(path).cells.itertuples()}
    ok = next(
        c
        for c in raw_cells.values()
        if c.status == "ok"
        and c.mode == "train"
        and c.world_size == 2
        and c.spec["batch_size"]
        and "repetitions" not in c.spec
    )
    skipped = next(c for c in raw_cells.values() if c.status == "skipped")
    # The golden's auto cell: a training cell of batch_size auto (spec batch 0) on 1 rank.
    auto = next(c for c in raw_cells.values() if c.spec["batch_size"] == 0 and c.world_size == 1)
    renames = {ok.cell_id: "ok-cell", skipped.cell_id: "skipped-cell", auto.cell_id: "auto-cell"}
    with h5py.File(path, "r") as f:  # layout 1.5: a series of repeated cells
        if "series" in f:
            renames[sorted(f["series"])[0]] = "series"
    # The series id is its repetition 0's cell id: that cell is not one of the golden's.
    got = {line for line in _listing(path, renames) if not line.startswith("/cells/<series>")}
    # The golden's timeout and running cells are states the synthetic file does not hold.
    golden = {
        line
        for line in GOLDEN.read_text().splitlines()
        if "<timeout-cell>" not in line
        and "<running-cell>" not in line
        and ("<" in line or line.startswith("/ ") or line == "/cells group")
    }
    assert got == golden


def test_summary_matches_the_raw_timings(raw):
    """The file's count, cv and flags follow from its timings and its thresholds (checks the
    writer: the C++ store on a real run, make_results.py on the synthetic file)."""
    for cell in raw.ok_cells():
        s = cell.summary
        samples = cell.samples()
        assert s["count"] == samples.size
        assert isinstance(s["count"], np.integer)
        cv = np.std(samples, ddof=1) / np.mean(samples) if samples.size > 1 else np.nan
        assert s["cv"] == pytest.approx(cv, rel=1e-9, nan_ok=True)
        enough = samples.size >= s["min_valid_iterations"]
        # Layout 1.10: a cell that chose its own iterations is judged by its interval.
        stop = s.get("stop_reason", "")
        stop = stop.decode() if isinstance(stop, bytes) else str(stop)
        auto = stop in ("precise", "budget", "cap")
        quiet = stop == "precise" if auto else bool(cv <= s["max_valid_cv"])
        in_sync = cell.replicas_in_sync(s["replica_checksum_rel_tolerance"])
        assert (s["valid_enough_iterations"], s["valid_cv"], s["valid_replicas_in_sync"]) == (
            enough,
            quiet,
            in_sync,
        ), cell.cell_id
        # Layout 1.9: a cell with untrusted_reasons (a program cell's worker found one) is
        # not valid, so info never shows it as such.
        trusted = not json.loads(cell.attrs.get("untrusted_reasons", "[]"))
        # Layout 1.10: the warm-up drift is stored and judged with the other flags.
        settled = True
        if "drift" in s:
            settled = not (abs(s["drift"]) > s["max_valid_drift"])
            assert s["valid_drift"] == settled, cell.cell_id
        assert s["valid"] == (enough and quiet and settled and in_sync and trusted)
        # Layout 1.8: the median's interval, the same order statistics as the reference.
        if "median_ci_low_s" in s:
            low, high = reference_figures.median_interval(samples)
            assert s["median_ci_low_s"] == pytest.approx(low, rel=1e-12, nan_ok=True)
            assert s["median_ci_high_s"] == pytest.approx(high, rel=1e-12, nan_ok=True)


def test_thresholds_are_those_of_the_cpp_header(raw):
    want = reference_figures.cpp_thresholds()
    for cell in raw.ok_cells():
        for name in THRESHOLDS:
            assert cell.summary[name] == want[name]


def _edit_summary(src, dst, cell_id, **attrs):
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        summary = f["cells"][cell_id]["summary"]
        # The planted figures are about the cv rule of fixed-count cells; a cell of a real
        # `iterations: auto` run (the quickstart) is judged by its interval instead.
        if "stop_reason" in summary.attrs and "stop_reason" not in attrs:
            summary.attrs["stop_reason"] = make_results._fixed_string("fixed")
        for name, value in attrs.items():
            summary.attrs[name] = value
    return str(dst)


def _clean_cell(results_file) -> str:
    trust = sa.analyze(results_file).sections["cells"]
    trusted = trust[trust.trusted == True]  # noqa: E712 (NaN for cells that are not ok)
    # Trusted by the cv rule too (an `iterations: auto` cell is trusted by its interval and
    # may have a cv above the file's limit): the planted figures are about the cv rule.
    cells = sa.load(results_file).cells.set_index("cell_id")
    quiet = [c for c in trusted.cell_id if bool(cells.loc[c].get("valid_cv", True))]
    trusted = trusted[trusted.cell_id.isin(quiet)]
    if trusted.empty:
        pytest.skip("the results file has no trusted cell")
    return trusted.cell_id.iloc[0]


def test_count_cv_and_flags_are_read_from_the_file(results_file, tmp_path):
    """Planted values that contradict the timings show up as they are: nothing is
    recomputed from the timings."""
    cell_id = _clean_cell(results_file)
    planted = _edit_summary(
        results_file,
        tmp_path / "planted.h5",
        cell_id,
        count=np.int64(3),
        cv=np.float64(0.5),
        max_valid_cv=np.float64(0.25),
        min_valid_iterations=np.int64(7),
        valid_cv=np.int8(0),
        valid_enough_iterations=np.int8(0),
        valid=np.int8(0),
    )
    row = sa.analyze(planted).sections["cells"].set_index("cell_id").loc[cell_id]
    assert row["count"] == 3 and row["cv"] == 0.5
    assert not row.trusted
    assert "only 3 samples (< 7)" in row.untrusted_because
    assert "cv 50.0% > 25%" in row.untrusted_because


def test_max_cv_option_rejudges_the_files_cv(results_file, tmp_path):
    cell_id = _clean_cell(results_file)
    planted = _edit_summary(results_file, tmp_path / "noisy.h5", cell_id, cv=np.float64(0.2))
    cells = sa.analyze(planted).sections["cells"].set_index("cell_id")
    assert cells.loc[cell_id].trusted  # the file's verdict valid_cv stands
    strict = sa.AnalysisOptions(quality=sa.QualityOptions(max_cv=0.15))
    row = sa.analyze(planted, strict).sections["cells"].set_index("cell_id").loc[cell_id]
    assert not row.trusted
    assert "cv 20.0% > 15% (--max-cv)" in row.untrusted_because


def test_layout_1_0_summary_without_thresholds_is_read(results_file, tmp_path):
    """Files of layout 1.0 lack the threshold attributes: their writer used fixed values,
    which load() fills in; the verdicts are the file's as before."""
    old = tmp_path / "v1_0.h5"
    shutil.copyfile(results_file, old)
    with h5py.File(old, "r+") as f:
        f.attrs["scalebench_layout_version"] = "1.0"
        for group in f["cells"].values():
            if "summary" in group:
                for name in THRESHOLDS:
                    del group["summary"].attrs[name]
    results = sa.load(old)
    assert results.layout_version == "1.0"
    ok = results.cells[results.cells.status == "ok"]
    for name, value in sa.LAYOUT_1_0_THRESHOLDS.items():
        assert (ok[name] == value).all()
    before = sa.analyze(results_file).sections["cells"]
    after = sa.analyze(str(old)).sections["cells"]
    assert list(after.trusted) == list(before.trusted)
    assert list(after.untrusted_because.fillna("")) == list(before.untrusted_because.fillna(""))


def test_the_overview_repeats_the_matrix_warnings(results_file, synthetic):
    """Layout 1.6: the matrix's warnings (here the stand-in warning of a CytoDL task file)
    stand in the overview of analyze and the report, not only in the run's log."""
    done = run_cli("analyze", results_file, check_rc=0)
    if synthetic:
        assert (
            "warning  tasks.csv:1:1: warning: every row runs scalebench's built-in" in done.stdout
        )
    else:
        assert "built-in stand-in" not in done.stdout  # the quickstart has no warning
