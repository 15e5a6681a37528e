"""`scalebench history`: the same cells lined up across many results files, each figure's trend.

Lines. A *line* is one cell configuration followed across files: cells of different files
belong to the same line when their spec (the parsed `spec` attribute) is equal apart from
the fields of HISTORY_DROP (`commit`, `repetition`, `repetitions`, `seed`, `timeout_s`,
`interleave`, `label_settings`) and the bookkeeping `cell_id` and `source`
(`line_key`). Everything else stays in the key: branch, experiment, model, mode,
precision, batch size, world size, samples, device, backend and every other setting. So
successive commits of one branch form one line, and main and a feature branch two.

Points. Per file and line, the ok cells with a finite `median_s` of that key make one
point (the repetitions of a cell collapse into it):

* the file's `/series` group covering them (layout 1.5, repeated cells): its `median_s` /
  `throughput_samples_per_s` and bootstrap interval (`median_s_ci_low/high`,
  `throughput_ci_low/high`); interval `series`;
* else two or more such cells (repetitions without a `/series`, e.g. an aborted run): the
  median of their `median_s` (`throughput_samples_per_s`) and a percentile bootstrap
  interval of that median over the cells (REPETITION_RESAMPLES draws); interval
  `repetitions`;
* else the one cell's summary figure and a 95 % percentile bootstrap interval of the median
  of its iteration samples (quality.iteration_samples: train: the slowest rank's `step`
  per measured iteration; inference: every measured `batch` time of every rank),
  `HistoryOptions.resamples` (2000) draws from ``numpy.random.default_rng([seed,
  crc32(cell_id)])`` (seed 0): interval `within-run`. For throughput, training maps the
  interval of the median (throughput = batch * world / median); inference resamples each
  rank's batch times and takes samples / the slowest rank's total, as the summary defines
  it. Such an interval covers the noise within that run only, not run-to-run variation. A
  series with one completed repetition gets that repetition's within-run interval; fewer
  than 2 samples give none (`interval` `none`, NaN bounds).

Order. `date` (default): the cell's `commit_date` when non-empty, else the file's root
`start_time`, ties broken by `start_time`, then by the order given; `commit`: the same
order, points labelled by short commit (`*` when the checkout was dirty); `file`: the
order given. Points of `date` and `file` are labelled by the file name without `.h5`.

Steps. Between consecutive points a, b of a line: change = value(b) / value(a) - 1; a
step is flagged when |change| > threshold AND both intervals exist and do not overlap
(b's interval lies wholly above or below a's). Direction: `slower` when the time rose or
the throughput fell, else `faster`.

JSON output (`--format json`), keys stable:

* ``command`` ("history"), ``metric`` ("time" / "throughput"), ``unit`` ("s" /
  "samples/s"), ``order``, ``threshold``, ``confidence``, ``bootstrap_resamples``,
  ``bootstrap_seed``, ``files`` (the usable files, in the order given), ``skipped``
  (``[{"path", "reason"}]``), ``slower_steps``, ``faster_steps`` (counts), ``lines``;
* each line: ``label``, ``key`` (canonical JSON of the spec without HISTORY_DROP),
  ``branch``, ``experiment``, ``mode``, ``precision``, ``batch_size``, ``world_size``,
  ``device``, ``n_points``, ``first``, ``last``, ``change`` (last / first - 1),
  ``steps``, ``points``;
* each point: ``label``, ``file``, ``cell_ids``, ``commit``, ``commit_date``,
  ``start_time``, ``when`` (the ISO time it was ordered by, null if none),
  ``value``, ``ci_low``, ``ci_high`` (in ``unit``), ``interval`` (``series``,
  ``repetitions``, ``within-run``, ``none``), ``repetitions`` (cells collapsed),
  ``disagree`` (the series' repetitions disagree);
* each step: ``from``, ``to`` (point labels), ``from_file``, ``to_file``,
  ``from_commit``, ``to_commit``, ``change``, ``direction`` (``slower`` / ``faster``).

NaN is written as null.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
import sys
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from .errors import ResultsFileError, UsageError
from .loader import Results, config_key, load
from .quality import iteration_samples, summarised_phase

#: Spec fields left out of a line's key (besides `cell_id` and `source`, which
#: loader.config_key always drops): what changes along a history or is bookkeeping.
HISTORY_DROP = (
    "commit",
    "repetition",
    "repetitions",
    "seed",
    "timeout_s",
    "interleave",
    "label_settings",
)
ORDERS = ("date", "commit", "file")
METRICS = ("time", "throughput")
FORMATS = ("text", "markdown", "json")
#: Exit status of `--fail-on-step` with a flagged slower step (compare's regression status).
EXIT_STEP = 1
#: Bootstrap draws of the interval of a median over repetition cells without a /series
#: (as many as scalebench's own series bootstrap).
REPETITION_RESAMPLES = 10000
#: Values one bootstrap block draws at most (bounds the memory of the resampling).
_BLOCK_VALUES = 2_000_000
_SPARK = "▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class HistoryOptions:
    """How points are ordered, which figure is followed and what counts as a step."""

    order: str = "date"
    metric: str = "time"
    threshold: float = 0.05
    resamples: int = 2000
    seed: int = 0
    confidence: float = 0.95


@dataclass
class RunFile:
    """One usable results file: its position among the files given, its contents and its
    `/series` groups (series id -> attributes)."""

    index: int
    path: str
    results: Results
    series: dict


@dataclass
class Point:
    """One file's figure of a line, with its interval (NaN bounds when none)."""

    label: str
    file: str
    index: int
    cell_ids: list
    commit: str
    commit_date: str
    start_time: str
    when: str
    order_key: tuple
    value: float
    ci_low: float
    ci_high: float
    interval: str
    repetitions: int
    disagree: bool


