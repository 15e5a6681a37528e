#!/usr/bin/env bash
# tests/gpu/device_check.sh: every GPU check of scalebench on a GPU node, from binaries built
# elsewhere by tests/gpu/prebuild.sh (docs/gpu-verification.md#a-short-lease): nothing is
# compiled here, so the checks fit a lease of minutes. No root, no network.
#
#   tests/gpu/device_check.sh KIT_DIR OUT_DIR [SECONDS]
#
#   KIT_DIR   what prebuild.sh made: kit.tar.xz (bin/ and prefix/; or kit.tar) and kit.txt
#   OUT_DIR   summary.md, checks.log and the results files (probe.h5, sweep.h5, mfu.h5)
#   SECONDS   the whole run's budget (default 540): each check's time limit is cut to what is
#             left, the long sweep runs last, and a check that ran out says so
#
# The checks, in order: detect (nvidia-smi, the node's torch), unit (GoogleTests *Gpu.*: CUDA
# events, CUDA memory), mpi (the MPI GoogleTests *Gpu.*: NCCL backend, watchdog abort, NCCL
# training, CUDA graphs), selftest, probe (NCCL), mfu (tests/gpu/mfu_matmul.yaml and
# tests/analysis/test_mfu_gpu.py), profile (tests/gpu/profile_gpu.yaml: operator tables with
# the GPU's kernels), aoti (docs/examples/own_model/aoti exported for CUDA and run on the GPU),
# compile (docs/examples/compile_axis.yaml on the GPU: the twins exported for CUDA,
# validated), and last the longest, sweep (tests/gpu/gpu_verify.yaml: bf16, channels-last,
# batch auto to a real out-of-memory error, CUDA graphs, accuracy validation).
# LibTorch, CUDA and NCCL come from the node's PyTorch (python3, or $SCALEBENCH_NODE_PYTHON),
# which must be the version prebuild.sh built against (kit.txt says which; checked).
# Exit status: 0 when every check passed, 1 when one failed, 2 for bad usage.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
[[ $# -ge 2 ]] || { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }
kit="$(realpath "$1")"
out="$(realpath -m "$2")"
budget="${3:-540}"
python="${SCALEBENCH_NODE_PYTHON:-python3}"
start=$SECONDS
mkdir -p "$out"
log="$out/checks.log"
summary="$out/summary.md"
: >"$log"
failed=0
# shellcheck source=tests/gpu/prefix.sh
source "$here/prefix.sh"

say() { echo "$*" | tee -a "$log"; }
row() { echo "| $1 | $2 | $3 | $4 |" >>"$summary"; }

# run_check <name> <limit s> <function> (check: the same where SCALEBENCH_CHECKS wants it):
# runs the function (exported, in a child bash) under the
# smaller of its limit and the budget left, its output into the log, and records a summary
# row (figures: the last line the command printed that starts with "FIGURE ").
run_check() {
  local name="$1" limit="$2" function="$3" left rc t0 figures
  left=$((budget - (SECONDS - start) - 10))
  ((left < limit)) && limit=$left
  if ((limit < 15)); then
    row "$name" "not run" 0 "no time left in the budget of ${budget} s"
    failed=1
    return
  fi
  say ""
  say "==== $name (limit ${limit} s): $function"
  t0=$SECONDS
  timeout --kill-after=10 "$limit" bash -o pipefail -c "$function" >>"$log" 2>&1
  rc=$?
  figures="$(grep '^FIGURE ' "$log" | tail -n 1 | cut -c8-)"
  sed -i 's/^FIGURE /figure: /' "$log"
  local result=passed
  ((rc == 124 || rc == 137)) && result="ran out of time"
  ((rc != 0 && rc != 124 && rc != 137)) && result="failed (exit $rc)"
  ((rc != 0)) && failed=1
  say "==== $name: $result in $((SECONDS - t0)) s"
  row "$name" "$result" "$((SECONDS - t0))" "${figures:--}"
}

# ---- the environment: the kit's Debian prefix, the node's LibTorch, CUDA and NCCL ------------
kit_file="$(find "$kit" -maxdepth 1 -name 'kit.tar*' -print -quit)"  # .tar.xz, or .tar
[[ -n $kit_file ]] && tar -xf "$kit_file" -C "$out" || { echo "no kit.tar.xz in $kit to unpack (tests/gpu/prebuild.sh makes it)" >&2; exit 2; }
bin="$out/kit/bin"
export_prefix_env "$out/kit/prefix"
remove_unloadable_components "$out/kit/prefix" >/dev/null  # Open MPI transports not carried
node_libs="$("$python" - <<'EOF'
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
dirs = [os.path.join(os.path.dirname(torch.__file__), "lib")]
dirs += sorted(d for d in glob.glob(os.path.join(site, "nvidia", "**", "lib"), recursive=True))
print(":".join(dirs))
EOF
)" || { echo "$python cannot import torch" >&2; exit 2; }
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$node_libs"
export SCALEBENCH_PYTHON="$python" PYTHONPATH="$repo/analysis:$repo/program/client${PYTHONPATH:+:$PYTHONPATH}"
export SCALEBENCH_RUN_SUMMARY=0 PYTHONUNBUFFERED=1

{
  echo "# scalebench GPU checks ($(date -u +%FT%TZ))"
  echo
  echo "kit: $(tr '\n' ' ' <"$kit/kit.txt")"
  echo
  echo "| check | result | seconds | figures |"
  echo "|---|---|---|---|"
} >"$summary"

# detect: the kit's torch version is the node's, every binary and library of the kit finds
# what it needs (ldd), and a GPU is there (nvidia-smi, torch.cuda): in that order, so that a
# machine without a GPU (tests/gpu/test_kit.sh) checks the first two.
detect() {
  local want got
  want="$(sed -n 's/^torch //p' "$kit/kit.txt")"
  got="$("$python" -c 'import torch; print(torch.__version__)')"
  [[ $got == "$want"* ]] || { echo "the kit was built against torch $want, this node has $got: run prebuild.sh --torch ${got%%+*}"; return 1; }
  local missing
  missing="$(missing_libraries "$bin" "$out/kit/prefix/usr")"
  [[ -z $missing ]] || { echo "$missing"; return 1; }
  echo "ldd: every binary and library of the kit finds what it needs"
  if ! nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader ||
    ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "FIGURE no GPU (nvidia-smi fails or torch.cuda.is_available() is False)"
    return 1
  fi
  "$python" -c 'import torch; print(f"FIGURE torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}, driver", end=" ")'
  nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1
}

gtests() {
  local rc=0 binary
  "$bin/worker_unit_tests" --gtest_filter='*Gpu.*' || rc=1
  for binary in collective_backend_test mpi_workload_test; do
    mpirun -np 2 "$bin/$binary" --gtest_filter='*Gpu.*' || rc=1
  done
  echo "FIGURE $(grep -c '^\[       OK \]' "$log") OK, $(grep -c '^\[  SKIPPED \]' "$log") skipped, $(grep -c '^\[  FAILED  \]' "$log") failed (counted over the log so far)"
  return $rc
}

selftest() {
  mpirun -np 2 "$bin/scalebench" selftest | tee "$out/selftest.out"
  local rc=${PIPESTATUS[0]}
  echo "FIGURE $(grep -E '^selftest:' "$out/selftest.out")"
  return "$rc"
}

probe() {
  mpirun -np 2 "$bin/scalebench" probe -o "$out/probe.h5" | tee "$out/probe.out"
  local rc=${PIPESTATUS[0]}
  echo "FIGURE $(grep -c WRONG "$out/probe.out") wrong; largest allreduce: $(grep -E '^ *allreduce' "$out/probe.out" | tail -n 1 | tr -s ' ')"
  return "$rc"
}

mfu_check() {
  mpirun -np 2 "$bin/scalebench" run "$repo/tests/gpu/mfu_matmul.yaml" -o "$out/mfu.h5" --force || return 1
  "$python" -m scalebench_analysis analyze "$out/mfu.h5" --details | tail -n 40
  SCALEBENCH_GPU_MFU_FILE="$out/mfu.h5" "$python" -m pytest -q -s -p no:cacheprovider \
    "$repo/tests/analysis/test_mfu_gpu.py" | tee "$out/mfu.out"
  local rc=${PIPESTATUS[0]}
  echo "FIGURE $(grep -E '^(infer|train):' "$out/mfu.out" | paste -sd';' -)"
  return "$rc"
}

sweep() {
  "$bin/scalebench" validate "$repo/tests/gpu/gpu_verify.yaml" || return 1
  mpirun -np 2 "$bin/scalebench" run "$repo/tests/gpu/gpu_verify.yaml" -o "$out/sweep.h5" --force
  local rc=$?
  "$bin/scalebench" info "$out/sweep.h5" | tee "$out/sweep.info"
  "$python" -m scalebench_analysis analyze "$out/sweep.h5" --details | tail -n 60
  echo "FIGURE $(grep -cE ' ok *$' "$out/sweep.info") ok cell rows; exit $rc"
  return "$rc"
}

# aoti: docs/examples/own_model/aoti on the GPU: the module exported for CUDA as an AOTInductor
# package (dynamic batch), as TorchScript, and as a batch-4 package; inference at batches 4
# and 8 on one GPU. Expected: the two dynamic ones ok with output checksums equal to 1e-3, the
# batch-4 package refusing batch 8 naming its exported shape (the run exits 1 for that cell).
aoti() {
  local demo="$out/aoti" example="$repo/docs/examples/own_model/aoti"
  rm -rf "$demo" && mkdir -p "$demo" && cp "$example/net.py" "$demo/" || return 1
  sed -e 's/device: cpu, backend: mpi/device: cuda, backend: nccl/' -e 's/world_sizes: \[1, 2\]/world_sizes: [1]/' \
    "$example/matrix.yaml" >"$demo/matrix.yaml"
  (cd "$demo" && "$python" -W ignore -m scalebench_client.export --factory net:build \
    --input-shape 3 32 32 --device cuda --aoti build/net.pt2 --torchscript build/net.pt &&
    "$python" -W ignore -m scalebench_client.export --factory net:build --input-shape 3 32 32 \
      --device cuda --aoti build/net-b4.pt2 --batch 4 --static-batch) || return 1
  mpirun -np 2 "$bin/scalebench" run "$demo/matrix.yaml" -o "$out/aoti.h5" --force
  "$bin/scalebench" info "$out/aoti.h5" | tee "$demo/info"
  "$python" - "$out/aoti.h5" <<'PY'
import json, sys, h5py
def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)
cells = {}
with h5py.File(sys.argv[1]) as f:
    for cell in f["cells"].values():
        spec = json.loads(text(cell.attrs["spec"]))
        names = json.loads(text(cell["rank_metrics"].attrs["names"])) if "rank_metrics" in cell else []
        metrics = dict(zip(names, cell["rank_metrics"][0])) if names else {}
        cells[(spec["experiment"], spec["batch_size"])] = (text(cell.attrs["status"]), text(cell.attrs["reason"]), metrics)
for key, (status, reason, metrics) in sorted(cells.items()):
    print(key, status, reason[:160], {k: v for k, v in metrics.items() if "checksum" in k})
ok = all(cells[(e, b)][0] == "ok" for e in ("aoti", "torchscript") for b in (4, 8))
def close(b):  # float32 rounding of different kernels (Triton vs cuDNN): 1e-3 relative
    a, t = cells[("aoti", b)][2].get("output_checksum"), cells[("torchscript", b)][2].get("output_checksum")
    return a is not None and t is not None and abs(a - t) <= 1e-3 * max(1.0, abs(t))
same = all(close(b) for b in (4, 8))
refused = cells[("aoti-batch4", 8)][0] == "failed" and "exported shape [4, 3, 32, 32]" in cells[("aoti-batch4", 8)][1]
print(f"FIGURE dynamic package and TorchScript ok: {ok}; output checksums within 1e-3: {same}; batch-4 package refuses batch 8: {refused}")
sys.exit(0 if ok and same and refused else 1)
PY
}

