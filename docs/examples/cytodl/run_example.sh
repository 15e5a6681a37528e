#!/usr/bin/env bash
# The real CytoDL (cyto-dl 0.6.2 from PyPI) benchmarked across two branches, end to end, as a
# CytoDL user would (docs/examples/cytodl/README.md):
#   1. CytoDL's own environment (setup_env.sh; cached: seconds when it exists);
#   2. a project made from the package (make_project.py): a git repository with CytoDL's
#      source and configs, tiny OME-TIFF data, a checkpoint, and the branches `main` and
#      `slow-forward` (50 ms more in MultiTaskIm2Im._train_forward);
#   3. cytodl_train.csv: CytoDL's train.py on both branches at world sizes 1 and 2 (DDP over
#      gloo), with the accuracy check of slow-forward against main -> train.h5;
#   4. cytodl_infer.csv: CytoDL's eval.py (predict) on the checkpoint -> infer.h5;
#   5. cytodl_shadowed.csv: the template without PYTHONPATH, where train.py imports the
#      installed cyto_dl instead of the branch's: the cell is untrusted, naming it -> shadowed.h5;
#   6. cytodl_auto.csv: train.py on both branches at world size 1 with `repetitions: auto`
#      (rounds until the comparison is decided, at most 6) -> auto.h5;
#   7. the analysis: info, compare of the branches, the run-level segments.
# Usage: run_example.sh [build dir] [scalebench python] [CytoDL environment folder]
# The files are in $SCALEBENCH_DEMO_DIR (default runs/cytodl); the environment defaults to
# $SCALEBENCH_CYTODL_VENV, else ~/.cache/scalebench-cytodl-venv (./setup.sh test's).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
build="${1:-$root/build/release}"
scalebench_python="${2:-$root/.venv/bin/python}"
# shellcheck source=env_path.sh
source "$here/env_path.sh"
cytodl_env="${3:-$cytodl_venv}"
scalebench="$build/bin/scalebench"
demo="${SCALEBENCH_DEMO_DIR:-$root/runs/cytodl}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[[ -x "$scalebench" ]] || { echo "run_example.sh: no $scalebench; run ./setup.sh build" >&2; exit 2; }

"$here/setup_env.sh" "$scalebench_python" "$cytodl_env"
rm -rf "$demo"
mkdir -p "$demo"
echo "== making the project (CytoDL's source, data, a checkpoint, two branches) =="
"$cytodl_env/bin/python" "$here/make_project.py" "$demo/project"
# The task files and their templates live in the repository (a task CSV's repo is its
# folder), untracked; env/ beside them is CytoDL's environment (python: env/bin/python).
cp "$here"/cytodl_{train,infer,shadowed}.{csv,program.yaml} "$here/cytodl_auto.csv" "$demo/project/"
cp "$here/cytodl_train.program.yaml" "$demo/project/cytodl_auto.program.yaml"
ln -s "$(cd "$cytodl_env" && pwd)" "$demo/project/env"

run() { # run <task file stem> <results name>
  echo
  echo "== scalebench run $1.csv =="
  mpirun -np 3 --oversubscribe "$scalebench" run "$demo/project/$1.csv" -o "$demo/$2.h5" --force
}
run cytodl_train train
run cytodl_infer infer
run cytodl_shadowed shadowed
run cytodl_auto auto

echo
"$scalebench" info "$demo/train.h5"
echo
"$scalebench" compare "$demo/train.h5" --branches main slow-forward || true
echo
"$scalebench" compare "$demo/auto.h5" --branches main slow-forward || true
echo
"$scalebench" info "$demo/infer.h5"
echo
"$scalebench" info "$demo/shadowed.h5"
