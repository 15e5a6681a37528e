"""Cell labels (read/cells.py): program cells whose commands differ are told apart by their
own argv elements, not by the whole command."""

from __future__ import annotations

from scalebench_analysis.read.cells import _setting_labels


def spec(command: list, precision: str = "fp32") -> dict:
    return {
        "experiment": "cnn",
        "mode": "train",
        "precision": precision,
        "program": {"command": command, "env": {}},
    }


def test_program_cells_are_labelled_by_their_own_arguments():
    base = ["python", "train.py", "trainer=cpu"]
    labels = _setting_labels(
        [spec([*base, "model.width=32"]), spec([*base, "model.width=16", "+x=1"]), spec(base)]
    )
    assert labels == [
        "args: model.width=32",
        "args: model.width=16 +x=1",
        "args: (none of its own)",
    ]
    # Same commands: no program part in the label.
    assert _setting_labels([spec(base), spec(base, "bf16")]) == ["default", "default"]
