#!/usr/bin/env bash
# tests/gpu/hide_packages.sh REGEX COMMAND...: runs COMMAND as on a machine that lacks the
# installed Debian packages whose names match REGEX (an extended regular expression), so that
# tests/gpu/test_kit.sh proves the bundle's prefix is used and nothing of the system's copies.
# In a private mount namespace (unshare -m: needs root), every file of those packages is
# covered by a stub that fails loudly (run, it prints "hidden system file" and exits 127; as a
# library or a header it is not one), and every folder holding only their files by an empty
# folder. Nothing changes outside the namespace; the other processes of the machine see no
# difference.
#
#   tests/gpu/hide_packages.sh --check    exit 0 where hiding is possible here, 2 where not
set -euo pipefail

possible() { [[ $(id -u) -eq 0 ]] && unshare -m --propagation private true 2>/dev/null; }

if [[ ${1:-} == --check ]]; then
  possible && exit 0
  exit 2
fi
if [[ ${1:-} != --inside ]]; then
  (($# >= 2)) || { echo "usage: $0 REGEX COMMAND..." >&2; exit 2; }
  possible || { echo "hide_packages.sh: needs root and unshare -m (a private mount namespace)" >&2; exit 2; }
  exec unshare -m --propagation private "$0" --inside "$@"
fi
shift
regex="$1"
shift

work="$(mktemp -d)"
mkdir -p "$work/empty"
# shellcheck disable=SC2016  # $0 is the stub's own, expanded when it runs
printf '#!/bin/sh\necho "hidden system file: $0 (tests/gpu/hide_packages.sh)" >&2\nexit 127\n' >"$work/stub"
chmod 755 "$work/stub"

# covered_paths: the topmost paths to cover: folders whose every entry (recursively) belongs to
# the packages, and the packages' other files. Documentation is left alone.
covered_paths() {
  dpkg-query -W -f='${Package}\n' | grep -E "$regex" | xargs -r dpkg -L | sort -u |
    python3 -c '
import os, sys
owned = {line.rstrip("\n") for line in sys.stdin if line.startswith("/") and line.strip() != "/."}
full = {}
def wholly_owned(folder):
    if folder not in full:
        full[folder] = all(
            path in owned and (os.path.islink(path) or not os.path.isdir(path) or wholly_owned(path))
            for path in (os.path.join(folder, name) for name in os.listdir(folder)))
    return full[folder]
covered, folders = [], set()
for path in sorted(owned):
    if path.startswith(("/usr/share/doc", "/usr/share/man", "/usr/share/lintian")):
        continue
    parent = os.path.dirname(path)
    while parent not in folders and parent != "/":
        parent = os.path.dirname(parent)
    if parent in folders:
        continue
    if os.path.isdir(path) and not os.path.islink(path):
        if wholly_owned(path):
            covered.append(path)
            folders.add(path)
    elif os.path.isfile(path) and not os.path.islink(path):
        covered.append(path)
print("\n".join(covered))
'
}

count=0
while IFS= read -r path; do
  [[ -n $path ]] || continue
  if [[ -d $path ]]; then mount --bind "$work/empty" "$path"; else mount --bind "$work/stub" "$path"; fi
  count=$((count + 1))
done < <(covered_paths)
echo "hide_packages.sh: $count paths of the packages matching '$regex' hidden" >&2
exec "$@"
