"""Operator profiles (setting `profile_steps`, docs/profiles.md): `analyze --ops` and
`compare --ops`, on frames made here (the arithmetic of Note [Operators explain a step's
change]) and on a real two-branch run whose branch `extra` adds a matmul to the model's
forward (TorchScript files written by this test).

The real run needs a build: SCALEBENCH_BUILD_DIR (tests/run_all.sh sets it); skipped
otherwise."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

from scalebench_analysis.tables import ops

from conftest import run_cli, run_scalebench

BUILD = os.environ.get("SCALEBENCH_BUILD_DIR")


def _profile(rows: list, steps: int = 2, ranks: int = 1) -> pd.DataFrame:
    """A read_profile frame: rows of (phase, name, count, self_s) per rank."""
    out = []
    for rank in range(ranks):
        for phase, name, count, self_s in rows:
            out.append(
                dict(
                    cell_id="c",
                    rank=rank,
                    device="cpu",
                    phase=phase,
                    name=name,
                    count=count,
                    self_s=self_s,
                    total_s=self_s,
                    self_cpu_memory_bytes=0.0,
                    steps=steps,
                )
            )
    return pd.DataFrame(out)


def test_top_ops_per_phase_by_self_time_per_step():
    profile = _profile(
        [
            ("forward", "aten::addmm", 4, 0.004),
            ("forward", "aten::relu", 2, 0.001),
            ("backward", "aten::mm", 8, 0.010),
        ],
        steps=2,
        ranks=2,
    )
    table = ops.top_ops(profile, limit=1)
    # backward has the most self time: its phase first; one operator per phase.
    assert list(table.phase) == ["backward", "forward"]
    assert list(table.name) == ["aten::mm", "aten::addmm"]
    assert table.calls_per_step.tolist() == [4.0, 2.0]
    assert np.allclose(table.self_ms_per_step, [5.0, 2.0])
    assert np.allclose(table.self_share, [1.0, 0.8])


def test_ops_diff_ranks_added_removed_count_and_time_by_share():
    base = _profile(
        [
            ("forward", "aten::addmm", 2, 0.004),
            ("forward", "aten::gelu", 2, 0.002),
            ("forward", "aten::cat", 2, 0.001),
            ("forward", "aten::add", 2, 0.002),
        ]
    )
    new = _profile(
        [
            ("forward", "aten::addmm", 2, 0.005),  # time: +0.5 ms per step
            ("forward", "aten::mm", 2, 0.006),  # added: +3 ms
            ("forward", "aten::cat", 4, 0.002),  # count: +0.5 ms
            ("forward", "aten::add", 2, 0.002),  # unchanged
        ]  # gelu removed: -1 ms
    )
    rows, totals = ops.ops_diff(base, new, step_delta_s=0.0035, limit=3)
    # By the size of their share, either sign: the removed gelu moved against the step.
    assert list(rows.name) == ["aten::mm", "aten::gelu", "aten::addmm"]
    assert list(rows.change) == ["added", "removed", "time"]
    assert np.isclose(rows.share_of_step_change[0], 3.0 / 3.5)
    assert np.isclose(rows.share_of_step_change[1], -1.0 / 3.5)
    assert np.isclose(totals["explained_ms"], 2.5)
    assert np.isclose(totals["all_ops_ms"], 3.0)  # the removed gelu's -1 ms counted
    assert np.isclose(totals["unexplained_ms"], 0.5)
    assert totals["operators"] == 5
    removed, _ = ops.ops_diff(new, base, step_delta_s=-0.0035, limit=1)
    assert list(removed.change) == ["removed"] and list(removed.name) == ["aten::mm"]


# --- the CLI, on the synthetic file with two profiles planted ---------------------------------


def _plant(f: h5py.File, cell_id: str, rows: list, steps: int = 4) -> None:
    """A `profile` group as the C++ store writes it (schemas/results-layout.md): rank 0's
    rows of (phase, name, calls per step, self ms per step)."""
    group = f[f"cells/{cell_id}"].create_group("profile")
    group.attrs["steps"] = np.int64(steps)
    group.attrs["activities"] = '["cpu"]'
    values = [
        [0, calls * steps, ms * steps / 1e3, ms * steps / 1e3, 0.0] for _, _, calls, ms in rows
    ]
    ops_set = group.create_dataset("ops", data=np.array(values, dtype=float))
    ops_set.attrs["columns"] = json.dumps(
        ["rank", "count", "self_s", "total_s", "self_cpu_memory_bytes"]
    )
    group.create_dataset("names", data=[r[1].encode() for r in rows])
    group.create_dataset("phases", data=[r[0].encode() for r in rows])
    group.create_dataset("devices", data=[b"cpu"] * len(rows))


def _cell_of(f: h5py.File, branch: str, label_end: str) -> str:
    for cell_id, cell in f["cells"].items():
        spec = json.loads(cell.attrs["spec"])
        if spec.get("branch") == branch and spec.get("experiment") == "mlp-infer":
            if spec.get("batch_size") == 16 and spec.get("world_size") == 1 and label_end:
                return cell_id
    raise AssertionError(f"no {branch} mlp-infer b16 w1 cell")


@pytest.fixture
def planted(results_file, synthetic, tmp_path):
    """A copy of the synthetic file whose main and feature mlp-infer b16 w1 cells hold a
    profile: feature drops aten::gelu (1.5 ms per step) and calls aten::cat once more."""
    if not synthetic:
        pytest.skip("plants profiles in the synthetic file")
    path = tmp_path / "planted.h5"
    path.write_bytes(Path(results_file).read_bytes())
    with h5py.File(path, "r+") as f:
        base, new = _cell_of(f, "main", "w1"), _cell_of(f, "feature", "w1")
        _plant(
            f,
            base,
            [
                ("forward", "aten::addmm", 2, 2.0),
                ("forward", "aten::gelu", 1, 1.5),
                ("forward", "aten::cat", 1, 0.1),
                ("load", "aten::randn", 1, 0.5),
            ],
        )
        _plant(
            f,
            new,
            [
                ("forward", "aten::addmm", 2, 2.0),
                ("forward", "aten::cat", 2, 0.2),
                ("load", "aten::randn", 1, 0.5),
            ],
        )
    return path, base, new


def test_analyze_ops_of_one_cell_per_phase(planted):
    path, base, _ = planted
    done = run_cli("analyze", str(path), "--ops", base[:6], check_rc=0)
    lines = done.stdout.splitlines()
    assert base in lines[0] and "4 profiled steps" in lines[0]
    assert [line.split()[0] for line in lines[2:6]] == ["forward"] * 3 + ["load"]
    assert lines[2].split()[1] == "aten::addmm"
    (entry,) = json.loads(run_cli("analyze", str(path), "--ops", base, "--format", "json").stdout)
    assert [op["name"] for op in entry["ops"]] == [
        "aten::addmm",
        "aten::gelu",
        "aten::cat",
        "aten::randn",
    ]
    assert np.isclose(entry["ops"][1]["self_ms_per_step"], 1.5)
    missing = run_cli("analyze", str(path), "--ops", "ffffffff")
    assert missing.returncode == 2 and "no profiled cell whose id starts with" in missing.stderr


def test_compare_ops_between_branches_of_one_file(planted):
    path, base, new = planted
    done = run_cli(
        "compare", str(path), "--branches", "main", "feature", "--ops", "--format", "json"
    )
    assert done.returncode in (0, 1), done.stderr
    (pair,) = json.loads(done.stdout)
    assert (pair["base_cell_id"], pair["new_cell_id"]) == (base, new)
    assert [(op["change"], op["name"]) for op in pair["ops"][:2]] == [
        ("removed", "aten::gelu"),
        ("count", "aten::cat"),
    ]
    assert np.isclose(pair["all_ops_ms"], -1.4)
    assert np.isclose(pair["unexplained_ms"], pair["step_delta_ms"] + 1.4)
    text = run_cli("compare", str(path), "--branches", "main", "feature", "--ops").stdout
    assert "removed" in text and "unexplained" in text


def test_ops_without_a_profile_says_how_to_get_one(results_file, synthetic):
    if not synthetic:
        pytest.skip("the synthetic file has no profile")
    done = run_cli("analyze", results_file, "--ops")
    assert done.returncode == 2 and "profile_steps" in done.stderr
    done = run_cli("compare", results_file, "--branches", "main", "feature", "--ops")
    assert done.returncode == 2 and "profile_steps" in done.stderr


# --- the real run -----------------------------------------------------------------------------

EXPORT = """
import sys
import torch

