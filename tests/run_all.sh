#!/usr/bin/env bash
# Runs every scalebench test suite; called by `./setup.sh test` after both presets are built.
#   1. style: clang-format on all C++ sources (no changes allowed)
#   2. release build: ctest (unit, MPI under mpiexec, CLI); a seeded third of the long tests
#      (Note [Long tests in CI]; SCALEBENCH_LONG_TESTS=all runs them all)
#   3. ASan/UBSan build: ctest of common/ and orchestrator/ (no Torch)
#   4. GPU kit: what of the GPU verification runs without a GPU (tests/gpu/test_kit.sh): the
#      bundle of Debian packages (downloaded once, cached in ~/.cache/scalebench-gpu-bundle),
#      unpacked into a prefix, mpirun from it, the release preset configured against it with the
#      system's copies hidden, and verify.sh --dry-run
#   5. clang-tidy over every .cc outside tests/ (see Note [clang-tidy in CI])
#   6. analysis: the tests that read a results file, on the HDF5 files of real `scalebench run`s
#      of the quickstart, of docs/examples/repetitions.yaml (series intervals against their
#      numpy reference) and of docs/examples/programs/run_demo.sh (a user's DDP script on two
#      branches: test_program_cells.py) and, with the frameworks' environment
#      (SCALEBENCH_FRAMEWORKS_PYTHON, made by `./setup.sh test`), of the Lightning + Hydra, JAX
#      and Keras examples (test_framework_programs.py) and, with CytoDL's environment
#      (SCALEBENCH_CYTODL_VENV), of the real CytoDL on two branches (docs/examples/cytodl/,
#      test_cytodl_example.py); every test on the synthetic files of
#      tests/analysis/make_results.py
#      (branches, bf16, failures); ruff (lint + format) over analysis/ and tests/analysis/
#   7. fuzz: a short run (15 s per libFuzzer target, tests/fuzz/run.sh); the long run is
#      documented in docs/reliability.md
#   8. slurm: a real Slurm cluster: one node, then two slurmd on one machine (tests/slurm/run.sh)
# Usage: tests/run_all.sh <repo> <venv python> [suite...]. With suites named (of `suites` below),
# only those run. Set SCALEBENCH_SKIP_SLURM=1 to skip step 8. Each suite's time goes into the
# timing table (tests/timings.sh). To run them under a known background load:
# tests/under_load.sh tests/run_all.sh <repo> <venv python> [suite...] (docs/contributing.md).
set -euo pipefail
# The suites, in the order they run (each run_step below names one of them).
suites=(format ctest asan gpukit tidy analysis ruff fuzz slurm)
# `scalebench run` prints the analysis' summary at its end (Note [The run ends with the
# answer]); the suites' many runs skip it, except the quickstart run that checks it.
export SCALEBENCH_RUN_SUMMARY=0
repo="$1"
python="$2"
shift 2
selected=("$@")
for suite in "${selected[@]}"; do
  if [[ " ${suites[*]} " != *" $suite "* ]]; then
    echo "tests/run_all.sh: unknown suite '$suite'; the suites: ${suites[*]}" >&2
    exit 2
  fi
