"""The layout of the analysis package (analysis/scalebench_analysis/), read from its source
with `ast` (nothing is imported):

* no import circle among its modules. Every import statement counts, those inside
  functions too (an import moved into a function hides a circle from Python's import order
  but not from the code): absolute (`import scalebench_analysis.x`, `from
  scalebench_analysis.x import y`) and relative (`from . import x`, `from ..x import y`),
  each resolved to the package module it names (`from P import n` names the module P.n
  when there is one, else P). The packages an import passes through (their __init__) are
  not counted: Python initialises a package before its modules whatever they import.
* no module imports a private (`_name`) name of another: neither `from M import _name` nor
  `M._name` on a module bound by an import. What modules share is public where it is
  defined.
* each module imports only from its own layer or those below it: errors / arguments, then
  read/, tables/, output/, history/, and the command line (cli.py, __main__.py and the
  package's __init__) on top.
* no module above MAX_LINES lines, and every directory of modules is a package (has an
  __init__.py) that the project's `packages.find` installs.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tomllib
from setuptools import find_packages

ANALYSIS = Path(__file__).resolve().parents[2] / "analysis"
PACKAGE = "scalebench_analysis"
ROOT = ANALYSIS / PACKAGE
MAX_LINES = 500

#: Layer of each part of the package: a module imports only from layers <= its own.
LAYERS = {
    "errors": 0,
    "arguments": 0,
    "read": 1,
    "tables": 2,
    "output": 3,
    "history": 4,
    "projection": 4,
    "cli": 5,
    "__main__": 5,
}
TOP = 5  # the package's own __init__


def _module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    """Module name -> file of every module of the package."""
    return {
        _module_name(path): path
        for path in sorted(ROOT.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _base(importer: str, level: int, module: str | None) -> str:
    """The absolute name `from <level dots><module> import ...` in `importer` refers to."""
    package = importer if _is_package(importer) else importer.rpartition(".")[0]
    parts = package.split(".")
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([module] if module else []))


def _imports(importer: str):
    """(line, imported module, imported names, local name of a module) of each import of
    a package module in `importer`, anywhere in the file (functions included)."""
    tree = ast.parse(MODULES[importer].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    local = alias.asname or (alias.name if "." not in alias.name else None)
                    yield node.lineno, alias.name, (), local
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                source = _base(importer, node.level, node.module)
            else:
                source = node.module or ""
            if source != PACKAGE and not source.startswith(PACKAGE + "."):
                continue
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in MODULES:  # `from P import module`
                    yield node.lineno, submodule, (), alias.asname or alias.name
                else:
                    yield node.lineno, source, (alias.name,), None


def _graph() -> dict[str, set[str]]:
    return {
        name: {target for _, target, _, _ in _imports(name) if target != name} for name in MODULES
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph` (module -> modules it imports) as [a, b, ..., a], by
    depth-first search; None when there is none."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(graph, WHITE)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = GREY
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if colour.get(target, WHITE) == GREY:
                return stack[stack.index(target) :] + [target]
            if colour.get(target, WHITE) == WHITE:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        colour[node] = BLACK
        return None

    for node in sorted(graph):
        if colour[node] == WHITE:
            found = visit(node)
            if found:
                return found
    return None


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _layer(name: str) -> int | None:
    """The layer of a package module (None for a part LAYERS does not list)."""
    parts = name.split(".")
    return TOP if len(parts) == 1 else LAYERS.get(parts[1])


def test_the_modules_are_found():
    """The scan sees the whole package, and resolves the kinds of import it uses."""
    assert len(MODULES) > 20, sorted(MODULES)
    for name in ("cli", "read.loader", "read.keys", "tables.analysis", "history.command"):
        assert f"{PACKAGE}.{name}" in MODULES
    graph = _graph()
    edges = {
        (a.removeprefix(PACKAGE + "."), b.removeprefix(PACKAGE + "."))
        for a in graph
        for b in graph[a]
    }
    assert ("cli", "read.loader") in edges  # from .read.loader import load
    assert ("tables.analysis", "tables.ablation") in edges  # from . import ablation
    assert ("tables.ablation", "read.keys") in edges  # from ..read.keys import ...
    assert ("cli", "output.report") in edges  # an import inside a function
    assert (PACKAGE, "tables.analysis") in edges  # the package's __init__


def test_the_cycle_finder_finds_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a", "c"}}) is None


def test_no_import_circle():
    cycle = find_cycle(_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_no_private_name_of_another_module():
    found = []
    for importer, path in MODULES.items():
        modules = {}  # local name -> package module it is bound to
        for line, target, names, local in _imports(importer):
            found += [
                f"{path.relative_to(ANALYSIS)}:{line}: {target}.{n}" for n in names if _private(n)
            ]
            if _private(target.rpartition(".")[2]):
                found.append(f"{path.relative_to(ANALYSIS)}:{line}: module {target}")
            if local:
                modules[local] = target
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
                and _private(node.attr)
            ):
                where = f"{path.relative_to(ANALYSIS)}:{node.lineno}"
                found.append(f"{where}: {modules[node.value.id]}.{node.attr}")
    assert not found, "private names used across modules:\n" + "\n".join(found)


def test_modules_import_only_from_their_layer_or_below():
    unplaced = [name for name in MODULES if _layer(name) is None]
    assert not unplaced, f"give these a layer in LAYERS: {unplaced}"
    found = [
        f"{a} (layer {_layer(a)}) imports {b} (layer {_layer(b)})"
        for a, targets in _graph().items()
        for b in targets
        if _layer(b) > _layer(a)
    ]
    assert not found, "\n".join(found)


def test_no_module_above_the_line_limit():
    lines = {
        name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()
    }
    assert sum(lines.values()) > 20 * 100  # the files were read
    too_long = {name: n for name, n in lines.items() if n > MAX_LINES}
    assert not too_long, f"modules above {MAX_LINES} lines (split them by role): {too_long}"


def test_every_directory_of_modules_is_an_installed_package():
    directories = {path.parent for path in MODULES.values()}
    assert all((d / "__init__.py").is_file() for d in directories), sorted(directories)
    config = tomllib.loads((ANALYSIS / "pyproject.toml").read_text(encoding="utf-8"))
    found = config["tool"]["setuptools"]["packages"]["find"]
    installed = set(find_packages(where=str(ANALYSIS), include=found["include"]))
    assert installed == {n for n in MODULES if _is_package(n)}
