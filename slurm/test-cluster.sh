#!/usr/bin/env bash
# A Slurm test cluster on this machine: its own munged, slurmctld and one slurmd per node,
# with a generated slurm.conf, all state, sockets, logs and pid files in one directory.
# Nothing under /etc is read or changed, and a Slurm or munge already running on the
# machine is left alone (this cluster uses its own munge socket and its own ports).
# One node by default (named after this machine); SCALEBENCH_SLURM_NODES=N simulates N nodes:
# see Note [Several slurmd on one machine] below.
#
#   slurm/test-cluster.sh start DIR     generate DIR/slurm.conf, start the daemons, wait
#                                       until the node is idle; prints `export SLURM_CONF=...`
#   slurm/test-cluster.sh stop DIR      stop the daemons started in DIR (by their pid files)
#   slurm/test-cluster.sh status DIR    sinfo + squeue of the cluster in DIR
#
# Requires root (slurmd launches jobs as their owner) and the Debian packages slurm-wlm,
# slurm-wlm-basic-plugins and munge. Tested with Slurm 22.05 and Open MPI 4.1 (PMIx).
#
# Environment (all optional):
#   SCALEBENCH_SLURM_CPUS        CPUs the node declares (default 16). More than the machine
#                                has is fine (SlurmdParameters=config_overrides): the test
#                                jobs ask for more tasks than a laptop has cores.
#   SCALEBENCH_SLURM_GPUS        fake GPUs the node declares (default 0): gres "gpu" backed by
#                                empty files DIR/fake-gpus/gpu<i>, so that jobs asking for
#                                --gpus-per-node start and get CUDA_VISIBLE_DEVICES; there
#                                is no GPU behind them.
#   SCALEBENCH_SLURM_NODES       nodes (default 1). With 2 or more: node1, node2, ... each
#                                slurmd in a UTS namespace of that name (needs unshare).
#   SCALEBENCH_SLURM_PORT        slurmctld port (default 16817); slurmd uses the next one
#                                (node i of several: the port + i).
#   SCALEBENCH_SLURM_PARTITION   name of the one partition (default "debug").
#   SCALEBENCH_SLURM_START_TIMEOUT_S  seconds to wait for the node to be idle (default 60).
set -euo pipefail

# Note [Several slurmd on one machine]
# Debian's Slurm (22.05, slurm-wlm) is built with --enable-multiple-slurmd: `scontrol show
# config` prints `MULTIPLE_SLURMD = Yes`. Then one machine runs one slurmd per NodeName
# (`slurmd -N name`), each on its own `Port=`, with `%n` (the node's name) in its pid file,
# spool and log paths. Two more things make the nodes look like nodes to a job:
# * each slurmd runs in a new UTS namespace whose hostname is its node's name (`unshare
#   --uts`), inherited by its slurmstepd and the tasks: gethostname() differs per node, as
#   scalebench's `rank_hosts` and Open MPI's locality (TCP between the nodes) need;
# * `TmpFS` carries `%n`: the PMIx plugin makes each step's client directory
#   `<TmpFS>/spmix_appdir_<uid>_<job>.<step>`, and with one shared /tmp the second node's
#   step fails with "Cannot create directory ... File exists".
# All nodes talk to slurmctld over 127.0.0.1. Checked by tests/slurm/two_nodes.sh.

usage() {
  echo "usage: $0 start|stop|status DIR" >&2
  exit 2
}

die() {
  echo "test-cluster: $*" >&2
  exit 1
}

