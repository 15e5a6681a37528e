"""The projection in the report and in `scalebench project`'s names (issue 51): the report's
projection section (projection/report_section.py) holds the projected step and efficiency
beside the measured cells, or says why it is empty; curves are named by their cells'
labels, with no placeholder for a missing branch; the forward phase growing between the
fit worlds is reported as contention (docs/projection.md#a-real-run-on-two-cores)."""

from __future__ import annotations

import numpy as np
import pytest

import projection_files as pf
from scalebench_analysis.projection.model import ProjectionOptions
from scalebench_analysis.projection.project import project
from scalebench_analysis.projection.report_section import projection_section, report_workers
from scalebench_analysis.read.loader import load
from scalebench_analysis.tables.analysis import analyze

from conftest import run_cli


@pytest.mark.parametrize(
    "worlds, expected",
    [((1,), (1, 2, 4)), ((1, 2), (1, 2, 4, 8)), ((1, 2, 3), (1, 2, 3, 4, 8, 12))],
)
def test_the_report_projects_to_four_times_the_largest_world(worlds, expected):
    assert report_workers(worlds) == expected


def test_the_report_section_has_the_projected_curve_and_the_measured_points(tmp_path):
    path = pf.write_law_file(tmp_path / "law.h5", worlds=(1, 2, 4))
    section = projection_section(analyze(path))
    assert section.why is None and section.plot
    table = section.table
    assert list(table.workers) == [1, 2, 4, 8, 16]
    assert set(table.curve) == {"main/law/train/fp32"}
    # the measured worlds are inputs here: their error is ~0 on the law; 8, 16 projected only
    measured = table[table.measured_ms != "-"]
    assert list(measured.workers) == [1, 2, 4]
    assert all(abs(float(e.rstrip("%"))) < 0.5 for e in measured.error)
    assert (table[table.workers > 4].measured_ms == "-").all()
    page = tmp_path / "r.html"
    run_cli("report", path, "-o", str(page), check_rc=0)
    text = page.read_text()
    start = text.index('id="projection"')
    body = text[start : text.index("<h2", start + 10)]
    assert "data:image/png;base64," in body and "main/law/train/fp32" in body
    assert "projection-empty" not in body


def test_the_report_section_says_why_it_is_empty(tmp_path):
    """World 1 alone and no probe: no communication fit, so no step beyond one worker; the
    section says so with what to run."""
    path = pf.write_law_file(tmp_path / "one.h5", worlds=(1,))
    section = projection_section(analyze(path))
    assert section.plot is None and "communication could not be fitted" in section.why
    assert any("scalebench probe" in note for note in section.notes)
    page = tmp_path / "r.html"
    run_cli("report", path, "-o", str(page), check_rc=0)
    text = page.read_text()
    assert 'id="projection-empty"' in text and "Not projected: no projected step" in text


def test_a_file_without_trained_cells_has_no_projection_section(tmp_path):
    path = pf.write_law_file(tmp_path / "law.h5", worlds=(1, 2), infer=True)
    results = load(path)
    trained = results.cells["mode"] == "train"
    assert trained.any()  # the law file trains; drop its training cells from the analysis
    analysis = analyze(path)
    analysis.results.cells = results.cells[~trained].reset_index(drop=True)
    assert projection_section(analysis) is None


def test_curves_are_named_by_their_labels_without_a_branch_placeholder(tmp_path):
    path = pf.write_law_file(tmp_path / "nobranch.h5", worlds=(1, 2, 4), branch="")
    labels = load(path).cells.label
    assert labels.str.startswith("law/train/").all()
    result = project(path, [], ProjectionOptions((4, 8)))
    assert set(result.rows.curve) == {"law/train/fp32"}
    out = run_cli("project", path, "--workers", "4,8", check_rc=0).stdout
    assert "-/" not in out and "law/train/fp32" in out
    with_branch = pf.write_law_file(tmp_path / "main.h5", worlds=(1, 2))
    assert set(project(with_branch, [], ProjectionOptions((4,))).rows.curve) == {
        "main/law/train/fp32"
    }


def test_a_projection_fitted_on_world_one_without_a_probe_prints(tmp_path):
    """No link can be fitted: the console shows the rows without a step, and what is
    missing, rather than failing on the columns it lacks."""
    path = pf.write_law_file(tmp_path / "law.h5", worlds=(1, 2))
    out = run_cli("project", path, "--workers", "2,4", "--fit-max-world", "1", check_rc=0)
    assert "training: projected step" in out.stdout and "no probe" in out.stdout


def test_forward_slowing_with_the_world_is_reported_as_contention(tmp_path, intra_probe_law):
    slowed = pf.write_law_file(tmp_path / "slow.h5", worlds=(1, 2), forward_factor={2: 1.5})
    notes = project(slowed, [intra_probe_law], ProjectionOptions((4,))).missing
    found = [n for n in notes if "contend" in n]
    assert len(found) == 1 and "1.50x slower at 2 workers than at 1" in found[0]
    steady = pf.write_law_file(tmp_path / "steady.h5", worlds=(1, 2))
    assert not [n for n in project(steady, [], ProjectionOptions((4,))).missing if "contend" in n]
    # the slowed compute of the fit world is what the projection carries forward
    rows = project(slowed, [intra_probe_law], ProjectionOptions((4,))).rows
    assert np.isclose(rows.forward_s.iloc[0], 1.5 * pf.PHASES_S["forward"], rtol=0.05)


@pytest.fixture
def intra_probe_law(tmp_path) -> str:
    return pf.write_law_probe(tmp_path / "intra.h5", pf.INTRA, 2)
