"""`scalebench history`: the same cells across many results files, their trend, and the
steps beyond noise.

Matching (the line a cell belongs to): the cell's spec (`spec` attribute) without the keys
that change over history or do not change what is measured: `commit`, `repetition`,
`repetitions`, `seed`, `timeout_s`, `source`, `cell_id`, `label_settings`. The branch stays
in the key, so `main` and a feature branch are separate lines; the experiment, model,
mode, precision, batch size, world size, device and every other setting must be equal.

Points: one per file and line, from ok cells with a summary: the median step (train) or batch
(inference) time `median_s` and the throughput. A repeated cell (Note [Repetitions]) gives
one point: its `/series` figures and bootstrap interval (or, for a file without `/series`,
the same computed here from its repetitions). A single run's interval is a percentile
bootstrap of the median over its own measured iterations (training: the slowest rank's step
per iteration; inference: every batch time of every rank), 2000 resamples drawn by numpy's
PCG64 seeded with 0; it covers the noise within that run only, not the run-to-run noise
that repetitions measure (docs/timeline.md). The throughput interval is the throughput
scaled by median / bound.

Order: --order date (default): the cell's `commit_date` when set, else the file's
`start_time`; --order commit: the same order, points labelled by short commit; --order file:
the order given on the command line (directories expand to their *.h5 files, sorted by
name, not recursive).

A step between two consecutive points of a line is flagged when the relative change of the
median exceeds --threshold AND the two intervals do not overlap: "slower" or "faster"
(for --metric throughput, lower is slower).

JSON (--format json): {"metric", "threshold", "order", "files": [...], "lines": [{"key",
"label", "experiment", "points": [{"file", "commit", "date", "value", "low", "high",
"repeated"}], "first", "last", "change", "steps": [{"from", "to", "change", "direction"}]}]}.
"""

from __future__ import annotations

import base64
import io
import json
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import h5py
import numpy as np

from .errors import ResultsFileError, UsageError

IGNORED_KEYS = (
    "commit",
    "repetition",
    "repetitions",
    "seed",
    "timeout_s",
    "source",
    "cell_id",
    "label_settings",
)
RESAMPLES = 2000
CONFIDENCE = 0.95


def _text(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray):
        return _text(value.item())
    return str(value)


def line_key(spec: dict) -> str:
    """The matching key of a cell: its spec without IGNORED_KEYS, as canonical JSON."""
    kept = {k: v for k, v in spec.items() if k not in IGNORED_KEYS}
    return json.dumps(kept, sort_keys=True, separators=(",", ":"))


def line_label(spec: dict) -> str:
    """branch/experiment/mode/b<batch>/w<world>/<precision>."""
    batch = spec.get("batch_size", 0)
    return (
        f"{spec.get('branch') or '-'}/{spec.get('experiment', '')}/{spec.get('mode', '')}"
        f"/b{batch if batch else 'auto'}/w{spec.get('world_size', 0)}"
        f"/{spec.get('precision', '')}"
    )


def median_interval(values: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap of the median (RESAMPLES draws, numpy PCG64 seeded `seed`)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, values.size, size=(RESAMPLES, values.size))
    medians = np.median(values[draws], axis=1)
    tail = 100 * (1 - CONFIDENCE) / 2
    return float(np.percentile(medians, tail)), float(np.percentile(medians, 100 - tail))


def iteration_times(group: h5py.Group, mode: str) -> np.ndarray:
    """The per-iteration times the summary's median is taken over (results layout)."""
    timings = group["timings"]
    warmup = int(timings.attrs.get("warmup_iterations", 0))
    whole = np.asarray(timings[()], dtype=float)[:, warmup:, -1]
    if mode == "train":
        with np.errstate(all="ignore"):
            rows = whole[:, np.all(np.isfinite(whole), axis=0)]
        return rows.max(axis=0) if rows.size else np.array([])
    return whole[np.isfinite(whole)]