# profile: tests/gpu/profile_gpu.yaml (issue 42, docs/profiles.md): ResNet-18 bf16 training and
# inference with 3 steps under the profiler. Expected: both cells ok, each with an operator
# table that holds the GPU's kernels (device cuda) in the forward phase beside the CPU's
# operators; the top rows and the kernels' share of the profiled step are printed.
profile_check() {
  mpirun -np 2 "$bin/scalebench" run "$repo/tests/gpu/profile_gpu.yaml" -o "$out/profile.h5" --force || return 1
  "$python" -m scalebench_analysis analyze "$out/profile.h5" --ops --ops-limit 12
  "$python" -m scalebench_analysis analyze "$out/profile.h5" --ops --ops-limit 500 --format json >"$out/profile.json" || return 1
  "$python" - "$out/profile.json" <<'PY'
import json, sys
cells = json.load(open(sys.argv[1]))
summary = []
ok = len(cells) == 2
for cell in cells:
    kernels = [op for op in cell["ops"] if op["device"] == "cuda"]
    forward = [op for op in kernels if op["phase"] == "forward"]
    top = max(kernels, key=lambda op: op["self_ms_per_step"], default=None)
    summary.append(f"{cell['cell_id'][:8]}: {len(kernels)} kernel rows ({len(forward)} forward)"
                   + (f", top {top['name'][:40]} {top['self_ms_per_step']:.3f} ms/step" if top else ""))
    ok = ok and bool(forward)
print("FIGURE " + "; ".join(summary))
sys.exit(0 if ok else 1)
PY
}

