"""Lists the files tests/run_all.sh's clang-tidy step must check (see Note [clang-tidy in CI]).

Usage: tidy_todo.py <build/release/compile_commands.json> <out dir>

Writes <out dir>/compile_commands.json: the build's commands without the precompiled-header
flags. Prints "<key> <file>" for every tracked .cc outside tests/ that has a command and no
stamp <out dir>/passed/<key>; the key hashes the file, its command, every tracked header,
.clang-tidy and <out dir>/version.txt (the clang-tidy version).
"""

import hashlib
import json
import os
import re
import subprocess
import sys


def tracked(pattern: str) -> list[str]:
    listing = subprocess.run(
        ["git", "ls-files", pattern], check=True, capture_output=True, text=True
    )
    return [path for path in listing.stdout.split() if os.path.exists(path)]


def main() -> None:
    database, out = sys.argv[1:3]
    with open(database) as f:
        commands = json.load(f)
    for entry in commands:
        entry["command"] = re.sub(
            r" -Winvalid-pch| -include \S*cmake_pch\.hxx", "", entry["command"]
        )
    with open(os.path.join(out, "compile_commands.json"), "w") as f:
        json.dump(commands, f, indent=1)
    by_file = {os.path.realpath(entry["file"]): entry["command"] for entry in commands}

    shared = hashlib.sha256()
    for path in [os.path.join(out, "version.txt"), ".clang-tidy", *tracked("*.h")]:
        with open(path, "rb") as f:
            shared.update(f.read())
    for source in tracked("*.cc"):
        command = by_file.get(os.path.realpath(source))
        if source.startswith("tests/") or command is None:
            continue
        key = shared.copy()
        key.update(command.encode())
        with open(source, "rb") as f:
            key.update(f.read())
        if not os.path.exists(os.path.join(out, "passed", key.hexdigest())):
            print(key.hexdigest(), source)


if __name__ == "__main__":
    main()
