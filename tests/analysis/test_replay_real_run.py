"""A replay cell on a real run (Note [Replay workload], docs/replay.md): a three-layer table
whose layers each own one 1 MiB parameter, at 1 and 2 workers, bucket cap 1 MiB, run by
`scalebench run` under mpirun. Checked: the training phases, the replayed waits as lower
bounds (a sleep never ends early; no upper bound is asserted: the machine is shared), DDP's
buckets (three of 1 MiB, launched in order during backward, each after the backward of its
layer), parameter_count, and what `project` reads from it: 3 MiB of gradients in 3 DDP
buckets and a rising gradient-ready curve. Needs a build: SCALEBENCH_BUILD_DIR."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

from scalebench_analysis.projection.inputs import measured_cells
from scalebench_analysis.read.loader import load

from conftest import run_scalebench

BUILD = os.environ.get("SCALEBENCH_BUILD_DIR")
MIB = 1 << 20
LAYER = MIB // 4  # elements: 1 MiB of fp32 gradient
FORWARD_S, BACKWARD_S, OPTIMIZER_S = 0.004, 0.008, 0.003
PHASES = ["data", "h2d", "forward", "backward", "comm_wait", "optimizer", "step"]
TABLE = {
    "model": "three-layers",
    "source": "written for this test",
    "optimizer_s": OPTIMIZER_S,
    "layers": [
        {
            "name": f"l{i}",
            "forward_s": FORWARD_S,
            "backward_s": BACKWARD_S,
            "parameters": [MIB // 4],
        }
        for i in range(3)
    ],
}


def _matrix(table: Path, modes=("train",)) -> dict:
    return {
        "name": "replay",
        "scheduling": "exclusive",
        "defaults": {
            "device": "cpu",
            "backend": "mpi",
            "warmup": 2,
            "iterations": 10,
            "bucket_bytes": MIB,
            "first_bucket_bytes": MIB,
        },
        "sweep": {"modes": list(modes), "batch_sizes": [4], "world_sizes": [1, 2]},
        "experiments": [{"name": "three", "model": {"replay": str(table)}}],
    }


@pytest.fixture(scope="module")
def replay_run(tmp_path_factory) -> Path:
    if not BUILD:
        pytest.skip("needs SCALEBENCH_BUILD_DIR (a build)")
    work = tmp_path_factory.mktemp("replay")
    table = work / "three.json"
    table.write_text(json.dumps(TABLE))
    return run_scalebench(_matrix(table), work, ranks=3)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _cell(f: h5py.File, world: int) -> h5py.Group:
    for group in f["cells"].values():
        if json.loads(_text(group.attrs["spec"]))["world_size"] == world:
            return group
    raise AssertionError(f"no cell of world {world}")


def test_the_waits_and_the_buckets(replay_run):
    with h5py.File(replay_run, "r") as f:
        for world in (1, 2):
            cell = _cell(f, world)
            assert _text(cell.attrs["status"]) == "ok"
            assert _text(cell.attrs["model"]).startswith("replay:")
            phases = json.loads(_text(cell["timings"].attrs["phases"]))
            assert phases == [
                "data",
                "h2d",
                "forward",
                "backward",
                "comm_wait",
                "optimizer",
                "step",
            ]
            timings = cell["timings"][()]  # (ranks, iterations, phases)
            assert np.nanmin(timings[:, :, 2]) >= 3 * FORWARD_S
            assert np.nanmin(timings[:, :, 3]) >= 3 * BACKWARD_S
            assert np.nanmin(timings[:, :, 5]) >= OPTIMIZER_S
            names = json.loads(_text(cell["rank_metrics"].attrs["names"]))
            counts = cell["rank_metrics"][()][:, names.index("parameter_count")]
            assert list(counts) == [3 * LAYER] * world
        assert "bucket_times" not in _cell(f, 1)
        two = _cell(f, 2)
        assert json.loads(_text(two["bucket_times"].attrs["bucket_bytes"])) == [MIB] * 3
        times = two["bucket_times"][()]  # (ranks, iterations, buckets, [launched, completed])
        begins = two["phase_starts"][()][:, :, 3]
        launched = times[:, :, :, 0] - begins[:, :, None]
        for k in range(3):  # bucket k holds layer 2 - k, ready after k + 1 layers' backward
            assert np.nanmin(launched[:, :, k]) >= (k + 1) * BACKWARD_S
        assert (np.diff(times[:, :, :, 0], axis=2) >= 0).all()
        assert (times[:, :, :, 1] >= times[:, :, :, 0]).all()


def test_project_reads_the_replay_like_ddp(replay_run):
    (two,) = [c for c in measured_cells(load(str(replay_run))) if c.world_size == 2]
    assert two.gradient_bytes == 3 * MIB and two.gradient_source == "3 DDP buckets of the cell"
    fractions, ready = two.ready_curve
    assert list(ready) == pytest.approx([0, 1 / 3, 2 / 3, 1, 1])
    assert (np.diff(fractions) >= 0).all() and 0 < fractions[1] < fractions[3] <= 1


def test_validate_refuses_inference(tmp_path):
    if not BUILD:
        pytest.skip("needs SCALEBENCH_BUILD_DIR (a build)")
    table = tmp_path / "three.json"
    table.write_text(json.dumps(TABLE))
    (tmp_path / "m.yaml").write_text(json.dumps(_matrix(table, ("train", "infer"))))
    done = subprocess.run(
        [f"{BUILD}/bin/scalebench", "validate", str(tmp_path / "m.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "a replay model replays a training step" in done.stdout + done.stderr


def test_the_shipped_example_validates():
    if not BUILD:
        pytest.skip("needs SCALEBENCH_BUILD_DIR (a build)")
    example = Path(__file__).resolve().parents[2] / "docs" / "examples" / "replay" / "matrix.yaml"
    done = subprocess.run(
        [f"{BUILD}/bin/scalebench", "validate", str(example)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
