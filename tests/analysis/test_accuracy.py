"""Accuracy validation (issue 13) in the analysis: the `accuracy` group of layout 1.3 read
into the cells table, the accuracy column, the Accuracy section, compare flagging a verdict
that changed, damaged groups, and files of layout 1.2 without the group. The groups are
planted into the synthetic file with the values below; every expected text is written out
by hand."""

from __future__ import annotations

import json
import math
import shutil

import h5py
import numpy as np
import pandas as pd
import pytest

import scalebench_analysis as sa
from scalebench_analysis.output.report import render_html
from scalebench_analysis.tables import compare

import make_results as mr
from conftest import run_cli


def _infer_id(batch: int) -> str:
    return mr.make_spec("main", "infer", batch, 1, samples=batch * mr.MEASURED)["cell_id"]


PASSED_INFER = _infer_id(16)  # identical outputs: psnr_db = +inf
FAILED_INFER = _infer_id(32)
PASSED_TRAIN = mr.make_spec("main", "train", 16, 1)["cell_id"]
# As common/cell/accuracy.cc words them.
CHECKS = ["mae_rel 0.0213 > 0.01", "1-cosine 0.0125 > 0.01"]

IDENTICAL = {
    "tolerance": 0.01,
    "validation_samples": 320,
    "elements": 3200,
    "mae": 0.0,
    "mse": 0.0,
    "rmse": 0.0,
    "max_abs_error": 0.0,
    "mean_rel_error": 0.0,
    "max_rel_error": 0.0,
    "reference_range": 4.0,
    "mae_rel": 0.0,
    "psnr_db": math.inf,
    "cosine_similarity": 1.0,
}
DIFFERENT = {
    **IDENTICAL,
    "validation_samples": 640,
    "elements": 6400,
    "mae": 0.0852,  # mae_rel = 0.0852 / 4.0
    "mse": 0.0144,
    "rmse": 0.12,
    "max_abs_error": 0.5,
    "mean_rel_error": 0.05,
    "max_rel_error": 0.25,
    "mae_rel": 0.0213,
    "psnr_db": 30.4575749056,  # 10 log10(16 / 0.0144)
    "cosine_similarity": 0.9875,
    "ssim": 0.97,
}
TRAINING = {
    "tolerance": 0.01,
    "validation_samples": 16,
    "steps": 22,
    "max_loss_rel_deviation": 0.0004,
    "final_loss": 2.3009,
    "reference_final_loss": 2.3,
    "param_rel_distance": 0.00012,
}


def _plant(path, cell_id, kind):
    if kind == "passed_infer":
        mr.add_accuracy(path, cell_id, "passed", **IDENTICAL)
    elif kind == "failed_infer":
        mr.add_accuracy(path, cell_id, "failed", CHECKS, **DIFFERENT)
    elif kind == "passed_train":
        mr.add_accuracy(path, cell_id, "passed", kind="training", **TRAINING)
    else:
        raise AssertionError(kind)


@pytest.fixture(scope="module")
def plain_file(tmp_path_factory):
    """The synthetic file as a layout 1.2 writer leaves it: no accuracy group anywhere."""
    path = mr.write_results(tmp_path_factory.mktemp("accuracy") / "plain.h5")
    with h5py.File(path, "r+") as f:
        f.attrs["scalebench_layout_version"] = mr._fixed_string("1.2")
        for group in f["cells"].values():
            if "accuracy" in group:  # planted to match the layout golden of 1.3
                del group["accuracy"]
    return path


@pytest.fixture(scope="module")
def accuracy_file(plain_file, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("accuracy") / "validated.h5")
    shutil.copyfile(plain_file, path)
    _plant(path, PASSED_INFER, "passed_infer")
    _plant(path, FAILED_INFER, "failed_infer")
    _plant(path, PASSED_TRAIN, "passed_train")
    return path