done
cd "$repo"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# shellcheck source=tests/timings.sh
source "$repo/tests/timings.sh"
# Started alone (not by setup.sh), the table covers the suites only.
[[ -n "${SCALEBENCH_TIMINGS:-}" ]] || timings_start "$repo/build/timings.tsv"
failures=()
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
# run_step <suite> <title> <command...>: runs the command unless other suites were selected.
run_step() {
  local suite="$1" name="$2"
  shift 2
  [[ " ${suites[*]} " == *" $suite "* ]] || { echo "run_step: suite '$suite' is not in suites" >&2; exit 2; }
  if ((${#selected[@]})) && [[ " ${selected[*]} " != *" $suite "* ]]; then return 0; fi
  step "$name"
  if timed "$name" "$@"; then echo "--- $name: passed"; else echo "--- $name: FAILED"; failures+=("$name"); fi
}

# Note [Long tests in CI]
# A handful of tests take 15 s to 2 min each (real batch searches, the fault matrix, two
# simulated nodes, a live watch; under ASan every fault test) and most of ctest's wall time,
# since a test needing more processes than -j runs alone. CI runs every other test and a
# seeded third of the long ones (at least one), a different third each run: over runs every
# long test runs, and a failure names its seed. `SCALEBENCH_LONG_TESTS=all` runs them all
# (before a submission that touches what they cover); SCALEBENCH_TEST_SEED=<n> repeats a
# sample. The label `long` is set beside each test's definition (tests/mpi, tests/faults).
# Note [A test that fails once]
# The names of the tests that failed, "<preset>: <name>" (ctest) or "<pytest run>: <test
# id>", go to the last lines of the output (CI keeps the end of a long log; its table alone
# does not say which test failed). A test that fails is run once more, alone (pytest: the
# failed ones together, in one process): failing again, the step fails; passing, the step
# passes and the test is named at the end as FLAKY, which is a defect to fix (a race in the
# code or a test that times the machine, issue 43), not a pass. Stop 45's CI failed in ctest
# (release) without naming the test: it was watch_live, which failed in every fresh clone (a
# cold interpreter, then fixed) and passed in a used one; stop 46's in pytest, on an operator
# ranking that a loaded machine could reorder (test_ops.py, since fixed). Files, since `timed`
# runs each step in a subshell.
failed_tests_file="$repo/build/failed-tests.txt"
flaky_tests_file="$repo/build/flaky-tests.txt"
mkdir -p "$repo/build"
: >"$failed_tests_file"
: >"$flaky_tests_file"
# failed_names <LastTestsFailed.log>: its test names, one a line ("12:name" -> "name").
failed_names() { sed 's/^[0-9]*://' "$1"; }
# ctest_run <preset> <ctest arguments...>: ctest; a failed test runs once more (-j 1).
ctest_run() {
  local preset="$1" failed_log
  shift
  failed_log="$repo/build/$preset/Testing/Temporary/LastTestsFailed.log"
  rm -f "$failed_log"
  ctest --preset "$preset" "$@" && return 0
  [[ -f "$failed_log" ]] || return 1
  local -a first
  mapfile -t first < <(failed_names "$failed_log")
  echo "ctest: ${#first[@]} test(s) failed: ${first[*]}; running them once more, one at a time"
  local rc=0 again=""
  ctest --preset "$preset" --rerun-failed -j 1 || rc=1
  ((rc == 0)) || again="$(failed_names "$failed_log")"
  sort_rerun "$preset" "$again" "${first[@]}"
  return "$rc"
}
# sort_rerun <label> <names failing again, one a line> <names that failed first...>: each
# first failure as "<label>: <name>" into the failed tests if it failed again, else the flaky.
sort_rerun() {
  local label="$1" again="$2" name
  shift 2
  for name in "$@"; do
    if grep -qxF -- "$name" <<<"$again"; then
      echo "$label: $name" >>"$failed_tests_file"
    else
      echo "$label: $name" >>"$flaky_tests_file"
    fi
  done
}
# pytest_run <name> <command running pytest...>: the command (which ends in pytest's
# arguments) with a cache of its own; the tests that failed run once more, in one process
# (pytest --last-failed -n 0), and are named as failed or flaky as ctest_run's are.
pytest_run() {
  local name="$1" rc=0
  shift
  local cache="$repo/build/pytest-cache/$name"
  local failed_list="$cache/v/cache/lastfailed"
  rm -rf "$cache"
  "$@" -o cache_dir="$cache" && return 0
  [[ -f "$failed_list" ]] || return 1
  local -a first
  mapfile -t first < <(pytest_failed_ids "$failed_list")
  ((${#first[@]})) || return 1
  echo "pytest: ${#first[@]} test(s) failed: ${first[*]}; running them once more, in one process"
  "$@" -o cache_dir="$cache" -n 0 --last-failed || rc=1
  local again=""
  ((rc == 0)) || again="$(pytest_failed_ids "$failed_list")"
  sort_rerun "$name" "$again" "${first[@]}"
  return "$rc"
}
# pytest_failed_ids <lastfailed>: pytest's cache of failed test ids (a JSON object), one a line.
pytest_failed_ids() {
  "$python" -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))))' "$1"
}
# ctest_sampled <preset> <label regex of the long tests>
ctest_sampled() {
  local preset="$1" long="$2" rc=0
  if [[ "${SCALEBENCH_LONG_TESTS:-sample}" == all ]]; then
    ctest_run "$preset" -j 2
    return
  fi
  local seed="${SCALEBENCH_TEST_SEED:-$RANDOM}" names chosen
  mapfile -t names < <(ctest --preset "$preset" -N -L "$long" | sed -n 's/^ *Test *#[0-9]*: //p')
  mapfile -t chosen < <(printf '%s\n' "${names[@]}" |
    shuf -n $(((${#names[@]} + 2) / 3)) --random-source=<(yes "$seed"))
  echo "long tests (labels $long): ${#chosen[@]} of ${#names[@]} this run (seed $seed): ${chosen[*]}"
  echo "  the same sample: SCALEBENCH_TEST_SEED=$seed; every one: SCALEBENCH_LONG_TESTS=all"
  ctest_run "$preset" -j 2 -LE "$long" || rc=1
  if ((${#chosen[@]})); then
    ctest_run "$preset" -j 2 -R "^($(IFS='|'; echo "${chosen[*]}"))\$" || rc=1
  fi
  return "$rc"
}
cpp_sources() { git ls-files '*.h' '*.cc' | grep -E '^(common|matrix|results|protocol|program|orchestrator|worker|app|tests)/'; }
check_format() { cpp_sources | xargs clang-format --dry-run --Werror; }
# Note [clang-tidy in CI]
# Every tracked .cc outside tests/ is checked, so a new top-level folder is covered without an
# edit here; a file absent from the compile commands (a *_cuda.cc without CUDA) is skipped.
# The commands are build/release's minus the worker's precompiled header: clang cannot read
# GCC's cmake_pch.hxx.gch, and each worker file includes the Torch headers it uses.
# A Torch file takes a minute or more (the checks walk all of Torch's headers), so a file that
# passed leaves a stamp in the user's cache (beside the compiler cache, so that it serves every
# later clone) named by a hash of what its check depends on: its text, the headers the compiler
# read for it, its command without the clone's path, .clang-tidy and the clang-tidy version
# (tests/tidy_todo.py). It is not checked again until one of those changes.
# A header every file includes changes every key: a cold check of all ~150 files takes 30 to 40
# minutes on 2 cores, most of CI's 90. So the step has a budget, SCALEBENCH_TIDY_BUDGET_S
# (default 300 s; 0: none): the files outside worker/ (seconds each) go first, then the
# worker's Torch files in a random order; a file not started within the budget is listed as not
# checked (no stamp: a later run takes it), and the step fails only on a finding. The whole
# check is `SCALEBENCH_TIDY_BUDGET_S=0 tests/run_all.sh "$PWD" .venv/bin/python tidy`
# (docs/contributing.md), run before a submission that changed a widely included header.
tidy_order() { # the cheap files first, then the Torch files shuffled
  local todo="$1"
  printf '%s\n' "$todo" | grep -v ' worker/' || true
  printf '%s\n' "$todo" | grep ' worker/' | shuf || true
}
check_tidy() {
  local dir=build/clang-tidy
  local stamps="${SCALEBENCH_TIDY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/scalebench-clang-tidy}"
  mkdir -p "$dir" "$stamps"
  rm -f "$dir"/*.log
  clang-tidy --version >"$dir/version.txt"
  local todo
  todo=$("$python" tests/tidy_todo.py build/release "$dir" "$stamps")
  echo "clang-tidy: $(printf '%s' "$todo" | grep -c .) file(s) to check (the others passed unchanged)"
  [[ -z $todo ]] && return 0
  local budget="${SCALEBENCH_TIDY_BUDGET_S:-300}" deadline=0
  ((budget > 0)) && deadline=$(($(date +%s) + budget))
  rm -f "$dir"/*.skipped
  # $0 the database's folder, $1 the stamps, $2 the deadline (0: none), $3 key, $4 file.
  tidy_order "$todo" | xargs -P "$(nproc)" -L 1 bash -c \
    'if (($2 > 0 && $(date +%s) >= $2)); then touch "$0/$3.skipped"; exit 0; fi
     clang-tidy -p "$0" --quiet "$4" >"$0/$3.log" 2>&1 && touch "$1/$3"' \
    "$dir" "$stamps" "$deadline" || true
  cat "$dir"/*.log 2>/dev/null |
    grep -v -E '^[0-9]+ warnings? generated|^Suppressed|^Use -header-filter' |
    tee build/clang-tidy.log
  local key source failed=0 skipped=()
  while read -r key source; do
    if [[ -f $stamps/$key ]]; then continue; fi
    if [[ -f $dir/$key.skipped ]]; then skipped+=("$source"); continue; fi
    echo "clang-tidy failed: $source"
    failed=1
  done <<<"$todo"
  if ((${#skipped[@]})); then
    echo "clang-tidy: ${#skipped[@]} file(s) not checked within the ${budget} s budget (a later" \
      "run takes them; all now: SCALEBENCH_TIDY_BUDGET_S=0 tests/run_all.sh \"\$PWD\" <python> tidy):"
    printf '  %s\n' "${skipped[@]}"
  fi
  return "$failed"
}
check_ruff() {
  local paths=(analysis tests/analysis program/client docs/examples/programs docs/examples/own_model/aoti
    docs/examples/cytodl tests/docs)
  "$python" -m ruff check "${paths[@]}" && "$python" -m ruff format --check "${paths[@]}"
}
# Real runs for the analysis suite: the quickstart, docs/examples/repetitions.yaml whose
# series intervals test_series.py checks against the numpy reference (Note [Repetitions]),
# and the program-cells demo (a repository with two branches of a DDP script, run by its own
# virtualenv) that test_program_cells.py checks.
real_runs_for_analysis() {
  mkdir -p "$repo/build/test-runs"
  # Its console as a person sees it (Note [The run ends with the answer]): test_answer_first.py
  # checks that it ends with the summary.
  SCALEBENCH_RUN_SUMMARY=1 mpirun -np 3 --oversubscribe --allow-run-as-root \
    build/release/bin/scalebench run docs/examples/quickstart.yaml \
    -o "$repo/build/test-runs/quickstart.h5" --force >"$repo/build/test-runs/quickstart.out" \
    2>"$repo/build/test-runs/quickstart.log" &&
    mpirun -np 3 --oversubscribe --allow-run-as-root build/release/bin/scalebench run \
      docs/examples/repetitions.yaml -o "$repo/build/test-runs/repetitions.h5" --force --quiet &&
    mpirun -np 3 --oversubscribe --allow-run-as-root build/release/bin/scalebench run \
      docs/examples/batch_auto.yaml -o "$repo/build/test-runs/batch_auto.h5" --force --quiet &&
    run_program_demo && run_aoti_demo && run_compile_axis
}
# docs/examples/compile_axis.yaml: zoo models eager, as TorchScript and as AOTInductor twins
# (test_compile_axis.py checks the file).
run_compile_axis() {
  local log="$repo/build/test-runs/compile_axis.log"
  mpirun -np 3 --oversubscribe --allow-run-as-root build/release/bin/scalebench run \
    docs/examples/compile_axis.yaml -o "$repo/build/test-runs/compile_axis.h5" --force --quiet \
    >"$log" 2>&1 || { tail -n 60 "$log"; return 1; }
}
# docs/examples/own_model/aoti: one module exported as AOTInductor packages and TorchScript
# (test_aoti_cells.py checks the file).
run_aoti_demo() {
  local log="$repo/build/test-runs/aoti.log"
  SCALEBENCH_DEMO_DIR="$repo/build/test-runs/aoti" \
    docs/examples/own_model/aoti/run_demo.sh "$repo/build/release" "$python" >"$log" 2>&1 ||
    { tail -n 60 "$log"; return 1; }
}
# The frameworks' examples, with the environment ./setup.sh test made (.venv-frameworks);
# without one they are skipped, and test_framework_programs.py says so.
frameworks_python="${SCALEBENCH_FRAMEWORKS_PYTHON:-$repo/.venv-frameworks/bin/python}"
have_frameworks() { [[ -x "$frameworks_python" ]]; }
framework_runs() {
  if ! have_frameworks; then
    echo "no frameworks environment ($frameworks_python): run ./setup.sh test; skipped"
    return 0
  fi
  local runs="$repo/build/test-runs" log="$repo/build/test-runs/frameworks.log" example
  SCALEBENCH_DEMO_DIR="$runs/lightning" docs/examples/programs/lightning_hydra/run_demo.sh \
    "$repo/build/release" "$frameworks_python" >"$log" 2>&1 || { tail -n 60 "$log"; return 1; }
  for example in jax_mlp keras_mlp; do
    mpirun -np 2 --oversubscribe --allow-run-as-root build/release/bin/scalebench run \
      "docs/examples/programs/$example/program.yaml" -o "$runs/$example.h5" --force --quiet \
      >>"$log" 2>&1 || { tail -n 60 "$log"; return 1; }
  done
}
# The real CytoDL example (docs/examples/cytodl/run_example.sh), with CytoDL's environment
# ./setup.sh test made (SCALEBENCH_CYTODL_VENV, default ~/.cache/scalebench-cytodl-venv);
# without one it is skipped, and test_cytodl_example.py says so.
# shellcheck source=docs/examples/cytodl/env_path.sh
source "$repo/docs/examples/cytodl/env_path.sh"
have_cytodl() { [[ -x "$cytodl_venv/bin/python" ]]; }
cytodl_runs() {
  if ! have_cytodl; then
    echo "no CytoDL environment ($cytodl_venv): run ./setup.sh test; skipped"
    return 0
  fi
  local log="$repo/build/test-runs/cytodl.log"
  SCALEBENCH_DEMO_DIR="$repo/build/test-runs/cytodl" docs/examples/cytodl/run_example.sh \
    "$repo/build/release" "$python" "$cytodl_venv" >"$log" 2>&1 || { tail -n 60 "$log"; return 1; }
}
run_program_demo() {
  local log="$repo/build/test-runs/programs.log"
  SCALEBENCH_DEMO_DIR="$repo/build/test-runs/programs" \
    docs/examples/programs/run_demo.sh "$repo/build/release" "$python" >"$log" 2>&1 ||
    { tail -n 60 "$log"; return 1; }
}
# The tests that read a results file, on the real files (tests/analysis/conftest.py runs only
# those when a file is given); every test, on the synthetic file, in the next step.
# The variables that name the real runs' files for pytest (tests/analysis/conftest.py
# FILE_FIXTURES), NAME=path, in one list: the run on the real files sets them, the run on the
# synthetic files unsets every one of them.
real_run_files=(
  SCALEBENCH_RESULTS_FILE="$repo/build/test-runs/quickstart.h5"
  SCALEBENCH_RUN_OUTPUT="$repo/build/test-runs/quickstart.out"
  SCALEBENCH_REPETITIONS_FILE="$repo/build/test-runs/repetitions.h5"
  SCALEBENCH_PROGRAMS_FILE="$repo/build/test-runs/programs/results.h5"
  SCALEBENCH_AOTI_FILE="$repo/build/test-runs/aoti/results.h5"
  SCALEBENCH_COMPILE_FILE="$repo/build/test-runs/compile_axis.h5"
  SCALEBENCH_BATCH_AUTO_FILE="$repo/build/test-runs/batch_auto.h5"
)
framework_run_files=(
  SCALEBENCH_LIGHTNING_FILE="$repo/build/test-runs/lightning/results.h5"
  SCALEBENCH_LIGHTNING_TASKS_FILE="$repo/build/test-runs/lightning/tasks.h5"
  SCALEBENCH_JAX_FILE="$repo/build/test-runs/jax_mlp.h5"
  SCALEBENCH_KERAS_FILE="$repo/build/test-runs/keras_mlp.h5"
)
cytodl_run_files=(
  SCALEBENCH_CYTODL_TRAIN_FILE="$repo/build/test-runs/cytodl/train.h5"
  SCALEBENCH_CYTODL_INFER_FILE="$repo/build/test-runs/cytodl/infer.h5"
  SCALEBENCH_CYTODL_SHADOWED_FILE="$repo/build/test-runs/cytodl/shadowed.h5"
  SCALEBENCH_CYTODL_AUTO_FILE="$repo/build/test-runs/cytodl/auto.h5"
)
# Note [pytest on both cores]: most analysis tests run the CLI in a subprocess (imports of
# pandas, h5py and matplotlib, then a report or a table), one core each; pytest-xdist runs two
# at once. --dist loadfile keeps a file's tests in one process, so a module's fixture (a real
# run, a rendered report) is made once.
pytest_parallel=(-n 2 --dist loadfile)
pytest_on_real_runs() {
  local files=("${real_run_files[@]}")
  if have_frameworks; then files+=("${framework_run_files[@]}"); fi
  if have_cytodl; then files+=("${cytodl_run_files[@]}"); fi
  pytest_run "pytest (real runs)" env "${files[@]}" "$python" -m pytest -q "${pytest_parallel[@]}" \
    tests/analysis
}
# `env -u NAME` for every variable of the two lists.
unset_real_run_files() {
  local assignment
  for assignment in "${real_run_files[@]}" "${framework_run_files[@]}" "${cytodl_run_files[@]}"; do
    printf '%s\n' -u "${assignment%%=*}"
  done
}
mapfile -t unset_real_runs < <(unset_real_run_files)

run_step format "clang-format" check_format
run_step ctest "ctest (release)" ctest_sampled release long
run_step asan "ctest (asan)" ctest_sampled asan 'long|faults'
run_step gpukit "GPU kit (bundle, prefix, configure)" tests/gpu/test_kit.sh "$python"
run_step tidy "clang-tidy" check_tidy
run_step analysis "analysis (real runs: quickstart, repetitions, batch auto, programs, compile)" real_runs_for_analysis
run_step analysis "analysis (real runs: Lightning + Hydra, JAX, Keras)" framework_runs
run_step analysis "analysis (real runs: the real CytoDL, two branches)" cytodl_runs
run_step analysis "analysis (pytest on the real runs)" pytest_on_real_runs
run_step analysis "analysis (pytest on the synthetic files)" \
  pytest_run "pytest (synthetic files)" \
  env "${unset_real_runs[@]}" SCALEBENCH_BUILD_DIR="$repo/build/release" \
  "$python" -m pytest -q -rs --durations=12 "${pytest_parallel[@]}" tests/analysis
run_step ruff "ruff (analysis)" check_ruff
run_step fuzz "fuzz (15 s per target)" tests/fuzz/run.sh 15
if [[ "${SCALEBENCH_SKIP_SLURM:-0}" != 1 ]]; then
  run_step slurm "slurm (one node, then two)" bash tests/slurm/run.sh "$repo" "$python"
fi

print_timings
echo
if [[ -s "$flaky_tests_file" ]]; then
  echo "FLAKY tests (failed, then passed alone; a defect to fix, Note [A test that fails once]):"
  sed 's/^/  /' "$flaky_tests_file"
fi
if ((${#failures[@]})); then
  echo "FAILED suites: ${failures[*]}"
  if [[ -s "$failed_tests_file" ]]; then
    echo "FAILED tests (their output is above, under the suite's heading):"
    sed 's/^/  /' "$failed_tests_file"
  fi
  exit 1
fi
echo "all suites passed"
