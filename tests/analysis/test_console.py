"""The console output of `analyze` and `compare` (issue 29: the answer first): every table
fits the width, a column left out is named under its table, the label is never dropped;
`analyze` prints the run, the cells and the summary and names the other tables, which
`--details` prints. And `--format csv|json` carries every statistic of the file, checked
against the file read with h5py (rawdata.py)."""

from __future__ import annotations

import csv
import io
import json
import shutil

import h5py
import numpy as np
import pandas as pd
import pytest

import scalebench_analysis as sa
from scalebench_analysis.output import fit
from scalebench_analysis.output.render import BRIEF_SECTIONS, display_frame

import rawdata
from conftest import run_cli

# --- the width ---------------------------------------------------------------------------


def _section(text: str, title: str) -> list[str]:
    """The lines of the section whose title starts with `title`, up to the blank line."""
    return text.split(f"== {title}", 1)[1].split("\n\n", 1)[0].splitlines()[1:]


def _notes(lines: list[str]) -> dict:
    """The `  * ` notes of a section, continuation lines joined: their text by first words
    ("every row", "left out for width", ...)."""
    notes, current = [], None
    for line in lines:
        if line.startswith("  * "):
            current = line[4:]
            notes.append(current)
        elif current is not None and line.startswith("    "):
            notes[-1] += " " + line.strip()
    return {note.partition(":")[0]: note.partition(":")[2].strip() for note in notes}


def _table(lines: list[str]) -> list[str]:
    """The table's lines: those before its first note."""
    notes = [i for i, line in enumerate(lines) if line.startswith("  * ")]
    return lines[: notes[0]] if notes else lines


@pytest.mark.parametrize("width", [80, 100, 160])
def test_every_line_fits_and_no_column_is_lost_silently(results_file, monkeypatch, width):
    monkeypatch.setenv("COLUMNS", str(width))
    brief = run_cli("analyze", results_file, check_rc=0).stdout
    details = run_cli("analyze", results_file, "--details", check_rc=0).stdout
    for text in (brief, details):
        too_wide = [line for line in text.splitlines() if len(line) > width]
        assert not too_wide, too_wide
    analysis = sa.analyze(results_file)
    full = list(display_frame("cells", analysis.sections["cells"]).columns)
    lines = _section(brief, "Cells ==")
    header = _table(lines)[0].split()
    notes = _notes(lines)
    constant = [item.split(" ", 1)[0] for item in notes.get("every row", "").split(", ") if item]
    left_out = notes.get("left out for width", "").split(" (every column")[0]
    dropped = [c for c in left_out.split(", ") if c]
    assert header[0] == "label", "never dropped"
    assert sorted(header + constant + dropped) == sorted(full), (header, constant, dropped)
    if dropped:
        assert "--format csv --table cells" in notes["left out for width"]
        # left out in the stated order: DROP_ORDER's first, a headline column only after all
        order = fit.DROP_ORDER["cells"]
        listed = [c for c in dropped if c in order]
        assert dropped[: len(listed)] == listed == [c for c in order if c in listed]
        if len(listed) < len(dropped):
            assert not set(order) & set(header), "a headline column went before a listed one"
    if width >= 100:
        headline = {"status", "throughput_samples_per_s", "median_ms", "trusted", "accuracy"}
        assert headline <= set(header) | set(constant), "the headline figures are kept"
    # every ok cell's row is there, its label whole or cut in the middle
    end = _table(lines)[0].index("label") + len("label")  # right-justified
    labels = [line[:end].strip() for line in _table(lines)[1:]]
    for cell, shown in zip(analysis.sections["cells"].label, labels):
        head, _, tail = shown.partition(fit._CUT)
        assert cell.startswith(head) and cell.endswith(tail), (cell, shown)


