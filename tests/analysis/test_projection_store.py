"""`scalebench project --store` and `--against` (Note [Stored projections]): a projection
fitted on worlds 1 and 2 of a known ring law, stored in that file, read back, and compared
with a second file that measured worlds 4 and 8: the error is 0 % where the law holds."""

from __future__ import annotations

import fcntl
import io
import json
import os

import h5py
import pandas as pd
import pytest

import projection_files as pf
from scalebench_analysis.errors import UsageError
from scalebench_analysis.projection.against import against
from scalebench_analysis.projection.store import stored

from conftest import run_cli


@pytest.fixture
def small_and_large(tmp_path) -> tuple[str, str, str]:
    """(a file of worlds 1 and 2, a file of worlds 4 and 8, the law's 2-worker probe)."""
    small = pf.write_law_file(tmp_path / "small.h5", worlds=(1, 2))
    large = pf.write_law_file(tmp_path / "large.h5", worlds=(4, 8), seed=6)
    probe = pf.write_law_probe(tmp_path / "intra.h5", pf.INTRA, 2)
    return small, large, probe


def test_a_stored_projection_keeps_rows_inputs_and_options(small_and_large):
    small, _, probe = small_and_large
    with h5py.File(small, "r") as f:
        cells_before = sorted(f["cells"])
    done = run_cli("project", small, "--workers", "4,8", "--probe", probe, "--store", check_rc=0)
    assert "stored the projection as /projections/0" in done.stderr
    run_cli("project", small, "--workers", "16", "--probe", probe, "--store", check_rc=0)
    documents = stored(small)
    assert [d["name"] for d in documents] == ["/projections/0", "/projections/1"]
    first = documents[0]
    assert [row["workers"] for row in first["train"]] == [4, 8]
    assert json.loads(first["stored"]["options"])["workers"] == [4, 8]
    probes = json.loads(first["stored"]["probes"])
    assert probes[0]["path"] == os.path.abspath(probe) and "busbw" in probes[0]["fit"]
    (curve,) = first["curves"]
    assert [c["world_size"] for c in curve["cells"]] == [1, 2]
    assert curve["gradient_bytes"] == sum(pf.BUCKETS)
    (link,) = curve["links"]
    assert link["step_latency_s"] == pytest.approx(pf.INTRA.latency_s, rel=1e-6)
    assert link["bus_bandwidth_bytes_per_s"] == pytest.approx(pf.INTRA.busbw, rel=1e-6)
    assert curve["ready_curve"]["bytes_fraction"][-1] == 1.0
    with h5py.File(small, "r") as f:  # the cells are as they were
        assert sorted(f["cells"]) == cells_before


def test_a_later_run_is_compared_with_the_stored_projection(small_and_large):
    small, large, probe = small_and_large
    run_cli("project", small, "--workers", "4,8,16", "--probe", probe, "--store", check_rc=0)
    result = against(large, small)
    assert sorted(result.table.workers) == [4, 8]  # 16 was not measured
    assert result.table.step_error.abs().max() < 1e-9
    exposed = result.table.comm_exposed_projected_s / result.table.comm_exposed_measured_s
    assert (exposed - 1).abs().max() < 1e-9
    assert "2 projected step(s) measured: median |error| 0.0%" in result.summary()
    out = run_cli("project", large, "--against", small, check_rc=0).stdout
    assert "== stored projection against this run ==" in out and "/projections/0" in out
    csv = run_cli("project", large, "--against", small, "--format", "csv", check_rc=0)
    frame = pd.read_csv(io.StringIO(csv.stdout))
    assert list(frame.workers) == [4, 8] and {"step_error", "p95_error"} <= set(frame)


def test_nothing_stored_or_a_wrong_index(small_and_large):
    small, large, probe = small_and_large
    done = run_cli("project", large, "--against", small, check_rc=2)
    assert "no stored projection" in done.stderr and "--store" in done.stderr
    run_cli("project", small, "--workers", "4", "--probe", probe, "--store", check_rc=0)
    with pytest.raises(UsageError, match=r"0\.\.0"):
        against(large, small, 3)
    done = run_cli("project", large, "--against", small, "--workers", "4", check_rc=2)
    assert "drop --workers" in done.stderr
    assert "--workers N,N,... is required" in run_cli("project", small, check_rc=2).stderr


def test_store_refuses_while_a_run_holds_the_file(small_and_large):
    small, _, _ = small_and_large
    with open(small + ".lock", "w") as lock:
        lock.write("host x pid 1\n")
        lock.flush()
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = run_cli("project", small, "--workers", "4", "--store", check_rc=2)
    assert "a run writes this file" in done.stderr and "host x pid 1" in done.stderr
    assert stored(small) == []
    assert not [p for p in os.listdir(os.path.dirname(small)) if ".tmp-" in p]
