"""Model FLOPs utilisation (tables/mfu.py, docs/metrics.md#mfu): the peak table's lookup, the
user's additions, and the figures of a synthetic file whose cells ran on named GPUs,
against a hand computation."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

from scalebench_analysis.errors import UsageError
from scalebench_analysis.read.loader import load
from scalebench_analysis.tables import mfu

import make_results
from conftest import run_cli


def test_the_longest_matching_device_key_gives_the_peak_of_the_precision():
    peaks = mfu.default_peaks()
    assert mfu.peak_for("NVIDIA H100 80GB HBM3", "bf16", peaks) == 989.4e12
    assert mfu.peak_for("NVIDIA H100 PCIe", "bf16", peaks) == 756.5e12
    assert mfu.peak_for("NVIDIA H200", "tf32", peaks) == 494.7e12
    assert mfu.peak_for("NVIDIA A100-SXM4-80GB", "fp32", peaks) == 19.5e12
    assert mfu.peak_for("NVIDIA GeForce RTX 4090", "fp16", peaks) == 165.2e12
    assert math.isnan(mfu.peak_for("NVIDIA B200", "bf16", peaks)), "never guessed"
    assert math.isnan(mfu.peak_for("cpu", "fp32", peaks))
    for entry in peaks.values():
        assert entry["source"], "every figure names its source"


def test_the_users_table_adds_devices_and_a_bad_one_is_refused(tmp_path):
    good = tmp_path / "peaks.json"
    good.write_text(json.dumps({"devices": {"B200": {"bf16": 2.25e15, "source": "mine"}}}))
    peaks = mfu.load_peaks(str(good))
    assert mfu.peak_for("NVIDIA B200", "bf16", peaks) == 2.25e15
    assert mfu.peak_for("NVIDIA H200", "bf16", peaks) == 989.4e12
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"devices": {"B200": {"bf16": "fast"}}}))
    with pytest.raises(UsageError, match="'B200'.*bf16"):
        mfu.load_peaks(str(bad))
    with pytest.raises(UsageError, match="expected"):
        bad.write_text("[]")
        mfu.load_peaks(str(bad))


def _plant(path, cell_id: str, device: str, flops: float, effective: dict) -> None:
    """Gives a cell of the synthetic file a GPU's name, its model FLOPs and effective values."""
    with h5py.File(path, "r+") as f:
        group = f["cells"][cell_id]
        metrics = group["rank_metrics"]
        names = json.loads(metrics.attrs["names"]) + ["flops_per_sample", "train_flops_per_sample"]
        values = np.concatenate([metrics[()], np.full((metrics.shape[0], 2), flops)], axis=1)
        values[:, -1] = 3 * flops
        del group["rank_metrics"]
        group.create_dataset("rank_metrics", data=values).attrs["names"] = json.dumps(names)
        world = values.shape[0]
        del group["rank_devices"]
        group.create_dataset(
            "rank_devices", data=[device] * world, dtype=h5py.string_dtype("utf-8")
        )
        for key, value in effective.items():
            group.attrs[f"effective_{key}"] = value


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("mfu") / "results.h5")
    make_results.write_results(path)
    cells = load(path).cells
    ok = cells[cells.status == "ok"]
    train = ok[ok["mode"] == "train"].iloc[0]
    infer = ok[ok["mode"] == "infer"].iloc[0]
    _plant(path, train.cell_id, "NVIDIA H100 80GB HBM3", 1.0e9, {"precision": "bf16"})
    _plant(path, infer.cell_id, "cpu", 2.0e9, {})
    return path, train, infer


def test_mfu_of_a_gpu_cell_is_achieved_over_the_peak_of_its_precision(planted):
    path, train, infer = planted
    table = mfu.mfu_table(load(path)).set_index("cell_id")
    assert set(table.index) == {train.cell_id, infer.cell_id}, "cells without FLOPs: no row"
    row = table.loc[train.cell_id]
    achieved = 3.0e9 * train.throughput_samples_per_s  # training: 3 x forward
    assert row.precision_used == "bf16"
    assert row.achieved_tflops == pytest.approx(achieved / 1e12)
    assert row.peak_tflops == pytest.approx(989.4 * train.world_size)
    assert row.mfu == pytest.approx(achieved / (989.4e12 * train.world_size))
    cpu = table.loc[infer.cell_id]
    assert cpu.achieved_tflops == pytest.approx(2.0e9 * infer.throughput_samples_per_s / 1e12)
    assert math.isnan(cpu.mfu) and math.isnan(cpu.peak_tflops), "CPU: achieved FLOP/s only"


def test_analyze_shows_the_section_and_reads_the_users_table(planted, tmp_path):
    path, _, _ = planted
    out = run_cli("analyze", path, "--details", check_rc=0)
    assert "Model FLOPs utilisation" in out.stdout
    bad = tmp_path / "peaks.json"
    bad.write_text("{")
    refused = run_cli("analyze", path, "--peak-flops", str(bad))
    assert refused.returncode == 2 and "--peak-flops" in refused.stderr


@pytest.mark.skipif(
    not os.environ.get("SCALEBENCH_BUILD_DIR"), reason="needs SCALEBENCH_BUILD_DIR (a build)"
)
def test_scalebench_info_shows_the_analysis_mfu(planted):
    """`scalebench info` (C++, the same peak table compiled in) gives the analysis's figures."""
    path, train, infer = planted
    binary = str(Path(os.environ["SCALEBENCH_BUILD_DIR"]) / "bin" / "scalebench")
    shown = subprocess.run(
        [binary, "info", path, "--format", "json"], capture_output=True, text=True
    )
    cells = {c["cell_id"]: c for c in json.loads(shown.stdout)["cells"]}
    table = mfu.mfu_table(load(path)).set_index("cell_id")
    gpu = cells[train.cell_id]["mfu"]
    assert gpu["device"] == "NVIDIA H100 80GB HBM3" and gpu["precision_used"] == "bf16"
    assert gpu["achieved_tflops"] == pytest.approx(table.loc[train.cell_id].achieved_tflops)
    assert gpu["peak_tflops"] == pytest.approx(table.loc[train.cell_id].peak_tflops)
    assert gpu["mfu"] == pytest.approx(table.loc[train.cell_id].mfu)
    cpu = cells[infer.cell_id]["mfu"]
    assert cpu["achieved_tflops"] == pytest.approx(table.loc[infer.cell_id].achieved_tflops)
    assert cpu["mfu"] is None and cpu["peak_tflops"] is None
    text = subprocess.run([binary, "info", path], capture_output=True, text=True).stdout
    assert "# MFU: model FLOP/s over the dense peak" in text
    assert f"NVIDIA H100 80GB HBM3 bf16: {gpu['achieved_tflops']:.2f} TFLOP/s" in text
