#!/usr/bin/env bash
# A Lightning + Hydra project benchmarked across two branches, end to end (docs/programs.md):
#   1. builds a demo repository from train.py and configs/: branch `main` trains in fp32,
#      branch `bf16-channels-last` sets bf16-mixed precision and channels-last memory in
#      configs/experiment/cnn.yaml;
#   2. links the user's own environment `env/`: a virtualenv with Lightning, Hydra and
#      scalebench-client (./setup.sh test makes one: .venv-frameworks);
#   3. runs branches.yaml under mpirun (1 orchestrator + 2 workers, CPU, world sizes 1 and 2,
#      DDP over gloo as Lightning sets it up from the torchrun variables) and prints the
#      analysis against `main` and the gate of the bf16 branch against it;
#   4. runs tasks.csv, a CytoDL-style task file whose program template tasks.program.yaml
#      makes each row run train.py on its branch with the row's Hydra overrides
#      (results in $SCALEBENCH_DEMO_DIR/tasks.h5).
# Usage: docs/examples/programs/lightning_hydra/run_demo.sh [build dir] [frameworks env python]
# The results file is $SCALEBENCH_DEMO_DIR/results.h5 (default runs/lightning_demo).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
build="${1:-$root/build/release}"
env_python="${2:-$root/.venv-frameworks/bin/python}"
scalebench="$build/bin/scalebench"
demo="${SCALEBENCH_DEMO_DIR:-$root/runs/lightning_demo}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if ! "$env_python" -c 'import lightning, hydra, scalebench_client.lightning' 2>/dev/null; then
  echo "run_demo.sh: $env_python lacks lightning, hydra-core or scalebench-client;" \
    "make the environment with ./setup.sh test, or give one: run_demo.sh <build> <python>" >&2
  exit 2
fi

rm -rf "$demo"
mkdir -p "$demo/repo"
git_() { git -C "$demo/repo" -c user.name=demo -c user.email=demo@example.invalid \
  -c commit.gpgsign=false "$@"; }
git_ init -q -b main
cp -r "$here/train.py" "$here/configs" "$demo/repo/"
printf 'outputs/\n' >"$demo/repo/.gitignore"
git_ add -A && git_ commit -q -m "fp32 image classifier"
git_ checkout -q -b bf16-channels-last
sed -i -e 's/channels_last: false/channels_last: true/' \
  -e 's/precision: 32-true/precision: bf16-mixed/' "$demo/repo/configs/experiment/cnn.yaml"
grep -q 'precision: bf16-mixed' "$demo/repo/configs/experiment/cnn.yaml"
git_ commit -q -am "bf16-mixed and channels-last" && git_ checkout -q main
# The environment: python: env/bin/python in the matrix is the matrix folder's env/.
ln -s "$(cd "$(dirname "$env_python")/.." && pwd)" "$demo/env"
cp "$here/branches.yaml" "$demo/matrix.yaml"
# The CytoDL-style task file and its program template live in the repository (a task CSV's
# repo is its folder); env/ beside them, untracked, is the same environment.
cp "$here/tasks.csv" "$here/tasks.program.yaml" "$demo/repo/"
ln -s "$(cd "$(dirname "$env_python")/.." && pwd)" "$demo/repo/env"

"$scalebench" validate "$demo/matrix.yaml"
status=0
mpirun -np 3 --oversubscribe "$scalebench" run "$demo/matrix.yaml" -o "$demo/results.h5" \
  --force || status=$?
echo
"$scalebench" analyze "$demo/results.h5" --baseline-branch main || status=$?
echo
"$scalebench" compare "$demo/results.h5" --branches main bf16-channels-last || true
echo
# The task file: each row runs train.py on its branch with its own overrides.
"$scalebench" validate "$demo/repo/tasks.csv"
mpirun -np 3 --oversubscribe "$scalebench" run "$demo/repo/tasks.csv" -o "$demo/tasks.h5" \
  --force || status=$?
exit "$status"
