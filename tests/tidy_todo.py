"""Lists the files tests/run_all.sh's clang-tidy step must check (see Note [clang-tidy in CI]).

Usage: tidy_todo.py <build dir> <out dir> <stamp dir>

Writes <out dir>/compile_commands.json: the build's commands without the precompiled-header
flags (clang cannot read GCC's .gch) and without the debug-info flags (-g, -g1, -gz: they
change nothing clang-tidy sees, and a change of them would re-check every file, 30 to 40
minutes). Prints "<key> <file>" for every tracked .cc outside tests/ that has a command and no
stamp <stamp dir>/<key>.

The key is what the file's check depends on, and nothing that differs between two clones of
the same commit, so that a stamp left by one clone serves the next (the stamp directory lives
in the user's cache, beside the compiler cache):
  * the clang-tidy version (<out dir>/version.txt) and .clang-tidy;
  * the file's compile command with the source tree's path replaced by a fixed name;
  * the name and content of every header the compiler read for the file, as the build's
    dependency records list them (`ninja -t deps`), names inside the source tree relative to
    it, the tree's path inside a content replaced by a fixed name (generated headers such as
    CMake's cmake_pch.hxx hold it). A file compiled with the worker's precompiled header also depends on the headers
    the precompiled header was made from (Torch's). A file without dependency records (not built yet)
    depends on every tracked header instead.
A change to one header therefore re-checks only the files that include it.

A unity build (Note [Unity build] in CMakeLists.txt) compiles generated files that include a
group of .cc files each; every member gets its group's command, with the member as its source,
and the headers of its group's object except the other members (clang-tidy reads the member
alone, so it must compile alone).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

PCH_FLAGS = re.compile(r" -Winvalid-pch| -include \S*cmake_pch\.hxx")
DEBUG_FLAGS = re.compile(r" -g[0-9a-z=-]*(?=\s|$)")
PCH_INCLUDE = re.compile(r" -include (\S*cmake_pch\.hxx)")
OUTPUT_FLAG = re.compile(r" -o (\S+)")
UNITY_MEMBER = re.compile(r'^#include "([^"]+\.cc)"$', re.MULTILINE)


def tracked(pattern: str) -> list[str]:
    listing = subprocess.run(
        ["git", "ls-files", pattern], check=True, capture_output=True, text=True
    )
    return [path for path in listing.stdout.split() if os.path.exists(path)]


def unity_members(commands: list[dict], source_root: Path) -> tuple[list[dict], dict]:
    """The database with each generated unity file's entry replaced by one per member (the
    group's command, the member as its source), and member (absolute) -> its group's members."""
    expanded: list[dict] = []
    groups: dict[str, set[str]] = {}
    for entry in commands:
        unity = Path(entry.get("directory", ".")) / entry["file"]
        if "/generated/unity/" not in str(unity):
            expanded.append(entry)
            continue
        members = [
            os.path.normpath(source_root / member)
            for member in UNITY_MEMBER.findall(unity.read_text())
        ]
        for member in members:
            groups[member] = set(members)
            expanded.append(
                dict(
                    entry,
                    file=member,
                    command=entry["command"].replace(entry["file"], member),
                )
            )
    return expanded, groups


def ninja_deps(build: Path) -> dict[str, list[str]]:
    """Object file (absolute) -> headers and source it was compiled from (absolute)."""
    listing = subprocess.run(
        ["ninja", "-C", str(build), "-t", "deps"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    deps: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in listing.splitlines():
        if not line.strip():
            current = None
        elif not line.startswith(" "):
            target = line.split(": #deps", 1)[0]
            current = deps.setdefault(os.path.normpath(build / target), [])
        elif current is not None:
            current.append(os.path.normpath(build / line.strip()))
    return deps


class ContentHashes:
    """sha256 of files, each read once per run (Torch's headers are shared by many files),
    with the source tree's path replaced by a fixed name first: files the build generates
    name it (CMake's cmake_pch.hxx includes the worker's pch.h by its absolute path), and a
    clone elsewhere must still find the stamps another clone left."""

    def __init__(self, source_root: Path) -> None:
        self._known: dict[str, str] = {}
        self._root = str(source_root).encode()

    def __call__(self, path: str) -> str:
        if path not in self._known:
            try:
                with open(path, "rb") as f:
                    data = f.read().replace(self._root, b"<source>")
                    self._known[path] = hashlib.sha256(data).hexdigest()
            except OSError:
                self._known[path] = "missing"
        return self._known[path]


def main() -> None:
    build, out, stamps = (Path(arg).resolve() for arg in sys.argv[1:4])
    source_root = Path.cwd().resolve()
    with open(build / "compile_commands.json") as f:
        commands, groups = unity_members(json.load(f), source_root)
    precompiled = {}  # source -> the precompiled header its build used (GCC's .gch)
    for entry in commands:
        used = PCH_INCLUDE.search(entry["command"])
        if used:
            pch = Path(entry.get("directory", build)) / used.group(1)
            precompiled[os.path.realpath(entry["file"])] = os.path.normpath(
                str(pch) + ".gch"
            )
        entry["command"] = DEBUG_FLAGS.sub("", PCH_FLAGS.sub("", entry["command"]))
    with open(out / "compile_commands.json", "w") as f:
        json.dump(commands, f, indent=1)

    deps = ninja_deps(build)
    content = ContentHashes(source_root)
    root_prefix = str(source_root) + os.sep

    def name(path: str) -> str:
        return path.removeprefix(root_prefix)

    def headers_of(object_file: str, pch: str | None, source: str) -> list[str] | None:
        # GCC's dependency file of a file built with a precompiled header lists neither the
        # .gch nor the headers in it (their include guards skip them), so those come from
        # the dependency records of the precompiled header itself.
        listed = deps.get(object_file)
        if listed is None or (pch is not None and pch not in deps):
            return None
        group_others = groups.get(source, set()) - {source}
        return sorted(set(listed + (deps[pch] if pch else [])) - group_others)

    shared = hashlib.sha256()
    for path in [out / "version.txt", source_root / ".clang-tidy"]:
        shared.update(path.read_bytes())
    every_header = [str(source_root / h) for h in tracked("*.h")]

    by_file = {os.path.realpath(entry["file"]): entry for entry in commands}
    for source in tracked("*.cc"):
        entry = by_file.get(os.path.realpath(source))
        if source.startswith("tests/") or entry is None:
            continue
        key = shared.copy()
        key.update(entry["command"].replace(str(source_root), "<source>").encode())
        key.update(source.encode() + content(str(source_root / source)).encode())
        # The object file: the database's "output" where CMake writes it, else the -o flag.
        output = entry.get("output") or next(
            iter(OUTPUT_FLAG.findall(entry["command"])), None
        )
        pch = precompiled.get(os.path.realpath(source))
        headers = None
        if output:
            object_file = os.path.normpath(Path(entry.get("directory", build)) / output)
            headers = headers_of(
                object_file, pch, os.path.normpath(source_root / source)
            )
        # In the order of their names as hashed: sorted by absolute path, a clone under /tmp
        # would put its .venv before /usr and one under /work after it (other keys).
        for header in sorted(every_header if headers is None else headers, key=name):
            key.update(name(header).encode() + b"\0" + content(header).encode())
        if not (stamps / key.hexdigest()).exists():
            print(key.hexdigest(), source)


if __name__ == "__main__":
    main()
