"""`analyze --ops` and `compare --ops` (docs/profiles.md): the operator tables of profiled
cells as text, CSV or JSON."""

from __future__ import annotations

import json
import math

import pandas as pd

from ..errors import UsageError
from ..read import profiles
from ..read.loader import Results
from ..tables import ops

_NO_PROFILE = (
    "no cell of {path} holds an operator profile: run its cells with `profile_steps: N` "
    "(docs/profiles.md)"
)


def _ms(value: float) -> str:
    return "nan" if not math.isfinite(value) else f"{value:+.3f} ms"


def _pct(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value * 100:.0f} %"


def _table_text(frame: pd.DataFrame) -> str:
    shown = frame.copy()
    for column in shown.columns:
        if column.endswith("share") or column == "share_of_step_change":
            shown[column] = [_pct(v) for v in shown[column]]
        elif shown[column].dtype.kind == "f":
            shown[column] = [f"{v:.3f}" for v in shown[column]]
    return shown.to_string(index=False)


def _label(results: Results, cell_id: str) -> str:
    try:
        return str(results.cell(cell_id).get("label", cell_id))
    except KeyError:
        return cell_id


def _pick_cells(results: Results, path: str, wanted: str | None) -> list[str]:
    have = profiles.profiled_cells(path)
    if not have:
        raise UsageError(_NO_PROFILE.format(path=path))
    if wanted is None:
        return have
    chosen = [c for c in have if c.startswith(wanted)]
    if not chosen:
        raise UsageError(
            f"{path}: no profiled cell whose id starts with {wanted!r} (profiled: "
            + ", ".join(have)
            + ")"
        )
    return chosen


def analyze_ops(results: Results, path: str, cell: str | None, limit: int, fmt: str) -> str:
    """For each profiled cell (or those whose id starts with `cell`): the top `limit`
    operators by self time per phase (ops.top_ops)."""
    sections = []
    for cell_id in _pick_cells(results, path, cell):
        profile = profiles.read_profile(path, cell_id)
        table = ops.top_ops(profile, limit)
        table.insert(0, "cell_id", cell_id)
        sections.append((cell_id, profile.attrs, table))
    if fmt == "csv":
        return pd.concat([t for _, _, t in sections]).to_csv(index=False)
    if fmt == "json":
        return json.dumps(
            [
                {"cell_id": c, **attrs, "ops": t.drop(columns="cell_id").to_dict("records")}
                for c, attrs, t in sections
            ],
            indent=1,
        )
    out = []
    for cell_id, attrs, table in sections:
        out.append(
            f"{_label(results, cell_id)} (cell {cell_id}): top operators by self time per "
            f"phase, per step, over {attrs['steps']} profiled steps "
            f"({', '.join(attrs['activities'])}); times are under the profiler"
        )
        out.append(_table_text(table.drop(columns="cell_id")) if not table.empty else "(empty)")
        out.append("")
    return "\n".join(out)


def _profiled(results: Results, unit_id: str, have: set) -> str | None:
    """The first profiled cell of a compared unit (a cell, or the repetitions of a series)."""
    cells = results.cells
    ids = list(cells.cell_id[cells.cell_id == unit_id])
    if "series_id" in cells:
        ids += list(cells.cell_id[cells.series_id == unit_id])
    return next((c for c in ids if c in have), None)


def compare_ops(
    base: Results,
    base_path: str,
    new: Results,
    new_path: str,
    table: pd.DataFrame,
    limit: int,
    fmt: str,
) -> str:
    """For each compared pair of the regression table whose two cells hold a profile: the
    operators that explain the step's change (ops.ops_diff)."""
    have_base = set(profiles.profiled_cells(base_path))
    have_new = set(profiles.profiled_cells(new_path))
    sections = []
    for _, row in table.iterrows():
        base_id, new_id = row.get("base_cell_id"), row.get("new_cell_id")
        if not isinstance(base_id, str) or not isinstance(new_id, str) or not base_id:
            continue
        b = _profiled(base, base_id, have_base)
        n = _profiled(new, new_id, have_new)
        if b is None or n is None:
            continue
        b_median = float(base.cell(b).get("median_s", math.nan))
        n_median = float(new.cell(n).get("median_s", math.nan))
        rows, totals = ops.ops_diff(
            profiles.read_profile(base_path, b),
            profiles.read_profile(new_path, n),
            n_median - b_median,
            limit,
        )
        sections.append((row.get("label", n), b, n, b_median, n_median, rows, totals))
    if not sections:
        raise UsageError(
            "compare --ops: no compared pair whose two cells hold an operator profile: run "
            "both sides with `profile_steps: N` (docs/profiles.md)"
        )
    if fmt == "csv":
        frames = [r.assign(base_cell_id=b, new_cell_id=n) for _, b, n, _, _, r, _ in sections]
        return pd.concat(frames).to_csv(index=False)
    if fmt == "json":
        return json.dumps(
            [
                {
                    "label": label,
                    "base_cell_id": b,
                    "new_cell_id": n,
                    **totals,
                    "ops": rows.to_dict("records"),
                }
                for label, b, n, _, _, rows, totals in sections
            ],
            indent=1,
        )
    out = []
    for label, b, n, b_median, n_median, rows, totals in sections:
        out.append(
            f"{label}: step {b_median * 1e3:.3f} ms -> {n_median * 1e3:.3f} ms "
            f"({_ms(totals['step_delta_ms'])}; cells {b} -> {n}); operators by their share of "
            f"the step's change ({totals['device']} self time per step, under the profiler)"
        )
        out.append(_table_text(rows) if not rows.empty else "(no operator)")
        out.append(
            f"the {len(rows)} operators shown explain {_ms(totals['explained_ms'])} "
            f"({_pct(totals['explained_share'])} of the step's change); all "
            f"{totals['operators']} together {_ms(totals['all_ops_ms'])} "
            f"({_pct(totals['all_ops_share'])}); unexplained {_ms(totals['unexplained_ms'])} "
            f"({_pct(totals['unexplained_share'])})"
        )
        out.append("")
    return "\n".join(out)


def report_ops_frame(results: Results, path: str, limit: int = 5) -> pd.DataFrame | None:
    """The HTML report's Operators section (docs/profiles.md): for each profiled cell, its
    label and the `limit` operators of most self time per phase (ops.top_ops), shares as
    percentages; None when no cell of the file was profiled."""
    frames = []
    for cell_id in profiles.profiled_cells(path):
        profile = profiles.read_profile(path, cell_id)
        if profile is None or profile.empty:
            continue
        table = ops.top_ops(profile, limit)
        table.insert(0, "cell", _label(results, cell_id))
        frames.append(table)
    if not frames:
        return None
    shown = pd.concat(frames, ignore_index=True)
    shown["self_share"] = [_pct(v) for v in shown["self_share"]]
    for column in ("calls_per_step", "self_ms_per_step", "total_ms_per_step"):
        shown[column] = [f"{v:.3f}" for v in shown[column]]
    return shown.drop(columns="self_cpu_kib_per_step")
