"""No source file of the project over MAX_LINES lines (issue 38: a file that grows past it
holds more than one job; split it along its seams, as matrix/yaml_node_reader.cc,
tests/analysis/reference_figures.py or tests/gpu/summary.sh were). The analysis package has
its own, lower limit (test_package_layout.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAX_LINES = 600
SOURCES = ("*.cc", "*.h", "*.py", "*.sh", "*.cmake", "CMakeLists.txt")


def _tracked_sources() -> list[str]:
    try:
        listing = subprocess.run(
            ["git", "-C", str(REPO), "ls-files", "--", *SOURCES],
            check=True,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [path for path in listing.stdout.split("\n") if path]


def test_no_source_file_is_over_the_limit():
    sources = _tracked_sources()
    assert len(sources) > 100, sources  # the listing itself worked
    over = {}
    for path in sources:
        file = REPO / path
        if file.is_file():
            lines = file.read_bytes().count(b"\n")
            if lines > MAX_LINES:
                over[path] = lines
    assert not over, f"over {MAX_LINES} lines (split each along its seams): {over}"
