"""The compile axis over a checkpoint's weights (docs/optimizations.md#compilation, Note
[Compiled twins]): one `scalebench run` (CPU, world 1) of the zoo mlp with a `torch.save`
state dict as `checkpoint`, eager, TorchScript and AOTInductor. The eager cell loads the
checkpoint (metric checkpoint_load_s); each twin was exported from the eager model with the
checkpoint loaded and carries those weights, so it loads nothing and its outputs equal the
eager cell's; every cell passes validation against eager fp32.

Needs a build: SCALEBENCH_BUILD_DIR (tests/run_all.sh sets it); skipped otherwise."""

from __future__ import annotations

import os

import h5py
import pytest
import torch

import rawdata
from conftest import run_scalebench

BUILD = os.environ.get("SCALEBENCH_BUILD_DIR")
pytestmark = pytest.mark.skipif(not BUILD, reason="needs SCALEBENCH_BUILD_DIR (a build)")

INPUTS, CLASSES = 12, 3


def _checkpoint(path) -> None:
    """A state dict of the zoo mlp (worker/models/mlp.cc names) far from its initialisation."""
    generator = torch.Generator().manual_seed(5)
    shapes = {"fc1": (512, INPUTS), "fc2": (512, 512), "fc3": (CLASSES, 512)}
    state = {}
    for name, (rows, columns) in shapes.items():
        state[f"{name}.weight"] = torch.randn(rows, columns, generator=generator) * 0.2
        state[f"{name}.bias"] = torch.randn(rows, generator=generator)
    torch.save(state, path)


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    work = tmp_path_factory.mktemp("compile_checkpoint")
    _checkpoint(work / "weights.pt")
    matrix = {
        "name": "compile-checkpoint",
        "defaults": {"device": "cpu", "backend": "mpi", "warmup": 1, "iterations": 3},
        "sweep": {"modes": ["infer"], "batch_sizes": [4], "world_sizes": [1]},
        "experiments": [
            {
                "name": "mlp",
                "model": "mlp",
                "input_shape": [INPUTS],
                "num_classes": CLASSES,
                "checkpoint": "weights.pt",
                "compile": ["eager", "torchscript", "aoti"],
                "validate": True,
                "validation_samples": 8,
            }
        ],
    }
    results = run_scalebench(matrix, work)
    raw = rawdata.read(results)
    out = {}
    with h5py.File(results, "r") as f:
        for cell in raw.cells.values():
            accuracy = f["cells"][cell.cell_id]["accuracy"].attrs["verdict"]
            out[cell.spec.get("compile", "eager")] = (cell, rawdata.text(accuracy))
    return out


def test_the_twins_carry_the_checkpoints_weights(cells):
    assert set(cells) == {"eager", "torchscript", "aoti"}
    for compile_, (cell, _verdict) in cells.items():
        assert cell.attrs["status"] == "ok", (compile_, cell.attrs["reason"])
    assert cells["eager"][0].rank_metrics["checkpoint_load_s"][0] > 0
    eager = cells["eager"][0].rank_metrics["output_checksum"][0]
    for compile_ in ("torchscript", "aoti"):
        twin = cells[compile_][0].rank_metrics
        assert "checkpoint_load_s" not in twin, "the weights are the twin's already"
        assert abs(twin["output_checksum"][0] - eager) <= 1e-4 * abs(eager), (compile_, eager)


def test_every_twin_passes_validation_against_eager(cells):
    for compile_, (_cell, verdict) in cells.items():
        assert verdict == "passed", compile_