class Net(torch.nn.Module):
    def __init__(self, extra: bool):
        super().__init__()
        self.hidden = torch.nn.Linear(256, 16)
        self.out = torch.nn.Linear(16, 10)
        self.extra = extra
        self.register_buffer("square", torch.randn(256, 256) / 16)

    def forward(self, x):
        if self.extra:
            x = torch.matmul(x, self.square)
        return self.out(torch.relu(self.hidden(x)))

torch.manual_seed(0)
torch.jit.script(Net(sys.argv[1] == "extra")).save(sys.argv[2])
"""


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def two_branches(tmp_path_factory):
    """A results file of one inference cell per branch, with and without profile_steps:
    branch `extra` adds `x @ W` (256 x 256) to the forward.

    The added matmul does 16 times the work of the model's own layers (batch 1024: 67 M
    multiply-adds against 4 M) and the worker runs one thread: the test checks the ranking of
    a change the profile holds, and on a busy machine a small operator's time can grow by a
    stall (a descheduled thread of a two-thread addmm cost more than a 256-wide matmul in a
    loaded CI run); 8 profiled steps average such a stall further."""
    if not BUILD:
        pytest.skip("needs SCALEBENCH_BUILD_DIR (a build)")
    work = tmp_path_factory.mktemp("ops")
    repo = work / "repo"
    repo.mkdir()
    (work / "export.py").write_text(EXPORT)
    git = ["-c", "user.name=t", "-c", "user.email=t@t"]
    _git("init", "-q", "-b", "main", cwd=repo)
    for branch in ("main", "extra"):
        if branch == "extra":
            _git("checkout", "-q", "-b", "extra", cwd=repo)
        exported = [sys.executable, str(work / "export.py"), branch, str(repo / "model.pt")]
        subprocess.run(exported, check=True)
        _git("add", "model.pt", cwd=repo)
        _git(*git, "commit", "-q", "-m", branch, cwd=repo)
    model = {"torchscript": "model.pt"}
    matrix = {
        "name": "ops",
        "repo": str(repo),
        "branches": ["main", "extra"],
        "defaults": {
            "device": "cpu",
            "warmup": 2,
            "iterations": 15,
            "timeout_s": 120,
            "cpu_threads": 1,
        },
        "sweep": {"modes": ["infer"], "batch_sizes": [1024], "world_sizes": [1]},
        "experiments": [
            {"name": "plain", "model": model, "input_shape": [256], "num_classes": 10},
            {
                "name": "profiled",
                "model": model,
                "input_shape": [256],
                "num_classes": 10,
                "profile_steps": 8,
            },
        ],
    }
    return run_scalebench(matrix, work)


def _by_experiment(path: Path) -> dict:
    out = {}
    with h5py.File(path, "r") as f:
        for cell_id, cell in f["cells"].items():
            experiment = cell.attrs["experiment"]
            branch = cell.attrs["branch"]
            key = (
                experiment.decode() if isinstance(experiment, bytes) else experiment,
                branch.decode() if isinstance(branch, bytes) else branch,
            )
            names = json.loads(cell["rank_metrics"].attrs["names"])
            out[key] = {
                "cell_id": cell_id,
                "timings": cell["timings"].shape,
                "count": int(cell["summary"].attrs["count"]),
                "metrics": dict(zip(names, cell["rank_metrics"][0])),
                "profile": "profile" in cell,
                "ops": len(cell["profile/names"]) if "profile/names" in cell else 0,
            }
    return out


def test_a_profiled_cell_keeps_its_measured_figures_and_stores_its_operators(two_branches):
    cells = _by_experiment(two_branches)
    for branch in ("main", "extra"):
        plain, profiled = cells[("plain", branch)], cells[("profiled", branch)]
        assert plain["timings"] == profiled["timings"]  # the profiled steps are no rows
        assert plain["count"] == profiled["count"] == 15
        assert not plain["profile"] and "profile_steps" not in plain["metrics"]
        assert profiled["profile"] and profiled["ops"] > 0
        assert profiled["metrics"]["profile_steps"] == 8
        assert profiled["metrics"]["profile_step_s"] > 0


def test_analyze_ops_shows_the_forward_operators(two_branches):
    done = run_cli("analyze", str(two_branches), "--ops", check_rc=0)
    assert "forward" in done.stdout and "aten::addmm" in done.stdout
    as_json = json.loads(run_cli("analyze", str(two_branches), "--ops", "--format", "json").stdout)
    assert len(as_json) == 2 and all(entry["steps"] == 8 for entry in as_json)


def test_compare_ops_ranks_the_added_matmul_first(two_branches):
    done = run_cli(
        "compare", str(two_branches), "--branches", "main", "extra", "--ops", "--format", "json"
    )
    assert done.returncode in (0, 1), done.stderr
    (pair,) = json.loads(done.stdout)
    first = pair["ops"][0]
    # The operator the branch added ranks first: its profiled self time, all of it new, is
    # the largest change of any operator (what the profile controls).
    assert (first["change"], first["phase"], first["name"]) == ("added", "forward", "aten::mm")
    assert first["delta_self_ms"] > 0 and first["base_calls"] == 0 < first["new_calls"]
    # Its share is its change over the measured step change of the two cells, and the totals
    # add up to that change. How much of it the matmul explains depends on the machine being
    # quiet while both cells ran (issue 43: on a loaded machine the measured change was
    # -1.3x the matmul's), so that figure is docs/profiles.md's quiet run, not an assertion.
    totals = pair  # the pair carries its totals beside its rows
    assert first["share_of_step_change"] == pytest.approx(
        first["delta_self_ms"] / totals["step_delta_ms"]
    )
    assert totals["all_ops_ms"] + totals["unexplained_ms"] == pytest.approx(totals["step_delta_ms"])
    text = run_cli("compare", str(two_branches), "--branches", "main", "extra", "--ops").stdout
    assert "unexplained" in text and "aten::mm" in text


def test_the_html_report_has_an_operators_section(two_branches, tmp_path):
    """issue 42: the report of a file with profiled cells shows their top operators per phase,
    labelled by cell, with the warning that the times are under the profiler; a file without
    profiles has no such section (test_reports.py renders the page in chromium)."""
    report = tmp_path / "ops.html"
    run_cli("report", str(two_branches), "-o", str(report), check_rc=0)
    page = report.read_text()
    assert "Operators of the profiled cells" in page
    section = page[page.index("Operators of the profiled cells") :]
    assert "aten::addmm" in section and "aten::mm" in section and "forward" in section
    assert "under the profiler" in section
    assert section.count("profiled") >= 2


def test_the_operators_section_renders_in_headless_chromium(two_branches, tmp_path):
    """issue 42's done-when: the report's operators section drawn by a browser. The DOM that
    headless chromium rendered holds the section (anchor report.html#operators) with its rows,
    as the page's last section; a screenshot of the whole page (a window taller than it) is
    drawn down to that section: the band above the page's last drawn row holds the table's
    text. (Chromium 156 draws a blank screenshot when told to open the page at the anchor.)"""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (setup.sh test installs it)")
    from PIL import Image

    report = tmp_path / "ops.html"
    run_cli("report", str(two_branches), "-o", str(report), check_rc=0)
    url = f"file://{report}"
    browser = [chromium, "--headless", "--no-sandbox", "--disable-gpu"]
    dom = subprocess.run(
        [*browser, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    section = dom[dom.index('id="operators"') :]
    assert "aten::mm" in section and "under the profiler" in section
    assert "<h2" not in section[1:], "the operators section is not the page's last"
    shot = tmp_path / "page.png"
    subprocess.run(
        [*browser, f"--screenshot={shot}", "--window-size=1280,16000", url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    pixels = np.asarray(Image.open(shot).convert("RGB"))
    drawn_rows = np.flatnonzero(np.any(pixels < 240, axis=2).any(axis=1))
    assert drawn_rows.size and drawn_rows[-1] < pixels.shape[0] - 50, "the page is taller"
    band = pixels[max(0, drawn_rows[-1] - 400) : drawn_rows[-1]].reshape(-1, 3)
    assert len(np.unique(band, axis=0)) > 20, "the operators section looks blank"
    assert np.any(band < 240, axis=1).mean() > 0.02