@dataclass
class Step:
    """A change beyond noise between points `before` and `after` (indices into the line)."""

    before: int
    after: int
    change: float
    direction: str


@dataclass
class Line:
    """One cell configuration across files: its key spec, label, points (ordered) and
    flagged steps."""

    key: str
    spec: dict
    label: str = ""
    points: list = field(default_factory=list)
    steps: list = field(default_factory=list)

    @property
    def first(self) -> float:
        return self.points[0].value

    @property
    def last(self) -> float:
        return self.points[-1].value

    @property
    def change(self) -> float:
        return self.last / self.first - 1.0 if self.first else math.nan


@dataclass
class History:
    """Everything `history` reports: the lines, the files used and those skipped."""

    options: HistoryOptions
    files: list
    skipped: list
    lines: list

    def count(self, direction: str) -> int:
        """Flagged steps of `direction` over every line."""
        return sum(s.direction == direction for line in self.lines for s in line.steps)


def line_key(spec: dict) -> str:
    """The key that lines a cell up across files: canonical JSON of its spec without
    HISTORY_DROP (and cell_id, source)."""
    return config_key(spec, drop=HISTORY_DROP)


# ---------------------------------------------------------------------------- inputs


def expand_inputs(paths: list) -> list:
    """The files to read, in the order given: a file as is, a directory as its `*.h5`
    files (not recursive, sorted by name); each file once. UsageError for a path that does
    not exist; a directory without `*.h5` gives a warning line on stderr."""
    files, seen = [], set()
    for path in paths:
        if os.path.isdir(path):
            found = sorted(
                os.path.join(path, name)
                for name in os.listdir(path)
                if name.endswith(".h5") and os.path.isfile(os.path.join(path, name))
            )
            if not found:
                warn(f"{path}: no *.h5 file in this directory")
        elif os.path.exists(path):
            found = [path]
        else:
            raise UsageError(f"{path}: no such file or directory")
        for name in found:
            real = os.path.realpath(name)
            if real not in seen:
                seen.add(real)
                files.append(name)
    return files


def warn(message: str) -> None:
    """One warning line on stderr."""
    print(f"scalebench history: warning: {message}", file=sys.stderr)


def file_series(results: Results) -> dict:
    """series id -> its row of the loader's `series` table (the `/series` groups of layout
    1.5; empty without them; a damaged group is left out by the loader, listed in
    `problems`, and its cells' point computed from the cells)."""
    return {
        row["series_id"]: row
        for row in results.series.to_dict("records")
        if isinstance(row.get("cells"), list)
    }


