#!/usr/bin/env bash
# Runs every scalebench test suite; called by `./setup.sh test` after both presets are built.
#   1. style: clang-format on all C++ sources (no changes allowed)
#   2. release build: ctest (unit, MPI under mpiexec, CLI)
#   3. ASan/UBSan build: ctest of common/ and orchestrator/ (no Torch)
#   4. clang-tidy over common/ and orchestrator/
#   5. analysis: pytest on an HDF5 file produced by a real `scalebench run` of the quickstart,
#      and on the synthetic file of tests/analysis/make_results.py (branches, bf16, failures)
#      plus ruff (lint + format) over analysis/ and tests/analysis/
#   6. slurm: a real single-node Slurm cluster (tests/slurm/run.sh)
# Usage: tests/run_all.sh <repo> <venv python>. Set SCALEBENCH_SKIP_SLURM=1 to skip step 6.
set -euo pipefail
repo="$1"
python="$2"
cd "$repo"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
failures=()
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
run_step() {
  local name="$1"; shift
  step "$name"
  if "$@"; then echo "--- $name: passed"; else echo "--- $name: FAILED"; failures+=("$name"); fi
}

cpp_sources() { git ls-files '*.h' '*.cc' | grep -E '^(common|orchestrator|worker|tests)/'; }
check_format() { cpp_sources | xargs clang-format --dry-run --Werror; }
check_tidy() {
  git ls-files 'common/*.cc' 'orchestrator/*.cc' |
    xargs -P "$(nproc)" -n 4 clang-tidy -p build/release --quiet 2>&1 |
    grep -v -E '^[0-9]+ warnings? generated|^Suppressed|^Use -header-filter' | tee build/clang-tidy.log
  ! grep -q -E '(warning|error):' build/clang-tidy.log
}
check_ruff() {
  "$python" -m ruff check analysis tests/analysis && "$python" -m ruff format --check analysis tests/analysis
}
run_quickstart_for_analysis() {
  local out="$repo/build/test-runs/quickstart.h5"
  mkdir -p "$(dirname "$out")"
  mpirun -np 3 --oversubscribe --allow-run-as-root build/release/bin/scalebench run \
    docs/examples/quickstart.yaml -o "$out" --force --quiet
  SCALEBENCH_RESULTS_FILE="$out" "$python" -m pytest -q tests/analysis
}

run_step "clang-format" check_format
run_step "ctest (release)" ctest --preset release -j 2
run_step "ctest (asan)" ctest --preset asan -j 2
run_step "clang-tidy" check_tidy
run_step "analysis (pytest on a real run)" run_quickstart_for_analysis
run_step "analysis (pytest on the synthetic file)" env -u SCALEBENCH_RESULTS_FILE "$python" -m pytest -q -rs tests/analysis
run_step "ruff (analysis)" check_ruff
if [[ "${SCALEBENCH_SKIP_SLURM:-0}" != 1 ]]; then
  run_step "slurm (single-node cluster)" bash tests/slurm/run.sh "$repo" "$python"
fi

echo
if ((${#failures[@]})); then
  echo "FAILED suites: ${failures[*]}"
  exit 1
fi
echo "all suites passed"
