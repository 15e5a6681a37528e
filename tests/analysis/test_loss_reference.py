"""Training with a float-target loss (issue 28, docs/own-model.md#losses) against PyTorch.

One run of `scalebench run` (world 1, CPU, no warm-up) trains the same TorchScript MLP on the
same HDF5 rows (float32 targets) with every float loss (mse, l1, smooth_l1, bce_with_logits)
for 1, 5 and 20 SGD steps; each cell's `final_loss` is the loss of its last step, so the
three cells of a loss are three points of its loss curve. The reference is a plain PyTorch
loop over `torch.jit.load` of the same file, the same rows in the same order (sample i of
the global batch sequence is row i mod rows, worker/hdf5_batches.h) and `torch.nn.functional`'s
loss with its defaults: every point to 1e-5 relative, and the final parameters' checksum.

The model is given no num_classes: neither float targets nor inference need one (Note
[TorchScript num_classes] in matrix/expand.cc; issue 38). The same run infers the
same model on a file of inputs without a `targets` dataset.

Needs a build: SCALEBENCH_BUILD_DIR (tests/run_all.sh sets it); skipped otherwise."""

from __future__ import annotations

import json
import os
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import run_scalebench

BUILD = os.environ.get("SCALEBENCH_BUILD_DIR")
pytestmark = pytest.mark.skipif(not BUILD, reason="needs SCALEBENCH_BUILD_DIR (a build)")

INPUTS, OUTPUTS, ROWS, BATCH, LR, SEED = 8, 4, 96, 16, 0.05, 11
STEPS = (1, 5, 20)
LOSSES = {
    "mse": F.mse_loss,
    "l1": F.l1_loss,
    "smooth_l1": F.smooth_l1_loss,
    "bce_with_logits": F.binary_cross_entropy_with_logits,
}


class Regressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(INPUTS, 16)
        self.out = torch.nn.Linear(16, OUTPUTS)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


def _param_checksum(parameters) -> float:
    """worker/workload.cc parameter_checksum (tests/perf/perf_common.py has the same)."""
    checksum = 0.0
    with torch.no_grad():
        for index, parameter in enumerate(parameters):
            flat = parameter.detach().flatten()
            terms = torch.add(flat.abs(), flat, alpha=0.5)
            whole = flat.numel() // 13 * 13
            sums = terms.narrow(0, 0, whole).view(-1, 13).sum(0, dtype=torch.float64).tolist()
            tail = terms.narrow(0, whole, flat.numel() - whole).to(torch.float64).tolist()
            for j in range(13):
                column = sums[j] + (tail[j] if j < len(tail) else 0.0)
                checksum += column * (1.0 + ((j + index * 31) % 13) / 13)
    return checksum


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("loss-reference")
    torch.manual_seed(SEED)
    torch.jit.script(Regressor()).save(str(work / "model.pt"))
    rng = np.random.default_rng(SEED)
    inputs = rng.standard_normal((ROWS, INPUTS), dtype=np.float32)
    targets = rng.uniform(0.0, 1.0, (ROWS, OUTPUTS)).astype(np.float32)  # in [0, 1]: bce too
    with h5py.File(work / "data.h5", "w") as f:
        f.create_dataset("inputs", data=inputs)
        f.create_dataset("targets", data=targets)
    with h5py.File(work / "images.h5", "w") as f:  # inputs only
        f.create_dataset("images", data=inputs)
    matrix = {
        "name": "loss-reference",
        "defaults": {
            "device": "cpu",
            "backend": "mpi",
            "cpu_threads": 1,
            "warmup": 0,
            "seed": SEED,
            "optimizer": {"name": "sgd", "lr": LR, "momentum": 0.0},
        },
        "sweep": {"modes": ["train"], "batch_sizes": [BATCH], "world_sizes": [1]},
        "experiments": [
            {
                "name": "regressor",
                "model": {"torchscript": str(work / "model.pt")},
                "input_shape": [INPUTS],
                "data": {"hdf5": str(work / "data.h5"), "inputs": "inputs", "targets": "targets"},
                "loss": list(LOSSES),
                "iterations": list(STEPS),
            },
            {
                "name": "regressor-infer",
                "model": {"torchscript": str(work / "model.pt")},
                "input_shape": [INPUTS],
                "data": {"hdf5": str(work / "images.h5"), "inputs": "images"},
                "modes": ["infer"],
                "samples": ROWS,
            },
        ],
    }
    results = run_scalebench(matrix, work)
    cells = {}
    with h5py.File(results, "r") as f:
        for group in f["cells"].values():
            spec = json.loads(group.attrs["spec"])
            names = json.loads(group["rank_metrics"].attrs["names"])
            metrics = dict(zip(names, group["rank_metrics"][0], strict=True))
            status = group.attrs["status"]
            status = status.decode() if isinstance(status, bytes) else status
            # An inference cell stores no loss (its spec keeps it only when not default).
            if spec["mode"] == "infer":
                cells["infer"] = (status, metrics)
            else:
                cells[(spec["loss"], spec["measured_iterations"])] = (status, metrics)
    return work, inputs, targets, cells


def _reference(work: Path, inputs, targets, loss_name: str, steps: int):
    """Per-step losses and the final parameter checksum of the plain PyTorch loop."""
    model = torch.jit.load(str(work / "model.pt"))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.0)
    x_all, y_all = torch.from_numpy(inputs), torch.from_numpy(targets)
    losses = []
    for step in range(steps):
        rows = torch.from_numpy((step * BATCH + np.arange(BATCH)) % ROWS)
        loss = LOSSES[loss_name](model(x_all[rows]).float(), y_all[rows])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses, _param_checksum(model.parameters())


@pytest.mark.parametrize("loss_name", list(LOSSES))
def test_the_loss_curve_is_pytorchs(run, loss_name):
    work, inputs, targets, cells = run
    curve, checksum = _reference(work, inputs, targets, loss_name, max(STEPS))
    assert curve[-1] < curve[0], "the reference itself learns"
    for steps in STEPS:
        status, metrics = cells[(loss_name, steps)]
        assert status == "ok"
        assert metrics["final_loss"] == pytest.approx(curve[steps - 1], rel=1e-5), steps
    _, metrics = cells[(loss_name, max(STEPS))]
    assert metrics["param_checksum"] == pytest.approx(checksum, rel=1e-5)


def test_inference_of_a_file_without_targets_needs_no_num_classes(run):
    """The inference cell (no num_classes, images.h5 has no `targets`) ran every row once,
    through the same model as Python."""
    work, inputs, _, cells = run
    status, metrics = cells["infer"]
    assert status == "ok"
    assert metrics["data_rows"] == ROWS
    with torch.no_grad():
        logits = torch.jit.load(str(work / "model.pt"))(torch.from_numpy(inputs)).double()
    # docs/metrics.md: sum over rows i of (1 + (i mod 97) / 97) * sum |logits_i|, float64.
    weights = 1 + (torch.arange(ROWS) % 97).double() / 97
    reference = float((logits.abs().sum(1) * weights).sum())
    assert metrics["output_checksum"] == pytest.approx(reference, rel=1e-5)