def load_runs(paths: list) -> tuple[list, list]:
    """(usable RunFiles, [(path, reason)] skipped) of `paths` (see expand_inputs). A file
    that is not a scalebench results file (a probe file, another HDF5 file, any other
    file) or that HDF5 cannot read is skipped with a warning; damaged cells are left out
    with one. ResultsFileError when no file is usable."""
    files = expand_inputs(paths)
    runs, skipped = [], []
    for path in files:
        try:
            results = load(path)
        except (ResultsFileError, OSError) as error:
            warn(f"skipped {error}")
            skipped.append((path, str(error)))
            continue
        except RuntimeError as error:  # libhdf5 refusing a damaged file (h5py raises these)
            reason = f"{path}: unreadable HDF5 file ({str(error).splitlines()[0]})"
            warn(f"skipped {reason}")
            skipped.append((path, reason))
            continue
        for cell_id, problem in sorted(results.damaged.items()):
            warn(f"{path}: damaged cell {cell_id} left out: {problem}")
        runs.append(RunFile(len(runs), path, results, file_series(results)))
    if not runs:
        raise ResultsFileError(
            f"no usable scalebench results file among the {len(files)} file(s) given"
            + (" (see the warnings above)" if skipped else "")
        )
    return runs, skipped


# ---------------------------------------------------------------------------- intervals


def _percentiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0
    low, high = np.percentile(values, [100 * tail, 100 * (1 - tail)])
    return float(low), float(high)


