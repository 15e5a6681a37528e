"""Config keys and flattened specs: which spec fields make a cell's configuration, and
the canonical JSON that groups cells into curves (`config_key`), lines (history) and
matches across files (compare)."""

from __future__ import annotations

import json

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
