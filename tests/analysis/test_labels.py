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


def test_a_setting_stored_only_when_not_its_default_is_labelled_with_the_default():
    def zoo(**settings) -> dict:
        return {"experiment": "mlp", "mode": "infer", "precision": "fp32", **settings}

    labels = _setting_labels([zoo(), zoo(compile="aoti"), zoo(compile="torchscript")])
    assert labels == ["compile=eager", "compile=aoti", "compile=torchscript"]


def test_the_unstored_defaults_are_the_settings_tables():
    """Every setting docs/matrix-reference.md marks "when not default" has its default in
    UNSTORED_DEFAULTS, with that value (the docs table is generated from the C++ table)."""
    import pathlib
    import re

    from scalebench_analysis.read.keys import UNSTORED_DEFAULTS

    docs = pathlib.Path(__file__).resolve().parents[2] / "docs" / "matrix-reference.md"
    documented = {}
    for line in docs.read_text().splitlines():
        cells = [c.strip() for c in line.split(" | ")]
        if len(cells) > 6 and cells[6] == "when not default":
            key = re.sub(r"[|`\s]", "", cells[0])
            documented[key] = cells[3]
    assert set(documented) == set(UNSTORED_DEFAULTS), documented
    for key, text in documented.items():
        value = UNSTORED_DEFAULTS[key]
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        assert text == shown, (key, text, value)