def test_accuracy_columns_are_read(accuracy_file):
    results = sa.load(accuracy_file)
    assert results.layout_version == "1.3"
    assert results.problems == {}
    cells = results.cells.set_index("cell_id")

    identical = cells.loc[PASSED_INFER]
    assert identical.accuracy_verdict == "passed"
    assert identical.accuracy_failed_checks == []
    assert identical.accuracy_kind == "inference"
    assert identical.accuracy_reference == mr.ACCURACY_REFERENCE
    assert identical.accuracy_psnr_db == math.inf
    assert identical.accuracy_cosine_similarity == 1.0
    assert identical.accuracy_elements == 3200
    assert pd.isna(identical.accuracy_ssim)  # not written: the output is not an image
    assert pd.isna(identical.accuracy_steps)

    different = cells.loc[FAILED_INFER]
    assert different.accuracy_verdict == "failed"
    assert different.accuracy_failed_checks == CHECKS
    assert different.accuracy_mae_rel == 0.0213
    assert different.accuracy_psnr_db == 30.4575749056
    assert different.accuracy_ssim == 0.97
    assert different.accuracy_validation_samples == 640

    training = cells.loc[PASSED_TRAIN]
    assert training.accuracy_kind == "training"
    assert training.accuracy_steps == 22
    assert training.accuracy_max_loss_rel_deviation == 0.0004
    assert training.accuracy_param_rel_distance == 0.00012
    assert training.accuracy_final_loss == 2.3009
    assert training.accuracy_reference_final_loss == 2.3
    assert pd.isna(training.accuracy_mae_rel)

    others = cells.drop(index=[PASSED_INFER, FAILED_INFER, PASSED_TRAIN])
    assert others.accuracy_verdict.isna().all()
    assert others.accuracy_psnr_db.isna().all()


def test_layout_1_2_file_without_accuracy_loads_as_before(plain_file, accuracy_file):
    plain = sa.load(plain_file)
    assert plain.layout_version == "1.2"
    assert not [c for c in plain.cells.columns if c.startswith("accuracy")]
    assert plain.problems == {}
    validated = sa.load(accuracy_file).cells
    pd.testing.assert_frame_equal(plain.cells, validated[list(plain.cells.columns)])

    analysis = sa.analyze(plain)
    study = ["batch_study", "batch_curve"] if len(analysis.batch_studies) else []
    assert list(analysis.sections) == [
        "overview",
        "cells",
        "scaling",
        "batch",
        *study,
        "stragglers",
        "startup",  # the start-up figures every file with model_init_s has (startup.py)
    ]
    assert set(analysis.sections["cells"]["accuracy"]) == {"not checked"}
    table = sa.regression_table(plain, plain, sa.GateOptions())
    assert set(table["accuracy"]) == {"not checked"}
    assert set(table["accuracy_change"]) == {""}
    assert not compare.gate_failed(table)


def test_accuracy_column_of_the_cells_table(accuracy_file):
    cells = sa.analyze(accuracy_file).sections["cells"].set_index("cell_id")
    assert cells.loc[PASSED_INFER, "accuracy"] == "passed"
    assert cells.loc[FAILED_INFER, "accuracy"] == "FAIL (mae_rel 0.0213 > 0.01)"
    assert cells.loc[PASSED_TRAIN, "accuracy"] == "passed"
    others = cells.drop(index=[PASSED_INFER, FAILED_INFER, PASSED_TRAIN])
    assert set(others["accuracy"]) == {"not checked"}


def test_accuracy_column_of_the_speedup_table(accuracy_file):
    table = sa.analyze(accuracy_file, sa.AnalysisOptions(baseline=("branch", "feature"))).sections[
        "speedup"
    ]
    by_id = table.set_index("cell_id")["accuracy"]
    assert by_id[PASSED_INFER] == "passed"
    assert by_id[FAILED_INFER] == "FAIL (mae_rel 0.0213 > 0.01)"
    assert by_id[PASSED_TRAIN] == "passed"
    assert (by_id.drop(index=[PASSED_INFER, FAILED_INFER, PASSED_TRAIN]) == "not checked").all()


