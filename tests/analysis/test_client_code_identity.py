"""The client's code record (scalebench_client/code_identity.py, docs/programs.md#code-identity)
on a made-up tree and module table: no run, no scalebench build."""

from __future__ import annotations

import hashlib
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "program" / "client"))

from scalebench_client import code_identity  # noqa: E402


def _module(name: str, path: Path) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = str(path)
    return module


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    for package in ("pkg", "other", "src/srcpkg"):
        (tree / package).mkdir(parents=True)
        (tree / package / "__init__.py").write_text(f"NAME = {package!r}\n")
    (tree / "pkg" / "core.py").write_text("X = 1\n")
    (tree / "tool.py").write_text("Y = 2\n")
    (tree / "configs").mkdir()  # no __init__.py: not a package
    (tree / "not-a-name.py").write_text("")
    return tree


def test_the_tree_packages_are_the_flat_and_src_layouts(tmp_path):
    tree = _tree(tmp_path)
    assert sorted(code_identity.tree_packages(str(tree))) == ["other", "pkg", "srcpkg", "tool"]


def test_a_package_imported_from_elsewhere_is_named_with_its_file(tmp_path):
    tree = _tree(tmp_path)
    site = tmp_path / "env" / "lib" / "site-packages" / "pkg"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("NAME = 'installed'\n")
    modules = {
        "pkg": _module("pkg", site / "__init__.py"),
        "tool": _module("tool", tree / "tool.py"),
        "json": sys.modules["json"],
    }
    record = code_identity.code_record(str(tree), modules)
    by_name = {p["name"]: p for p in record["packages"]}
    assert by_name["pkg"]["in_tree"] is False
    assert by_name["pkg"]["file"] == str((site / "__init__.py").resolve())
    assert by_name["pkg"]["origin"] == "installed in the environment"
    assert by_name["tool"] == {
        "name": "tool",
        "file": str((tree / "tool.py").resolve()),
        "in_tree": True,
        "defined_at": str((tree / "tool.py").resolve()),
    }
    assert by_name["other"]["file"] == ""  # not imported
    assert record["packages"][0]["name"] == "pkg"  # those from elsewhere first
    assert record["modules"] == ["tool.py"]


def test_the_digest_covers_the_imported_tree_sources_byte_for_byte(tmp_path):
    tree = _tree(tmp_path)
    modules = {
        "pkg": _module("pkg", tree / "pkg" / "__init__.py"),
        "pkg.core": _module("pkg.core", tree / "pkg" / "core.py"),
    }
    first = code_identity.code_record(str(tree), modules)
    files = {"pkg/__init__.py", "pkg/core.py"}
    assert files <= set(first["modules"])
    assert first["files"] == len(first["modules"])
    expected = hashlib.sha256()
    for relative in sorted(first["modules"]):
        content = (tree / relative).read_bytes()
        expected.update(relative.encode() + b"\0" + len(content).to_bytes(8, "little") + content)
    assert first["digest"] == "sha256:" + expected.hexdigest()
    assert code_identity.code_record(str(tree), modules)["digest"] == first["digest"]
    (tree / "pkg" / "core.py").write_text("X = 2\n")  # one byte differs: another digest
    assert code_identity.code_record(str(tree), modules)["digest"] != first["digest"]


def test_a_relative_module_file_is_no_file_of_the_tree(tmp_path, monkeypatch):
    """torch._classes and torch._ops say `__file__ = "_classes.py"`: resolved against the
    working directory (the tree) it would name a tree file that was never imported."""
    tree = _tree(tmp_path)
    monkeypatch.chdir(tree)
    record = code_identity.code_record(str(tree), {"torch._classes": _module("x", Path("tool.py"))})
    assert "tool.py" not in record["modules"]
