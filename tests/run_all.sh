#!/usr/bin/env bash
# Runs every scalebench test suite; called by `./setup.sh test` after both presets are built.
#   1. style: clang-format on all C++ sources (no changes allowed)
#   2. release build: ctest (unit, MPI under mpiexec, CLI)
#   3. ASan/UBSan build: ctest of common/ and orchestrator/ (no Torch)
#   4. clang-tidy over every .cc outside tests/ (see Note [clang-tidy in CI])
#   5. analysis: pytest on an HDF5 file produced by a real `scalebench run` of the quickstart,
#      and on the synthetic file of tests/analysis/make_results.py (branches, bf16, failures)
#      plus ruff (lint + format) over analysis/ and tests/analysis/; the series intervals of
#      a real run of docs/examples/repetitions.yaml against their numpy reference
#   6. fuzz: a short run (15 s per libFuzzer target, tests/fuzz/run.sh); the long run is
#      documented in docs/reliability.md
#   7. slurm: a real single-node Slurm cluster (tests/slurm/run.sh)
# Usage: tests/run_all.sh <repo> <venv python>. Set SCALEBENCH_SKIP_SLURM=1 to skip step 7.
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

cpp_sources() { git ls-files '*.h' '*.cc' | grep -E '^(common|protocol|orchestrator|worker|app|tests)/'; }
check_format() { cpp_sources | xargs clang-format --dry-run --Werror; }
# Note [clang-tidy in CI]
# Every tracked .cc outside tests/ is checked, so a new top-level folder is covered without an
# edit here; a file absent from the compile commands (a *_cuda.cc without CUDA) is skipped.
# The commands are build/release's minus the worker's precompiled header: clang cannot read
# GCC's cmake_pch.hxx.gch, and each worker file includes the Torch headers it uses.
# A Torch file takes a minute or more (the checks walk all of Torch's headers), so a file that
# passed leaves a stamp named by a hash of its text, every tracked header, .clang-tidy, its
# command and the clang-tidy version, and is not checked again until one of those changes.
check_tidy() {
  local dir=build/clang-tidy
  mkdir -p "$dir/passed"
  rm -f "$dir"/*.log
  clang-tidy --version >"$dir/version.txt"
  local todo
  todo=$("$python" tests/tidy_todo.py build/release/compile_commands.json "$dir")
  echo "clang-tidy: $(printf '%s' "$todo" | grep -c .) file(s) to check (the others passed unchanged)"
  [[ -z $todo ]] && return 0
  printf '%s\n' "$todo" | xargs -P "$(nproc)" -L 1 bash -c \
    'clang-tidy -p "$0" --quiet "$2" >"$0/$1.log" 2>&1 && touch "$0/passed/$1"' "$dir" || true
  cat "$dir"/*.log | grep -v -E '^[0-9]+ warnings? generated|^Suppressed|^Use -header-filter' |
    tee build/clang-tidy.log
  local key source failed=0
  while read -r key source; do
    [[ -f $dir/passed/$key ]] || { echo "clang-tidy failed: $source"; failed=1; }
  done <<<"$todo"
  return "$failed"
}
check_ruff() {
  "$python" -m ruff check analysis tests/analysis && "$python" -m ruff format --check analysis tests/analysis
}
# Note [Repetitions]: the series intervals of a real run against the numpy reference.
run_repetitions_for_analysis() {
  local out="$repo/build/test-runs/repetitions.h5"
  mkdir -p "$(dirname "$out")"
  mpirun -np 3 --oversubscribe --allow-run-as-root build/release/bin/scalebench run \
    docs/examples/repetitions.yaml -o "$out" --force --quiet
  SCALEBENCH_REPETITIONS_FILE="$out" "$python" -m pytest -q tests/analysis/test_series.py
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
run_step "analysis (repetitions of a real run)" run_repetitions_for_analysis
run_step "analysis (pytest on the synthetic file)" env -u SCALEBENCH_RESULTS_FILE "$python" -m pytest -q -rs tests/analysis
run_step "ruff (analysis)" check_ruff
run_step "fuzz (15 s per target)" tests/fuzz/run.sh 15
if [[ "${SCALEBENCH_SKIP_SLURM:-0}" != 1 ]]; then
  run_step "slurm (single-node cluster)" bash tests/slurm/run.sh "$repo" "$python"
fi

echo
if ((${#failures[@]})); then
  echo "FAILED suites: ${failures[*]}"
  exit 1
fi
echo "all suites passed"
