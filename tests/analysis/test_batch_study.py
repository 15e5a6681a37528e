"""The batch study (tables/batch.py Note [Batch study]): probes of `batch_size: auto` cells
(layout 1.4) and listed-batch groups, their figures, the executive summary, the plots.

The synthetic file plants two auto cells (make_results.plateau_search and
memory_bound_search); the figures below are computed by hand from their definitions."""

import html
import json
import shutil

import h5py
import numpy as np
import pandas as pd
import pytest

import scalebench_analysis as sa
from scalebench_analysis.output import plots
from scalebench_analysis.read.cells import BATCH_FIGURES
from scalebench_analysis.tables import batch

from conftest import run_cli

MIB, GIB = float(1 << 20), float(1 << 30)
PLATEAU = "main/mlp-auto/train/bauto:64/w1/fp32"
MEMORY_BOUND = "main/cnn-auto/train/bauto:48/w2/fp32"
LISTED_MEMORY_BOUND = "main/mlp-train/train/b*/w1/fp32"  # 16, 32 ok; 64 oom


@pytest.fixture(scope="module")
def analysis(results_file):
    return sa.analyze(results_file)


@pytest.fixture(scope="module")
def planted(synthetic):
    if not synthetic:
        pytest.skip("checks the figures planted in the synthetic file")


def _study(analysis, name):
    studies = analysis.batch_studies.set_index("study")
    return studies.loc[name]


def _points(analysis, name):
    curve = analysis.batch_curve
    return curve[curve.study == name].set_index("batch")


def test_probes_match_the_file(results_file, raw):
    results = sa.load(results_file)
    with h5py.File(results_file, "r") as f:
        stored = {
            cell_id: (g["probes"][()], g["probes"].attrs["status"], g["probe_times"][()])
            for cell_id, g in f["cells"].items()
            if "probes" in g
        }
    assert set(results.probes.cell_id) == set(stored)
    for cell_id, (values, status, times) in stored.items():
        rows = results.probes[results.probes.cell_id == cell_id]
        assert list(rows.probe) == list(range(len(values)))
        assert list(rows.status) == json.loads(status)
        columns = ["batch", "median_s", "p99_s", "throughput_samples_per_s", "peak_memory_bytes"]
        np.testing.assert_array_equal(rows[columns].to_numpy(), values)
        long = results.probe_times[results.probe_times.cell_id == cell_id]
        assert len(long) == np.isfinite(times).sum()
        probe, iteration = np.nonzero(np.isfinite(times))
        np.testing.assert_array_equal(long.time_s, times[probe, iteration])
        np.testing.assert_array_equal(long.batch, values[probe, 0].astype(int))


def test_batch_columns_of_the_cells_table(results_file, raw):
    cells = sa.load(results_file).cells.set_index("cell_id")
    for name in BATCH_FIGURES:
        assert cells[name].dtype == "Int64"
    for cell_id, cell in raw.cells.items():
        row = cells.loc[cell_id]
        assert row.batch_auto == (cell.spec["batch_size"] == 0)
        for name in BATCH_FIGURES:
            if name in cell.summary:
                assert row[name] == cell.summary[name]
            else:
                assert pd.isna(row[name])
        for name in ("energy_j", "samples_per_joule", "memory_budget_bytes"):
            want = cell.summary.get(name, np.nan)
            assert row[name] == pytest.approx(want, nan_ok=True)


def test_file_figures_planted(analysis, planted):
    want = {
        PLATEAU: (109, 110, 64, 32, 0, 64),
        MEMORY_BOUND: (54, 55, 54, 52, 54, 48),
    }
    for name, figures in want.items():
        study = _study(analysis, name)
        assert study.kind == "auto"
        assert tuple(study[list(BATCH_FIGURES)]) == figures
    assert _study(analysis, PLATEAU).batches == "1,2,4,8,16,32,64,128,96,112,104,108,110,109"
    assert _study(analysis, MEMORY_BOUND).memory_budget_mib == 1024.0
    assert _study(analysis, PLATEAU).memory_per_sample_mib == pytest.approx(4.5)


