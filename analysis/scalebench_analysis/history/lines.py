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

Steps. Between consecutive points a, b of a line: change = value(b) / value(a) - 1; the
pair is judged over its runs as compare judges two cells (tables/verdict.py, Note [Runs are
the unit of evidence]): each point's runs are its cells' figures (the repetitions; one run
for a cell that is not repeated), Welch's t test on their logarithms at alpha = 1 -
confidence; a step is flagged when that is significant and beyond the threshold. With one
run on a side the run-to-run variation is unknown: no step is flagged, and the changes
beyond the threshold left unjudged are counted (`unjudged`). The points' intervals are
shown, not tested. Direction: `slower` when the time rose or the throughput fell, else
`faster`.

The JSON output is described in render.py.
"""

from __future__ import annotations

import json
import math
import os
import sys
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from ..errors import ResultsFileError, UsageError
from ..read.loader import Results, load
from .model import History, HistoryOptions, Line, Point, RunFile, line_key
from .statistics import find_steps, repetition_interval, within_run_interval

#: history()'s options when none are given (the defaults of HistoryOptions).
_DEFAULT_OPTIONS = HistoryOptions()

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
                runs=tuple(float(v) for v in figures[group.index]),
            ),
        )
    return out


# ---------------------------------------------------------------------------- lines


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
        line.steps, line.unjudged = find_steps(
            line.points, options.threshold, options.metric, 1.0 - options.confidence
        )
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


def history(paths: list, options: HistoryOptions = _DEFAULT_OPTIONS) -> History:
    """Reads `paths` (files and directories, see expand_inputs) and lines their cells up."""
    runs, skipped = load_runs(paths)
    return build_history(runs, skipped, options)
