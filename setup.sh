#!/usr/bin/env bash
# scalebench setup and entry points. Idempotent: a second run on a ready machine
# only checks, configures and builds incrementally.
#
#   ./setup.sh            install what is missing, build everything of the release preset
#   ./setup.sh demo       install what is missing, build only the `scalebench` executable,
#                         run the quickstart sweep under mpirun and print its analysis
#   ./setup.sh test       install what is missing (and the test-only packages), build
#                         everything of the release and ASan/UBSan presets, run every suite
#
# Environment (all optional):
#   SCALEBENCH_VENV        virtualenv path (default: <repo>/.venv)
#   SCALEBENCH_FRAMEWORKS_VENV  virtualenv of the test-only frameworks of the program-cell
#                          examples (default: <repo>/.venv-frameworks; `test` only)
#   SCALEBENCH_CYTODL_VENV  CytoDL's virtualenv of the real CytoDL example (default:
#                          ~/.cache/scalebench-cytodl-venv, shared by clones; `test` only)
#   SCALEBENCH_SKIP_APT=1  do not call apt-get (packages are provided some other way)
#   Torch_DIR / CMAKE_PREFIX_PATH  use an already-installed LibTorch instead of the venv's
#   SCALEBENCH_TORCH_SPEC  pip requirement for torch (default: torch>=2.4)
#   SCALEBENCH_JOBS        build parallelism (default: nproc)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$repo"
action="${1:-build}"
venv="${SCALEBENCH_VENV:-$repo/.venv}"
jobs="${SCALEBENCH_JOBS:-$(nproc)}"

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
# shellcheck source=tests/timings.sh
source "$repo/tests/timings.sh"

# Debian packages the build, the tests and the analysis need, and hdf5-tools (h5ls, h5dump)
# for looking into results files as docs/results-file.md shows.
debian_packages=(
  build-essential cmake ninja-build ccache git python3-venv
  openmpi-bin libopenmpi-dev libhdf5-dev hdf5-tools
  libboost-log-dev libyaml-cpp-dev nlohmann-json3-dev libvalijson-dev libcli11-dev
  libgtest-dev libgmock-dev clang-format clang-tidy
)
# Only the test suite needs these: a real single-node Slurm, a browser for the report test,
# clang with the libFuzzer runtime for the fuzz targets (tests/fuzz).
test_packages=(slurm-wlm slurm-wlm-basic-plugins munge chromium fonts-dejavu-core
  clang libclang-rt-dev)

install_debian() {
  [[ "${SCALEBENCH_SKIP_APT:-0}" == 1 ]] && return 0
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  log "installing Debian packages: ${missing[*]}"
  local sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get -o Acquire::Retries=5 update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o Acquire::Retries=5 install -y -q --no-install-recommends "${missing[@]}"
}

# pip over a flaky network (a CI run lost its 540 MB torch download halfway, six resumes in a
# row): pip's own retries and resumes, then up to three whole attempts a minute apart. Every
# install here is idempotent, so an attempt that failed halfway is simply repeated.
pip_install() {
  local pip="$1"
  shift
  local -a network=(--retries 10 --timeout 60)
  if "$pip" install --help 2>/dev/null | grep -q -- '--resume-retries'; then
    network+=(--resume-retries 30)
  fi
  local attempt
  for attempt in 1 2 3; do
    if "$pip" install -q --disable-pip-version-check "${network[@]}" "$@"; then return 0; fi
    if [[ $attempt -lt 3 ]]; then
      log "pip install $* failed (attempt $attempt of 3); retrying in 60 s"
      sleep 60
    fi
  done
  log "pip install $* failed three times; check the network (PyPI) and run the command again"
  return 1
}

