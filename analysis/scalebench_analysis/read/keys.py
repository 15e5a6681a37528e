"""Config keys and flattened specs: which spec fields make a cell's configuration, and
the canonical JSON that groups cells into curves (`config_key`), lines (history) and
matches across files (compare)."""

from __future__ import annotations

import json

#: The cells table's columns that name a cell's configuration but for its batch size and
#: world size: the cells of one scaling or batch curve share them (tables/scaling.py,
#: tables/batch.py, output/plots.py, the summary's scaling line). One definition: the
#: analysis modules group and show cells by these.
GROUP_COLUMNS = ("branch", "experiment", "mode", "precision", "setting")
#: Every identity column of the cells table, the parts of a cell's label in its order. The
#: one spelling of them: tables that show, hide, keep or order by a cell's identity (the
#: cells, scaling and repetitions tables, output/render.py, output/fit.py) use this tuple.
IDENTITY_COLUMNS = (*GROUP_COLUMNS, "batch_size", "world_size")
#: The order of the cells table's rows: a curve's cells together, by world size, then batch
#: size (read/cells.py adds the repetition last).
SORT_COLUMNS = (*GROUP_COLUMNS, "world_size", "batch_size")

#: Spec fields that place a cell on a scaling / batch curve of its configuration. `samples`
#: (inference dataset size) is among them: throughput is per sample, so cells that differ
#: only in dataset size belong to the same curve.
CURVE_FIELDS = ("batch_size", "world_size", "samples")
#: Spec fields that are bookkeeping, not part of a configuration.
NON_CONFIG_FIELDS = ("cell_id", "source")
#: Spec fields shown as their own columns (not repeated in the `setting` label).
NAMED_FIELDS = (
    "branch",
    "commit",
    "experiment",
    "mode",
    "precision",
    "batch_size",
    "world_size",
    "samples",
    "cell_id",
    "source",
    "repetition",  # layout 1.5: shown as " rep k/N" in the label
    "repetitions",
)

#: Settings a cell spec stores only when they are not their default (the C++ settings
#: table's "in cell id: when not default", docs/matrix-reference.md), with that default:
#: a spec without the key had this value. tests/analysis/test_labels.py keeps it in step
#: with the docs table.
UNSTORED_DEFAULTS = {
    "ci_width": 0.02,
    "max_seconds": 60,
    "max_iterations": 2000,
    "cudnn_benchmark": False,
    "deterministic": False,
    "pinned_memory": False,
    "cuda_graphs": False,
    "cpu_threads": 0,
    "validate": False,
    "tolerance": 0.01,
    "validation_samples": 64,
    "min_batch": 1,
    "max_batch": 65536,
    "memory_limit_mb": 0,
    "safety_margin": 0.1,
    "latency_slo_ms": 0,
    "probe_iterations": 5,
    "batch_precision": 0.02,
    "repetitions": 1,
    "max_repetitions": 20,
    "repetitions_budget_s": 0,
    "loss": "auto",
    "compile": "eager",
    "optimizer.fused": False,
    "profile_steps": 0,
}


def flatten_spec(spec: dict, prefix: str = "") -> dict:
    """`spec` with nested objects flattened to dotted keys (`optimizer.lr`), lists as their
    JSON text."""
    flat = {}
    for key, value in spec.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten_spec(value, name + "."))
        else:
            flat[name] = json.dumps(value) if isinstance(value, list) else value
    return flat


def config_key(spec: dict, drop: tuple = CURVE_FIELDS) -> str:
    """Canonical JSON of `spec` without bookkeeping fields and the fields in `drop`."""
    reduced = {k: v for k, v in spec.items() if k not in drop and k not in NON_CONFIG_FIELDS}
    return json.dumps(reduced, sort_keys=True, separators=(",", ":"))
