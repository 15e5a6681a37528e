"""Compilation as an axis, on a real run (docs/optimizations.md#compilation): the results
file of docs/examples/compile_axis.yaml (tests/run_all.sh names it in
SCALEBENCH_COMPILE_FILE; without it these tests are skipped).

Checked with h5py and the analysis: every cell ran; the TorchScript and AOTInductor twins,
exported by rank 0 from the eager model's weights, give the eager cell's outputs on the same
samples (output_checksum) and pass validation against the eager model in fp32; the AOTInductor
cells record bf16 as ineffective; the ablation shows the compile axis.
"""

from __future__ import annotations

import json

import h5py
import pytest

import rawdata
from conftest import real_file


@pytest.fixture(scope="module")
def compile_file() -> str:
    return real_file("SCALEBENCH_COMPILE_FILE")


@pytest.fixture(scope="module")
def cells(compile_file):
    """{(experiment, compile, precision, world): {status, reason, model, metrics, accuracy,
    ineffective}} read with h5py alone (tests/analysis/rawdata.py)."""
    out = {}
    raw = rawdata.read(compile_file)
    with h5py.File(compile_file, "r") as f:
        for cell in raw.cells.values():
            spec = cell.spec
            key = (spec["experiment"], spec.get("compile", "eager"), spec["precision"])
            key += (spec["world_size"],)
            assert key not in out, key
            group = f["cells"][cell.cell_id]
            accuracy = {}
            if "accuracy" in group:
                accuracy = {k: rawdata.text(v) for k, v in group["accuracy"].attrs.items()}
            out[key] = {
                "status": cell.attrs["status"],
                "reason": cell.attrs["reason"],
                "model": cell.attrs["model"],
                "metrics": cell.rank_metrics,
                "accuracy": accuracy,
                "ineffective": json.loads(cell.attrs.get("ineffective_reasons", "[]")),
            }
    return out


TWINS = {
    "mlp": ("torchscript", "aoti"),
    "resnet18-32px": ("torchscript",),
    "unet3d-16": ("torchscript",),
    "transformer-16": ("torchscript",),
}


def test_every_cell_ran(cells):
    assert len(cells) == 12 + 2 + 2 + 2, sorted(cells)
    for key, cell in cells.items():
        assert cell["status"] == "ok", (key, cell["reason"])


def test_each_twin_computes_what_the_eager_model_computes(cells):
    """Same weights (rank 0 exported the twin from the eager model's state), same samples:
    the sums of the outputs agree to float32 rounding. A twin that drifted from its C++
    model (another layer option, another op) would differ far more."""
    for experiment, twins in TWINS.items():
        worlds = (1, 2) if experiment == "mlp" else (1,)
        for world in worlds:
            eager = cells[(experiment, "eager", "fp32", world)]["metrics"]["output_checksum"].sum()
            for compile_ in twins:
                twin = cells[(experiment, compile_, "fp32", world)]
                assert twin["model"] == experiment.split("-")[0], twin["model"]
                value = twin["metrics"]["output_checksum"].sum()
                assert abs(value - eager) <= 1e-4 * max(1.0, abs(eager)), (
                    experiment,
                    compile_,
                    world,
                    value,
                    eager,
                )


def test_twins_pass_validation_against_eager_fp32(cells):
    for experiment, twins in TWINS.items():
        for compile_ in twins:
            cell = cells[(experiment, compile_, "fp32", 1)]
            assert cell["accuracy"].get("verdict") == "passed", (experiment, compile_, cell)
            assert "eager" in cell["accuracy"].get("reference", ""), cell["accuracy"]
    bf16 = cells[("mlp", "torchscript", "bf16", 1)]
    assert bf16["accuracy"].get("verdict") == "passed", bf16["accuracy"]
    # ... and autocast reached the traced module: its outputs are not the fp32 ones.
    fp32 = cells[("mlp", "torchscript", "fp32", 1)]["metrics"]["output_checksum"].sum()
    assert bf16["metrics"]["output_checksum"].sum() != fp32
    assert float(bf16["accuracy"]["mae_rel"]) > 0, bf16["accuracy"]


def test_an_aoti_twin_records_bf16_as_ineffective(cells):
    cell = cells[("mlp", "aoti", "bf16", 1)]
    reasons = " ".join(cell["ineffective"])
    assert "precision: an AOTInductor package runs in the dtype it was exported in" in reasons
    assert "parameter_count" not in cell["metrics"], "the weights are compiled in"
    assert "parameter_count" in cells[("mlp", "torchscript", "fp32", 1)]["metrics"]


def test_the_ablation_shows_the_compile_axis(compile_file):
    from scalebench_analysis.read.loader import load
    from scalebench_analysis.tables import ablation

    results = load(compile_file)
    tables = ablation.ablation_tables(results.cells)
    rows = tables["ablation"]
    mlp = rows[(rows.experiment == "mlp") & (rows.world_size == 1)]
    assert {"+compile=torchscript", "+compile=aoti"} <= set(mlp.change), mlp.change.tolist()
    assert (mlp[mlp.axis == "compile"].speedup > 0).all()