def test_accuracy_section(accuracy_file, monkeypatch):
    results = sa.load(accuracy_file)
    table = sa.analyze(results).sections["accuracy"].set_index("cell_id")
    assert list(table.index) == [
        c for c in results.cells.cell_id if c in (PASSED_INFER, FAILED_INFER, PASSED_TRAIN)
    ]
    assert table.loc[FAILED_INFER, "verdict"] == "failed"
    assert table.loc[FAILED_INFER, "failed_checks"] == "; ".join(CHECKS)
    assert table.loc[FAILED_INFER, "experiment"] == "mlp-infer"
    assert table.loc[PASSED_INFER, "psnr_db"] == math.inf
    assert table.loc[PASSED_TRAIN, "param_rel_distance"] == 0.00012
    assert pd.isna(table.loc[PASSED_TRAIN, "cosine_similarity"])

    brief = run_cli("analyze", accuracy_file, check_rc=0).stdout
    assert "== Accuracy" not in brief and "accuracy" in brief.split("Other tables: ")[1]
    assert f"  * accuracy failed: {results.cell(FAILED_INFER).label}: " in brief, "a cells note"
    narrow = run_cli("analyze", accuracy_file, "--details", check_rc=0).stdout
    assert "left out for width: " in narrow.split("== Accuracy")[1].split("\n\n")[0]
    monkeypatch.setenv("COLUMNS", "250")  # every figure of the section (output/fit.py)
    out = run_cli("analyze", accuracy_file, "--details", check_rc=0).stdout
    assert "== Accuracy" in out
    label = results.cell(FAILED_INFER).label
    assert f"  * accuracy failed: {label}: {'; '.join(CHECKS)}" in out.splitlines()
    section = out.split("== Accuracy")[1].split("\n== ")[0]
    assert "0.0213" in section and "0.987500" in section and "inf" in section

    markdown = run_cli("analyze", accuracy_file, "--format", "markdown", check_rc=0).stdout
    assert "## Accuracy" in markdown
    assert "| FAIL (mae_rel 0.0213 > 0.01) |" in markdown


def test_html_report_has_the_accuracy_section_and_column(accuracy_file):
    page = render_html(sa.analyze(accuracy_file))
    assert '<h2 id="accuracy">Accuracy: each validated cell' in page
    assert "<th>accuracy</th>" in page
    assert "<td>FAIL (mae_rel 0.0213 &gt; 0.01)</td>" in page
    assert 'class="accuracy-failed"' in page
    assert "accuracy failed</div>" in page  # the counter card


def _with_verdict(src, dst, cell_id, kind) -> str:
    shutil.copyfile(src, dst)
    _plant(str(dst), cell_id, kind)
    return str(dst)


def test_compare_flags_passed_to_failed(accuracy_file, tmp_path):
    """The same timings, one cell's verdict passed -> failed: flagged, and the gate fails."""
    new = _with_verdict(accuracy_file, tmp_path / "new.h5", PASSED_INFER, "failed_infer")
    table = sa.regression_table(sa.load(accuracy_file), sa.load(new), sa.GateOptions())
    changed = table[table.accuracy_change != ""]
    assert list(changed.new_cell_id) == [PASSED_INFER]
    assert changed.accuracy_change.iloc[0] == "passed -> failed"
    assert changed.accuracy.iloc[0] == "passed -> FAIL (mae_rel 0.0213 > 0.01)"
    assert changed.verdict.iloc[0] == "inconclusive"  # one run per side
    unchanged = table.set_index("new_cell_id").loc[FAILED_INFER]
    assert unchanged.accuracy == "FAIL (mae_rel 0.0213 > 0.01)"
    assert unchanged.accuracy_change == ""

    done = run_cli("compare", accuracy_file, new, check_rc=1)
    label = sa.load(new).cell(PASSED_INFER).label
    flagged = [line for line in done.stdout.splitlines() if "accuracy: " in line]
    assert flagged == [f"  * accuracy: passed -> failed: {label}: FAIL (mae_rel 0.0213 > 0.01)"]
    assert "REGRESSION: 0 regression, 0 broke, 1 accuracy passed -> failed, 0 improvement" in (
        done.stdout
    )

    out = tmp_path / "gate.json"
    done = run_cli("compare", accuracy_file, new, "--format", "json", "-o", str(out), check_rc=1)
    assert done.stderr.startswith("REGRESSION: 0 regression, 0 broke, 1 accuracy")
    rows = json.loads(out.read_text())["sections"]["regressions"]
    assert [r["new_cell_id"] for r in rows if r["accuracy_change"]] == [PASSED_INFER]


