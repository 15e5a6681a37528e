"""A cell's `accuracy` subgroup (layout 1.3, accuracy validation) as `accuracy_<name>`
columns of the cells table; tables/accuracy.py reads the verdicts from them."""

from __future__ import annotations

import json

import h5py

from .decoding import attributes, one_line

#: Text attributes of the `accuracy` subgroup (layout 1.3); `failed_checks` is a JSON list.
_ACCURACY_TEXT_ATTRS = ("verdict", "failed_checks", "kind", "reference", "reference_cell")
#: Numeric attributes of the `accuracy` subgroup named by schemas/results-layout.md (any
#: other number a later minor version adds is read as well).
ACCURACY_NUMBERS = (
    "tolerance",
    "validation_samples",
    "elements",
    "mae",
    "mse",
    "rmse",
    "max_abs_error",
    "mean_rel_error",
    "max_rel_error",
    "reference_range",
    "mae_rel",
    "psnr_db",
    "cosine_similarity",
    "ssim",
    "steps",
    "max_loss_rel_deviation",
    "final_loss",
    "reference_final_loss",
    "param_rel_distance",
)
ACCURACY_VERDICTS = ("passed", "failed")


def _read_accuracy(accuracy) -> dict:
    """The attributes of an `accuracy` subgroup as `accuracy_<name>` columns; ValueError
    naming what is wrong when the group does not follow the layout."""
    if not isinstance(accuracy, h5py.Group):
        raise ValueError("'accuracy' is not a group")
    columns = {}
    for name, value in attributes(accuracy):
        if name in _ACCURACY_TEXT_ATTRS:
            if not isinstance(value, str):
                raise ValueError(f"attribute {name!r} is not a string")
        elif name in ACCURACY_NUMBERS or not isinstance(value, str):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"attribute {name!r} is not a number: {value!r}")
        columns[f"accuracy_{name}"] = value
    verdict = columns.get("accuracy_verdict")
    if verdict is None:
        raise ValueError("no attribute 'verdict'")
    if verdict not in ACCURACY_VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not one of {', '.join(ACCURACY_VERDICTS)}")
    text = columns.get("accuracy_failed_checks", "")
    try:
        checks = json.loads(text) if text else []
    except json.JSONDecodeError:
        raise ValueError("attribute 'failed_checks' is not valid JSON") from None
    if not isinstance(checks, list) or not all(isinstance(c, str) for c in checks):
        raise ValueError("attribute 'failed_checks' is not a JSON list of strings")
    columns["accuracy_failed_checks"] = checks
    return columns


def accuracy_columns(group: h5py.Group) -> dict:
    """The cell's `accuracy` subgroup as columns ({} without one, as in files before layout
    1.3). A group that cannot be read gives only `accuracy_problem`: one line saying why;
    the cell itself is kept (load() lists it in `problems`)."""
    try:
        if "accuracy" not in group:
            return {}
        return _read_accuracy(group["accuracy"])
    except (OSError, KeyError, ValueError, TypeError, AttributeError) as error:
        return {"accuracy_problem": one_line(error)}