# Note [Packages through uv]
# torch with its CUDA libraries is about 3 GB of wheels and 5.8 GB installed: pip took 90 to
# 130 s to install it on every fresh clone, from its cache or not. uv (PyPI's `uv`, installed
# into the virtualenv by pip) keeps the unpacked wheels in its cache (~/.cache/uv) and links
# them into a new environment: 2 s on a machine that has them, 36 s with the downloads. The
# environment is still a plain virtualenv with pip in it; uv only fills it. A machine where uv
# cannot be installed falls back to pip (SCALEBENCH_NO_UV=1 asks for pip).
# uv compiles the bytecode at install (--compile-bytecode), as pip does: without it the first
# import of each package compiled it, so the first `scalebench watch` or `analyze` of a fresh
# environment took seconds more, and the first program cell's start-up (torch) was measured
# with a compilation that no later cell pays (stop 45's CI: watch_live's watch started after
# the whole run had ended).
venv_install() { # venv_install <venv> <pip arguments...>: through uv when it is there
  local env="$1"
  shift
  if [[ -x "$env/bin/uv" ]]; then
    uv_install "$env" "$@"
  else
    pip_install "$env/bin/pip" "$@"
  fi
}
uv_install() { # the same three attempts as pip_install
  local env="$1" attempt
  shift
  for attempt in 1 2 3; do
    if UV_HTTP_TIMEOUT=120 "$env/bin/uv" pip install -q --compile-bytecode \
      --python "$env/bin/python" "$@"; then
      return 0
    fi
    if [[ $attempt -lt 3 ]]; then
      log "uv pip install $* failed (attempt $attempt of 3); retrying in 60 s"
      sleep 60
    fi
  done
  log "uv pip install $* failed three times; check the network (PyPI) and run the command again"
  return 1
}
install_uv() { # install_uv <venv>: uv into the virtualenv, unless asked not to or unavailable
  local env="$1"
  [[ "${SCALEBENCH_NO_UV:-0}" == 1 || -x "$env/bin/uv" ]] && return 0
  pip_install "$env/bin/pip" uv || log "uv could not be installed; pip installs the packages"
}

install_venv() {
  if [[ ! -x "$venv/bin/python" ]]; then
    log "creating virtualenv $venv"
    python3 -m venv "$venv"
  fi
  local stamp="$venv/.scalebench-requirements"
  local want
  want="$(cat analysis/requirements.txt 2>/dev/null; echo "${SCALEBENCH_TORCH_SPEC:-torch>=2.4}")"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then return 0; fi
  log "installing Python packages into $venv (torch is large; fast from uv's cache after the first time)"
  install_uv "$venv"
  if [[ -z "${Torch_DIR:-}" ]]; then
    venv_install "$venv" "${SCALEBENCH_TORCH_SPEC:-torch>=2.4}"
  fi
  venv_install "$venv" -r analysis/requirements.txt
  venv_install "$venv" --no-deps -e analysis
  echo "$want" > "$stamp"
}

# The program-cell examples' frameworks (tests/programs/requirements.txt: Lightning, Hydra,
# JAX, Keras) in an environment of their own, as a user's would be: scalebench's virtualenv
# is never touched. Its torch is scalebench's (a .pth file puts that site-packages last on
# the path, so pip sees torch installed and downloads it once only); scalebench-client is
# pip-installed from program/client as a user installs it (docs/programs.md#the-client; its
# backend, flit_core, writes nothing into the checkout), which registers its Lightning entry
# point.
frameworks_venv="${SCALEBENCH_FRAMEWORKS_VENV:-$repo/.venv-frameworks}"
install_frameworks_venv() {
  local want stamp="$frameworks_venv/.scalebench-requirements"
  want="$(cat tests/programs/requirements.txt; cat program/client/pyproject.toml \
    program/client/scalebench_client/*.py | sha256sum)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then return 0; fi
  log "installing the program-cell frameworks into $frameworks_venv"
  [[ -x "$frameworks_venv/bin/python" ]] || python3 -m venv "$frameworks_venv"
  local site
  site="$("$frameworks_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
  "$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))' \
    >"$site/scalebench-project-torch.pth"
  pip_install "$frameworks_venv/bin/pip" -r tests/programs/requirements.txt
  pip_install "$frameworks_venv/bin/pip" --no-deps program/client
  echo "$want" >"$stamp"
}

