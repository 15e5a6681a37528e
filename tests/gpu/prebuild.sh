#!/usr/bin/env bash
# tests/gpu/prebuild.sh: builds the GPU checks' binaries on this machine (no GPU needed) against
# the LibTorch of the GPU node's PyTorch, and packs them with the Debian runtime libraries
# into one kit that tests/gpu/device_check.sh runs on the node without compiling anything
# (docs/gpu-verification.md#a-short-lease).
#
#   tests/gpu/prebuild.sh [--torch VERSION] [--out DIR]
#
#   --torch VERSION  the node's torch (`python3 -c 'import torch; print(torch.__version__)'`
#                    there, without its +cuXXX), default 2.11.0: its wheel is fetched from PyPI
#                    (the default CUDA build of that version) and only its C++ side is used
#   --out DIR        default build/gpu-kit: kit.tar.xz (bin/ stripped, prefix/ the bundle's
#                    runtime packages unpacked), kit.txt; the build in build/gpu
#
# SCALEBENCH_TORCH_SITE: a folder holding that version's torch/ already unpacked (no download).
# Needs the CUDA toolkit (/usr/local/cuda), the project's Debian packages (setup.sh) and the
# bundle of tests/gpu/bundle.sh (made when missing). The kit must stay under the device
# tool's 64 MiB with the working tree: its size is printed and checked against 56 MiB.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
torch_version=2.11.0
out="$repo/build/gpu-kit"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --torch) torch_version="${2:?--torch needs a version}"; shift ;;
    --out) out="$(realpath -m "${2:?--out needs a folder}")"; shift ;;
    *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
  shift
done
build="$repo/build/gpu"
targets=(scalebench scalebench-supervisor worker_unit_tests collective_backend_test mpi_workload_test)
# shellcheck source=tests/gpu/kit.sh
source "$here/kit.sh"

# 1. LibTorch of the node's version: the wheel's torch/ folder (headers, libraries, CMake files).
wheels="$HOME/.cache/scalebench-torch-wheels/$torch_version"
site="${SCALEBENCH_TORCH_SITE:-$wheels/site}"
if [[ ! -f $site/torch/share/cmake/Torch/TorchConfig.cmake ]]; then
  mkdir -p "$wheels"
  python3 -m pip download --no-deps --retries 10 --timeout 60 "torch==$torch_version" -d "$wheels"
  rm -rf "$site"
  python3 -m zipfile -e "$(find "$wheels" -name "torch-$torch_version-*.whl" -print -quit)" "$site"
fi

# 2. The build (Release: no debug information to carry).
# The wheel's libtorch_cuda needs CUDA libraries of other wheels (cuSPARSELt, NVSHMEM, ...)
# that are not fetched: the link leaves their symbols to the node, where torch has them, and
# the test binaries cannot run here, so GoogleTest lists their tests when ctest runs, not
# after the link.
cmake --preset release -B "$build" -DCMAKE_BUILD_TYPE=Release \
  "-DTorch_DIR=$site/torch/share/cmake/Torch" \
  -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined \
  -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST | tee "$build.configure.log" | grep -E 'LibTorch|GPU code'
grep -qF 'GPU code is compiled' "$build.configure.log" ||
  { echo "prebuild.sh: the GPU code is not compiled (no CUDA toolkit or NCCL; see $build.configure.log)" >&2; exit 1; }
cmake --build "$build" -j "${SCALEBENCH_JOBS:-$(nproc)}" --target "${targets[@]}"

# 3. The kit: stripped binaries and the bundle's runtime packages, unpacked.
files=()
for target in "${targets[@]}"; do
  files+=("$(find "$build" -type f -name "$target" -perm -u+x -print -quit)")
done
pack_kit "$out" "$torch_version" xz "${files[@]}"
size_mib=$(($(stat -c %s "$out/kit.tar.xz") / 1048576))
echo "prebuild.sh: $out/kit.tar.xz, $size_mib MiB (${#targets[@]} binaries), torch $torch_version"
((size_mib <= 56)) || { echo "prebuild.sh: the kit is over 56 MiB" >&2; exit 1; }