def test_throughput_speedup_latency_and_memory_efficiency(analysis, planted):
    # plateau: step (0.002 + 0.001 b)(1 + 0.0005 max(0, b - 64)) s, memory (20 + 4.5 b) MiB
    a = _points(analysis, PLATEAU)
    assert a.loc[64].throughput_samples_per_s == pytest.approx(64 / 0.066)
    assert a.loc[64].speedup == pytest.approx((64 / 0.066) / (1 / 0.003))
    assert a.loc[64].per_sample_latency_s == pytest.approx(0.066 / 64)
    assert a.loc[64].peak_memory_mib == pytest.approx(308.0)
    assert a.loc[64].samples_per_s_per_gib == pytest.approx((64 / 0.066) / (308 * MIB / GIB))
    step_96 = 0.098 * (1 + 0.0005 * 32)
    assert a.loc[96].throughput_samples_per_s == pytest.approx(96 / step_96)
    assert a.loc[96].per_sample_latency_s == pytest.approx(step_96 / 96)
    # probes that did not fit: no throughput, speedup or efficiency; oom: no time either
    assert a.loc[128].status == "over_budget" and np.isnan(a.loc[128].throughput_samples_per_s)
    assert np.isnan(a.loc[128].speedup) and np.isnan(a.loc[128].samples_per_s_per_gib)
    assert a.loc[128].per_sample_latency_s == pytest.approx(0.130 * (1 + 0.0005 * 64) / 128)
    assert a.loc[112].status == "oom" and np.isnan(a.loc[112].per_sample_latency_s)
    # memory-bound: 2 workers, step 0.02 + 0.0002 b s, memory (64 + 17.5 b) MiB
    b = _points(analysis, MEMORY_BOUND)
    assert b.loc[48].throughput_samples_per_s == pytest.approx(96 / 0.0296)
    assert b.loc[48].speedup == pytest.approx((96 / 0.0296) / (8 / 0.0208))
    assert b.loc[48].per_sample_latency_s == pytest.approx(0.0296 / 48)
    assert b.loc[48].samples_per_s_per_gib == pytest.approx((96 / 0.0296) / (904 * MIB / GIB))
    study = _study(analysis, MEMORY_BOUND)
    assert study.recommended_throughput == pytest.approx(96 / 0.0296)
    assert study.recommended_speedup == pytest.approx((96 / 0.0296) / (8 / 0.0208))
    assert study.recommended_memory_mib == pytest.approx(904.0)


def test_bottlenecks(analysis, planted):
    assert _study(analysis, PLATEAU).bottleneck == batch.PLATEAU
    assert _study(analysis, MEMORY_BOUND).bottleneck == batch.MEMORY
    listed = _study(analysis, LISTED_MEMORY_BOUND)
    assert listed.kind == "listed"
    assert (listed.max_batch_ok, listed.oom_batch, listed.best_batch) == (32, 64, 32)
    assert listed.bottleneck == batch.MEMORY


def test_listed_groups_follow_the_batch_table(analysis, raw):
    """A listed group's best / knee / boundary are the `batch` table's (trusted ok cells),
    its speedup the throughput over the smallest batch's."""
    table = analysis.sections["batch"]
    for study in analysis.batch_studies[analysis.batch_studies.kind == "listed"].itertuples():
        batches = sorted(int(b) for b in study.batches.split(","))
        # the table lists every batch of the curve (skipped, failed too), the study ok / oom
        match = table[[set(batches) <= {int(b) for b in t.split(",")} for t in table.batches]]
        match = match[
            (match.experiment == study.experiment)
            & (match["mode"] == study.mode)
            & (match.branch == study.branch)
            & (match.world_size == study.world_size)
            & (match.precision == study.precision)
            & (match.setting == study.setting)
        ]
        assert len(match) == 1
        row = match.iloc[0]
        assert study.best_batch == (0 if np.isnan(row.best_batch) else row.best_batch)
        assert study.knee_batch == (0 if np.isnan(row.knee_batch) else row.knee_batch)
        points = _points(analysis, study.study)
        ok = points[points.status == "ok"]
        smallest = ok.loc[ok.index.min()].throughput_samples_per_s
        for batch_size, point in ok.iterrows():
            cell = raw.cells[point.cell_id]
            assert point.throughput_samples_per_s == pytest.approx(cell.throughput(), rel=1e-9)
            assert point.speedup == pytest.approx(point.throughput_samples_per_s / smallest)
            assert point.per_sample_latency_s == pytest.approx(
                float(np.median(cell.samples())) / batch_size, rel=1e-9
            )


def test_figures_are_read_not_recomputed(results_file, tmp_path, planted):
    cell_id = next(
        c.cell_id for c in sa.load(results_file).cells.itertuples() if c.label == PLATEAU
    )
    path = tmp_path / "planted.h5"
    shutil.copyfile(results_file, path)
    with h5py.File(path, "r+") as f:
        f["cells"][cell_id]["summary"].attrs["knee_batch"] = np.int64(16)
    study = _study(sa.analyze(str(path)), PLATEAU)
    assert study.knee_batch == 16