# compile: docs/examples/compile_axis.yaml on one GPU (device cuda, NCCL, world size 1): each
# zoo model's TorchScript twin and the mlp's AOTInductor twin, exported for CUDA by rank 0 from
# the eager weights and validated against eager fp32 (docs/optimizations.md#compilation).
# Expected: every cell ok with accuracy passed.
compile_axis() {
  sed -e 's/device: cpu/device: cuda/' -e 's/backend: mpi/backend: nccl/' \
    -e 's/world_sizes: \[1, 2\]/world_sizes: [1]/' "$repo/docs/examples/compile_axis.yaml" \
    >"$out/compile_axis.yaml" || return 1
  # SCALEBENCH_RANK0_DEBUGGER: a command that runs rank 0 (e.g. "cuda-gdb -q -batch -ex run
  # -ex bt --args", for a backtrace of a crash; the node has no gdb).
  local -a rank0=("$bin/scalebench" run "$out/compile_axis.yaml" -o "$out/compile.h5" --force)
  # shellcheck disable=SC2086
  mpirun -np 1 ${SCALEBENCH_RANK0_DEBUGGER:-} "${rank0[@]}" : -np 1 "${rank0[@]}"
  local rc=$?
  "$bin/scalebench" info "$out/compile.h5" | tee "$out/compile.info"
  echo "FIGURE $(grep -cE 'passed +ok *$' "$out/compile.info") cells ok with accuracy passed; exit $rc"
  return "$rc"
}

export -f detect gtests selftest probe mfu_check profile_check sweep aoti compile_axis missing_libraries
export kit out log bin python repo SCALEBENCH_RANK0_DEBUGGER
# SCALEBENCH_CHECKS: only these checks after detect (names as below, space-separated), for a
# rerun of one check within what is left of a lease.
wanted() { [[ -z ${SCALEBENCH_CHECKS:-} || " $SCALEBENCH_CHECKS " == *" $1 "* ]]; }
check() { wanted "$1" || return 0; run_check "$@"; }
# always: the checks below need it. 17 to 21 s on the H200 node; its limit only bounds a hang,
# and on a loaded machine (CI's test_kit.sh beside other work) ldd over the kit took over 60 s.
run_check detect 180 detect
if grep -q '^| detect | passed' "$summary"; then
  check unit-and-mpi-tests 180 gtests
  check selftest 120 selftest
  check probe 120 probe
  check mfu 120 mfu_check
  check profile 120 profile_check
  check aoti 180 aoti
  check compile 240 compile_axis
  check sweep 300 sweep
fi
say ""
say "total $((SECONDS - start)) s of the budget of ${budget} s"
cat "$summary"
exit "$failed"
