#!/usr/bin/env bash
# `scalebench submit` to a two-node Slurm cluster on this machine (issue 41 item 7):
# slurm/test-cluster.sh with SCALEBENCH_SLURM_NODES=2 runs two slurmd, node1 and node2, each
# in a UTS namespace of its name (Note [Several slurmd on one machine] in test-cluster.sh).
# A 2-node job of a tiny CPU matrix (train and infer, world size 2, one worker a node) must
# complete with every cell ok, each cell's two worker ranks on the two nodes (`rank_hosts`),
# and the analysis' straggler_nodes table one row per node of each cell. About 30 s.
# The cluster is stopped on every exit (trap), pass or fail. Exit 77 (skipped, with the
# reason) where the nodes cannot be made: not root, or `unshare --uts` refused.
# Usage: tests/slurm/two_nodes.sh <repo> <venv python> [<scalebench binary>]
#   default binary: <repo>/build/release/bin/scalebench.
set -euo pipefail

repo=$(cd "$1" && pwd)
python=$2
scalebench=${3:-$repo/build/release/bin/scalebench}
job_timeout_s=${SCALEBENCH_SLURM_JOB_TIMEOUT_S:-300}

log() { printf '\n[tests/slurm two nodes] %s\n' "$*"; }
fail() {
  echo "[tests/slurm two nodes] FAIL: $*" >&2
  exit 1
}
skip() {
  echo "[tests/slurm two nodes] SKIP: $*"
  exit 77
}

[[ $(id -u) -eq 0 ]] || skip "needs root (slurmd starts jobs as their owner)"
unshare --uts true 2>/dev/null || skip "'unshare --uts' is refused here: no node can have its own hostname"
[[ -x $scalebench ]] || fail "no scalebench binary at $scalebench (build the release preset)"

work=$(mktemp -d /tmp/scalebench-slurm-2nodes.XXXXXX)
cluster=$work/cluster
cleanup() {
  local status=$?
  "$repo/slurm/test-cluster.sh" stop "$cluster" || true
  if ((status == 0)); then
    rm -rf "$work"
  else
    echo "tests/slurm two nodes: FAILED (status $status); logs kept in $work" >&2
  fi
  exit "$status"
}
trap cleanup EXIT

log "starting a two-node test cluster in $cluster"
# Its own ports: the one-node cluster of tests/slurm/run.sh may be running (16817, 16818).
eval "$(SCALEBENCH_SLURM_NODES=2 SCALEBENCH_SLURM_PORT=16827 \
  "$repo/slurm/test-cluster.sh" start "$cluster")"
export SLURM_CONF
cd "$work"

cat >"$work/matrix.yaml" <<'EOF'
name: two-nodes
defaults: {device: cpu, backend: mpi, warmup: 1, iterations: 5, timeout_s: 120, cpu_threads: 1}
sweep: {modes: [train, infer], batch_sizes: [8], world_sizes: [2]}
experiments:
  - {name: mlp, model: mlp, input_shape: [32], num_classes: 4}
EOF

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
submit=("$scalebench" submit "$work/matrix.yaml" -o "$work/two.h5" --nodes 2 --gpus-per-node 0
  --workers-per-node 1 --time 5 --signal-lead-s 60)
"${submit[@]}" --dry-run >"$work/two.sbatch"
grep -q -- "--nodes=2" "$work/two.sbatch" || fail "dry run: $(cat "$work/two.sbatch")"

log "scalebench submit --nodes 2"
id=$("${submit[@]}")
[[ $id =~ ^[0-9]+$ ]] || fail "submit printed '$id', expected a job id"
record=""
for _ in $(seq 1 "$job_timeout_s"); do
  record=$(grep -E "^JobId=$id " "$cluster/log/jobcomp.log" 2>/dev/null || true)
  [[ -n $record ]] && break
  sleep 1
done
[[ -n $record ]] || fail "job $id did not finish within ${job_timeout_s}s"
if [[ $record != *"JobState=COMPLETED "* || $record != *"ExitCode=0:0"* ||
  $record != *"NodeCnt=2 "* ]]; then
  cat "slurm-$id.out" >&2 || true
  fail "job $id: expected JobState=COMPLETED ExitCode=0:0 NodeCnt=2, got: $record"
fi
echo "job $id: JobState=COMPLETED ExitCode=0:0 NodeCnt=2"
"$python" "$repo/tests/slurm/check_results.py" "$work/two.h5" spans-nodes 2 node1 node2

log "scalebench submit to two nodes passed"
