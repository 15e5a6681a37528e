#!/usr/bin/env bash
# Benchmark your own training script across two branches, end to end (docs/programs.md):
#   1. builds a demo repository from train_ddp.py: branch `main` normalises each sample in a
#      Python loop (PER_SAMPLE_TRANSFORM = True), branch `batched-transform` the whole batch
#      in one operation, `bf16-autocast` that and bf16 forward passes, `shifted-outputs` that
#      and a deliberate bug in its outputs (the accuracy check across branches fails it);
#   2. builds the user's own environment `env/`: a virtualenv with scalebench-client
#      installed by pip (torch, pip and the client's build backend flit_core borrowed from the
#      project's virtualenv through a .pth file, so that nothing is downloaded);
#   3. runs branches.yaml under mpirun (1 orchestrator + 2 workers, CPU, world sizes 1 and
#      2, gloo), prints the analysis with `main` as the baseline branch (accuracy column:
#      `shifted-outputs` fails, the others pass) and the regression gate of
#      `batched-transform` against `main` (compare --branches).
# Usage: docs/examples/programs/run_demo.sh [build dir] [venv python]
# The results file is $SCALEBENCH_DEMO_DIR/results.h5 (default runs/program_demo).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
build="${1:-$root/build/release}"
python="${2:-$root/.venv/bin/python}"
scalebench="$build/bin/scalebench"
demo="${SCALEBENCH_DEMO_DIR:-$root/runs/program_demo}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

rm -rf "$demo"
mkdir -p "$demo/repo"
git_() { git -C "$demo/repo" -c user.name=demo -c user.email=demo@example.invalid \
  -c commit.gpgsign=false "$@"; }
git_ init -q -b main
sed 's/^PER_SAMPLE_TRANSFORM = False$/PER_SAMPLE_TRANSFORM = True/' "$here/train_ddp.py" \
  >"$demo/repo/train_ddp.py"
grep -q '^PER_SAMPLE_TRANSFORM = True$' "$demo/repo/train_ddp.py"
git_ add -A && git_ commit -q -m "normalise sample by sample"
git_ checkout -q -b batched-transform
sed -i 's/^PER_SAMPLE_TRANSFORM = True$/PER_SAMPLE_TRANSFORM = False/' "$demo/repo/train_ddp.py"
git_ commit -q -am "normalise the whole batch at once"
git_ checkout -q -b bf16-autocast
sed -i 's/^AUTOCAST_BF16 = False$/AUTOCAST_BF16 = True/' "$demo/repo/train_ddp.py"
git_ commit -q -am "forward in bf16"
git_ checkout -q -b shifted-outputs batched-transform
sed -i 's/^OUTPUT_SHIFT = 0.0$/OUTPUT_SHIFT = 0.5/' "$demo/repo/train_ddp.py"
git_ commit -q -am "a bug: shifted outputs"
git_ checkout -q main

"$python" -m venv --without-pip "$demo/env"
site="$("$demo/env/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
"$python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))' >"$site/project-torch.pth"
# As docs/programs.md#the-client says, offline: pip and flit_core come through the .pth too.
"$demo/env/bin/python" -m pip install --quiet --no-deps --no-build-isolation \
  --no-index --disable-pip-version-check "$root/program/client"
"$demo/env/bin/python" -c 'import scalebench_client, torch'
cp "$here/branches.yaml" "$demo/matrix.yaml"

"$scalebench" validate "$demo/matrix.yaml"
status=0
mpirun -np 3 --oversubscribe "$scalebench" run "$demo/matrix.yaml" -o "$demo/results.h5" \
  --force || status=$?
echo
"$python" -m scalebench_analysis analyze "$demo/results.h5" --baseline-branch main
echo
"$python" -m scalebench_analysis compare "$demo/results.h5" --branches main batched-transform ||
  status=$?
exit "$status"
