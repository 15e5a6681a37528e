"""The console outputs shown in the docs still have the format the tool prints (issue 54 row
10; Note [Documented outputs] in tests/docs/doc_blocks.py). Each marked block's `shape:`
command runs on the synthetic file; every `== section ==` title the block shows must be one the
tool prints now, and every column name under a title must be a name the tool prints in that
section (in its header, its `every row:` line or its `left out for width:` list). The numbers
are a real run's and are not checked here: tests/docs/regenerate_outputs.py rewrites them."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

import make_results
from conftest import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs"))
import doc_blocks  # noqa: E402

OUTPUTS = doc_blocks.outputs()
WORD = re.compile(r"[a-z][a-z0-9_]*")


def _normal(title: str) -> str:
    return " ".join(title.split())


def test_the_blocks_the_issue_named_are_marked():
    """The outputs the first-hour issue found stale are under the test: the program demo's
    gate and cells, the quickstart's analysis."""
    marked = {(o.path.name, o.fields["command"].split()[1]) for o in OUTPUTS}
    assert {
        ("programs.md", "compare"),
        ("programs.md", "analyze"),
        ("getting-started.md", "analyze"),
    } <= marked


def test_every_marked_block_names_a_run_and_a_command():
    for output in OUTPUTS:
        assert output.fields.get("run"), f"{output.where}: no `run:` (tests/docs/doc_blocks.py)"
        assert output.fields["command"].split()[0] == "scalebench", output.where


@pytest.fixture(scope="module")
def shape_file(tmp_path_factory) -> str:
    """Always the synthetic file (its branches and repetitions), never a real run's: the
    shapes are the tool's format, and the real quickstart has no branches to compare. (Not
    the `results_file` fixture, which a real-run pytest step points at the quickstart.)"""
    path = tmp_path_factory.mktemp("shapes") / "synthetic.h5"
    return make_results.write_results(path, repetitions=True)


@pytest.mark.parametrize(
    "output", [o for o in OUTPUTS if "shape" in o.fields], ids=lambda o: o.where
)
def test_documented_output_has_the_tool_s_format(output, shape_file, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # nothing left out for width
    argv = shlex.split(output.fields["shape"].replace("{synthetic}", shape_file))
    done = run_cli(*argv)
    assert done.returncode in (0, 1), done.stderr
    printed = {_normal(t): lines for t, lines in doc_blocks.split_sections(done.stdout).items()}
    shown = doc_blocks.split_sections("\n".join(output.block.lines))
    titles = [t for t in shown if t]
    assert titles, f"{output.where}: the block shows no `== section ==` title"
    for title in titles:
        assert _normal(title) in printed, (
            f"{output.where}: the tool prints no section `== {title} ==` now "
            f"(it prints: {[t for t in printed if t]}); rerun tests/docs/regenerate_outputs.py"
        )
        header = next((line for line in shown[title] if line.strip()), "")
        columns = set(WORD.findall(header)) if header == header.lower() else set()
        names = set(WORD.findall("\n".join(printed[_normal(title)])))
        assert columns <= names, (
            f"{output.where}: section `{title}` shows columns {sorted(columns - names)} that "
            "the tool no longer prints; rerun tests/docs/regenerate_outputs.py"
        )