@dataclass
class Point:
    file: str
    commit: str
    date: str
    value: float  # median_s or throughput
    low: float
    high: float
    repeated: bool = False


@dataclass
class Line:
    key: str
    label: str
    experiment: str
    points: list[Point] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)


def _scaled(value: float, median: float, bound: float) -> float:
    return value * median / bound if bound > 0 else float("nan")


def read_points(path: Path, metric: str) -> dict[str, tuple[str, str, Point]]:
    """key -> (label, experiment, point) of every ok cell (repetitions collapsed) of `path`.
    ResultsFileError when it is not a scalebench results file."""
    try:
        f = h5py.File(path, "r", locking=False)
    except OSError:
        raise ResultsFileError(f"{path} is not an HDF5 file") from None
    with f:
        if "cells" not in f or "scalebench_layout_version" not in f.attrs:
            raise ResultsFileError(f"{path} is not a scalebench results file")
        start = _text(f.attrs.get("start_time", ""))
        series = f["series"] if "series" in f else {}
        groups: dict[str, list] = {}
        for cell_id, group in f["cells"].items():
            if _text(group.attrs.get("status", "")) != "ok" or "summary" not in group:
                continue
            spec = json.loads(_text(group.attrs["spec"]))
            groups.setdefault(line_key(spec), []).append((cell_id, spec, group))
        out = {}
        for key, members in groups.items():
            cell_id, spec, group = min(members, key=lambda m: m[1].get("repetition", 0))
            mode = spec.get("mode", "")
            commit = spec.get("commit", "")
            date = _text(group.attrs.get("commit_date", "")) or start
            summary = group["summary"].attrs
            median = float(summary["median_s"])
            throughput = float(summary["throughput_samples_per_s"])
            repeated = int(spec.get("repetitions", 1)) > 1
            if repeated and cell_id in series:
                s = series[cell_id].attrs
                median = float(s["median_s"])
                throughput = float(s["throughput_samples_per_s"])
                low, high = float(s["median_s_ci_low"]), float(s["median_s_ci_high"])
                t_low, t_high = float(s["throughput_ci_low"]), float(s["throughput_ci_high"])
            elif repeated:
                medians = np.array([float(m[2]["summary"].attrs["median_s"]) for m in members])
                rates = np.array(
                    [float(m[2]["summary"].attrs["throughput_samples_per_s"]) for m in members]
                )
                median, throughput = float(np.median(medians)), float(np.median(rates))
                low, high = median_interval(medians)
                t_low, t_high = median_interval(rates)
            else:
                low, high = median_interval(iteration_times(group, mode))
                t_low, t_high = _scaled(throughput, median, high), _scaled(throughput, median, low)
            if metric == "time":
                point = Point(str(path), commit, date, median, low, high, repeated)
            else:
                point = Point(str(path), commit, date, throughput, t_low, t_high, repeated)
            out[key] = (line_label(spec), spec.get("experiment", ""), point)
    return out


def expand_inputs(inputs: list[str]) -> list[Path]:
    """Files as given; directories as their *.h5 files sorted by name. UsageError for a
    path that does not exist."""
    paths = []
    for text in inputs:
        path = Path(text)
        if path.is_dir():
            paths += sorted(path.glob("*.h5"))
        elif path.exists():
            paths.append(path)
        else:
            raise UsageError(f"{text} does not exist")
    return paths


def _sort_key(point: Point, position: int, order: str):
    if order == "file":
        return (position,)
    try:
        moment = datetime.fromisoformat(point.date.replace("Z", "+00:00")).timestamp()
    except ValueError:
        moment = float("inf")
    return (moment, position)