(($# == 2)) || usage
action=$1
dir=$2

cpus=${SCALEBENCH_SLURM_CPUS:-16}
gpus=${SCALEBENCH_SLURM_GPUS:-0}
nodes=${SCALEBENCH_SLURM_NODES:-1}
port=${SCALEBENCH_SLURM_PORT:-16817}
partition=${SCALEBENCH_SLURM_PARTITION:-debug}
start_timeout_s=${SCALEBENCH_SLURM_START_TIMEOUT_S:-60}

[[ $cpus =~ ^[1-9][0-9]*$ ]] || die "SCALEBENCH_SLURM_CPUS must be a positive integer, got '$cpus'"
[[ $gpus =~ ^[0-9]+$ ]] || die "SCALEBENCH_SLURM_GPUS must be a number, got '$gpus'"
[[ $nodes =~ ^[1-9][0-9]*$ ]] || die "SCALEBENCH_SLURM_NODES must be a positive integer, got '$nodes'"
[[ $port =~ ^[1-9][0-9]*$ ]] || die "SCALEBENCH_SLURM_PORT must be a port number, got '$port'"
[[ $partition =~ ^[A-Za-z0-9_.-]+$ ]] || die "SCALEBENCH_SLURM_PARTITION: use letters, digits, _ . -"

# pid_of NAME: the pid recorded by daemon NAME in $dir, empty if none or not running.
pid_of() {
  local file="$dir/$1.pid" pid
  [[ -f $file ]] || return 0
  pid=$(<"$file")
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
  return 0
}

# stop_daemon NAME: SIGTERM the daemon by its pid file, wait up to 20 s, then SIGKILL.
stop_daemon() {
  local pid
  pid=$(pid_of "$1")
  [[ -n $pid ]] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.2
  done
  echo "test-cluster: $1 (pid $pid) did not stop on SIGTERM; sending SIGKILL" >&2
  kill -KILL "$pid" 2>/dev/null || true
}

# node_names: the cluster's node names, one a line: this machine's short hostname for one
# node, node1 ... nodeN for several (Note [Several slurmd on one machine]).
node_names() {
  if ((nodes == 1)); then
    hostname -s
  else
    seq -f "node%g" 1 "$nodes"
  fi
}

# node_lines: the NodeName lines; several nodes each get their own slurmd port.
node_lines() {
  local gres="" i=0 name
  ((gpus > 0)) && gres="Gres=gpu:$gpus "
  if ((nodes == 1)); then
    echo "NodeName=$(node_names) CPUs=$cpus ${gres}State=UNKNOWN"
    return
  fi
  for name in $(node_names); do
    i=$((i + 1))
    echo "NodeName=$name NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 Port=$((port + i)) CPUs=$cpus ${gres}State=UNKNOWN"
  done
}

# slurmd_paths: the slurmd pid, spool, log (and, for several nodes, TmpFS) settings; `%n` is
# the node's name.
slurmd_paths() {
  if ((nodes == 1)); then
    printf '%s\n' "SlurmdSpoolDir=$dir/spool" "SlurmdPidFile=$dir/slurmd.pid" \
      "SlurmdLogFile=$dir/log/slurmd.log"
  else
    printf '%s\n' "SlurmdSpoolDir=$dir/spool/%n" "SlurmdPidFile=$dir/slurmd-%n.pid" \
      "SlurmdLogFile=$dir/log/slurmd-%n.log" "TmpFS=$dir/tmp/%n"
  fi
}

write_conf() {
  local host=$1
  cat >"$dir/slurm.conf" <<EOF
# Generated by scalebench slurm/test-cluster.sh: a test cluster of $nodes node(s).
ClusterName=scalebench-test
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmctldPidFile=$dir/slurmctld.pid
SlurmctldLogFile=$dir/log/slurmctld.log
$(slurmd_paths)
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
SlurmdParameters=config_overrides
# Finished jobs stay visible to scontrol for 10 minutes; the job completion log keeps
# every job's final state and exit code for the tests.
MinJobAge=600
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.log
AccountingStorageType=accounting_storage/none
$( ((gpus > 0)) && echo "GresTypes=gpu")
$(node_lines)
PartitionName=$partition Nodes=$(node_names | paste -s -d,) Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
  if ((gpus > 0)); then
    mkdir -p "$dir/fake-gpus"
    # character devices like /dev/null (1,3): slurmd refuses plain files
    for ((i = 0; i < gpus; i++)); do
      [[ -c $dir/fake-gpus/gpu$i ]] || mknod "$dir/fake-gpus/gpu$i" c 1 3
    done
    echo "Name=gpu File=$dir/fake-gpus/gpu[0-$((gpus - 1))]" >"$dir/gres.conf"
  fi
}

start_munge() {
  mkdir -p "$dir/munge"
  chmod 700 "$dir/munge"
  if [[ ! -f $dir/munge/munge.key ]]; then
    head -c 1024 /dev/urandom >"$dir/munge/munge.key"
  fi
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed"
  munge --socket="$dir/munge/munge.socket" -n | unmunge --socket="$dir/munge/munge.socket" \
    >/dev/null || die "munged does not answer on $dir/munge/munge.socket (see $dir/log/munged.log)"
}

# slurmd_daemons: the names (for pid_of, stop_daemon) of the slurmd pid files in $dir:
# slurmd (one node) or slurmd-<node> (several).
slurmd_daemons() {
  local file
  for file in "$dir"/slurmd.pid "$dir"/slurmd-*.pid; do
    [[ -f $file ]] && basename "$file" .pid
  done
  return 0
}

wait_idle() {
  local states=""
  for _ in $(seq 1 $((start_timeout_s * 2))); do
    states=$(SLURM_CONF="$dir/slurm.conf" sinfo --noheader --Node --format=%t 2>/dev/null || true)
    [[ $(grep -c -x idle <<<"$states") -eq $nodes ]] && return 0
    sleep 0.5
  done
  die "nodes not idle after ${start_timeout_s}s (states '${states//$'\n'/ }'); see $dir/log/"
}

# start_slurmd NAME: one node's slurmd; with several nodes in a UTS namespace whose hostname
# is NAME (Note [Several slurmd on one machine]).
start_slurmd() {
  local name=$1
  if ((nodes == 1)); then
    slurmd -f "$dir/slurm.conf" -N "$name"
  else
    mkdir -p "$dir/tmp/$name"
    # shellcheck disable=SC2016  # $1 and $2 are the inner shell's
    unshare --uts sh -c 'hostname "$1" && exec slurmd -f "$2" -N "$1"' sh "$name" "$dir/slurm.conf"
  fi
}

start() {
  [[ $(id -u) -eq 0 ]] || die "run as root (slurmd must start jobs as their owner), e.g. with sudo"
  for tool in munged munge unmunge slurmctld slurmd sinfo; do
    command -v "$tool" >/dev/null || die "$tool not found: apt-get install slurm-wlm slurm-wlm-basic-plugins munge"
  done
  [[ -z $(pid_of slurmctld) ]] || die "a test cluster is already running in $dir"
  if ((nodes > 1)); then
    unshare --uts true 2>/dev/null ||
      die "SCALEBENCH_SLURM_NODES=$nodes needs a UTS namespace per node: 'unshare --uts' is refused here"
  fi
  mkdir -p "$dir"/{state,spool,log}
  dir=$(cd "$dir" && pwd)
  local host
  host=$(hostname -s)
  write_conf "$host"
  start_munge
  slurmctld -f "$dir/slurm.conf"
  local name
  for name in $(node_names); do
    start_slurmd "$name"
  done
  wait_idle
  echo "export SLURM_CONF=$dir/slurm.conf"
}

# cancel_jobs: cancels the cluster's jobs (their slurmstepd and tasks would outlive
# slurmd) and waits up to 60 s for them to be gone.
cancel_jobs() {
  [[ -n $(pid_of slurmctld) ]] || return 0
  local jobs name alive=""
  for name in $(slurmd_daemons); do
    [[ -n $(pid_of "$name") ]] && alive=1
  done
  [[ -n $alive ]] || return 0
  export SLURM_CONF="$dir/slurm.conf"
  jobs=$(squeue --noheader --format=%A 2>/dev/null | sort -u || true)
  [[ -n $jobs ]] || return 0
  # shellcheck disable=SC2086  # one job id per word
  scancel $jobs 2>/dev/null || true
  for _ in $(seq 1 120); do
    # squeue lists only unfinished jobs (pending, running, completing, ...) by default
    [[ -z $(squeue --noheader --format=%A 2>/dev/null) ]] && return 0
    sleep 0.5
  done
  echo "test-cluster: jobs still running after scancel: $jobs" >&2
}

stop() {
  [[ -d $dir ]] || return 0
  cancel_jobs
  local name
  for name in $(slurmd_daemons); do
    stop_daemon "$name"
  done
  stop_daemon slurmctld
  stop_daemon munged
}

status() {
  [[ -f $dir/slurm.conf ]] || die "no test cluster in $dir"
  SLURM_CONF="$dir/slurm.conf" sinfo
  SLURM_CONF="$dir/slurm.conf" squeue
}

case $action in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) usage ;;
esac
