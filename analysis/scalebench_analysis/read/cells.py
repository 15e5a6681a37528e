"""A cell's row (its attributes, summary and accuracy group, checked) and the `cells`
table of every cell: column types, the derived keys (`config`, `setting`), the labels and
the order."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pandas as pd

from .accuracy_columns import accuracy_columns
from .decoding import attributes, json_text
from .keys import (
    IDENTITY_COLUMNS,
    NAMED_FIELDS,
    SORT_COLUMNS,
    UNSTORED_DEFAULTS,
    config_key,
    flatten_spec,
)
from .natural_order import natural_column

STATUSES = ("ok", "failed", "oom", "timeout", "running", "skipped", "interrupted")

#: The validity thresholds of summaries that do not store them. Since layout 1.1 every
#: `summary` holds the thresholds its `valid_*` flags were judged by (scalebench defines
#: them once, in results/cell_summary.h); a layout 1.0 writer judged by these fixed values
#: (schemas/results-layout.md of 1.0), so a 1.0 summary is read as if it stored them. This
#: is a record of what 1.0 files mean, not a second definition: nothing re-judges a flag.
LAYOUT_1_0_THRESHOLDS = {
    "min_valid_iterations": 5,
    "max_valid_cv": 0.10,
    "replica_checksum_rel_tolerance": 1e-6,
}

#: Summary attributes of a `batch_size: auto` cell (layout 1.4): integers, then floats.
BATCH_FIGURES = (
    "max_batch_ok",
    "oom_batch",
    "best_batch",
    "knee_batch",
    "slo_batch",
    "recommended_batch",
)
_BATCH_FLOATS = ("memory_per_sample_bytes", "memory_budget_bytes", "energy_j", "samples_per_joule")


#: Spec fields every cell's spec has, with their type.
_REQUIRED_SPEC_FIELDS = {"experiment": str, "mode": str, "batch_size": int, "world_size": int}
#: Cell attributes read as integers by cells_frame.
_INTEGER_CELL_ATTRS = (
    "batch_size",
    "world_size",
    "warmup_iterations",
    "measured_iterations",
    "samples",
    "seed",
)


def check_cell(row: dict, spec_text) -> None:
    """Raises ValueError naming what is wrong with a cell row read by cell_row."""
    status = row.get("status")
    if not isinstance(status, str) or status not in STATUSES:
        shown = repr(status) if isinstance(status, str) else "of the wrong type"
        raise ValueError(f"status {shown} is not one of {', '.join(STATUSES)}")
    if not isinstance(spec_text, str):
        raise ValueError("attribute 'spec' is missing or not a string")
    try:
        spec = json.loads(spec_text)
    except json.JSONDecodeError:
        raise ValueError("attribute 'spec' is not valid JSON") from None
    if not isinstance(spec, dict):
        raise ValueError("attribute 'spec' is not a JSON object")
    for name, kind in _REQUIRED_SPEC_FIELDS.items():
        value = spec.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"spec field {name!r} is missing or not a {kind.__name__}")
    for name in (*_INTEGER_CELL_ATTRS, "loop_batch_size"):
        value = row.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            what = "summary attribute 'batch_size'" if name == "loop_batch_size" else None
            raise ValueError(f"{what or f'attribute {name!r}'} is not an integer: {value!r}")


def cell_row(cell_id: str, group: h5py.Group) -> tuple[dict, object]:
    """The cell's row, and its `spec` attribute as stored (None when absent) for
    check_cell. Every attribute is read once (Note [Attribute fast path])."""
    stored = dict(attributes(group))
    row = {"cell_id": cell_id}
    row.update((k, v) for k, v in stored.items() if k not in ("spec", "ranks"))
    row["spec"] = json_text(stored["spec"], {}) if "spec" in stored else {}
    row["ranks"] = json_text(stored["ranks"], []) if "ranks" in stored else []
    if "summary" in group:
        row.update(LAYOUT_1_0_THRESHOLDS)
        summary = dict(attributes(group["summary"]))
        if "batch_size" in summary:  # layout 1.4: the loop's batch (loader.py takes it)
            row["loop_batch_size"] = summary.pop("batch_size")
        row.update(summary)
    row.update(accuracy_columns(group))
    # A program cell is labelled with the framework its program reported (layout 1.6's
    # effective_program_framework: pytorch, lightning, jax, keras; none without the client)
    # rather than the interpreter that ran it.
    framework = stored.get("effective_program_framework")
    model = row.get("model")
    if isinstance(model, str) and model.startswith("program:") and isinstance(framework, str):
        if framework not in ("", "none"):
            row["model"] = f"program:{framework}"
    return row, stored.get("spec")


def _setting_labels(specs: list[dict]) -> list[str]:
    """Per cell, the spec fields that vary among the cells of its own (experiment, mode):
    what tells two otherwise alike cells apart (e.g. ``channels_last=True``). Fields that
    differ only between experiments (model, input shape, optimizer) are the experiment's
    own and not repeated."""
    flats = [flatten_spec(s) for s in specs]
    groups: dict = {}
    for index, spec in enumerate(specs):
        groups.setdefault((spec.get("experiment"), spec.get("mode")), []).append(index)
    labels = ["default"] * len(specs)
    for members in groups.values():
        group = [flats[i] for i in members]
        keys = sorted({k for f in group for k in f})
        varying = [
            k
            for k in keys
            if k not in NAMED_FIELDS
            and k.split(".")[0] not in NAMED_FIELDS
            and len({json.dumps(f.get(k), sort_keys=True) for f in group}) > 1
        ]
        commands = [specs[i].get("program", {}).get("command", []) for i in members]
        shared = set.intersection(*(set(c) for c in commands)) if commands else set()
        for i, command in zip(members, commands):
            labels[i] = (
                " ".join(
                    _program_args(command, shared)
                    if k == "program.command"
                    else f"{k}={flats[i].get(k, UNSTORED_DEFAULTS.get(k))}"
                    for k in varying
                )
                or "default"
            )
    return labels


def _program_args(command: list, shared: set) -> str:
    """A program cell's label part when the commands of its group differ: its own argv
    elements, those not in every command of the group (a CytoDL row's overrides, say),
    rather than the whole command."""
    own = [arg for arg in command if arg not in shared]
    return "args: " + (" ".join(own) if own else "(none of its own)")


def _batch_text(batch: int, auto: bool) -> str:
    """A label's batch: the number; `auto:<batch the loop ran>` (as `scalebench info` shows
    it) for a `batch_size: auto` cell, `auto` when it has no results."""
    if not auto:
        return str(batch)
    return f"auto:{batch}" if batch else "auto"


def cells_frame(rows: list[dict]) -> pd.DataFrame:
    cells = pd.DataFrame(rows)
    if cells.empty:
        return pd.DataFrame(
            columns=["cell_id", *IDENTITY_COLUMNS, "status", "spec", "repetition", "repetitions"]
        )
    for name in (
        "batch_size",
        "world_size",
        "warmup_iterations",
        "measured_iterations",
        "samples",
        "seed",
    ):
        if name in cells:
            cells[name] = cells[name].astype("int64")
    # Layout 1.4: the batch figures of auto cells (NA elsewhere) and the energy figures.
    for name in BATCH_FIGURES:
        cells[name] = cells[name] if name in cells else pd.Series(pd.NA, index=cells.index)
        cells[name] = cells[name].astype("Int64")
    for name in _BATCH_FLOATS:
        cells[name] = cells[name].astype(float) if name in cells else np.nan
    cells["batch_auto"] = [s.get("batch_size") == 0 for s in cells["spec"]]
    # Layout 1.5, Note [Repetitions]: which run of the cell (0 and 1 for older files).
    cells["repetition"] = [int(s.get("repetition", 0)) for s in cells["spec"]]
    cells["repetitions"] = [int(s.get("repetitions", 1)) for s in cells["spec"]]
    cells["global_batch"] = cells["batch_size"] * cells["world_size"]
    cells["config"] = [config_key(s) for s in cells["spec"]]
    cells["setting"] = _setting_labels(list(cells["spec"]))
    cells["label"] = [
        (f"{r.branch}/" if r.branch else "")  # no placeholder for a cell without a branch
        + f"{r.experiment}/{r.mode}/b{_batch_text(r.batch_size, r.batch_auto)}"
        f"/w{r.world_size}/{r.precision}"
        + ("" if r.setting == "default" else f" [{r.setting}]")
        + (f" rep {r.repetition + 1}/{r.repetitions}" if r.repetitions > 1 else "")
        for r in cells.itertuples()
    ]
    # Names in natural order (issue 53): experiment e2 before e10.
    order = [*SORT_COLUMNS, "repetition"]
    return cells.sort_values(order, kind="stable", key=natural_column).reset_index(drop=True)
