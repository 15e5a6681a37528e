"""A projection as text: the console (answer first, then the tables, the check, the
inputs and what is missing), CSV (one table) and JSON (everything)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from ..output.fit import fit_table, wrap
from .against import Against
from .model import EXPOSED, STRAGGLER
from .project import Projection

#: The tables of a projection, by the name `--table` takes.
TABLES = ("train", "infer", "check")
#: Step parts in console order (those a curve lacks are left out).
PARTS = ("data", "h2d", "forward", "backward", "optimizer", STRAGGLER, EXPOSED)


def _rows(projection: Projection, mode: str) -> pd.DataFrame:
    rows = projection.rows
    if rows.empty or "mode" not in rows:
        return pd.DataFrame()
    return rows[rows["mode"] == mode].dropna(axis=1, how="all").reset_index(drop=True)


def tables(projection: Projection) -> dict:
    return {
        "train": _rows(projection, "train"),
        "infer": _rows(projection, "infer"),
        "check": projection.check.table,
    }


def _ms(value) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value * 1e3:.3f}"


def _pct(value) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.0%}"


def _signed(value) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:+.1%}"


def _number(value) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.4g}"


def _mib(value) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:g}"


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    """A numeric column of `frame`, all NaN where _rows dropped it (no finite value: a
    step without a communication fit, a world no cell measured)."""
    return frame[name] if name in frame else pd.Series(np.nan, frame.index)


def _train_console(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    shown = pd.DataFrame(
        {
            "curve": frame.curve,
            "batch": frame.batch_size,
            "workers": frame.workers,
            "nodes": frame.nodes.map(lambda n: str(int(n))),
            "step_ms": _column(frame, "step_s").map(_ms),
            "p95_ms": _column(frame, "step_p95_s").map(_ms),
            "p95_90%_ms": [
                f"{_ms(low)}-{_ms(high)}"
                for low, high in zip(
                    _column(frame, "step_p95_low_s"), _column(frame, "step_p95_high_s")
                )
            ],
            "samples/s": _column(frame, "throughput_samples_per_s").map(_number),
            "weak_eff": _column(frame, "weak_efficiency").map(_pct),
            "strong_eff": _column(frame, "strong_efficiency").map(_pct),
            "bottleneck": frame.bottleneck,
            "bucket_MiB": _column(frame, "bucket_mib").map(_mib),
            "best_MiB": _column(frame, "best_bucket_mib").map(_mib),
            "measured_ms": _column(frame, "measured").map(_ms),
            "error": _column(frame, "error").map(_signed),
        }
    )
    parts = {"curve": frame.curve, "batch": frame.batch_size, "workers": frame.workers}
    for part in PARTS:
        if f"{part}_s" in frame:
            parts[part] = frame[f"{part}_s"].map(_ms)
    return shown, pd.DataFrame(parts)


def _infer_console(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "curve": frame.curve,
            "batch": frame.batch_size,
            "shards": frame.workers,
            "latency_ms": _column(frame, "latency_s").map(_ms),
            "p95_ms": _column(frame, "latency_p95_s").map(_ms),
            "samples/s": _column(frame, "throughput_samples_per_s").map(_number),
            "weak_eff": _column(frame, "weak_efficiency").map(_pct),
            "strong_eff": _column(frame, "strong_efficiency").map(_pct),
            "measured": _column(frame, "measured").map(_number),
            "error": _column(frame, "error").map(_signed),
        }
    )


def _check_console(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "curve": frame.curve,
            "batch": frame.batch_size,
            "workers": frame.workers,
            "figure": frame.figure,
            "predicted": frame.predicted.map(_number),
            "measured": frame.measured.map(_number),
            "error": frame.error.map(_signed),
            "comm_pred_ms": frame.comm_exposed_predicted_s.map(_ms),
            "comm_meas_ms": frame.comm_exposed_measured_s.map(_ms),
        }
    )


def answer_lines(projection: Projection) -> list[str]:
    """Per curve and batch, the largest worker count asked: the step or latency, the
    efficiency, the bottleneck and the best bucket."""
    lines = []
    largest = max(projection.options.workers)
    rows = projection.rows
    if rows.empty:
        return lines
    for row in rows[rows.workers == largest].itertuples():
        if row.mode == "train":
            lines.append(
                f"{row.curve} b{row.batch_size} at {largest} workers ({int(row.nodes)} node(s)): "
                f"step {_ms(row.step_s)} ms, {_number(row.throughput_samples_per_s)} samples/s, "
                f"weak efficiency {_pct(row.weak_efficiency)}, bottleneck {row.bottleneck}, "
                f"best bucket {_mib(row.best_bucket_mib)} MiB (now {_mib(row.bucket_mib)})"
            )
        else:
            lines.append(
                f"{row.curve} b{row.batch_size} on {largest} shards: "
                f"{_number(row.throughput_samples_per_s)} samples/s, latency "
                f"{_ms(row.latency_s)} ms (p95 {_ms(row.latency_p95_s)})"
            )
    return lines


def _section(title: str, name: str, frame: pd.DataFrame, width: int) -> list[str]:
    shown, notes = fit_table(name, frame.astype(str), width)
    return [f"== {title} ==", shown.to_string(index=False), *notes, ""]


def to_console(projection: Projection, width: int) -> str:
    workers = ", ".join(map(str, projection.options.workers))
    head = (
        f"scalebench project {projection.path}: to {workers} workers, fit on measured worlds "
        f"up to {projection.largest_fit_world} (the model: docs/projection.md)"
    )
    lines = [*wrap(head, width), ""]
    lines += [piece for line in answer_lines(projection) for piece in wrap(line, width)]
    lines.append("")
    found = tables(projection)
    if not found["train"].empty:
        steps, parts = _train_console(found["train"])
        lines += _section("training: projected step", "train", steps, width)
        lines += _section("training: step parts (ms)", "train", parts, width)
    if not found["infer"].empty:
        lines += _section(
            "inference: projected shards", "infer", _infer_console(found["infer"]), width
        )
    if not found["check"].empty:
        lines += _section("check against runs", "check", _check_console(found["check"]), width)
    lines += wrap(projection.check.summary(), width)
    lines += ["", "== inputs =="]
    lines += [piece for line in projection.inputs for piece in wrap(line, width)]
    if projection.missing:
        lines += ["", "== missing =="]
        lines += [piece for line in projection.missing for piece in wrap(line, width)]
    return "\n".join(lines) + "\n"


def _plain(value):
    if isinstance(value, (np.floating, float)):
        return None if not math.isfinite(value) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def to_document(projection: Projection) -> dict:
    """Everything of a projection as JSON-ready values: `--format json` and `--store`."""
    return {
        "results": projection.path,
        "workers": list(projection.options.workers),
        "gpus_per_node": projection.options.gpus_per_node,
        "fit_max_world": projection.options.fit_max_world,
        "largest_fit_world": projection.largest_fit_world,
        "inputs": projection.inputs,
        "curves": projection.curves,
        "missing": projection.missing,
        "check_summary": projection.check.summary(),
        **{
            name: [{k: _plain(v) for k, v in row.items()} for row in frame.to_dict("records")]
            for name, frame in tables(projection).items()
        },
    }


def to_json(projection: Projection) -> str:
    return json.dumps(to_document(projection), indent=2)


def render(projection: Projection, fmt: str, table: str | None, width: int) -> str:
    if fmt == "json":
        return to_json(projection)
    if fmt == "csv":
        return tables(projection)[table or "train"].to_csv(index=False)
    return to_console(projection, width)


def render_against(result: Against, fmt: str, width: int) -> str:
    """`project NEW.h5 --against OLD.h5`: the table (console, CSV at machine precision, or
    JSON with the stored projection's name and date) and its summary."""
    frame = result.table
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "json":
        document = {
            "stored": f"{result.stored_path}{result.name}",
            "made": result.made,
            "fitted_on": result.fitted_on,
            "results": result.results_path,
            "summary": result.summary(),
            "rows": [{k: _plain(v) for k, v in r.items()} for r in frame.to_dict("records")],
        }
        return json.dumps(document, indent=2)
    head = (
        f"scalebench project {result.results_path} --against {result.stored_path}: the "
        f"projection {result.name} (made {result.made}, fitted on {result.fitted_on}) "
        f"against the cells measured here"
    )
    lines = [*wrap(head, width), ""]
    if not frame.empty:
        shown = pd.DataFrame(
            {
                "curve": frame.curve,
                "batch": frame.batch_size,
                "workers": frame.workers,
                "nodes": frame.nodes_projected.map(_number),
                "hosts": frame.hosts_measured,
                "step_ms": frame.step_projected_s.map(_ms),
                "measured_ms": frame.step_measured_s.map(_ms),
                "error": frame.step_error.map(_signed),
                "p95_ms": frame.p95_projected_s.map(_ms),
                "p95_meas_ms": frame.p95_measured_s.map(_ms),
                "p95_error": frame.p95_error.map(_signed),
                "comm_pred_ms": frame.comm_exposed_projected_s.map(_ms),
                "comm_meas_ms": frame.comm_exposed_measured_s.map(_ms),
            }
        )
        lines += _section("stored projection against this run", "against", shown, width)
    lines += wrap(result.summary(), width)
    return "\n".join(lines) + "\n"
