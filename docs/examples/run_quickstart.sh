#!/usr/bin/env bash
# The main job on the embedded default: a small CPU sweep of docs/examples/quickstart.yaml
# under mpirun (1 orchestrator + 2 worker ranks, synthetic data), then its analysis.
# Usage: docs/examples/run_quickstart.sh <build dir> <venv python>   (./setup.sh demo calls it)
set -euo pipefail
build="$1"
python="$2"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${SCALEBENCH_DEMO_OUTPUT:-$repo/runs/quickstart.h5}"
mkdir -p "$(dirname "$out")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export SCALEBENCH_PYTHON="$python"
export SCALEBENCH_RUN_SUMMARY=0  # `analyze` below ends with the summary; once is enough
scalebench="$build/bin/scalebench"

"$scalebench" validate "$repo/docs/examples/quickstart.yaml"
echo
status=0
mpirun -np 3 --oversubscribe "$scalebench" run "$repo/docs/examples/quickstart.yaml" \
  -o "$out" --force || status=$?
echo
"$scalebench" analyze "$out"
echo
echo "results: $out"
echo "report:  $scalebench report $out -o ${out%.h5}.html"
exit "$status"
