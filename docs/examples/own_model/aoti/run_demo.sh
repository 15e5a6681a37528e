#!/usr/bin/env bash
# Your model as an AOTInductor package, end to end (docs/own-model.md#aotinductor-packages):
#   1. exports net.py's module with python -m scalebench_client.export: build/net.pt2 (dynamic
#      batch) and build/net.pt (TorchScript), and build/net-b4.pt2 (batch 4 only);
#   2. runs matrix.yaml under mpirun (1 orchestrator + 2 workers, CPU, inference at batches
#      4 and 8): the aoti-batch4 cell at batch 8 fails naming the exported shape;
#   3. prints the analysis.
# Usage: docs/examples/own_model/aoti/run_demo.sh [build dir] [venv python]
# The results file is $SCALEBENCH_DEMO_DIR/results.h5 (default runs/aoti_demo).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
build="$(realpath -s "${1:-$root/build/release}")"
python="$(realpath -s "${2:-$root/.venv/bin/python}")"  # the export runs in another folder
scalebench="$build/bin/scalebench"
demo="${SCALEBENCH_DEMO_DIR:-$root/runs/aoti_demo}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

rm -rf "$demo"
mkdir -p "$demo"
cp "$here/net.py" "$here/matrix.yaml" "$demo/"
export_() {
  (cd "$demo" && PYTHONPATH="$root/program/client" "$python" -W ignore \
    -m scalebench_client.export --factory net:build --input-shape 3 32 32 "$@")
}
export_ --aoti build/net.pt2 --torchscript build/net.pt
export_ --aoti build/net-b4.pt2 --batch 4 --static-batch

"$scalebench" validate "$demo/matrix.yaml"
status=0
mpirun -np 3 --oversubscribe "$scalebench" run "$demo/matrix.yaml" -o "$demo/results.h5" \
  --force || status=$?
echo
"$python" -m scalebench_analysis analyze "$demo/results.h5"
# One cell fails on purpose (batch 8 on the batch-4 package): exit 1 (cells failed) is the expected outcome.
[[ $status == 1 ]] || { echo "run_demo: scalebench run exited $status, expected 1" >&2; exit 1; }
