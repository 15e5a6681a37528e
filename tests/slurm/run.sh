#!/usr/bin/env bash
# End-to-end test of the Slurm path against a real single-node Slurm cluster
# (slurm/test-cluster.sh: munged + slurmctld + slurmd in a temporary directory).
#   1. MPI under Slurm: `srun --mpi=pmix -n 3 hostname` and an MPI program, inside sbatch.
#   2. `scalebench submit` of docs/examples/quickstart.yaml (1 node, 2 CPU workers): the job
#      completes and every cell of the matrix is `ok` in the HDF5 file.
#   3. A second job is sent the pre-timeout signal (`scancel --signal=USR1 --batch`) after
#      its first finished cell: it must exit 3 with some cells done; a resubmission of the
#      same command completes the remaining cells, and none of the finished ones again.
#   4. `scalebench submit --nodes 2` to a two-node cluster of its own (tests/slurm/two_nodes.sh;
#      skipped where `unshare --uts` is refused).
# The cluster is stopped on every exit (trap), pass or fail.
# Usage: tests/slurm/run.sh <repo> <venv python> [<scalebench binary>]
#   default binary: <repo>/build/release/bin/scalebench. Needs root (the test cluster does).
set -euo pipefail

repo=$(cd "$1" && pwd)
python=$2
scalebench=${3:-$repo/build/release/bin/scalebench}
job_timeout_s=${SCALEBENCH_SLURM_JOB_TIMEOUT_S:-900}
matrix=$repo/docs/examples/quickstart.yaml

work=$(mktemp -d /tmp/scalebench-slurm-test.XXXXXX)
cluster=$work/cluster
cleanup() {
  local status=$?
  "$repo/slurm/test-cluster.sh" stop "$cluster" || true
  if ((status == 0)); then
    rm -rf "$work"
  else
    echo "tests/slurm: FAILED (status $status); logs kept in $work" >&2
  fi
  exit "$status"
}
trap cleanup EXIT

log() { printf '\n[tests/slurm] %s\n' "$*"; }
fail() {
  echo "[tests/slurm] FAIL: $*" >&2
  exit 1
}

[[ -x $scalebench ]] || fail "no scalebench binary at $scalebench (build the release preset)"

log "starting the test cluster in $cluster"
eval "$("$repo/slurm/test-cluster.sh" start "$cluster")"
export SLURM_CONF
cd "$work"

# wait_job ID: waits until job ID has finished; prints its job completion record.
wait_job() {
  local id=$1 record=""
  for _ in $(seq 1 "$job_timeout_s"); do
    record=$(grep -E "^JobId=$id " "$cluster/log/jobcomp.log" 2>/dev/null || true)
    if [[ -n $record ]]; then
      echo "$record"
      return 0
    fi
    sleep 1
  done
  scontrol show job "$id" >&2 || true
  fail "job $id did not finish within ${job_timeout_s}s"
}

# expect_job ID STATE EXIT: the job's final state and exit code, with its log on mismatch.
expect_job() {
  local id=$1 state=$2 code=$3 record
  record=$(wait_job "$id")
  if [[ $record != *"JobState=$state "* || $record != *"ExitCode=$code:0"* ]]; then
    cat "slurm-$id.out" >&2 || true
    fail "job $id: expected JobState=$state ExitCode=$code:0, got: $record"
  fi
  echo "job $id: JobState=$state ExitCode=$code:0"
}

log "1. MPI under Slurm"
mpicc -O1 -o "$work/mpi_hello" "$repo/tests/slurm/mpi_hello.c"
cat >"$work/mpi.sbatch" <<EOF
#!/bin/bash
#SBATCH --ntasks=3
set -e
srun --mpi=pmix -n 3 hostname
srun --mpi=pmix -n 3 $work/mpi_hello
EOF
id=$(sbatch --parsable "$work/mpi.sbatch")
expect_job "$id" COMPLETED 0
[[ $(grep -c -x "$(hostname -s)" "slurm-$id.out") -eq 3 ]] || fail "srun hostname: $(cat "slurm-$id.out")"
grep -q "mpi_hello: 3 ranks, rank sum 3 (ok)" "slurm-$id.out" || fail "mpi_hello: $(cat "slurm-$id.out")"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
submit=("$scalebench" submit "$matrix" --nodes 1 --gpus-per-node 0 --workers-per-node 2
  --time 30 --signal-lead-s 60)
expected_cells=$("$scalebench" plan "$matrix" --format json | "$python" -c \
  'import json, sys; print(len(json.load(sys.stdin)))')
log "matrix: $expected_cells cells"

log "2. scalebench submit: a complete run"
"${submit[@]}" -o "$work/full.h5" --dry-run >"$work/full.sbatch"
grep -q -- "--ntasks-per-node=3" "$work/full.sbatch" || fail "dry run: $(cat "$work/full.sbatch")"
id=$("${submit[@]}" -o "$work/full.h5")
[[ $id =~ ^[0-9]+$ ]] || fail "submit printed '$id', expected a job id"
expect_job "$id" COMPLETED 0
"$python" "$repo/tests/slurm/check_results.py" "$work/full.h5" all-ok "$expected_cells"

log "3. pre-timeout signal, exit 3, resubmission resumes"
id=$("${submit[@]}" -o "$work/resume.h5")
ok=0
for _ in $(seq 1 "$job_timeout_s"); do
  if [[ -f $work/resume.h5 ]]; then
    ok=$("$python" "$repo/tests/slurm/check_results.py" "$work/resume.h5" count-ok 2>/dev/null ||
      echo 0)
    ((ok >= 1)) && break
  fi
  grep -q -E "^JobId=$id " "$cluster/log/jobcomp.log" && fail "job $id ended before it was signalled"
  sleep 1
done
scancel --signal=USR1 --batch "$id"
echo "job $id: sent USR1 to the batch shell after $ok finished cell(s)"
expect_job "$id" FAILED 3
grep -q "SIGUSR1 received" "slurm-$id.out" || fail "the batch shell did not report the signal"
"$python" "$repo/tests/slurm/check_results.py" "$work/resume.h5" snapshot "$work/before.json"
done_before=$("$python" "$repo/tests/slurm/check_results.py" "$work/resume.h5" count-ok)
((done_before < expected_cells)) || fail "all cells finished before the interrupt took effect"

id=$("${submit[@]}" -o "$work/resume.h5")
expect_job "$id" COMPLETED 0
"$python" "$repo/tests/slurm/check_results.py" "$work/resume.h5" resumed "$work/before.json" \
  "$expected_cells"

log "4. two nodes"
rc=0
bash "$repo/tests/slurm/two_nodes.sh" "$repo" "$python" "$scalebench" || rc=$?
((rc == 0 || rc == 77)) || fail "the two-node test failed (exit $rc)"

log "all Slurm tests passed"
