#!/usr/bin/env bash
# Benchmark your own model across branches, end to end (docs/own-model.md):
#   1. builds a demo model repository with branches `main` and `wide` from export_model.py
#      (HIDDEN = [32] on main, [64, 64] on wide) and configs/experiment/own.yaml,
#   2. runs matrix.yaml under mpirun (1 orchestrator + 2 workers, CPU): each branch's
#      prepare step exports its TorchScript model, checkpoint and HDF5 data,
#   3. prints the analysis and the branch comparison.
# Usage: docs/examples/own_model/run_demo.sh [build dir] [venv python]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
# Absolute, as the aoti demo makes them: the prepare step runs in the branches' worktrees.
build="$(realpath -s "${1:-$root/build/release}")"
python="$(realpath -s "${2:-$root/.venv/bin/python}")"
scalebench="$build/bin/scalebench"
demo="${SCALEBENCH_DEMO_DIR:-$root/runs/own_model_demo}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# `python` in the matrix's prepare step is the project's virtualenv (torch, h5py).
PATH="$(dirname "$python"):$PATH"
export PATH

rm -rf "$demo"
mkdir -p "$demo/repo/configs/experiment"
git_() { git -C "$demo/repo" -c user.name=demo -c user.email=demo@example.invalid \
  -c commit.gpgsign=false "$@"; }
git_ init -q -b main
cp "$here/export_model.py" "$demo/repo/export_model.py"
cp "$here/configs_experiment_own.yaml" "$demo/repo/configs/experiment/own.yaml"
printf 'build/\n' >"$demo/repo/.gitignore"
git_ add -A && git_ commit -q -m "narrow model"
git_ checkout -q -b wide
sed -i 's/^HIDDEN = \[32\]/HIDDEN = [64, 64]/' "$demo/repo/export_model.py"
git_ commit -q -am "wide model" && git_ checkout -q main
cp "$here/matrix.yaml" "$demo/matrix.yaml"

"$scalebench" validate "$demo/matrix.yaml"
"$scalebench" plan "$demo/matrix.yaml"
status=0
mpirun -np 3 --oversubscribe "$scalebench" run "$demo/matrix.yaml" -o "$demo/results.h5" \
  --force || status=$?
echo
"$scalebench" analyze "$demo/results.h5"
exit "$status"
