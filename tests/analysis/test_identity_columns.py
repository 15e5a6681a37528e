"""One definition of the identity columns (issue 50): read/keys.py spells the cells table's
identity columns (IDENTITY_COLUMNS, GROUP_COLUMNS); every other module of the analysis
package uses those tuples instead of a list of its own. Checked on the source: no list,
tuple or set literal outside read/keys.py names four or more of them, but for the
subsets kept on purpose (ALLOWED)."""

from __future__ import annotations

import ast
from pathlib import Path

from scalebench_analysis.read import keys

PACKAGE = Path(keys.__file__).resolve().parent.parent
#: (module, the names its literal holds): subsets that are not the cells table's identity.
ALLOWED = {
    # an ablation's context: the cell's place without the axis being ablated
    ("tables/ablation.py", ("branch", "experiment", "mode", "batch_size", "world_size")),
    # history lines key the specs' fields (not the cells table's columns)
    (
        "history/lines.py",
        ("branch", "experiment", "mode", "batch_size", "world_size", "precision"),
    ),
    ("history/render.py", ("branch", "experiment", "mode", "precision")),
}


def _literals_naming_identity(path: Path) -> list[tuple[int, tuple]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            names = tuple(
                e.value
                for e in node.elts
                if isinstance(e, ast.Constant) and e.value in keys.IDENTITY_COLUMNS
            )
            if len(names) >= 4:
                found.append((node.lineno, names))
    return found


def test_identity_columns_are_spelled_only_in_keys():
    spelled = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module == "read/keys.py":
            continue
        for line, names in _literals_naming_identity(path):
            if (module, names) not in ALLOWED:
                spelled.append(f"{module}:{line}: {', '.join(names)}")
    assert not spelled, "use read/keys.py's IDENTITY_COLUMNS / GROUP_COLUMNS:\n" + "\n".join(
        spelled
    )


def test_the_checker_finds_an_inline_spelling(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('COLUMNS = ["label", "branch", "experiment", "mode", "precision"]\n')
    assert _literals_naming_identity(module) == [(1, ("branch", "experiment", "mode", "precision"))]