def bootstrap_medians(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """`resamples` medians of `values` resampled with replacement (n of n each), drawn in
    blocks of at most _BLOCK_VALUES values."""
    n = values.size
    block = max(1, _BLOCK_VALUES // n)
    out = np.empty(resamples)
    for start in range(0, resamples, block):
        k = min(block, resamples - start)
        out[start : start + k] = np.median(values[rng.integers(0, n, (k, n))], axis=1)
    return out


def _bootstrap_slowest_total(per_rank: list, resamples: int, rng) -> np.ndarray:
    """Per resample: the largest over ranks of the sum of that rank's values resampled
    with replacement (inference throughput's denominator)."""
    out = np.zeros(resamples)
    for values in per_rank:
        n = values.size
        block = max(1, _BLOCK_VALUES // n)
        for start in range(0, resamples, block):
            k = min(block, resamples - start)
            totals = values[rng.integers(0, n, (k, n))].sum(axis=1)
            out[start : start + k] = np.maximum(out[start : start + k], totals)
    return out


def within_run_interval(results: Results, cell: pd.Series, options: HistoryOptions):
    """(low, high) of the cell's figure from its own iterations (module doc: `within-run`);
    (NaN, NaN) with fewer than 2 samples. Deterministic: seeded by options.seed and the
    cell id."""
    cell_id, mode = cell["cell_id"], cell["mode"]
    samples = iteration_samples(results, cell_id, mode)
    if samples.size < 2:
        return math.nan, math.nan
    rng = np.random.default_rng([options.seed, zlib.crc32(cell_id.encode())])
    if options.metric == "time" or mode == "train":
        low, high = _percentiles(
            bootstrap_medians(samples, options.resamples, rng), options.confidence
        )
        if options.metric == "time":
            return low, high
        scale = float(cell["throughput_samples_per_s"]) * float(cell["median_s"])
        return scale / high, scale / low
    batches = results.timing_array(cell_id, summarised_phase(mode))
    per_rank = [row[np.isfinite(row)] for row in batches]
    per_rank = [row for row in per_rank if row.size]
    slowest = max(float(row.sum()) for row in per_rank)
    totals = _bootstrap_slowest_total(per_rank, options.resamples, rng)
    scale = float(cell["throughput_samples_per_s"]) * slowest
    low, high = _percentiles(scale / totals, options.confidence)
    return low, high


def repetition_interval(values: np.ndarray, seed_text: str, options: HistoryOptions):
    """(low, high): percentile bootstrap interval of the median of `values` (one figure
    per repetition cell), REPETITION_RESAMPLES draws seeded by options.seed and
    `seed_text`."""
    rng = np.random.default_rng([options.seed, zlib.crc32(seed_text.encode())])
    medians = bootstrap_medians(values, REPETITION_RESAMPLES, rng)
    return _percentiles(medians, options.confidence)


# ---------------------------------------------------------------------------- points


def _figure_column(metric: str) -> str:
    return "median_s" if metric == "time" else "throughput_samples_per_s"


def _parse_time(text) -> datetime | None:
    """An ISO 8601 time as an aware datetime (naive ones read as UTC); None when empty or
    not ISO 8601."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _order_key(run: RunFile, commit_date: str, order: str) -> tuple[tuple, str]:
    """(sort key, the time it stands for as given) of a point of `run`: see the module
    doc's Order. Points without a usable time sort after those with one."""
    start_text = run.results.meta.get("start_time") or ""
    start = _parse_time(start_text)
    start_ts = start.timestamp() if start else math.inf
    if order == "file":
        return (run.index,), ""
    committed = _parse_time(commit_date)
    if committed is not None:
        return (committed.timestamp(), start_ts, run.index), commit_date
    return (start_ts, start_ts, run.index), start_text if start else ""


def _covering_series(run: RunFile, cell_ids: list) -> dict | None:
    """The one `/series` group whose repetitions include every cell of `cell_ids`; None
    when there is none or more than one."""
    wanted = set(cell_ids)
    found = [s for s in run.series.values() if wanted <= set(s["cells"])]
    return found[0] if len(found) == 1 else None


def _finite(value) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def _series_figures(series: dict, metric: str):
    """(value, low, high) of a `/series` group for `metric`."""
    if metric == "time":
        names = ("median_s", "median_s_ci_low", "median_s_ci_high")
    else:
        names = ("throughput_samples_per_s", "throughput_ci_low", "throughput_ci_high")
    return tuple(_finite(series.get(name)) for name in names)


def _figures(run: RunFile, cells: pd.DataFrame, options: HistoryOptions):
    """(value, low, high, interval kind, disagree) of one line's ok cells of one file."""
    column = _figure_column(options.metric)
    ids = list(cells["cell_id"])
    series = _covering_series(run, ids)
    if series is not None:
        value, low, high = _series_figures(series, options.metric)
        if math.isfinite(value):
            disagree = bool(series.get("disagree") or 0)
            if math.isfinite(low) and math.isfinite(high):
                return value, low, high, "series", disagree
            if len(cells) == 1:  # one completed repetition: its own iterations
                low, high = within_run_interval(run.results, cells.iloc[0], options)
                kind = "within-run" if math.isfinite(low) else "none"
                return value, low, high, kind, disagree
            return value, math.nan, math.nan, "none", disagree
    values = cells[column].to_numpy(dtype=float)
    if len(cells) >= 2:
        low, high = repetition_interval(values, f"{run.path}:{min(ids)}", options)
        return float(np.median(values)), low, high, "repetitions", False
    low, high = within_run_interval(run.results, cells.iloc[0], options)
    kind = "within-run" if math.isfinite(low) else "none"
    return float(values[0]), low, high, kind, False


def _point_label(run: RunFile, commit: str, dirty: bool, order: str) -> str:
    if order == "commit":
        return (commit[:7] or "-") + ("*" if dirty else "")
    name = os.path.basename(run.path)
    return name[:-3] if name.endswith(".h5") else name


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def file_points(run: RunFile, options: HistoryOptions) -> dict:
    """line key -> (key spec, Point) of one file: its ok cells with a finite figure,
    grouped by line_key (repetitions collapse into one point)."""
    cells = run.results.cells
    column = _figure_column(options.metric)
    if column not in cells or cells.empty:
        return {}
    figures = pd.to_numeric(cells[column], errors="coerce")
    ok = cells[(cells["status"] == "ok") & np.isfinite(figures)]
    keys = [line_key(spec) for spec in ok["spec"]]
    out = {}
    for key, group in ok.groupby(pd.Series(keys, index=ok.index), sort=False):
        value, low, high, kind, disagree = _figures(run, group, options)
        first = group.iloc[0]
        commit_date = _text(first.get("commit_date"))
        commit = _text(first.get("commit")) or _text(first["spec"].get("commit"))
        dirty = bool(first.get("dirty")) if pd.notna(first.get("dirty")) else False
        order_key, when = _order_key(run, commit_date, options.order)
        out[key] = (
            first["spec"],
            Point(
                label=_point_label(run, commit, dirty, options.order),
                file=run.path,
                index=run.index,
                cell_ids=list(group["cell_id"]),
                commit=commit,
                commit_date=commit_date,
                start_time=_text(run.results.meta.get("start_time")),
                when=when,
                order_key=order_key,
                value=value,
                ci_low=low,
                ci_high=high,
                interval=kind,
                repetitions=len(group),
                disagree=disagree,
            ),
        )
    return out


# ---------------------------------------------------------------------------- lines


def intervals_apart(a: Point, b: Point) -> bool:
    """Both intervals exist and do not overlap."""
    bounds = (a.ci_low, a.ci_high, b.ci_low, b.ci_high)
    if not all(math.isfinite(x) for x in bounds):
        return False
    return b.ci_low > a.ci_high or b.ci_high < a.ci_low


def find_steps(points: list, threshold: float, metric: str) -> list:
    """The flagged steps between consecutive points (module doc: Steps)."""
    steps = []
    for i in range(1, len(points)):
        a, b = points[i - 1], points[i]
        change = b.value / a.value - 1.0 if a.value else math.nan
        if not (abs(change) > threshold) or not intervals_apart(a, b):
            continue
        worse = change > 0 if metric == "time" else change < 0
        steps.append(Step(i - 1, i, change, "slower" if worse else "faster"))
    return steps


def _flatten(spec: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in spec.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


#: Spec fields a line's base label shows (the rest only where they tell lines apart).
_LABEL_FIELDS = ("branch", "experiment", "mode", "batch_size", "world_size", "precision")


def _base_label(spec: dict) -> str:
    batch = spec.get("batch_size")
    return (
        f"{spec.get('branch') or '-'}/{spec.get('experiment')}/{spec.get('mode')}"
        f"/b{'auto' if batch == 0 else batch}/w{spec.get('world_size')}/{spec.get('precision')}"
    )


def label_lines(lines: list) -> None:
    """Sets each line's label: its base label, plus ``[field=value ...]`` of the spec
    fields that differ among the lines sharing that base label."""
    groups: dict = {}
    for line in lines:
        groups.setdefault(_base_label(line.spec), []).append(line)
    for base, members in groups.items():
        flats = [_flatten(json.loads(m.key)) for m in members]
        names = sorted({n for f in flats for n in f} - set(_LABEL_FIELDS))
        varying = [
            n for n in names if len({json.dumps(f.get(n), sort_keys=True) for f in flats}) > 1
        ]
        for line, flat in zip(members, flats):
            extra = " ".join(f"{n}={json.dumps(flat.get(n))}" for n in varying)
            line.label = f"{base} [{extra}]" if extra else base


def build_history(runs: list, skipped: list, options: HistoryOptions) -> History:
    """The lines of `runs`: points ordered (options.order), steps flagged, lines sorted by
    experiment, branch, mode, precision, label."""
    lines: dict = {}
    for run in runs:
        for key, (spec, point) in file_points(run, options).items():
            line = lines.setdefault(key, Line(key, spec))
            line.points.append(point)
    for line in lines.values():
        line.points.sort(key=lambda p: p.order_key)
        line.steps = find_steps(line.points, options.threshold, options.metric)
    ordered = list(lines.values())
    label_lines(ordered)
    ordered.sort(
        key=lambda ln: (
            str(ln.spec.get("experiment")),
            str(ln.spec.get("branch")),
            str(ln.spec.get("mode")),
            str(ln.spec.get("precision")),
            ln.label,
        )
    )
    return History(options, [r.path for r in runs], skipped, ordered)


def history(paths: list, options: HistoryOptions = HistoryOptions()) -> History:
    """Reads `paths` (files and directories, see expand_inputs) and lines their cells up."""
    runs, skipped = load_runs(paths)
    return build_history(runs, skipped, options)


# ---------------------------------------------------------------------------- rendering


def format_value(value: float, metric: str) -> str:
    """A figure for the tables: time in ms, throughput in samples/s (4 significant)."""
    if not math.isfinite(value):
        return "-"
    return f"{value * 1e3:.4g} ms" if metric == "time" else f"{value:.4g}/s"


def sparkline(values: list, unicode: bool = True) -> str:
    """One character per value, scaled between the line's smallest and largest value
    (ASCII digits 0-7 when `unicode` is False)."""
    marks = _SPARK if unicode else "01234567"
    low, high = min(values), max(values)
    if not high > low:
        return marks[3] * len(values)
    return "".join(marks[min(7, int((v - low) / (high - low) * 8))] for v in values)


def _step_text(line: Line, step: Step) -> str:
    a, b = line.points[step.before], line.points[step.after]
    return f"{step.direction} {step.change:+.1%} ({a.label} -> {b.label})"


def table_rows(hist: History, unicode: bool = True) -> list:
    """One dict per line: the columns of the trend table, as text."""
    metric = hist.options.metric
    rows = []
    for line in hist.lines:
        values = [p.value for p in line.points]
        rows.append(
            {
                "line": line.label,
                "n": str(len(line.points)),
                "first": format_value(line.first, metric),
                "last": format_value(line.last, metric),
                "change": f"{line.change:+.1%}" if math.isfinite(line.change) else "-",
                "steps": "; ".join(_step_text(line, s) for s in line.steps) or "-",
                "trend": sparkline(values, unicode),
            }
        )
    return rows


_COLUMNS = ("line", "n", "first", "last", "change", "steps", "trend")


def summary_line(hist: History) -> str:
    """One line: files, lines, what was followed, and the flagged steps."""
    opts = hist.options
    figure = "median step/batch time" if opts.metric == "time" else "throughput"
    return (
        f"history of {figure} over {len(hist.files)} file(s), {len(hist.lines)} line(s), "
        f"order {opts.order}, threshold {opts.threshold:.1%}: "
        f"{hist.count('slower')} slower step(s), {hist.count('faster')} faster step(s)"
    )


def to_text(hist: History, unicode: bool = True) -> str:
    """The trend table for the console, then the summary line."""
    rows = table_rows(hist, unicode)
    widths = {c: max([len(c)] + [len(r[c]) for r in rows]) for c in _COLUMNS}
    header = "  ".join(c.ljust(widths[c]) for c in _COLUMNS)
    body = ["  ".join(r[c].ljust(widths[c]) for c in _COLUMNS).rstrip() for r in rows]
    return "\n".join([header.rstrip(), *body, "", summary_line(hist)]) + "\n"


def to_markdown(hist: History, unicode: bool = True) -> str:
    """The trend table as a GitHub markdown table, then the summary line."""
    rows = table_rows(hist, unicode)
    lines = ["| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    for r in rows:
        cells = [r[c].replace("|", "\\|") for c in _COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", summary_line(hist)]) + "\n"


def _number(value):
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def _point_json(p: Point) -> dict:
    return {
        "label": p.label,
        "file": p.file,
        "cell_ids": p.cell_ids,
        "commit": p.commit,
        "commit_date": p.commit_date,
        "start_time": p.start_time,
        "when": p.when or None,
        "value": _number(p.value),
        "ci_low": _number(p.ci_low),
        "ci_high": _number(p.ci_high),
        "interval": p.interval,
        "repetitions": p.repetitions,
        "disagree": p.disagree,
    }


def _step_json(line: Line, s: Step) -> dict:
    a, b = line.points[s.before], line.points[s.after]
    return {
        "from": a.label,
        "to": b.label,
        "from_file": a.file,
        "to_file": b.file,
        "from_commit": a.commit,
        "to_commit": b.commit,
        "change": _number(s.change),
        "direction": s.direction,
    }


def _line_json(line: Line) -> dict:
    spec = line.spec
    return {
        "label": line.label,
        "key": line.key,
        **{f: spec.get(f) for f in ("branch", "experiment", "mode", "precision")},
        **{f: spec.get(f) for f in ("batch_size", "world_size", "device")},
        "n_points": len(line.points),
        "first": _number(line.first),
        "last": _number(line.last),
        "change": _number(line.change),
        "steps": [_step_json(line, s) for s in line.steps],
        "points": [_point_json(p) for p in line.points],
    }


def to_json(hist: History) -> str:
    """The JSON document of the module doc."""
    opts = hist.options
    document = {
        "command": "history",
        "metric": opts.metric,
        "unit": "s" if opts.metric == "time" else "samples/s",
        "order": opts.order,
        "threshold": opts.threshold,
        "confidence": opts.confidence,
        "bootstrap_resamples": opts.resamples,
        "bootstrap_seed": opts.seed,
        "files": hist.files,
        "skipped": [{"path": p, "reason": r} for p, r in hist.skipped],
        "slower_steps": hist.count("slower"),
        "faster_steps": hist.count("faster"),
        "lines": [_line_json(line) for line in hist.lines],
    }
    return json.dumps(document, indent=2, allow_nan=False) + "\n"


def render(hist: History, fmt: str, unicode: bool = True) -> str:
    """`hist` as text, markdown or json."""
    if fmt == "json":
        return to_json(hist)
    if fmt == "markdown":
        return to_markdown(hist, unicode)
    return to_text(hist, unicode)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; font-size: 0.85em; }}
th, td {{ border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; }}
td.slower {{ background: #fdd; }} td.faster {{ background: #dfd; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>{title}</h1>
<p>{summary}</p>
{plots}
<h2>Trend table</h2>
{table}
</body></html>
"""


def html_page(hist: History, pngs: list, title: str = "scalebench history") -> str:
    """A self-contained page: the summary, one inlined PNG per experiment (`pngs`:
    [(experiment, base64 text)]), the trend table. No script, no external link."""
    plots = "\n".join(
        f"<h2>{html.escape(name)}</h2>\n"
        f'<img alt="{html.escape(name)}" src="data:image/png;base64,{data}">'
        for name, data in pngs
    )
    rows = table_rows(hist)
    head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
    body = []
    for line, row in zip(hist.lines, rows):
        directions = {s.direction for s in line.steps}
        kind = "slower" if "slower" in directions else ("faster" if directions else "")
        cells = "".join(
            (f'<td class="{kind}">' if c == "steps" and kind else "<td>")
            + html.escape(row[c])
            + "</td>"
            for c in _COLUMNS
        )
        body.append(f"<tr>{cells}</tr>")
    table = f"<table><tr>{head}</tr>\n" + "\n".join(body) + "\n</table>"
    return _PAGE.format(
        title=html.escape(title), summary=html.escape(summary_line(hist)), plots=plots, table=table
    )


# ---------------------------------------------------------------------------- command


def add_parser(sub) -> None:
    """The `history` subcommand."""
    from .cli import fraction

    h = sub.add_parser(
        "history",
        help="trend of the same cells across many results files, steps beyond noise flagged",
    )
    h.add_argument(
        "paths",
        nargs="+",
        metavar="DIR_OR_FILE",
        help="results .h5 files, or directories (their *.h5 files, not recursive)",
    )
    h.add_argument("--order", choices=ORDERS, default="date", help="order of points")
    h.add_argument("--metric", choices=METRICS, default="time", help="figure followed")
    h.add_argument(
        "--threshold",
        type=fraction,
        default=HistoryOptions.threshold,
        help="smallest relative change flagged as a step (default 5%%)",
    )
    h.add_argument("--format", choices=FORMATS, default="text", help="output format")
    h.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    h.add_argument("--html", metavar="REPORT.html", help="also write a self-contained HTML page")
    h.add_argument("--plots", metavar="DIR", help="also write one PNG per experiment to DIR")
    h.add_argument(
        "--fail-on-step",
        action="store_true",
        help=f"exit {EXIT_STEP} when a slower step is flagged (for CI)",
    )


def _can_encode(text: str, stream) -> bool:
    try:
        text.encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def run(args) -> int:
    """`scalebench history`: prints (or writes) the trend, the HTML page and the PNGs;
    EXIT_STEP with --fail-on-step and a slower step, else 0."""
    options = HistoryOptions(order=args.order, metric=args.metric, threshold=args.threshold)
    hist = history(args.paths, options)
    unicode = bool(args.output) or _can_encode(_SPARK, sys.stdout)
    text = render(hist, args.format, unicode)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
    if args.output or args.format == "json":
        print(summary_line(hist), file=sys.stderr)
    if args.html or args.plots:
        from .history_plots import experiment_pngs, write_pngs

        pngs = experiment_pngs(hist)
        if args.plots:
            written = write_pngs(pngs, args.plots)
            print(f"wrote {len(written)} plots to {args.plots}", file=sys.stderr)
        if args.html:
            with open(args.html, "w", encoding="utf-8") as out:
                out.write(html_page(hist, [(name, _b64(png)) for name, png in pngs]))
            print(f"wrote {args.html}", file=sys.stderr)
    failed = args.fail_on_step and hist.count("slower") > 0
    return EXIT_STEP if failed else 0


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
