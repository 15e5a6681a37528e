"""`scalebench analyze` of probe files (docs/probe.md#the-probe-file): the file is written
here with h5py as orchestrator/probe_file.cc writes it (root strings fixed-length UTF-8,
`operation` variable-length), and every figure checked below is computed by hand."""

from __future__ import annotations

import io
import json
import math

import h5py
import numpy as np
import pandas as pd
import pytest

import scalebench_analysis as sa
from scalebench_analysis.tables import probe

from conftest import run_cli
from make_results import _fixed_string

WORLD = 4
# busbw factor of each operation at WORLD ranks (Note [Probe figures])
FACTOR = {"allreduce": 2 * (WORLD - 1) / WORLD, "broadcast": 1.0, "allgather": (WORLD - 1) / WORLD}
MIB, GIB = 2**20, 2**30

# (operation, in_place, bytes, time_s, baseline_time_s or None, ok)
ROWS = [
    ("allreduce", True, 8, 4e-6, 3.2e-6, True),
    ("allreduce", True, 4096, 8e-6, 8e-6, True),
    ("allreduce", True, MIB, 2e-4, 1.6e-4, True),
    ("allreduce", False, 8, 5e-6, 4e-6, True),
    ("allreduce", False, 4096, 1e-5, 9e-6, True),
    ("allreduce", False, MIB, 2.5e-4, 2e-4, True),
    ("broadcast", True, 8, 2e-6, None, True),
    ("broadcast", True, MIB, 1e-4, None, True),
    ("allgather", True, 8, 3e-6, None, True),
    ("allgather", True, GIB, 0.1, None, True),
]


