"""Weak and strong scaling efficiency and communication share, recomputed from raw timings."""

import numpy as np
import pytest

import scalebench_analysis as sa


def _expected(raw):
    """{cell_id: (weak, strong)} from the definitions in docs/analysis-guide.md."""
    ok = raw.ok_cells()
    out = {}
    for cell in ok:
        config = cell.key("batch_size", "world_size", "samples")
        same = [c for c in ok if c.key("batch_size", "world_size", "samples") == config]
        b, w = cell.spec["batch_size"], cell.spec["world_size"]
        t = cell.throughput()
        weak_group = sorted(
            (c for c in same if c.spec["batch_size"] == b), key=lambda c: c.spec["world_size"]
        )
        g = b * w
        strong_group = sorted(
            (c for c in same if c.spec["batch_size"] * c.spec["world_size"] == g),
            key=lambda c: c.spec["world_size"],
        )
        weak = strong = np.nan
        if len(weak_group) > 1:
            ref = weak_group[0]
            w0 = ref.spec["world_size"]
            weak = (t / w) / (ref.throughput() / w0)
        if len(strong_group) > 1:
            ref = strong_group[0]
            w0 = ref.spec["world_size"]
            strong = t / ref.throughput() * w0 / w
        out[cell.cell_id] = (weak, strong)
    return out


def test_scaling_efficiencies(results_file, raw):
    analysis = sa.analyze(results_file)
    table = analysis.sections["scaling"].set_index("cell_id")
    expected = _expected(raw)
    assert set(table.index) == set(expected)
    checked = 0
    for cell_id, (weak, strong) in expected.items():
        row = table.loc[cell_id]
        for got, want in ((row.weak_efficiency, weak), (row.strong_efficiency, strong)):
            if np.isnan(want):
                assert np.isnan(got)
            else:
                assert got == pytest.approx(want, rel=1e-9)
                checked += 1
    assert checked > 0, "no cell pair to scale: the file needs world sizes 1 and 2"


def test_weak_scaling_w1_definition(results_file, raw):
    """With a world-size-1 reference the weak efficiency is T(b, w) / (w * T(b, 1))."""
    table = sa.analyze(results_file).sections["scaling"]
    rows = table[(table.world_size > 1) & (table.weak_reference_world == 1)]
    assert len(rows) > 0
    for row in rows.itertuples():
        cell = raw.cells[row.cell_id]
        ref = [
            c
            for c in raw.ok_cells()
            if c.key("batch_size", "world_size", "samples")
            == cell.key("batch_size", "world_size", "samples")
            and c.spec["batch_size"] == cell.spec["batch_size"]
            and c.spec["world_size"] == 1
        ]
        assert len(ref) == 1
        want = cell.throughput() / (row.world_size * ref[0].throughput())
        assert row.weak_efficiency == pytest.approx(want, rel=1e-9)


def test_comm_share(results_file, raw):
    table = sa.analyze(results_file).sections["scaling"].set_index("cell_id")
    seen = 0
    for cell in raw.ok_cells():
        if "comm_wait" not in cell.phases:
            assert np.isnan(table.loc[cell.cell_id].comm_share)
            continue
        want = np.nansum(cell.phase("comm_wait")) / np.nansum(cell.phase("step"))
        assert table.loc[cell.cell_id].comm_share == pytest.approx(want, rel=1e-9)
        seen += 1
    assert seen > 0


def test_throughput_in_summary_matches_raw(results_file, raw):
    cells = sa.load(results_file).cells.set_index("cell_id")
    for cell in raw.ok_cells():
        assert cells.loc[cell.cell_id].throughput_samples_per_s == pytest.approx(
            cell.throughput(), rel=1e-6
        )
