#!/usr/bin/env bash
# Benchmarks of scalebench itself (issue 16): measurements, never pass/fail. Not part of
# ctest or tests/run_all.sh; the exit status is 0 whatever the figures (non-zero only when
# a benchmark could not run at all). See docs/performance.md, "Benchmarks (tests/perf)".
#
#   tests/perf/run.sh [build dir] [python]      defaults: build/release .venv/bin/python
#
# Each benchmark prints its details, then one line per figure
#   TABLE|benchmark|figure|goal|measured|met
# which this script collects into the table at the end. Sizes are chosen so that the whole
# run takes about 3-5 minutes on a 2-core VM; each script takes --help for its knobs.
#
#   ddp_vs_torch.py     scalebench DDP step (2 ranks) vs PyTorch DistributedDataParallel
#   cpp_vs_eager.py     scalebench (TorchScript in C++) vs a PyTorch eager loop, 1 rank
#   orchestration.py    many tiny cells: wall time vs the cells' own time
#   analysis_load.py    scalebench_analysis load() of 1M timing rows
#   program_client.py   program cells: the client's cost per step, the launch cost per cell
#   iterations_auto.py  the quickstart with iterations auto against fixed counts (20/100/300)
#   projection_check.py `scalebench project` against replay runs on simulated nodes (--quick
#                       here; the whole check: docs/projection.md)
#   sweep_scale.py      info / analyze / compare / history of sweeps of 10^3 and 10^4 cells
#                       (10^5 and `report`: run it alone, docs/performance.md)
#   results_store_cost  C++ (tests/perf/results_store_cost.cc): one results-file update and
#                       a cell through the group commit, at 1, 1k and 10k cells in the file
#   harness_overhead    C++ (tests/perf/harness_overhead.cc), run when built: prints its own
#                       lines (TABLE| lines, if it prints any, join the table)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$repo/build/release}" && pwd)"
python="${2:-$repo/.venv/bin/python}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# The benchmarks' files (models, datasets, results files) go to one temporary folder,
# removed at the end unless SCALEBENCH_PERF_KEEP=1 (then its path is printed).
export TMPDIR="$(mktemp -d -t scalebench-perf.XXXXXX)"
table="$TMPDIR/table"
last="$TMPDIR/last"  # the output of the latest benchmark
: >"$table"
if [[ ${SCALEBENCH_PERF_KEEP:-0} == 1 ]]; then
  trap 'echo "files kept in $TMPDIR"' EXIT
else
  trap 'rm -rf "$TMPDIR"' EXIT
fi
failed=0
bench() {
  local name="$1"; shift
  printf '\n==> %s\n' "$name"
  local start=$SECONDS rc
  "$@" 2>&1 | tee "$last"
  rc=${PIPESTATUS[0]}
  if [[ $rc -ne 0 ]]; then
    echo "$name|failed (exit $rc, see above)|-|-|-" >>"$table"
    failed=1
  fi
  grep '^TABLE|' "$last" | cut -d'|' -f2- >>"$table"
  echo "--- $name: $((SECONDS - start)) s"
}

bench ddp_vs_torch "$python" "$here/ddp_vs_torch.py" "$build"
bench cpp_vs_eager "$python" "$here/cpp_vs_eager.py" "$build"
bench orchestration "$python" "$here/orchestration.py" "$build"
bench analysis_load "$python" "$here/analysis_load.py"
bench program_client "$python" "$here/program_client.py" "$build"
bench iterations_auto "$python" "$here/iterations_auto.py" "$build"
bench projection_check "$python" "$here/projection_check.py" "$build" --quick
bench sweep_scale "$python" "$here/sweep_scale.py" "$build" --sizes 1000,10000 \
  --commands info,analyze,compare,history
if [[ -x $build/tests/perf/results_store_cost ]]; then
  bench results_store_cost "$build/tests/perf/results_store_cost"
else
  echo "results_store|cost per recorded cell|-|not built|-" >>"$table"
fi
if [[ -x $build/tests/perf/harness_overhead ]]; then
  bench harness_overhead "$build/tests/perf/harness_overhead"
  # No TABLE| lines of its own: its "overhead:" line, as printed.
  if ! grep -q '^harness_overhead|' "$table"; then
    line="$(grep -m1 'overhead:' "$last" | sed 's/^ *//')"
    echo "harness_overhead|instrumented vs bare LibTorch step|-|${line:-see above}|-" >>"$table"
  fi
else
  echo "harness_overhead|harness vs bare LibTorch loop|-|not built|-" >>"$table"
fi

printf '\n%-18s | %-38s | %-15s | %-12s | %s\n' benchmark figure goal measured met
printf '%s\n' "-------------------+----------------------------------------+-----------------+--------------+-----"
while IFS='|' read -r name figure goal measured met; do
  printf '%-18s | %-38s | %-15s | %-12s | %s\n' "$name" "$figure" "$goal" "$measured" "$met"
done <"$table"
exit "$failed"