def write_probe(path, rows=ROWS, version="1.0", fixed=True, drop=(), hosts=None) -> str:
    """A probe file with `rows`; `drop` names /probe datasets left out."""
    hosts = hosts or ["node0", "node0", "node1", "node1"]
    attrs = {
        "scalebench_probe_version": version,
        "tool_version": "0.9.0",
        "created": "2026-01-02T03:04:05Z",
        "backend": "mpi",
        "device": "cpu",
        "hosts": json.dumps(hosts),
        "devices": json.dumps(["cpu"] * len(hosts)),
    }
    with h5py.File(path, "w") as f:
        for name, value in attrs.items():
            f.attrs[name] = _fixed_string(value) if fixed else value
        f.attrs["world_size"] = np.int64(WORLD)
        f.attrs["iterations"] = np.int64(20)
        f.attrs["warmup"] = np.int64(5)
        g = f.create_group("probe")
        columns = {name: [] for name in probe.PROBE_NUMBERS}
        for op, in_place, size, time_s, baseline, ok in rows:
            algbw = size / time_s / 1e9
            values = {
                "in_place": 1.0 if in_place else 0.0,
                "bytes": float(size),
                "elements": float(size // 4 // (WORLD if op == "allgather" else 1)),
                "time_s": time_s,
                "algbw_gb_s": algbw,
                "busbw_gb_s": algbw * FACTOR[op],
                "max_error": 0.0 if ok else 1.0,
                "ok": 1.0 if ok else 0.0,
                "baseline_time_s": math.nan if baseline is None else baseline,
            }
            for name, value in values.items():
                columns[name].append(value)
        if "operation" not in drop:
            g.create_dataset(
                "operation", data=[r[0] for r in rows], dtype=h5py.string_dtype("utf-8")
            )
        for name, values in columns.items():
            if name not in drop:
                g.create_dataset(name, data=np.asarray(values, dtype=np.float64))
    return str(path)


@pytest.fixture
def probe_file(tmp_path) -> str:
    return write_probe(tmp_path / "probe.h5")


def _section(text: str, title: str) -> list[str]:
    """The lines of console section `== title ==` up to the blank line after it."""
    lines = text.splitlines()
    start = lines.index(f"== {title} ==") + 1
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    return lines[start:end]


def _row(text: str, title: str, size: str) -> list[str]:
    """The cells after the size of the row of `size` in console section `title`."""
    for line in _section(text, title)[1:]:
        tokens = line.split()
        if " ".join(tokens[:2]) == size:
            return tokens[2:]
    raise AssertionError(f"no row {size} in {title}:\n{text}")


# --- loading ---------------------------------------------------------------------------


def test_load_probe_frame(probe_file):
    loaded = sa.load_probe(probe_file)
    rows = loaded.rows
    assert loaded.version == "1.0"
    assert len(rows) == len(ROWS)
    assert list(rows.operation) == [r[0] for r in ROWS]
    assert list(rows.in_place) == [r[1] for r in ROWS]
    assert rows.bytes.dtype == np.int64 and list(rows.bytes) == [r[2] for r in ROWS]
    assert rows.ok.dtype == bool and rows.ok.all()
    assert list(rows.elements[:3]) == [2, 1024, MIB // 4]
    assert list(rows.table.unique()) == [
        "allreduce (in place)",
        "allreduce (out of place)",
        "broadcast",
        "allgather",
    ]
    assert rows.busbw_gb_s[2] == pytest.approx(MIB / 2e-4 / 1e9 * 1.5)
    # vs_mpi = time / plain-MPI time; NaN where not measured
    assert rows.vs_mpi[0] == pytest.approx(1.25)
    assert rows.vs_mpi[1] == pytest.approx(1.0)
    assert rows.baseline_time_s.isna().tolist() == [False] * 6 + [True] * 4
    assert rows.vs_mpi.isna().tolist() == [False] * 6 + [True] * 4
    # fixed-length root strings come back as str, JSON lists as lists, counts as int
    meta = loaded.meta
    assert meta["backend"] == "mpi" and meta["device"] == "cpu"
    assert meta["hosts"] == ["node0", "node0", "node1", "node1"]
    assert meta["world_size"] == WORLD and isinstance(meta["world_size"], int)
    assert (meta["iterations"], meta["warmup"]) == (20, 5)


def test_variable_length_version_and_later_minor_load(tmp_path):
    path = write_probe(tmp_path / "p.h5", version="1.3", fixed=False)
    loaded = sa.load_probe(path)
    assert loaded.version == "1.3"
    assert loaded.meta["backend"] == "mpi"


def test_probe_file_detection(probe_file, results_file, tmp_path):
    assert sa.is_probe_file(probe_file)
    assert not sa.is_probe_file(results_file)
    assert not sa.is_probe_file(tmp_path / "missing.h5")
    with pytest.raises(sa.ResultsFileError, match="a scalebench probe file, not a results file"):
        sa.load(probe_file)


@pytest.mark.parametrize(
    "size, text",
    [
        (8, "8 B"),
        (4096, "4 KiB"),
        (MIB, "1 MiB"),
        (GIB, "1 GiB"),
        (1536, "1536 B"),
        (3072, "3 KiB"),
    ],
)
def test_human_size(size, text):
    assert probe.human_size(size) == text


# --- analyze: console, markdown, json, csv ---------------------------------------------------


def test_analyze_console_figures(probe_file):
    out = run_cli("analyze", probe_file, check_rc=0).stdout
    header = out.splitlines()[1]
    assert "backend mpi" in header and "device cpu" in header
    assert "world size 4" in header
    assert "20 timed calls after 5 warm-up per size" in header
    assert "hosts node0 (2 ranks), node1 (2 ranks)" in header
    # 1 MiB in place: 200 us; algbw 2**20 / 2e-4 / 1e9 = 5.24288; busbw x 1.5 = 7.86432;
    # plain MPI 160 us: 200 / 160 = 1.25x
    assert _row(out, "allreduce (in place)", "1 MiB") == [
        "200.00",
        "5.243",
        "7.864",
        "ok",
        "160.00",
        "1.25x",
    ]
    # 8 B in place: 4 us; algbw 0.002; busbw 0.003; 4 / 3.2 = 1.25x
    assert _row(out, "allreduce (in place)", "8 B") == [
        "4.00",
        "0.002",
        "0.003",
        "ok",
        "3.20",
        "1.25x",
    ]
    # 4 KiB out of place: 10 us, algbw 0.4096, busbw 0.6144, 10 / 9 = 1.11x
    assert _row(out, "allreduce (out of place)", "4 KiB") == [
        "10.00",
        "0.410",
        "0.614",
        "ok",
        "9.00",
        "1.11x",
    ]
    # broadcast: busbw = algbw; no plain-MPI column
    assert "mpi (µs)" not in _section(out, "broadcast")[0]
    assert "mpi (µs)" in _section(out, "allreduce (in place)")[0]
    assert _row(out, "broadcast", "1 MiB") == ["100.00", "10.486", "10.486", "ok"]
    # allgather 1 GiB in 0.1 s: algbw 10.737, busbw x 0.75 = 8.053
    assert _row(out, "allgather", "1 GiB") == ["100000.00", "10.737", "8.053", "ok"]
    summary = _section(out, "Summary")
    assert "allreduce (in place): peak busbw 7.864 GB/s at 1 MiB" in summary
    assert "allreduce (out of place): peak busbw 6.291 GB/s at 1 MiB" in summary
    assert "broadcast: peak busbw 10.486 GB/s at 1 MiB" in summary
    assert "allgather: peak busbw 8.053 GB/s at 1 GiB" in summary
    assert "check: every result exact (10 rows)" in summary


def test_analyze_markdown(probe_file):
    out = run_cli("analyze", probe_file, "--format", "markdown", check_rc=0).stdout
    assert "## allreduce (in place)" in out
    assert "| size | time (µs) | algbw (GB/s) | busbw (GB/s) | check | mpi (µs) | vs mpi |" in out
    assert "| 1 MiB | 200.00 | 5.243 | 7.864 | ok | 160.00 | 1.25x |" in out
    assert "| 1 GiB | 100000.00 | 10.737 | 8.053 | ok |" in out
    assert "* allgather: peak busbw 8.053 GB/s at 1 GiB" in out


def test_analyze_json(probe_file):
    document = json.loads(run_cli("analyze", probe_file, "--format", "json", check_rc=0).stdout)
    assert document["kind"] == "probe" and document["probe_version"] == "1.0"
    assert document["meta"]["hosts"] == ["node0", "node0", "node1", "node1"]
    assert len(document["rows"]) == len(ROWS)
    assert document["rows"][6]["baseline_time_s"] is None  # NaN -> null
    assert document["rows"][0]["vs_mpi"] == pytest.approx(1.25)
    peaks = {r["table"]: (r["peak_busbw_gb_s"], r["peak_bytes"]) for r in document["summary"]}
    assert peaks["allgather"][0] == pytest.approx(GIB / 0.1 / 1e9 * 0.75)
    assert peaks["allgather"][1] == GIB
    assert document["checks"] == {"rows": 10, "wrong": 0}


def test_analyze_csv(probe_file, tmp_path):
    out = tmp_path / "rows.csv"
    done = run_cli("analyze", probe_file, "--format", "csv", "-o", str(out), check_rc=0)
    assert "every result exact" in done.stderr
    frame = pd.read_csv(out)
    assert list(frame.bytes) == [r[2] for r in ROWS]
    assert frame.time_s.tolist() == pytest.approx([r[3] for r in ROWS])
    summary = run_cli("analyze", probe_file, "--format", "csv", "--table", "summary", check_rc=0)
    table = pd.read_csv(io.StringIO(summary.stdout))
    assert table.set_index("table").peak_size["allreduce (in place)"] == "1 MiB"
    bad = run_cli("analyze", probe_file, "--format", "csv", "--table", "cells", check_rc=2)
    assert "--table cells: no such table in a probe file" in bad.stderr


# --- failed checks ---------------------------------------------------------------------------


def _wrong_rows():
    """ROWS with allreduce out of place at 4 KiB WRONG and (falsely) the fastest of its table."""
    rows = list(ROWS)
    rows[4] = ("allreduce", False, 4096, 1e-7, 9e-6, False)
    return rows


def test_wrong_check_exits_1(tmp_path):
    path = write_probe(tmp_path / "wrong.h5", rows=_wrong_rows())
    done = run_cli("analyze", path, check_rc=1)
    assert _row(done.stdout, "allreduce (out of place)", "4 KiB")[3] == "WRONG"
    assert _row(done.stdout, "allreduce (out of place)", "1 MiB")[3] == "ok"
    summary = _section(done.stdout, "Summary")
    # the peak ignores the wrong row (busbw 61.44 GB/s)
    assert "allreduce (out of place): peak busbw 6.291 GB/s at 1 MiB" in summary
    assert any(
        line.startswith("check: 1 of 10 results WRONG (allreduce (out of place) 4 KiB)")
        for line in summary
    ), summary
    assert probe.failed_checks(sa.load_probe(path)) == 1
    as_json = run_cli("analyze", path, "--format", "json", check_rc=1)
    assert json.loads(as_json.stdout)["checks"] == {"rows": 10, "wrong": 1}
    assert "1 of 10 results WRONG" in as_json.stderr


def test_wrong_check_exit_status_of_the_process(tmp_path):
    path = write_probe(tmp_path / "wrong.h5", rows=_wrong_rows())
    done = run_cli("analyze", path, subprocess_run=True)
    assert done.returncode == 1, done.stderr
    assert "WRONG" in done.stdout


def test_report_of_a_probe_file(tmp_path):
    good = write_probe(tmp_path / "good.h5")
    page = tmp_path / "good.html"
    run_cli("report", good, "-o", str(page), check_rc=0)
    text = page.read_text(encoding="utf-8")
    assert "<h2>allreduce (in place)</h2>" in text
    assert "<td>7.864</td>" in text and 'class="wrong"' not in text
    wrong = write_probe(tmp_path / "wrong.h5", rows=_wrong_rows())
    run_cli("report", wrong, "-o", str(tmp_path / "wrong.html"), check_rc=1)
    assert '<tr class="wrong"><td>4 KiB</td>' in (tmp_path / "wrong.html").read_text("utf-8")


# --- bad files and options --------------------------------------------------------------------


def _one_error_line(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


@pytest.mark.parametrize("fixed", [True, False])
def test_other_major_version(tmp_path, fixed):
    path = write_probe(tmp_path / "v2.h5", version="2.0", fixed=fixed)
    line = _one_error_line(run_cli("analyze", path, check_rc=2))
    assert line == (
        f"scalebench analyze: error: {path}: probe file version mismatch: required 1.x, "
        f"found 2.0 (use a scalebench_analysis release that reads probe files 2.x)"
    )
    with pytest.raises(sa.ProbeFileError, match="required 1.x, found 2.0"):
        sa.load_probe(path)


def test_malformed_version(tmp_path):
    path = write_probe(tmp_path / "vx.h5", version="one")
    line = _one_error_line(run_cli("analyze", path, check_rc=2))
    assert "malformed scalebench_probe_version 'one'" in line


@pytest.mark.parametrize(
    "drop, message",
    [
        (("busbw_gb_s",), "/probe lacks dataset busbw_gb_s"),
        (("operation", "ok"), "/probe lacks datasets operation, ok"),
    ],
)
def test_missing_dataset(tmp_path, drop, message):
    path = write_probe(tmp_path / "part.h5", drop=drop)
    line = _one_error_line(run_cli("analyze", path, check_rc=2))
    assert line == f"scalebench analyze: error: {path}: damaged probe file: {message}"


def test_missing_group_and_unequal_lengths(tmp_path):
    path = write_probe(tmp_path / "nogroup.h5")
    with h5py.File(path, "a") as f:
        del f["probe"]
    assert "damaged probe file: no group /probe" in _one_error_line(
        run_cli("analyze", path, check_rc=2)
    )
    path = write_probe(tmp_path / "short.h5")
    with h5py.File(path, "a") as f:
        del f["probe/time_s"]
        f["probe"].create_dataset("time_s", data=np.ones(3))
    line = _one_error_line(run_cli("analyze", path, check_rc=2))
    assert "/probe datasets differ in length" in line and "time_s 3" in line


def test_neither_results_nor_probe_file_keeps_its_error(tmp_path):
    path = tmp_path / "other.h5"
    with h5py.File(path, "w") as f:
        f.attrs["something"] = "else"
    line = _one_error_line(run_cli("analyze", str(path), check_rc=2))
    assert line == (
        f"scalebench analyze: error: {path}: not a scalebench results file "
        f"(no root attribute scalebench_layout_version)"
    )


def test_results_options_refused_for_a_probe_file(probe_file, results_file):
    done = run_cli("analyze", probe_file, "--baseline-file", results_file, check_rc=2)
    assert (
        f"--baseline-file: only for results files, and {probe_file} is a probe file"
        in _one_error_line(done)
    )
    done = run_cli("compare", probe_file, results_file, check_rc=2)
    assert "a scalebench probe file, not a results file" in _one_error_line(done)