def test_fit_table_drops_by_priority_and_never_the_label():
    frame = pd.DataFrame(
        {
            "label": ["main/a-long-experiment/train/b16/w1/fp32", "main/b/infer/b32/w2/fp32"],
            "status": ["ok", "failed"],
            "throughput_samples_per_s": ["1,000.0", "-"],
            "median_ms": ["16.00", "-"],
            "p99_ms": ["18.00", "-"],
            "comm_share": ["0.0%", "-"],
            "peak_memory_mib": ["100.00", "-"],
            "trusted": ["yes", "no"],
        }
    )
    full = fit.table_width(frame)
    assert fit.fit_table("cells", frame, full) == (frame, [])
    fitted, notes = fit.fit_table("cells", frame, full - 1)
    assert "peak_memory_mib" not in fitted and "comm_share" in fitted  # the first listed
    assert notes == [
        "left out for width: peak_memory_mib (every column: --format csv --table cells, "
        "or a wider COLUMNS)"
    ]
    narrow, notes = fit.fit_table("cells", frame, 10)
    assert list(narrow.columns) == ["label"] and fit.table_width(narrow) <= 10
    assert narrow.label[0].startswith("main") and fit._CUT in narrow.label[0]
    assert any(n.startswith("labels shortened") for n in notes)
    text = narrow.to_string(index=False)
    assert max(len(line) for line in text.splitlines()) == fit.table_width(narrow)


def test_a_constant_column_is_named_once_before_anything_is_dropped():
    frame = pd.DataFrame(
        {"label": ["a", "b", "c"], "status": ["ok"] * 3, "p99_ms": ["1.00", "2.00", "3.00"]}
    )
    fitted, notes = fit.fit_table("cells", frame, fit.table_width(frame) - 1)
    assert list(fitted.columns) == ["label", "p99_ms"]
    assert notes == ["every row: status ok"]


def test_the_width_is_columns_else_the_terminal_else_120(monkeypatch):
    monkeypatch.setenv("COLUMNS", "90")
    assert fit.console_width(False) == fit.console_width(True) == 90
    monkeypatch.delenv("COLUMNS")
    assert fit.console_width(False) == fit.DEFAULT_WIDTH == 120


def test_compare_fits_the_width(results_file, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    done = run_cli("compare", results_file, results_file)
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) <= 100
    table = _table(_section(done.stdout, "Regression gate"))
    assert table[0].split()[0] == "label"


# --- --details ---------------------------------------------------------------------------


def test_analyze_prints_the_cells_and_names_the_other_tables(results_file, raw):
    brief = run_cli("analyze", results_file, check_rc=0).stdout
    details = run_cli("analyze", results_file, "--details", check_rc=0).stdout
    sections = sa.analyze(results_file).sections
    shown = [n for n in sections if n in BRIEF_SECTIONS]
    others = [n for n in sections if n not in BRIEF_SECTIONS]
    assert "overview" in shown and "cells" in shown and others
    named = " ".join(brief.split("Other tables: ", 1)[1].split("\n\n", 1)[0].split())
    assert named.startswith(", ".join(others) + ": --details prints them")
    for title in ("== Batch size ==", "== Straggler ranks ==", "== Scaling"):
        assert title not in brief and title in details
    assert "Other tables" not in details
    for text in (brief, details):
        lines = text.rstrip("\n").splitlines()
        assert lines[lines.index("== Summary ==") - 1] == "", "the summary comes last"
        assert all(line.startswith("  ") for line in lines[lines.index("== Summary ==") + 1 :])
        assert text.index("== Run ==") < text.index("== Cells ==") < text.index("== Summary")
    cell = raw.ok_cells()[0]
    assert f"{cell.throughput():,.1f}" in brief


# --- every statistic in csv and json -----------------------------------------------------

SUMMARY_FIGURES = (
    "median_s",
    "mean_s",
    "std_s",
    "min_s",
    "max_s",
    "p50_s",
    "p90_s",
    "p95_s",
    "p99_s",
    "cv",
    "median_ci_low_s",
    "median_ci_high_s",
    "energy_j",
    "samples_per_joule",
)
STARTUP_METRICS = ("model_init_s", "data_open_s", "checkpoint_load_s")