def test_compare_flags_failed_to_passed_without_failing_the_gate(accuracy_file, tmp_path):
    new = _with_verdict(accuracy_file, tmp_path / "fixed.h5", FAILED_INFER, "passed_infer")
    done = run_cli("compare", accuracy_file, new, check_rc=0)
    label = sa.load(new).cell(FAILED_INFER).label
    flagged = [line for line in done.stdout.splitlines() if "accuracy: " in line]
    assert flagged == [f"  * accuracy: failed -> passed: {label}: passed"]
    assert "OK: 0 regression, 0 broke, 0 accuracy passed -> failed" in done.stdout


def test_compare_of_the_file_with_itself_flags_nothing(accuracy_file):
    done = run_cli("compare", accuracy_file, accuracy_file, check_rc=0)
    assert "accuracy: " not in done.stdout


def _verdict_unknown(group):
    group.attrs["verdict"] = mr._fixed_string("maybe")


def _checks_not_json(group):
    group.attrs["failed_checks"] = mr._fixed_string("[mae_rel")


def _mae_text(group):
    group.attrs["mae"] = mr._fixed_string("small")


def _no_verdict(group):
    del group.attrs["verdict"]


def _not_a_group(group):
    cell = group.parent
    del cell["accuracy"]
    cell.create_dataset("accuracy", data=np.zeros(3))


DAMAGE = {
    "verdict_unknown": (_verdict_unknown, "verdict 'maybe' is not one of passed, failed"),
    "checks_not_json": (_checks_not_json, "attribute 'failed_checks' is not valid JSON"),
    "mae_text": (_mae_text, "attribute 'mae' is not a number: 'small'"),
    "no_verdict": (_no_verdict, "no attribute 'verdict'"),
    "not_a_group": (_not_a_group, "'accuracy' is not a group"),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_damaged_accuracy_group_keeps_the_cell(kind, accuracy_file, tmp_path):
    path = tmp_path / f"{kind}.h5"
    shutil.copyfile(accuracy_file, path)
    damage, phrase = DAMAGE[kind]
    with h5py.File(path, "r+") as f:
        damage(f["cells"][FAILED_INFER]["accuracy"])

    results = sa.load(path)
    assert results.damaged == {}
    assert list(results.problems) == [FAILED_INFER]
    assert results.problems[FAILED_INFER] == f"accuracy group unreadable: {phrase}"
    cell = results.cell(FAILED_INFER)
    assert cell.status == "ok" and cell.median_s > 0
    assert pd.isna(cell.accuracy_verdict)
    cells = sa.analyze(results).sections["cells"].set_index("cell_id")
    assert cells.loc[FAILED_INFER, "accuracy"] == "unreadable"
    assert cells.loc[PASSED_INFER, "accuracy"] == "passed"

    done = run_cli("analyze", str(path), check_rc=0)
    assert "Traceback" not in done.stderr
    warnings = [line for line in done.stderr.splitlines() if FAILED_INFER in line]
    assert len(warnings) == 1 and phrase in warnings[0]
