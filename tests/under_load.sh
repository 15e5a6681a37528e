#!/usr/bin/env bash
# Runs a command under a known background load (issue 43: the test command must pass on a busy
# machine, and a test of scalebench must fail when scalebench is wrong, not when the machine
# is busy). Use it once per change to a timing-sensitive test (docs/contributing.md#running-the-
# suites-under-load), e.g.
#
#   tests/under_load.sh tests/run_all.sh /work/main /work/main/.venv/bin/python analysis
#   tests/under_load.sh ctest --preset release -j 2
#
# The load: SCALEBENCH_LOAD_PROCESSES busy processes (default 2: one per core of the project's
# 2-core CI machine) that switch on and off together with a fixed period: busy for
# SCALEBENCH_LOAD_ON_S seconds (default 2), idle for SCALEBENCH_LOAD_OFF_S (default 2). A
# switching load is the harder case for a timed test: part of a measurement runs on a quiet
# machine and part on a loaded one, as when another build or a training job starts beside it.
# Each busy process is a pure-bash loop (no child while busy) in a process group of its own;
# a trap ends every group on any exit of this script (the command's end, an error, Ctrl-C,
# SIGTERM), so no load outlives it. The exit status is the command's.
set -euo pipefail
if (($# == 0)); then
  echo "usage: tests/under_load.sh <command> [argument...]" >&2
  exit 2
fi
processes="${SCALEBENCH_LOAD_PROCESSES:-2}"
on_s="${SCALEBENCH_LOAD_ON_S:-2}"
off_s="${SCALEBENCH_LOAD_OFF_S:-2}"
for value in "$processes" "$on_s" "$off_s"; do
  if ! [[ $value =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
    echo "tests/under_load.sh: SCALEBENCH_LOAD_PROCESSES, _ON_S and _OFF_S must be numbers," \
      "got '$value'" >&2
    exit 2
  fi
done
processes="${processes%%.*}"

# One busy process: busy until the next multiple of the period plus on_s, idle to the end of
# the period; every process follows the same clock, so they switch together.
busy_loop='
period_us=$(awk -v a="$1" -v b="$2" "BEGIN { printf \"%d\", (a + b) * 1e6 }")
on_us=$(awk -v a="$1" "BEGIN { printf \"%d\", a * 1e6 }")
while :; do
  now=${EPOCHREALTIME/./}
  start=$((now - now % period_us))
  end=$((start + on_us))
  while ((${EPOCHREALTIME/./} < end)); do :; done
  now=${EPOCHREALTIME/./}
  idle_us=$((start + period_us - now))
  if ((idle_us > 0)); then sleep "$(awk -v u="$idle_us" "BEGIN { printf \"%.6f\", u / 1e6 }")"; fi
done'

groups=()
stop_load() {
  local group
  for group in "${groups[@]}"; do kill -TERM -- "-$group" 2>/dev/null || true; done
  for group in "${groups[@]}"; do wait "$group" 2>/dev/null || true; done
  groups=()
}
trap stop_load EXIT
trap 'stop_load; exit 130' INT
trap 'stop_load; exit 143' TERM

for ((i = 0; i < processes; i++)); do
  setsid bash -c "$busy_loop" under-load "$on_s" "$off_s" </dev/null >/dev/null 2>&1 &
  groups+=("$!")
done
echo "under_load: $processes busy process(es), on ${on_s} s / off ${off_s} s, while: $*" >&2
# The command runs in the background (its stdin kept) and the script waits for it: a signal
# to the script then runs its trap at once (bash runs a trap only after a foreground command
# ends), ending the command and the load; `kill <pid of this script>` stops everything.
status=0
"$@" <&0 &
command_pid=$!
trap 'kill -INT "$command_pid" 2>/dev/null; stop_load; exit 130' INT
trap 'kill -TERM "$command_pid" 2>/dev/null; stop_load; exit 143' TERM
wait "$command_pid" || status=$?
echo "under_load: load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exit "$status"