def flag_steps(line: Line, threshold: float, metric: str) -> None:
    """Sets line.steps: consecutive points whose relative change exceeds `threshold` and
    whose intervals do not overlap."""
    line.steps = []
    for a, b in zip(line.points, line.points[1:]):
        if not (a.value > 0 and np.isfinite(b.value)):
            continue
        change = (b.value - a.value) / a.value
        disjoint = b.low > a.high or b.high < a.low
        if abs(change) > threshold and disjoint:
            worse = change > 0 if metric == "time" else change < 0
            line.steps.append(
                {
                    "from": a.file,
                    "to": b.file,
                    "from_commit": a.commit,
                    "to_commit": b.commit,
                    "change": change,
                    "direction": "slower" if worse else "faster",
                }
            )


def build_history(inputs: list[str], metric: str, threshold: float, order: str) -> list[Line]:
    """Every line of the results files `inputs` with its ordered points and flagged steps."""
    paths = expand_inputs(inputs)
    lines: dict[str, Line] = {}
    used = 0
    for position, path in enumerate(paths):
        try:
            points = read_points(path, metric)
        except ResultsFileError as error:
            print(f"scalebench history: warning: skipped {error}", file=sys.stderr)
            continue
        used += 1
        for key, (label, experiment, point) in points.items():
            line = lines.setdefault(key, Line(key, label, experiment))
            line.points.append((position, point))
    if used == 0:
        raise ResultsFileError("none of the given paths is a scalebench results file")
    for line in lines.values():
        line.points = [
            p for _, p in sorted(line.points, key=lambda x: _sort_key(x[1], x[0], order))
        ]
        flag_steps(line, threshold, metric)
    return sorted(lines.values(), key=lambda line: line.label)


def _value_text(value: float, metric: str) -> str:
    return f"{value * 1e3:.3f} ms" if metric == "time" else f"{value:.1f}/s"


def _point_name(point: Point, order: str) -> str:
    if order == "commit" and point.commit:
        return point.commit[:8]
    return Path(point.file).name


def render_text(lines: list[Line], metric: str, order: str, markdown: bool = False) -> str:
    """The trend table: one row per line."""
    header = ["cell", "points", "first", "last", "change", "steps beyond noise"]
    rows = []
    for line in lines:
        first, last = line.points[0], line.points[-1]
        change = (last.value - first.value) / first.value if first.value else float("nan")
        steps = "; ".join(
            f"{s['direction']} {s['change'] * 100:+.1f}% at "
            f"{_point_name(next(p for p in line.points if p.file == s['to']), order)}"
            for s in line.steps
        )
        rows.append(
            [
                line.label,
                str(len(line.points)),
                _value_text(first.value, metric),
                _value_text(last.value, metric),
                f"{change * 100:+.1f}%",
                steps or "-",
            ]
        )
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(out) + "\n"
    widths = [max(len(r[c]) for r in rows + [header]) for c in range(len(header))]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    out += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows]
    flagged = sum(1 for line in lines if line.steps)
    out.append(f"# {len(lines)} cells, {flagged} with a step beyond noise")
    return "\n".join(out) + "\n"


def to_json(lines: list[Line], metric: str, threshold: float, order: str, files) -> dict:
    def finite(value):
        return value if np.isfinite(value) else None

    return {
        "metric": metric,
        "threshold": threshold,
        "order": order,
        "files": [str(f) for f in files],
        "lines": [
            {
                "key": json.loads(line.key),
                "label": line.label,
                "experiment": line.experiment,
                "points": [
                    {
                        "file": p.file,
                        "commit": p.commit,
                        "date": p.date,
                        "value": finite(p.value),
                        "low": finite(p.low),
                        "high": finite(p.high),
                        "repeated": p.repeated,
                    }
                    for p in line.points
                ],
                "first": finite(line.points[0].value),
                "last": finite(line.points[-1].value),
                "change": finite(
                    (line.points[-1].value - line.points[0].value) / line.points[0].value
                ),
                "steps": line.steps,
            }
            for line in lines
        ],
    }