# CytoDL's own environment for the real CytoDL example (docs/examples/cytodl/: cyto-dl 0.6.2
# from PyPI, pinned dependencies, torch borrowed from scalebench's virtualenv), in the user's
# cache: a fresh clone (CI) finds it ready when its stamp matches (0.2 s instead of 2 minutes
# of installing and compiling 155 packages' bytecode). env_path.sh names the folder.
# shellcheck source=docs/examples/cytodl/env_path.sh
source "$repo/docs/examples/cytodl/env_path.sh"
install_cytodl_venv() {
  docs/examples/cytodl/setup_env.sh "$venv/bin/python" "$cytodl_venv"
}

# One compiler cache for every clone on this machine (Note [Compiler cache across clones] in
# CMakeLists.txt): no compile command or preprocessed text holds the clone's path once
# CCACHE_BASEDIR turns the absolute paths of the command line into relative ones, so a fresh
# clone (CI) rebuilds from what another one compiled. The sloppiness lets ccache cache the
# worker's precompiled-header translation units.
export CCACHE_DIR="${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/scalebench-ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$repo}"
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"

# configure_and_build <preset> [target...]: every target of the preset when none is named.
configure_and_build() {
  local preset="$1"
  shift
  log "configuring + building preset '$preset'${*:+ (targets: $*)}"
  local extra=()
  [[ -n "${Torch_DIR:-}" ]] && extra+=("-DTorch_DIR=$Torch_DIR")
  timed "configure ($preset)" \
    cmake --preset "$preset" -DSCALEBENCH_PYTHON="$venv/bin/python" "${extra[@]}" >/dev/null
  local targets=()
  (($# > 0)) && targets=(--target "$@")
  timed "build ($preset)" cmake --build --preset "$preset" -j "$jobs" "${targets[@]}"
}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

# check_disk <GB>: a warning, before any work, when the disk of the clone has less free than a
# setup from nothing writes (measured: the torch virtualenv 5.8 GB and its wheel cache 1.6 GB,
# the release tree 1.2 GB; for `test` also the ASan tree 2.3 GB, the test-only virtualenvs
# 2 GB, test outputs 0.5 GB).
# A warning, not an error: a machine that has run it before needs far less.
check_disk() {
  local need="$1" free
  free="$(df -Pk "$repo" | awk 'NR == 2 { print int($4 / 2^20) }')"
  ((free >= need)) && return 0
  log "warning: $free GB free on the disk of $repo; './setup.sh $action' on a fresh machine" \
    "writes about $need GB (build trees, virtualenvs, caches). If a step stops with" \
    "'No space left on device', free space (or point SCALEBENCH_VENV and the caches elsewhere)" \
    "and run the same command again: it resumes where it stopped."
}

# Every step is timed into build/timings.tsv (tests/timings.sh); the table ends each action.
case "$action" in build | demo | test) timings_start "$repo/build/timings.tsv" ;; esac
case "$action" in build | demo) check_disk 10 ;; test) check_disk 14 ;; esac
case "$action" in
  build)
    timed "apt (Debian packages)" install_debian "${debian_packages[@]}"
    timed "virtualenv (pip)" install_venv
    ccache_mark
    configure_and_build release
    print_timings
    ;;
  demo)
    timed "apt (Debian packages)" install_debian "${debian_packages[@]}"
    timed "virtualenv (pip)" install_venv
    ccache_mark
    configure_and_build release scalebench
    timed "quickstart sweep + analysis" \
      bash docs/examples/run_quickstart.sh "$repo/build/release" "$venv/bin/python"
    print_timings
    ;;
  test)
    timed "apt (Debian packages)" install_debian "${debian_packages[@]}" "${test_packages[@]}"
    timed "virtualenv (pip)" install_venv
    timed "frameworks virtualenv (pip)" install_frameworks_venv
    timed "CytoDL virtualenv (uv)" install_cytodl_venv
    ccache_mark
    configure_and_build release
    configure_and_build asan
    SCALEBENCH_FRAMEWORKS_PYTHON="$frameworks_venv/bin/python" SCALEBENCH_CYTODL_VENV="$cytodl_venv" \
      exec bash tests/run_all.sh "$repo" "$venv/bin/python"
    ;;
  *)
    echo "usage: $0 [build|demo|test]" >&2
    exit 2
    ;;
esac