def test_markdown_executive_summary(results_file, planted):
    text = run_cli("analyze", results_file, "--format", "markdown", check_rc=0).stdout
    assert "## Batch size: executive summary" in text
    sections = {part.split("\n", 1)[0]: part for part in text.split("### ")[1:]}
    plateau = sections[f"`{PLATEAU}` (batch_size auto)"]
    speedup = (64 / 0.066) / (1 / 0.003)
    for needle in (
        "**Recommended batch: 64**",
        f"{64 / 0.066:,.1f} samples/s",
        f"{speedup:.2f}x the smallest batch (1)",
        "peak memory 308.0 MiB of a 512.0 MiB budget",
        "batch 109 fits, 110 does not",
        "Best throughput at batch 64; knee at 32",
        "**Bottleneck: throughput plateau**",
    ):
        assert needle in plateau, needle
    assert "memory**" not in plateau
    bound = sections[f"`{MEMORY_BOUND}` (batch_size auto)"]
    speedup = (96 / 0.0296) / (8 / 0.0208)
    for needle in (
        "**Recommended batch: 48**",
        f"{96 / 0.0296:,.1f} samples/s",
        f"{speedup:.2f}x the smallest batch (4)",
        "peak memory 904.0 MiB of a 1,024.0 MiB budget",
        "batch 54 fits, 55 does not",
        "knee at 52",
        "latency SLO met up to batch 54",
        "**Bottleneck: memory**",
    ):
        assert needle in bound, needle
    listed = sections[f"`{LISTED_MEMORY_BOUND}` (batches 16, 32, 64)"]
    assert "**Bottleneck: memory**" in listed and "batch 32 fits, 64 does not" in listed
    # the tables follow, the study's among them
    assert "## Batch study" in text and "## Cells" in text


def test_plots_option_writes_every_plot(results_file, tmp_path):
    directory = tmp_path / "plots" / "nested"
    done = run_cli("analyze", results_file, "--plots", str(directory), "-o", str(tmp_path / "t"))
    assert done.returncode == 0, done.stderr
    written = sorted(p.name for p in directory.iterdir())
    analysis = sa.analyze(results_file)
    want = sorted(
        f"{key}.png"
        for key, _title, function in plots.PLOTS + plots.REPETITION_PLOTS + plots.BATCH_PLOTS
        if function(analysis) is not None
    )
    assert written == want
    if len(analysis.batch_studies):
        assert {f"{key}.png" for key, _t, _f in plots.BATCH_PLOTS} <= set(written)
    for name in written:
        data = (directory / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000


def test_damaged_probes_keep_the_cell(results_file, tmp_path, planted):
    path = tmp_path / "damaged.h5"
    shutil.copyfile(results_file, path)
    results = sa.load(results_file)
    cell_id = results.cells.set_index("label").loc[PLATEAU].cell_id
    with h5py.File(path, "r+") as f:
        f["cells"][cell_id]["probes"].attrs["status"] = '["ok"]'
    damaged = sa.load(path)
    assert cell_id not in damaged.damaged
    assert damaged.problems[cell_id].startswith("probes unreadable: 'probes' status")
    assert cell_id not in set(damaged.probes.cell_id)
    assert len(damaged.probes) == len(results.probes) - 14
    done = run_cli("analyze", str(path), "-o", str(tmp_path / "out.txt"), check_rc=0)
    assert "its batch search is left out" in done.stderr


def test_file_without_auto_cells(results_file, tmp_path):
    """A file before layout 1.4: no probes, no batch figures; the columns are there, empty."""
    path = tmp_path / "old.h5"
    shutil.copyfile(results_file, path)
    with h5py.File(path, "r+") as f:
        for cell_id in list(f["cells"]):
            group = f["cells"][cell_id]
            if json.loads(group.attrs["spec"])["batch_size"] == 0:
                del f["cells"][cell_id]
            elif "summary" in group:
                for name in ("batch_size", "energy_j", "samples_per_joule"):
                    if name in group["summary"].attrs:
                        del group["summary"].attrs[name]
    results = sa.load(path)
    assert results.probes.empty and results.probe_times.empty
    assert list(results.probes.columns[:4]) == ["cell_id", "probe", "batch", "status"]
    assert results.cells.recommended_batch.isna().all()
    assert results.cells.energy_j.isna().all()
    assert not results.cells.batch_auto.any()
    studies = sa.analyze(results).batch_studies
    assert (studies.kind == "listed").all()


def test_html_has_the_batch_section(results_file, tmp_path):
    path = tmp_path / "report.html"
    run_cli("report", results_file, "-o", str(path), check_rc=0)
    text = path.read_text()
    analysis = sa.analyze(results_file)
    if not len(analysis.batch_studies):
        assert 'id="batch-size"' not in text
        return
    assert '<h2 id="batch-size">Batch size</h2>' in text
    for _key, title, _function in plots.BATCH_PLOTS:
        assert f"<h3>{title.replace('/', '/')}</h3>" in text
    assert "<b>Bottleneck:" in text
    # Each study's heading is its `study` in <code> (issue 38: the tag was escaped and shown).
    for study in analysis.batch_studies.study:
        assert f"<h3><code>{html.escape(study)}</code>" in text, study
    assert "&lt;code&gt;" not in text
