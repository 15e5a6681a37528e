"""docs/examples/batch_auto.yaml as shipped (tests/run_all.sh runs it): ResNet-18 (batch norm)
with `batch_size: auto`, no `min_batch`, under a 200 MiB tensor budget, train and infer, one
and two workers. Every cell finds its boundary, starts where the model trains (Note [Batch
search start]) and runs a recommended batch inside the safety margin, refined between the
probed sizes where the memory line says so (Note [Batch refinement])."""

from __future__ import annotations

import json
import os

import h5py
import numpy as np
import pytest


@pytest.fixture(scope="module")
def batch_auto_file() -> str:
    path = os.environ.get("SCALEBENCH_BATCH_AUTO_FILE")
    if not path:
        pytest.skip("needs the real run: SCALEBENCH_BATCH_AUTO_FILE (tests/run_all.sh)")
    return path


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def test_every_cell_finds_its_batch_inside_the_margin(batch_auto_file):
    with h5py.File(batch_auto_file, "r") as f:
        cells = list(f["cells"].values())
        assert len(cells) == 4
        for group in cells:
            label = f"{_text(group.attrs['mode'])} w{group.attrs['world_size']}"
            assert _text(group.attrs["status"]) == "ok", label + ": " + _text(group.attrs["reason"])
            s = group["summary"].attrs
            ok, oom, chosen = s["max_batch_ok"], s["oom_batch"], s["recommended_batch"]
            assert 1 <= chosen <= ok, label
            # Note [Batch search]: bisected to within batch_precision (default 2 %) of the batch
            # that fit: exact below batch 100, at most floor(2 % x ok) above it.
            spec = json.loads(_text(group.attrs["spec"]))
            gap = max(1, int(np.floor(spec.get("batch_precision", 0.02) * ok)))
            assert ok < oom <= ok + gap, f"{label}: the boundary within its precision: {ok} / {oom}"
            assert s["batch_size"] == chosen, "the timed loop ran the recommended batch"
            # Its measured peak is inside the margin of the budget the probes were judged by.
            probes = group["probes"][()]
            columns = json.loads(_text(group["probes"].attrs["columns"]))
            rows = {int(r[columns.index("batch")]): r for r in probes}
            peak = rows[int(chosen)][columns.index("peak_memory_bytes")]
            margin = json.loads(_text(group.attrs["spec"])).get("safety_margin", 0.1)  # the default
            assert peak <= (1 - margin) * s["memory_budget_bytes"], label
            # No probe inside the margin was faster than the chosen one.
            status = json.loads(_text(group["probes"].attrs["status"]))
            for index, row in enumerate(probes):
                inside = (
                    row[columns.index("peak_memory_bytes")]
                    <= (1 - margin) * s["memory_budget_bytes"]
                )
                if status[index] == "ok" and inside:
                    assert row[columns.index("throughput_samples_per_s")] <= rows[int(chosen)][
                        columns.index("throughput_samples_per_s")
                    ] * (1 + 1e-12), label
            names = json.loads(_text(group["rank_metrics"].attrs["names"]))
            metrics = dict(zip(names, group["rank_metrics"][0], strict=True))
            if "batch_refined" in metrics and np.isfinite(metrics["batch_refined"]):
                assert int(metrics["batch_refined"]) in rows, "the refined batch was probed"
