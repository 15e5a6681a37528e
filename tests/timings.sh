# Timing table of a setup or test run (docs/contributing.md, "Reading the timing table").
# Sourced by setup.sh and tests/run_all.sh; bash only.
#
# Contract: every step run through `timed NAME CMD...` (in a subshell, so CMD cannot set the
# caller's variables) appends one row "NAME<TAB>seconds<TAB>
# ok|FAILED" to the file $SCALEBENCH_TIMINGS and returns CMD's exit status, so callers keep
# their own error handling. setup.sh starts the file (build/timings.tsv) and exports its path;
# tests/run_all.sh, started by it, appends its suites to the same file, so the table at the end
# of `./setup.sh test` covers the whole CI run. `print_timings` prints the rows, their total and
# the compiler-cache figures of this run (from `ccache_mark` to now) and the disk the run's
# trees take (build/ and the virtualenvs beside it) against what is left on that disk.

timings_start() {
  export SCALEBENCH_TIMINGS="$1"
  mkdir -p "$(dirname "$SCALEBENCH_TIMINGS")"
  : >"$SCALEBENCH_TIMINGS"
}

timed() {
  local name="$1"
  shift
  local begin end rc errexit=0
  [[ $- == *e* ]] && errexit=1
  begin=$(date +%s.%N)
  # CMD runs in a subshell with the caller's errexit, so that the row is written whether it
  # fails or not. As everywhere in bash, `set -e` is ignored inside CMD when `timed` itself
  # is called as an `if` condition or before `||`: setup.sh calls it plainly.
  set +e
  (
    ((errexit)) && set -e
    "$@"
  )
  rc=$?
  ((errexit)) && set -e
  end=$(date +%s.%N)
  if [[ -n "${SCALEBENCH_TIMINGS:-}" ]]; then
    awk -v name="$name" -v begin="$begin" -v end="$end" -v status="$([[ $rc == 0 ]] && echo ok || echo FAILED)" \
      'BEGIN { printf "%s\t%.1f\t%s\n", name, end - begin, status }' >>"$SCALEBENCH_TIMINGS"
  fi
  return "$rc"
}

# ccache's hit and miss counters, as "hits misses" (0 0 without ccache).
_ccache_counts() {
  command -v ccache >/dev/null || { echo "0 0"; return; }
  ccache --print-stats 2>/dev/null | awk -F'\t' '
    $1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { hits += $2 }
    $1 == "cache_miss" { misses += $2 }
    END { print hits + 0, misses + 0 }'
}

# Remembers the counters so that print_timings reports this run's hits only.
ccache_mark() {
  [[ -n "${SCALEBENCH_TIMINGS:-}" ]] || return 0
  _ccache_counts >"$SCALEBENCH_TIMINGS.ccache"
}

print_timings() {
  [[ -n "${SCALEBENCH_TIMINGS:-}" && -s "$SCALEBENCH_TIMINGS" ]] || return 0
  printf '\n\033[1m==> timing table (seconds)\033[0m\n'
  awk -F'\t' '
    { printf "  %-48s %8.1f  %s\n", $1, $2, $3; total += $2 }
    END { printf "  %-48s %8.1f\n", "total", total }' "$SCALEBENCH_TIMINGS"
  if [[ -f "$SCALEBENCH_TIMINGS.ccache" ]]; then
    local before after
    read -r -a before <"$SCALEBENCH_TIMINGS.ccache"
    read -r -a after < <(_ccache_counts)
    local hits=$((after[0] - before[0])) misses=$((after[1] - before[1]))
    local calls=$((hits + misses))
    if ((calls > 0)); then
      printf '  compiler cache: %d of %d compilations were hits (%d %%)\n' \
        "$hits" "$calls" $((100 * hits / calls))
    fi
  fi
  _disk_figures
}

# "disk: build/ 2.1 GB, virtualenvs 6.3 GB; 48.0 GB free on /": a CI machine once ran out of
# disk in the middle of the link (Note [Debug info on disk] in CMakeLists.txt); the figures
# show how close a run comes.
_disk_figures() {
  local root build venvs free mount
  root="$(dirname "$(dirname "$SCALEBENCH_TIMINGS")")"
  build="$(du -sk "$root/build" 2>/dev/null | cut -f1)"
  venvs="$(du -skc "$root"/.venv* 2>/dev/null | tail -1 | cut -f1)"
  read -r free mount < <(df -Pk "$root" | awk 'NR == 2 { print $4, $6 }')
  awk -v b="${build:-0}" -v v="${venvs:-0}" -v f="${free:-0}" -v m="$mount" 'BEGIN {
    printf "  disk: build/ %.1f GB, virtualenvs %.1f GB; %.1f GB free on %s\n", b / 2^20, v / 2^20, f / 2^20, m }'
}
