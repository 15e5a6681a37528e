"""MFU on a GPU, against a hand computation (docs/metrics.md#mfu): the results file of
tests/gpu/mfu_matmul.yaml (the zoo mlp widened to three bf16 matrix products of known FLOPs,
run by tests/gpu/device_check.sh, which names it in SCALEBENCH_GPU_MFU_FILE; without it these
tests are skipped, as on every machine without a GPU).

Checked: the FLOPs the worker stored equal the matrix products' 2 x m x n x k counted by hand
and by torch.utils.flop_counter on the same layers; the analysis's achieved FLOP/s and MFU
equal FLOPs x throughput over the datasheet peak of the cell's GPU in bf16; and MFU lies in
(0, 1].
"""

from __future__ import annotations

import os

import pytest

from scalebench_analysis.read.loader import load
from scalebench_analysis.tables import mfu

IN, HIDDEN, OUT = 4096, 512, 4096  # tests/gpu/mfu_matmul.yaml; worker/models/mlp.cc
FORWARD_FLOPS = 2 * (IN * HIDDEN + HIDDEN * HIDDEN + HIDDEN * OUT)


@pytest.fixture(scope="module")
def results():
    path = os.environ.get("SCALEBENCH_GPU_MFU_FILE")
    if not path:
        pytest.skip("needs a GPU run of tests/gpu/mfu_matmul.yaml: SCALEBENCH_GPU_MFU_FILE")
    return load(path)


def test_the_stored_flops_are_the_matrix_products_counted_by_hand_and_by_torch(results):
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    layers = torch.nn.Sequential(
        torch.nn.Linear(IN, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, OUT),
    ).to("meta")
    with FlopCounterMode(display=False) as counter:
        layers(torch.empty(1, IN, device="meta"))
    assert counter.get_total_flops() == FORWARD_FLOPS
    table = mfu.mfu_table(results).set_index("cell_id")
    assert len(table) == 2, "one inference and one training cell, both ok"
    for cell in results.cells.itertuples():
        factor = 3 if cell.mode == "train" else 1  # backward = 2 x forward (PaLM)
        assert table.loc[cell.cell_id].flops_per_sample == factor * FORWARD_FLOPS


def test_mfu_is_the_achieved_flops_over_the_gpus_bf16_peak(results):
    table = mfu.mfu_table(results).set_index("cell_id")
    for cell in results.cells.itertuples():
        row = table.loc[cell.cell_id]
        assert cell.status == "ok"
        assert "H100" in row.device or "H200" in row.device, row.device
        peak = mfu.peak_for(row.device, "bf16", mfu.default_peaks())
        achieved = row.flops_per_sample * cell.throughput_samples_per_s
        assert row.precision_used == "bf16"
        assert row.achieved_tflops == pytest.approx(achieved / 1e12, rel=1e-12)
        assert row.peak_tflops == pytest.approx(peak / 1e12, rel=1e-12)
        assert row.mfu == pytest.approx(achieved / peak, rel=1e-12)
        assert 0 < row.mfu <= 1, f"{cell.mode}: MFU {row.mfu:.3f} outside (0, 1]"
        print(
            f"{cell.mode}: {row.device}, {achieved / 1e12:.1f} TFLOP/s of "
            f"{peak / 1e12:.1f}: MFU {row.mfu:.3f}"
        )
