"""Which code of the branch's tree a program ran (docs/programs.md#code-identity).

A program cell runs in its branch's tree (``SCALEBENCH_TREE``; the working directory when
unset), but Python imports a package from the first entry of ``sys.path`` that has it: a
script run as ``python pkg/train.py`` puts ``pkg/`` first on the path, not the tree, so
``import pkg`` finds the copy installed in the environment (or an editable install of
another clone) and the branch's own code never runs. At exit the client reports, for each
top-level package or module of the tree, the file it was actually imported from, and a
digest of every imported source file inside the tree (the ``code`` record,
schemas/program-records.md). The worker marks the cell untrusted when a tree package came
from elsewhere, and the analysis warns when two branches ran byte-identical code.

Cost: one directory listing of the tree (and of ``src/``), one pass over ``sys.modules``
and one read of each imported tree source, at exit: a few milliseconds for a project of a
few hundred modules, outside every step.
"""

from __future__ import annotations

import hashlib
import os
import sys

#: Most characters of module paths and of package entries named in a record (the count and
#: the digest cover all of them): a record stays below the channel's 64 KiB limit.
MAX_LISTED_CHARS = 16 << 10
#: Longest path text in a record.
_MAX_PATH_CHARS = 400


def tree_packages(tree: str) -> dict[str, str]:
    """Top-level packages and modules of `tree`: name -> the path that defines it (a
    package's folder, a module's ``.py`` file), for the flat layout (``tree/pkg/__init__.py``,
    ``tree/mod.py``) and the src layout (``tree/src/pkg/__init__.py``). Folders without an
    ``__init__.py`` (configs, data, namespace packages) and names that are not identifiers
    are left out."""
    found: dict[str, str] = {}
    for base in (tree, os.path.join(tree, "src")):
        try:
            entries = sorted(os.scandir(base), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            name, path = entry.name, entry.path
            if entry.is_dir() and os.path.isfile(os.path.join(path, "__init__.py")):
                module = name
            elif entry.is_file() and name.endswith(".py"):
                module = name[:-3]
            else:
                continue
            if module.isidentifier() and module not in found:
                found[module] = path
    return found


def _module_file(module) -> str | None:
    """The file a module was loaded from (a package's ``__init__.py``), else None."""
    path = getattr(module, "__file__", None)
    if isinstance(path, str) and path:
        return path
    search = getattr(module, "__path__", None)  # a namespace package: its first folder
    try:
        return next(iter(search)) if search is not None else None
    except (StopIteration, TypeError):
        return None


def _inside(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree + os.sep)


def _origin_kind(path: str) -> str:
    """Where a file outside the tree lives, in words."""
    parts = path.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return "installed in the environment"
    return "another folder: an editable install or another clone"


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_PATH_CHARS else "..." + text[-_MAX_PATH_CHARS:]


def code_record(tree: str, modules: dict | None = None) -> dict:
    """The ``code`` record of this process (schemas/program-records.md): for each top-level
    package/module of `tree` the file it was imported from (``""``: not imported) and
    whether that file is inside the tree; the sha256 of the tree's imported sources
    (relative path and bytes of each, in path order; ``__main__`` included) and their
    count. `modules` defaults to ``sys.modules``."""
    modules = sys.modules if modules is None else modules
    root = os.path.realpath(tree)
    packages = []
    for name, defined_at in tree_packages(root).items():
        module = modules.get(name)
        path = _module_file(module) if module is not None else None
        entry = {
            "name": name,
            "file": "",
            "in_tree": True,
            "defined_at": _clip(defined_at),
        }
        if path is not None:
            real = os.path.realpath(path)
            entry["file"] = _clip(real)
            entry["in_tree"] = _inside(real, root)
            if not entry["in_tree"]:
                entry["origin"] = _origin_kind(real)
        packages.append(entry)
    # Those imported from elsewhere first, then the imported ones: a long list loses only
    # packages that were not imported.
    packages.sort(key=lambda e: (e["in_tree"], not e["file"]))
    kept, chars = [], 0
    for entry in packages:
        chars += len(str(entry))
        if chars > MAX_LISTED_CHARS:
            break
        kept.append(entry)
    sources = {}
    # A module's file is absolute; a relative one is no file (torch._classes says
    # "_classes.py"), and would resolve against the working directory.
    paths = [_module_file(m) for m in list(modules.values()) if m is not None]
    paths = [p for p in paths if isinstance(p, str) and os.path.isabs(p)]
    # The script as run (`python -m scalebench_client train.py` restores __main__ first),
    # relative to the tree the program started in.
    if sys.argv and sys.argv[0]:
        paths.append(os.path.join(root, sys.argv[0]))
    for path in paths:
        if not path.endswith(".py"):
            continue
        real = os.path.realpath(path)
        if _inside(real, root) and os.path.isfile(real):
            sources[os.path.relpath(real, root)] = real
    digest = hashlib.sha256()
    read = []
    for relative in sorted(sources):
        try:
            with open(sources[relative], "rb") as source:
                content = source.read()
        except OSError:
            continue
        digest.update(relative.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(len(content).to_bytes(8, "little") + content)
        read.append(relative)
    listed, chars = [], 0
    for relative in sorted(read):
        chars += len(relative) + 3
        if chars > MAX_LISTED_CHARS:
            break
        listed.append(relative)
    return {
        "type": "code",
        "tree": _clip(root),
        "packages": kept,
        "files": len(read),
        "digest": "sha256:" + digest.hexdigest(),
        "modules": [_clip(m) for m in listed],
    }
