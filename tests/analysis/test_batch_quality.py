"""Batch-size picks, stragglers and untrusted cells, recomputed from raw timings."""

import numpy as np
import pytest

import scalebench_analysis as sa

MAX_DRIFT = 0.10


def _trusted(cell):
    """The file's verdict (valid: enough samples, cv, replicas in sync; test_summary.py
    checks it against the timings) and the warm-up drift, recomputed from raw timings. An
    `iterations: auto` cell (docs/measurement.md) is judged by its stop instead of its cv:
    trusted when it stopped `precise`."""
    series = cell.phase("step" if cell.mode == "train" else "batch")
    series = series[:, np.isfinite(series).any(axis=0)]
    series = np.nanmax(series, axis=0) if cell.mode == "train" else np.nanmean(series, axis=0)
    half = series.size // 2
    drift = np.median(series[:half]) / np.median(series[-half:]) - 1 if half >= 2 else 0.0
    s = cell.summary
    if s.get("stop_reason") in ("precise", "budget", "cap"):
        verdict = (
            bool(s["valid_enough_iterations"])
            and bool(s["valid_replicas_in_sync"])
            and s["stop_reason"] == "precise"
        )
    else:
        verdict = bool(s["valid"])
    return verdict and abs(drift) <= MAX_DRIFT


def test_untrusted_cells(results_file, raw, synthetic):
    trust = sa.analyze(results_file).sections["cells"].set_index("cell_id")
    for cell in raw.ok_cells():
        assert bool(trust.loc[cell.cell_id].trusted) == _trusted(cell), cell.cell_id
    if synthetic:
        labels = set(trust[trust.trusted == False].label)  # noqa: E712
        assert labels == {
            "feature/mlp-train/train/b32/w1/fp32",  # noisy
            "main/mlp-infer/infer/b16/w1/fp32",
        }  # warm-up drift


def _curves(raw):
    curves = {}
    for cell in raw.cells.values():
        curves.setdefault(cell.key("batch_size", "samples"), []).append(cell)
    return curves


@pytest.mark.parametrize("slo_quantile", [0.5])
def test_best_knee_slo_and_oom(results_file, raw, synthetic, slo_quantile):
    ok_p99 = [np.percentile(c.samples(), 99) * 1e3 for c in raw.ok_cells()]
    slo_ms = float(np.quantile(ok_p99, slo_quantile))
    analysis = sa.analyze(results_file, sa.AnalysisOptions(slo_p99_ms=slo_ms))
    table = analysis.sections["batch"]
    assert len(table) == len(_curves(raw))
    found_oom = False
    for cells in _curves(raw).values():
        first = cells[0]
        row = table[
            (table.branch == first.spec["branch"])
            & (table.experiment == first.spec["experiment"])
            & (table["mode"] == first.mode)
            & (table.precision == first.spec["precision"])
            & (table.world_size == first.spec["world_size"])
        ]
        if len(row) != 1:  # several settings share these columns: match by batches instead
            continue
        row = row.iloc[0]
        good = [c for c in cells if c.ok and _trusted(c)]
        if good:
            best = max(good, key=lambda c: c.throughput())
            assert row.best_batch == best.batch
            near = [c.batch for c in good if c.throughput() >= 0.95 * best.throughput()]
            assert row.knee_batch == min(near)
            meeting = [c.batch for c in good if np.percentile(c.samples(), 99) * 1e3 <= slo_ms]
            assert (row.slo_batch == max(meeting)) if meeting else np.isnan(row.slo_batch)
        else:
            assert np.isnan(row.best_batch)
        oom = [c.batch for c in cells if c.attrs["status"] == "oom"]
        if oom:
            found_oom = True
            assert row.oom_batch == min(oom)
        else:
            assert np.isnan(row.oom_batch)
    if synthetic:
        assert found_oom


def test_stragglers(results_file, raw, synthetic):
    table = sa.analyze(results_file).sections["stragglers"]
    expected = set()
    for cell in raw.ok_cells():
        if cell.spec["world_size"] < 2:
            continue
        if cell.mode == "train":
            busy = cell.phase("step") - cell.phase("comm_wait")
        else:
            busy = cell.phase("batch")
        medians = np.array([np.nanmedian(r) for r in busy])
        for rank, median in enumerate(medians):
            others = np.median(np.delete(medians, rank))
            row = table[(table.cell_id == cell.cell_id) & (table["rank"] == rank)].iloc[0]
            assert row.excess == pytest.approx(median / others - 1, rel=1e-9)
            if median > 1.10 * others:
                expected.add((cell.cell_id, rank))
    got = {(r.cell_id, r.rank) for r in table[table.straggler].itertuples()}
    assert got == expected
    if synthetic:
        assert [raw.cells[c].attrs["mode"] for c, _ in got] == ["train"]
        assert [r for _, r in got] == [1]
