"""The client's metrics (program/client/scalebench_client): a NaN or infinite value (a
diverged loss, an empty validation) is a figure to keep, and JSON has no such numbers, so
``metric`` writes it as the text "nan", "inf" or "-inf" (which the worker reads back:
ProgramReport.NonFiniteMetricsTravelAsTextAndAreKept) instead of failing the program. The
real CytoDL's training once ended in a ValueError from ``json.dumps`` in the Lightning
adapter's metrics at ``on_train_end``.

Run in a child interpreter with the report channel a worker opens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "program" / "client"

_SCRIPT = """
import scalebench_client as sb
sb.metric("loss", float("nan"))
sb.metric("grad_norm", float("inf"))
sb.metric("log_lik", float("-inf"))
sb.metric("accuracy", 0.75)
sb.metric("steps", 3)
"""


def test_non_finite_metrics_are_written_as_text_and_the_program_goes_on():
    read, write = os.pipe()
    env = dict(os.environ, SCALEBENCH_REPORT_FD=str(write), PYTHONPATH=str(CLIENT))
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], env=env, pass_fds=(write,), capture_output=True
    )
    os.close(write)
    with os.fdopen(read) as channel:
        records = [json.loads(line) for line in channel if line.strip()]
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    metrics = {r["name"]: r["value"] for r in records if r["type"] == "metric"}
    assert metrics == {
        "loss": "nan",
        "grad_norm": "inf",
        "log_lik": "-inf",
        "accuracy": 0.75,
        "steps": 3.0,
    }