def plot_experiment(lines: list[Line], metric: str, order: str) -> bytes:
    """PNG: one error-bar series per line of one experiment, flagged steps marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    scale = 1e3 if metric == "time" else 1.0
    for line in lines:
        xs = np.arange(len(line.points))
        values = np.array([p.value for p in line.points]) * scale
        lows = np.array([p.low for p in line.points]) * scale
        highs = np.array([p.high for p in line.points]) * scale
        errors = np.vstack([np.nan_to_num(values - lows), np.nan_to_num(highs - values)])
        ax.errorbar(xs, values, yerr=errors, marker="o", capsize=3, label=line.label)
        for step in line.steps:
            k = next(i for i, p in enumerate(line.points) if p.file == step["to"])
            ax.annotate(
                f"{step['direction']} {step['change'] * 100:+.0f}%",
                (k, values[k]),
                textcoords="offset points",
                xytext=(0, 10),
                ha="center",
                color="red",
            )
            ax.plot([k], [values[k]], "rx", markersize=12)
    names = [_point_name(p, order) for p in max(lines, key=lambda line: len(line.points)).points]
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("median time (ms)" if metric == "time" else "throughput (samples/s)")
    ax.set_title(lines[0].experiment)
    ax.legend(fontsize=6)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


def by_experiment(lines: list[Line]) -> dict[str, list[Line]]:
    groups: dict[str, list[Line]] = {}
    for line in lines:
        groups.setdefault(line.experiment, []).append(line)
    return groups


def write_html(lines: list[Line], metric: str, order: str, output: str) -> None:
    """A self-contained page: the table and one plot per experiment."""
    import html

    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>scalebench history</title>",
        "</head><body><h1>scalebench history</h1>",
        f"<pre>{html.escape(render_text(lines, metric, order))}</pre>",
    ]
    for experiment, members in by_experiment(lines).items():
        png = base64.b64encode(plot_experiment(members, metric, order)).decode("ascii")
        parts.append(f"<h2>{html.escape(experiment)}</h2>")
        parts.append(f"<img alt='{html.escape(experiment)}' src='data:image/png;base64,{png}'>")
    parts.append("</body></html>")
    Path(output).write_text("\n".join(parts))


def add_parser(sub) -> None:
    """The `history` subcommand."""
    h = sub.add_parser("history", help="the same cells across many results files: trends")
    h.add_argument("inputs", nargs="+", metavar="DIR_OR_FILE", help="results files or directories")
    h.add_argument("--order", choices=("date", "commit", "file"), default="date")
    h.add_argument("--metric", choices=("time", "throughput"), default="time")
    h.add_argument(
        "--threshold", type=float, default=0.05, help="relative change a step must exceed"
    )
    h.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    h.add_argument("--html", metavar="REPORT.html", help="also write an HTML page with plots")
    h.add_argument("--plots", metavar="DIR", help="also write one PNG per experiment to DIR")
    h.add_argument(
        "--fail-on-step", action="store_true", help="exit 1 when a step is flagged slower"
    )


def run(args) -> int:
    if not 0 <= args.threshold < 1:
        raise UsageError("--threshold is a fraction, e.g. 0.05 for 5 %")
    lines = build_history(args.inputs, args.metric, args.threshold, args.order)
    if args.format == "json":
        files = expand_inputs(args.inputs)
        print(json.dumps(to_json(lines, args.metric, args.threshold, args.order, files), indent=1))
    else:
        print(render_text(lines, args.metric, args.order, args.format == "markdown"), end="")
    if args.html:
        write_html(lines, args.metric, args.order, args.html)
        print(f"wrote {args.html}", file=sys.stderr)
    if args.plots:
        directory = Path(args.plots)
        directory.mkdir(parents=True, exist_ok=True)
        for experiment, members in by_experiment(lines).items():
            name = "".join(c if c.isalnum() or c in "-_" else "_" for c in experiment)
            (directory / f"history-{name}.png").write_bytes(
                plot_experiment(members, args.metric, args.order)
            )
    slower = any(s["direction"] == "slower" for line in lines for s in line.steps)
    return 1 if args.fail_on_step and slower else 0
