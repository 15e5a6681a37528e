#!/usr/bin/env bash
# tests/gpu/test_kit.sh [PYTHON]: the parts of the GPU verification kit (docs/gpu-verification.md)
# that run without a GPU, in about a minute; a step of tests/run_all.sh (suite `gpukit`).
#   1. the bundle: tests/gpu/bundle.sh into ~/.cache/scalebench-gpu-bundle, only when there is
#      none yet or it was made by another version of bundle.sh (the download needs the network)
#   2. tests/gpu/verify.sh --dry-run lists every step with its time limit
#   3. tests/gpu/verify.sh --until configure: the bundle unpacked into a prefix (ldd finds every
#      library), `mpirun -np 2 hostname` from the prefix, and the release preset configured with
#      /usr and /usr/local ignored: every package from the prefix, LibTorch from PYTHON's torch
#      (default: the project's .venv). Where this machine allows it (root, unshare), the
#      system's copies of the bundle's packages are hidden meanwhile (tests/gpu/hide_packages.sh),
#      as on a node that has none of them.
#   4. tests/gpu/device_check.sh without a GPU, on a kit of this machine's build/release
#      (tests/gpu/kit.sh, as tests/gpu/prebuild.sh packs it; the system's packages hidden as in
#      3): the kit unpacks, every binary and library finds what it needs, and `detect` stops
#      the run saying "no GPU"; no later check runs.
# The build and the GPU steps are left to a GPU node. Files go to a temporary folder, kept
# (and named) when a check fails.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${1:-$repo/.venv/bin/python}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/scalebench-gpu-bundle"
bundle="$cache/scalebench-gpu-bundle.tar"
# The installed packages whose files the bundle replaces, their siblings (h5cc, libhdf5-hl) and
# Open MPI's network transports, which the bundle leaves out: a bare node has none of them.
bundle_families='^(openmpi-|libopenmpi|libpmix|libhwloc|libevent|libhdf5|hdf5-|libboost|libicu|libyaml-cpp|nlohmann-json|libvalijson|libcli11|libgtest|libgmock|googletest|libaec|libsz|libmunge|libucx|libfabric|libibverbs|ibverbs-providers|librdmacm|libpsm|libnl-|libnuma)'

work="$(mktemp -d -t scalebench-gpu-kit.XXXXXX)"
finish() {
  local status=$?
  if ((status == 0)); then
    rm -rf "$work"
  else
    echo "test_kit.sh: FAILED (status $status); files kept in $work" >&2
  fi
}
trap finish EXIT

fail() {
  echo "test_kit.sh: $*" >&2
  exit 1
}

# shellcheck source=tests/gpu/kit.sh
source "$here/kit.sh"

# bundle_is_current: the cached bundle was made by this bundle.sh (its sha256 is in MANIFEST.tsv).
bundle_is_current() {
  [[ -f $bundle ]] || return 1
  local made_by
  made_by="$(tar -xOf "$bundle" scalebench-gpu-bundle/MANIFEST.tsv | sed -n 's/.*bundle.sh sha256 \([0-9a-f]*\).*/\1/p')"
  [[ $made_by == "$(sha256sum "$here/bundle.sh" | cut -d' ' -f1)" ]]
}

make_bundle() {
  if bundle_is_current; then
    echo "bundle: $bundle (cached, made by this bundle.sh)"
  else
    SCALEBENCH_BUNDLE_PIP_PYTHON="$python" "$here/bundle.sh" "$cache"
  fi
}

# check_dry_run: every step is listed with its limit, and nothing was written but the listing.
check_dry_run() {
  "$here/verify.sh" --dry-run --bundle "$bundle" --out "$work/dry" --python "$python" >"$work/dry-run.txt"
  local step
  for step in unpack mpi configure build detect gpu-tests selftest probe sweep ddp-bench; do
    grep -qE "^[0-9]{2} $step +limit +[0-9]+ s" "$work/dry-run.txt" ||
      fail "verify.sh --dry-run does not list step $step with its time limit (see $work/dry-run.txt)"
  done
  [[ ! -e $work/dry/prefix && ! -e $work/dry/build ]] || fail "verify.sh --dry-run wrote a prefix or a build"
  echo "verify.sh --dry-run: 10 steps listed with their limits"
}

