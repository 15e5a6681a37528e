#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (preset `fuzz`: clang, ASan + UBSan, no Torch)
# and runs each for SECONDS seconds (default 30; tests/run_all.sh runs 15; the long
# run of docs/reliability.md is 600). The corpus grows in build/fuzz/corpus/<target> and is
# kept between runs; it is seeded from the matrix examples and test files, and for the
# results reader from results files written by scalebench (tests/data/results/fuzz_seed)
# and the damaged files of tests/data/results/damaged. A crash, a sanitizer report, a timeout
# (> 10 s per input) or more than 2 GiB of memory leaves its input in
# build/fuzz/crashes/<target>-*, fails the run, and belongs in the malformed corpus
# (tests/data/matrix/malformed + tests/unit/common/matrix_malformed_test.cc) once fixed.
#
# Usage: tests/fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
seconds="${1:-30}"
shift || true
targets=("$@")
((${#targets[@]})) || targets=(fuzz_matrix_yaml fuzz_matrix_csv fuzz_names fuzz_results_reader)
export CCACHE_DIR="${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/scalebench-ccache}" CCACHE_BASEDIR="${CCACHE_BASEDIR:-$repo}"

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)" --target "${targets[@]}" >/dev/null

seeds=build/fuzz/seeds
mkdir -p "$seeds/yaml" "$seeds/csv" "$seeds/names" "$seeds/results" build/fuzz/crashes
cp tests/data/matrix/valid/*.yaml tests/data/matrix/malformed/*.yaml docs/examples/*.yaml \
  "$seeds/yaml/" 2>/dev/null || true
cp tests/data/matrix/malformed/*.csv docs/examples/*.csv "$seeds/csv/" 2>/dev/null || true
printf '%s\n' main feature/x v1.2 HEAD~1 -rf 'a..b' 'x@{1}' im2im/segmentation ../etc \
  | split -l 1 - "$seeds/names/seed-"
rm -f "$seeds/results/synthetic.h5"  # h5py's old format: refused before HDF5 parses it
cp tests/data/results/fuzz_seed/*.h5 tests/data/results/damaged/*.h5 "$seeds/results/"

seed_of() {
  case "$1" in
    fuzz_matrix_yaml) echo "$seeds/yaml" ;;
    fuzz_matrix_csv) echo "$seeds/csv" ;;
    fuzz_names) echo "$seeds/names" ;;
    fuzz_results_reader) echo "$seeds/results" ;;
  esac
}

export LSAN_OPTIONS="suppressions=$repo/tests/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
failed=()
for target in "${targets[@]}"; do
  corpus="build/fuzz/corpus/$target"
  mkdir -p "$corpus"
  echo "fuzz: $target for ${seconds}s"
  if ! "build/fuzz/tests/fuzz/$target" "$corpus" "$(seed_of "$target")" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="build/fuzz/crashes/$target-" >"build/fuzz/$target.log" 2>&1; then
    failed+=("$target")
    tail -n 40 "build/fuzz/$target.log"
  else
    grep -E '^stat::number_of_executed_units|^Done' "build/fuzz/$target.log" || true
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: FAILED ${failed[*]} (inputs in build/fuzz/crashes/)"
  exit 1
fi
echo "fuzz: ${#targets[@]} target(s) ran ${seconds}s each without a finding"
