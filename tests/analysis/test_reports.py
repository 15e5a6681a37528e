"""Every report format, and the HTML page rendered by headless chromium."""

import csv
import io
import json
import shutil
import subprocess

import numpy as np
import pytest

import results_edits
from conftest import run_cli


def test_console_table(results_file, raw):
    """Every table with --details (without: test_console.py)."""
    out = run_cli("analyze", results_file, "--details", check_rc=0).stdout
    for title in ("== Cells ==", "== Batch size ==", "== Straggler ranks ==", "== Scaling"):
        assert title in out
    cell = raw.ok_cells()[0]
    assert f"{cell.throughput():,.1f}" in out


def test_csv(results_file, raw, tmp_path):
    path = tmp_path / "cells.csv"
    run_cli("analyze", results_file, "--format", "csv", "-o", str(path), check_rc=0)
    rows = {r["cell_id"]: r for r in csv.DictReader(io.StringIO(path.read_text()))}
    assert set(rows) == set(raw.cells)
    for cell in raw.ok_cells():
        assert float(rows[cell.cell_id]["throughput_samples_per_s"]) == pytest.approx(
            cell.throughput(), rel=1e-9
        )
    scaling = run_cli(
        "analyze", results_file, "--format", "csv", "--table", "scaling", check_rc=0
    ).stdout
    assert scaling.splitlines()[0].count("weak_efficiency") == 1


def test_json(results_file, raw):
    document = json.loads(run_cli("analyze", results_file, "--format", "json", check_rc=0).stdout)
    assert document["layout_version"].startswith("1.")
    sections = document["sections"]
    assert {"overview", "cells", "scaling", "batch", "stragglers"} <= set(sections)
    cells = {r["cell_id"]: r for r in sections["cells"]}
    for cell in raw.ok_cells():
        assert cells[cell.cell_id]["p99_ms"] == pytest.approx(
            np.percentile(cell.samples(), 99) * 1e3, rel=1e-9
        )
    for cell in raw.cells.values():
        # A failed cell has no figures, unless it kept its timings (an `oom` judged by
        # memory_limit_mb after the loop has datasets and a summary).
        if not cell.ok and cell.timings is None:
            assert cells[cell.cell_id]["throughput_samples_per_s"] is None


def test_markdown(results_file, raw, tmp_path):
    path = tmp_path / "analysis.md"
    run_cli("analyze", results_file, "--format", "markdown", "-o", str(path), check_rc=0)
    text = path.read_text()
    assert text.startswith("# scalebench analysis")
    for title in ("## Cells", "## Batch size", "## Straggler ranks"):
        assert title in text
    table_lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(table_lines) >= len(raw.cells) + 1


@pytest.fixture(scope="module")
def html_report(results_file, raw, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    victim = max(raw.ok_cells(), key=lambda c: c.samples().size)
    base = results_edits.copy_with_slowdown(results_file, tmp / "base.h5", victim.cell_id, 1.10)
    path = tmp / "report.html"
    run_cli("report", results_file, "-o", str(path), "--baseline-file", base, check_rc=0)
    return path


def test_html_is_self_contained(html_report, synthetic):
    text = html_report.read_text()
    assert text.count("data:image/png;base64,") >= 4
    if synthetic:  # auto cells and listed-batch groups: the batch study (test_batch_study.py)
        assert '<h2 id="batch-size">Batch size</h2>' in text
        assert "Throughput against batch: knee, best, recommended, boundary" in text
        # No cell of the synthetic file was profiled (test_ops.py: a file with profiles).
        assert "Operators of the profiled cells" not in text
    for needle in ("http://", "https://", "<script src", "<link "):
        assert needle not in text
    for title in (
        "Throughput against batch size",
        "Phase breakdown",
        "Latency distribution",
        "Regression gate",
        "Regression test against the baseline file",
    ):
        assert title in text


def test_html_renders_in_headless_chromium(html_report, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (setup.sh test installs it)")
    from PIL import Image

    shot = tmp_path / "out.png"
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--screenshot={shot}",
            "--window-size=1280,2000",
            f"file://{html_report}",
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 2000)
    pixels = np.asarray(image).reshape(-1, 3)
    colors = np.unique(pixels, axis=0)
    assert len(colors) > 200, "screenshot looks blank"
    non_white = np.any(pixels < 240, axis=1).mean()
    assert non_white > 0.03, f"only {non_white:.1%} of the page is drawn"