# check_until_configure: the prefix works and the configure finds everything in it.
check_until_configure() {
  "${runner[@]}" "$here/verify.sh" --until configure --bundle "$bundle" --out "$work/verify" \
    --python "$python" || fail "verify.sh --until configure failed: see $work/verify/logs and $work/verify/summary.md"
  local step
  for step in unpack mpi configure; do
    grep -qE "^\| $step \| passed \|" "$work/verify/summary.md" ||
      fail "summary.md does not say that $step passed (see $work/verify/summary.md)"
  done
  grep -q 'every package from the prefix' "$work/verify/logs/03-configure.log" ||
    fail "the configure log lacks the prefix check (see $work/verify/logs/03-configure.log)"
  sed -n '/^| step/,/^$/p' "$work/verify/summary.md"
}

# check_device_check_without_gpu: device_check.sh's own steps before the first GPU call.
check_device_check_without_gpu() {
  local build="$repo/build/release" files=() target file torch_version status=0
  if [[ ! -x $build/bin/scalebench ]]; then
    echo "(no build/release: device_check.sh is not checked)"
    return 0
  fi
  for target in scalebench scalebench-supervisor worker_unit_tests collective_backend_test mpi_workload_test; do
    file="$(find "$build" -type f -name "$target" -perm -u+x -print -quit)"
    [[ -n $file ]] || fail "build/release has no $target"
    files+=("$file")
  done
  torch_version="$("$python" -c 'import torch; print(torch.__version__.split("+")[0])')"
  pack_kit "$work/kit" "$torch_version" none "${files[@]}"
  SCALEBENCH_NODE_PYTHON="$python" "${runner[@]}" "$here/device_check.sh" "$work/kit" \
    "$work/check" 300 >"$work/device_check.out" 2>&1 || status=$?
  ((status == 1)) || fail "device_check.sh without a GPU exited $status, not 1 (see $work/device_check.out)"
  # A detect that ran out of its time limit (a loaded machine) says so, not "missing libraries".
  ! grep -qE '^\| detect \| ran out of time' "$work/check/summary.md" ||
    fail "device_check.sh: detect ran out of its time limit (a loaded machine? see $work/check/checks.log)"
  grep -q 'ldd: every binary and library of the kit finds what it needs' "$work/check/checks.log" ||
    fail "device_check.sh: ldd found missing libraries (see $work/check/checks.log)"
  grep -qE '^\| detect \| failed .*no GPU' "$work/check/summary.md" ||
    fail "device_check.sh: summary.md does not say that detect found no GPU (see $work/check/summary.md)"
  ! grep -qE '^\| (unit-and-mpi-tests|selftest|probe|mfu|sweep|aoti) \|' "$work/check/summary.md" ||
    fail "device_check.sh ran GPU checks without a GPU (see $work/check/summary.md)"
  echo "device_check.sh without a GPU: the kit unpacks, ldd finds every library, detect says no GPU"
}

[[ -x $python ]] || fail "no Python at $python: run ./setup.sh (it makes .venv with torch) or pass a Python with torch"
# Where this machine allows it, the checks run with the system's copies of the bundle's
# packages hidden (a bare node has none of them).
runner=()
if "$here/hide_packages.sh" --check; then
  runner=("$here/hide_packages.sh" "$bundle_families")
else
  echo "(not root or no unshare: the system's packages stay visible; CMake ignores /usr and /usr/local)"
fi
make_bundle
check_dry_run
check_until_configure
check_device_check_without_gpu
