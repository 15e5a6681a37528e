#!/usr/bin/env bash
# CytoDL's own environment, as a CytoDL user has one: cyto-dl 0.6.2 from PyPI in a virtualenv
# of its own, never in scalebench's.
#
#   setup_env.sh [--resolve] <scalebench python> <environment folder>
#
# * torch is scalebench's (cyto-dl pins torch~=2.0.0, which has no wheel for this Python and
#   CUDA): a folder of symbolic links to the torch, torchgen, functorch, triton, nvidia and
#   cuda packages of scalebench's virtualenv (with their dist-info, so that pip sees torch
#   installed) goes on the path through a .pth file. Linking those packages alone keeps the
#   other virtualenv's numpy and pandas out of CytoDL's.
# * The dependencies are requirements.txt, pinned (resolved once from requirements.in:
#   unpinned, pip backtracks for minutes over zarr and monai) and complete, so installed
#   --no-deps: uv does not look through .pth files, sees no torch, and given the chance
#   installs a second torch with its CUDA libraries (5 GB) that then shadows the borrowed one.
#   cyto-dl itself --no-deps too. --resolve resolves with pip, which does see the borrowed torch.
# * scalebench's client (program/client) is installed as a user installs it (its backend,
#   flit_core, writes nothing into the checkout), which registers its Lightning entry
#   point: CytoDL's scripts never import scalebench.
# * Cached: nothing is installed when the stamp (requirements, client sources, the borrowed
#   torch's version) matches; the links are remade every time (cheap), so the environment
#   belongs to no clone: a new clone (CI) uses it with its own torch (./setup.sh test keeps it
#   in ~/.cache). Two clones running the example at once share it; their torch is the same.
#   uv installs the packages (SCALEBENCH_NO_UV=1: pip) and compiles their bytecode: about
#   2 minutes from uv's cache; pip takes 3 minutes and more.
set -euo pipefail

resolve=0
if [[ "${1:-}" == --resolve ]]; then
  resolve=1
  shift
fi
if (($# != 2)); then
  echo "usage: $0 [--resolve] <scalebench python> <environment folder>" >&2
  exit 2
fi
scalebench_python="$1"
env_dir="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cytodl_version=0.6.2

log() { echo "[cytodl env] $*" >&2; }
# pip_install <arguments>: through uv when the environment has it (seconds from its cache,
# where pip takes three minutes for the same 155 wheels), else pip; three attempts, since
# PyPI over a slow link fails now and then. Bytecode is compiled at install: with
# PYTHONDONTWRITEBYTECODE set (as on CI machines) every start would compile the packages anew.
pip_install() {
  local attempt
  for attempt in 1 2 3; do
    if ((!resolve)) && [[ -x "$env_dir/bin/uv" ]]; then
      UV_HTTP_TIMEOUT=120 "$env_dir/bin/uv" pip install -q --compile-bytecode --python "$env_dir/bin/python" "$@" &&
        return 0
    elif "$env_dir/bin/pip" install -q --disable-pip-version-check --retries 10 --timeout 60 "$@"; then
      return 0
    fi
    ((attempt < 3)) && { log "pip install $* failed (attempt $attempt of 3); retrying in 30 s"; sleep 30; }
  done
  log "pip install $* failed three times; check the network (PyPI) and run the command again"
  return 1
}

[[ -x "$scalebench_python" ]] || { log "no scalebench python at $scalebench_python: run ./setup.sh build first"; exit 1; }
[[ -x "$env_dir/bin/python" ]] || python3 -m venv "$env_dir"
site="$("$env_dir/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
torch_site="$("$scalebench_python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"

# The borrowed torch: links remade on every call (the clone that owns torch may have moved).
# What is borrowed: these packages and their dist-info folders.
borrowed_packages=(torch torchgen functorch triton nvidia cuda)
borrowed_dist_info=(torch- triton- nvidia_ cuda_) # name prefixes of <name>*.dist-info
links="$env_dir/scalebench-torch"
rm -rf "$links"
mkdir -p "$links"
entries=("${borrowed_packages[@]/#/$torch_site/}")
shopt -s nullglob
for prefix in "${borrowed_dist_info[@]}"; do
  entries+=("$torch_site/$prefix"*.dist-info)
done
shopt -u nullglob
for entry in "${entries[@]}"; do
  ln -s "$entry" "$links/$(basename "$entry")"
done
[[ -e "$links/torch" ]] || { log "no torch in $torch_site"; exit 1; }
echo "$links" >"$site/scalebench-borrowed-torch.pth"

stamp="$env_dir/.scalebench-cytodl"
want="$(
  echo "cyto-dl==$cytodl_version"
  basename "$(ls -d "$torch_site"/torch-*.dist-info)"
  cat "$here/setup_env.sh" "$here/requirements.txt" "$repo/program/client/pyproject.toml" \
    "$repo"/program/client/scalebench_client/*.py
)"
want="$(sha256sum <<<"$want")"
if ((!resolve)) && [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
# A torch of the environment's own (an older version of this script let uv install one)
# would shadow the borrowed one: removed with its CUDA libraries.
for own in "${borrowed_packages[@]}"; do
  [[ -L "$site/$own" || ! -e "$site/$own" ]] || rm -rf "${site:?}/$own"
done
for prefix in "${borrowed_dist_info[@]}"; do
  rm -rf "${site:?}/$prefix"*.dist-info
done

if [[ "${SCALEBENCH_NO_UV:-0}" != 1 && ! -x "$env_dir/bin/uv" ]]; then
  pip_install uv || log "uv could not be installed; pip installs the packages"
fi
# antlr4-python3-runtime (omegaconf's) has no wheel: alone first, from source; everything else
# binary only (with --only-binary=:all: for all of it, hydra-core is unresolvable).
pip_install "antlr4-python3-runtime==4.9.3"
if ((resolve)); then
  pip_install --only-binary=:all: -r "$here/requirements.in"
  {
    sed -n '1,/^$/p' "$here/requirements.txt" 2>/dev/null | grep '^#' || true
    "$env_dir/bin/pip" freeze --exclude-editable | \
      grep -viE '^(cyto-dl|scalebench-client|antlr4-python3-runtime|torch|triton)==|^(nvidia|cuda)-'
  } >"$here/requirements.txt.new"
  mv "$here/requirements.txt.new" "$here/requirements.txt"
  log "pinned $(grep -vc '^#' "$here/requirements.txt") packages into $here/requirements.txt"
else
  pip_install --only-binary=:all: --no-deps -r "$here/requirements.txt"
fi
pip_install --no-deps "cyto-dl==$cytodl_version"
pip_install --no-deps "$repo/program/client"
"$env_dir/bin/python" -c 'import cyto_dl, lightning, monai, bioio, torch' ||
  { log "the environment does not import CytoDL's packages"; exit 1; }
borrowed="$("$env_dir/bin/python" -c 'import os, torch; print(os.path.realpath(torch.__file__))')"
[[ "$borrowed" == "$(realpath "$torch_site")"/* ]] ||
  { log "torch comes from $borrowed, not from scalebench's $torch_site"; exit 1; }
echo "$want" >"$stamp"
