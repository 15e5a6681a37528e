"""AOTInductor packages as a model source, on a real run (docs/own-model.md#aotinductor-
packages): the results file of docs/examples/own_model/aoti/run_demo.sh, one module exported
by ``python -m scalebench_client.export`` as a package with a dynamic batch, as TorchScript,
and as a package for batch 4 only (tests/run_all.sh names the file in SCALEBENCH_AOTI_FILE;
without it these tests are skipped).

Checked with h5py: every package cell ran at batches 4 and 8 and world sizes 1 and 2, its
outputs equal the TorchScript cell's of the same inputs (output_checksum), and the batch-4
package refused batch 8 naming the shape it was exported with.
"""

from __future__ import annotations

import json

import h5py
import pytest

from conftest import real_file


@pytest.fixture(scope="module")
def aoti_file() -> str:
    return real_file("SCALEBENCH_AOTI_FILE")


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@pytest.fixture(scope="module")
def cells(aoti_file):
    """{(experiment, batch, world): {status, reason, failed_phase, model, metrics}}."""
    out = {}
    with h5py.File(aoti_file, "r") as f:
        for cell in f["cells"].values():
            spec = json.loads(_text(cell.attrs["spec"]))
            metrics = {}
            if "rank_metrics" in cell:
                names = json.loads(_text(cell["rank_metrics"].attrs["names"]))
                metrics = {n: cell["rank_metrics"][:, i] for i, n in enumerate(names)}
            key = (spec["experiment"], spec["batch_size"], spec["world_size"])
            out[key] = {
                "status": _text(cell.attrs["status"]),
                "reason": _text(cell.attrs["reason"]),
                "failed_phase": _text(cell.attrs["failed_phase"]),
                "model": _text(cell.attrs["model"]),
                "metrics": metrics,
            }
    return out


def test_packages_run_at_every_batch_and_world_size(cells):
    for batch in (4, 8):
        for world in (1, 2):
            cell = cells[("aoti", batch, world)]
            assert cell["status"] == "ok", (batch, world, cell["reason"])
            assert cell["model"] == "aoti:build/net.pt2"
            assert "parameter_count" not in cell["metrics"], "the weights are compiled in"
            # The export helper's torch.utils.flop_counter count, from the package's metadata:
            # conv 2 x 3*9*8 x 32*32 + linear 2 x 128*10 (docs/examples/own_model/aoti/net.py).
            assert list(cell["metrics"]["flops_per_sample"]) == [444928.0] * world


def test_the_package_computes_what_torchscript_computes(cells):
    """The same module, the same synthetic inputs (the cells differ only in their model
    file): the sums of their outputs agree to float32 rounding."""
    for batch in (4, 8):
        for world in (1, 2):
            package = cells[("aoti", batch, world)]["metrics"]["output_checksum"].sum()
            script = cells[("torchscript", batch, world)]["metrics"]["output_checksum"].sum()
            assert abs(package - script) <= 1e-4 * max(1.0, abs(script)), (package, script)


def test_the_packages_flops_give_the_mfu_section_its_rows(aoti_file):
    from scalebench_analysis.read.loader import load
    from scalebench_analysis.tables import mfu

    table = mfu.mfu_table(load(aoti_file))
    assert len(table) == 5, table  # the ok package cells; TorchScript has no count
    assert (table.achieved_tflops > 0).all() and table.mfu.isna().all(), "CPU: no MFU"


def test_a_static_batch_refuses_another_batch_naming_the_exported_shape(cells):
    assert cells[("aoti-batch4", 4, 1)]["status"] == "ok"
    refused = cells[("aoti-batch4", 8, 1)]
    assert refused["status"] == "failed"
    assert refused["failed_phase"] == "forward", refused
    assert "exported shape [4, 3, 32, 32]" in refused["reason"], refused["reason"]
    assert "dynamic batch" in refused["reason"]
