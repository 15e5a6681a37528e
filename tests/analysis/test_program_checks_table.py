"""tables/program_checks.py on made-up cells tables: the stored untrusted reasons, and the
warning that two branches ran byte-identical code (test_program_checks.py checks both on a
real run)."""

from __future__ import annotations

import json

import pandas as pd

from scalebench_analysis.tables.program_checks import identical_code_warnings, untrusted_reasons

A, B = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def _cells(rows) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "branch": branch,
                "experiment": experiment,
                "mode": "train",
                "status": status,
                "effective_program_code_digest": digest,
            }
            for branch, experiment, digest, status in rows
        ]
    )


def test_untrusted_reasons_are_the_stored_list():
    assert untrusted_reasons(pd.Series({"untrusted_reasons": json.dumps(["x", "y"])})) == [
        "x",
        "y",
    ]
    assert untrusted_reasons(pd.Series({"untrusted_reasons": float("nan")})) == []
    assert untrusted_reasons(pd.Series({})) == []


def test_branches_that_ran_the_same_bytes_are_named():
    cells = _cells(
        [
            ("main", "train", A, "ok"),
            ("main", "train", A, "ok"),
            ("feature", "train", A, "ok"),
            ("other", "train", B, "ok"),  # its own code: not named
        ]
    )
    (line,) = identical_code_warnings(cells)
    assert line.startswith(
        "train (train): the code that ran is the same on both branches feature and main"
    )
    assert "their difference is noise" in line


def test_no_warning_where_the_code_differs_or_was_not_checked():
    assert identical_code_warnings(_cells([("main", "e", A, "ok"), ("f", "e", B, "ok")])) == []
    not_checked = _cells([("main", "e", "not checked", "ok"), ("f", "e", "not checked", "ok")])
    assert identical_code_warnings(not_checked) == []
    failed = _cells([("main", "e", A, "ok"), ("f", "e", A, "failed")])
    assert identical_code_warnings(failed) == []
    assert identical_code_warnings(pd.DataFrame({"branch": ["main"], "status": ["ok"]})) == []