def _planted(src: str, dst) -> tuple[str, str]:
    """A copy of `src` whose first ok cell with rank metrics has an energy figure, a stop
    and warm-up reason and a checkpoint load time on every rank (what a short CPU run
    lacks), and that cell's id."""
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        cell_id = next(
            name
            for name, cell in f["cells"].items()
            if cell.attrs["status"] in ("ok", b"ok") and "rank_metrics" in cell
        )
        group = f["cells"][cell_id]
        summary = group["summary"].attrs
        summary["energy_j"], summary["samples_per_joule"] = 123.5, 4.25
        summary["stop_reason"], summary["warmup_reason"] = "budget", "steady"
        metrics = group["rank_metrics"]
        names = json.loads(metrics.attrs["names"])
        values = metrics[()]
        attrs = dict(metrics.attrs)
        if "checkpoint_load_s" not in names:
            names = sorted([*names, "checkpoint_load_s"])
            values = np.insert(values, names.index("checkpoint_load_s"), np.nan, axis=1)
        values[:, names.index("checkpoint_load_s")] = 0.5 + np.arange(values.shape[0])
        del group["rank_metrics"]
        written = group.create_dataset("rank_metrics", data=values)
        for key, value in attrs.items():
            written.attrs[key] = value
        written.attrs["names"] = json.dumps(names)
    return str(dst), cell_id


def _same(got, want) -> bool:
    if isinstance(want, str):
        return (got or "") == want
    got = np.nan if got in (None, "") else float(got)
    return bool(np.isclose(got, float(want), rtol=1e-12, atol=0, equal_nan=True))


def _expected(cell) -> dict:
    """Every statistic of `cell` as the file holds it (rawdata: h5py only)."""
    want = {name: float(cell.summary.get(name, np.nan)) for name in SUMMARY_FIGURES}
    want["stop_reason"] = str(cell.summary.get("stop_reason", ""))
    want["warmup_reason"] = str(cell.summary.get("warmup_reason", ""))
    for name in STARTUP_METRICS:
        values = cell.rank_metrics.get(name, np.array([np.nan]))
        want[name] = float(np.nanmedian(values)) if np.isfinite(values).any() else np.nan
    first = cell.rank_metrics.get("first_iteration_s", np.array([np.nan]))
    if np.isfinite(first).any():
        want["first_iteration_s"] = float(np.nanmedian(first))
    else:  # the first warm-up iteration of the timings, as the start-up table reads it
        step = cell.phases.index("step" if cell.mode == "train" else "batch")
        want["first_iteration_s"] = float(np.nanmedian(cell.timings[:, 0, step]))
    return want


def test_csv_and_json_carry_every_statistic_of_the_file(results_file, tmp_path):
    path, planted = _planted(results_file, tmp_path / "planted.h5")
    raw = rawdata.read(path)
    rows = {
        r["cell_id"]: r
        for r in csv.DictReader(io.StringIO(run_cli("analyze", path, "--format", "csv").stdout))
    }
    document = json.loads(run_cli("analyze", path, "--format", "json", check_rc=0).stdout)
    records = {r["cell_id"]: r for r in document["sections"]["cells"]}
    assert set(rows) == set(records) == set(raw.cells)
    for cell in raw.ok_cells():
        for name, want in _expected(cell).items():
            assert _same(rows[cell.cell_id][name], want), (cell.cell_id, name)
            assert _same(records[cell.cell_id][name], want), (cell.cell_id, name)
    row = rows[planted]
    assert float(row["energy_j"]) == 123.5 and float(row["samples_per_joule"]) == 4.25
    assert row["stop_reason"] == "budget" and row["warmup_reason"] == "steady"
    ranks = raw.cells[planted].rank_metrics["checkpoint_load_s"]
    assert float(row["checkpoint_load_s"]) == pytest.approx(float(np.median(ranks)))
    # machine-only: the console keeps its own columns
    console = run_cli("analyze", path, check_rc=0).stdout
    assert "p95_s" not in console and "median_ci_low_s" not in console
