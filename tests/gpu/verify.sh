#!/usr/bin/env bash
# tests/gpu/verify.sh: builds scalebench on a GPU node that has PyTorch but none of the Debian
# packages, from the bundle of tests/gpu/bundle.sh, and runs every GPU check, in one command.
# No root, no network, nothing installed: everything goes under OUT. See docs/gpu-verification.md.
#
#   tests/gpu/verify.sh [--dry-run] [--from STEP] [--until STEP] [--bundle FILE] [--out DIR]
#                       [--python PYTHON]
#
#   --bundle FILE  the bundle (default: ./scalebench-gpu-bundle.tar, else the one bundle.sh
#                  leaves in ~/.cache/scalebench-gpu-bundle)
#   --out DIR      everything it writes (default: <repo>/build/gpu-verify): prefix/ (the
#                  unpacked packages), build/, logs/NN-STEP.log, the results files, summary.md
#   --python P     the Python whose torch scalebench is built against (default: python3)
#   --from STEP    start at STEP; the results of the steps before it (an earlier run) are kept
#   --until STEP   stop after STEP (tests/gpu/test_kit.sh stops after configure)
#   --dry-run      print every step with its commands and time limit; run nothing
#
# The steps, in order, each under its own time limit (at most 10 minutes) with its own log:
#   unpack     the bundle's packages into OUT/prefix (dpkg -x), checked with ldd
#   mpi        `mpirun -np 2 hostname` with the prefix's Open MPI
#   configure  the release preset into OUT/build, against the prefix and PyTorch's LibTorch,
#              with /usr and /usr/local ignored; every package must come from the prefix
#   build      everything of the preset
#   detect     the GPUs (nvidia-smi -L, torch.cuda); without one: "no GPU", exit 0
#   gpu-tests  ctest -L gpu (the unit and MPI tests labelled gpu)
#   selftest   mpirun -np G+1 scalebench selftest
#   probe      mpirun -np G+1 scalebench probe (NCCL)
#   sweep      scalebench run tests/gpu/gpu_verify.yaml (bf16, channels-last, CUDA graphs,
#              batch auto up to a real out-of-memory error, accuracy validation)
#   ddp-bench  tests/perf/ddp_vs_torch.py on the GPUs: DDP over NCCL with 2+ GPUs, else one
#              GPU against PyTorch eager
# Then OUT/summary.md: passed / failed / skipped per step, the key figures, where to resume.
# Exit status: 0 when every step run passed (or there is no GPU), 1 when one failed, 2 for
# bad usage.
#
# Environment: SCALEBENCH_JOBS (build parallelism, default nproc); SCALEBENCH_VERIFY_IGNORE_PREFIX
# (what CMake must not search, default "/usr;/usr/local"; "" where the node's CUDA lives there).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
self="$here/$(basename "${BASH_SOURCE[0]}")"
# shellcheck source=tests/gpu/prefix.sh
source "$here/prefix.sh"
# shellcheck source=tests/gpu/summary.sh
source "$here/summary.sh"

steps=(unpack mpi configure build detect gpu-tests selftest probe sweep ddp-bench)
declare -A limit_s=([unpack]=300 [mpi]=120 [configure]=300 [build]=600 [detect]=120
  [gpu-tests]=600 [selftest]=300 [probe]=300 [sweep]=600 [ddp-bench]=600)
declare -A title=(
  [unpack]="the bundle's packages into the prefix"
  [mpi]="Open MPI from the prefix"
  [configure]="release preset against the prefix and PyTorch's LibTorch"
  [build]="every target of the release preset"
  [detect]="GPUs"
  [gpu-tests]="GPU unit and MPI tests"
  [selftest]="scalebench selftest"
  [probe]="scalebench probe (NCCL)"
  [sweep]="GPU sweep (tests/gpu/gpu_verify.yaml)"
  [ddp-bench]="DDP vs PyTorch benchmark (world G; one GPU: against PyTorch eager)"
)
# detect's exit status when there is no GPU: the run stops there, successfully.
no_gpu_status=3

# usage [status]: the header of this file.
usage() {
  sed -n '2,/^set -euo/p' "$self" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
  exit "${1:-2}"
}

die() {
  echo "verify.sh: $*" >&2
  exit 1
}

# ---- options ------------------------------------------------------------------------------
dry_run=0
from=""
until=""
bundle=""
out="$repo/build/gpu-verify"
python=python3
run_step_name=""
parse_options() {
  while (($#)); do
    case "$1" in
      --dry-run) dry_run=1 ;;
      --from) from="${2:?--from needs a step}"; shift ;;
      --until) until="${2:?--until needs a step}"; shift ;;
      --bundle) bundle="${2:?--bundle needs a file}"; shift ;;
      --out) out="${2:?--out needs a folder}"; shift ;;
      --python) python="${2:?--python needs a program}"; shift ;;
      --run-step) run_step_name="${2:?}"; shift ;;  # internal: one step, under its time limit
      -h | --help) usage 0 ;;
      *) echo "verify.sh: unknown option '$1'" >&2; usage ;;
    esac
    shift
  done
  local step
  for step in "$from" "$until"; do
    [[ -z $step || -n ${limit_s[$step]:-} ]] ||
      { echo "verify.sh: unknown step '$step'; the steps: ${steps[*]}" >&2; exit 2; }
  done
  if [[ -z $bundle ]]; then
    bundle="$PWD/scalebench-gpu-bundle.tar"
    [[ -f $bundle ]] || bundle="${XDG_CACHE_HOME:-$HOME/.cache}/scalebench-gpu-bundle/scalebench-gpu-bundle.tar"
  fi
  out="$(realpath -m "$out")"
  bundle="$(realpath -m "$bundle")"
  prefix="$out/prefix"
  build="$out/build"
  state="$out/state"
}

# ---- helpers of the steps -----------------------------------------------------------------
# x <command...>: runs it, with a trace line on stderr; in a dry run only prints it (on fd 3,
# the listing, so that a command whose output a step captures is listed too).
x() {
  if ((dry_run)); then
    {
      printf '      $'
      printf ' %q' "$@"
      printf '\n'
    } >&3
    return 0
  fi
  printf '+' >&2
  printf ' %q' "$@" >&2
  printf '\n' >&2
  "$@"
}

# figure <line>: one line of this step's key figures (the summary's table and details).
figure() { ((dry_run)) || echo "$*" >>"$state/$run_step_name.figures"; }

# detail_file <file> <heading>: a file's text for the summary's details of this step.
detail_file() {
  ((dry_run)) && return 0
  { echo "#### $2"; echo '```'; cat "$1"; echo '```'; } >>"$state/$run_step_name.details"
}

need_prefix() {
  ((dry_run)) && return 0
  [[ -f $prefix/.unpacked ]] ||
    die "no unpacked prefix in $prefix: run from the first step (--from unpack)"
  export_prefix_env "$prefix"
  [[ -d $prefix/python ]] && export PYTHONPATH="$prefix/python${PYTHONPATH:+:$PYTHONPATH}"
  return 0
}

need_build() {
  need_prefix
  ((dry_run)) || [[ -x $build/bin/scalebench ]] ||
    die "no scalebench in $build/bin: run from the build step (--from build)"
}

# gpus: the GPU count found by detect (G in a dry run).
gpus() {
  if ((dry_run)); then echo G; return; fi
  [[ -f $state/gpus ]] || die "no GPU count in $state: run from the detect step (--from detect)"
  cat "$state/gpus"
}

ranks() {
  if ((dry_run)); then echo 'G+1'; else echo $(($(gpus) + 1)); fi
}

# keep_aside <file>: a results file of an earlier run is renamed, never overwritten.
keep_aside() {
  [[ -e $1 ]] || return 0
  x mv "$1" "${1%.h5}.$(date -r "$1" +%Y%m%d-%H%M%S).h5"
}

# ---- unpack -------------------------------------------------------------------------------
step_unpack() {
  ((dry_run)) || [[ -f $bundle ]] ||
    die "no bundle at $bundle: make it with tests/gpu/bundle.sh on a machine with apt and the network, copy it here and pass --bundle FILE"
  x rm -rf "$prefix" "$out/bundle"
  x mkdir -p "$out/bundle"
  x tar -xf "$bundle" -C "$out/bundle" --strip-components=1
  x check_manifest "$out/bundle"
  x unpack_debs "$prefix" "$out/bundle"/debs/*.deb
  x export_prefix_env "$prefix"
  x prefer_node_libraries "$prefix" "$out/bundle"
  x remove_unloadable_components "$prefix"
  x check_prefix_libraries "$prefix"
  x add_h5py_if_missing "$out/bundle"
  ((dry_run)) && return 0
  touch "$prefix/.unpacked"
  figure "$(grep -vc '^#' "$out/bundle/MANIFEST.tsv" | awk '{ print $1 - 1 }') files of the bundle, prefix $(du -sm "$prefix" | cut -f1) MiB"
  touch "$prefix/node-libraries.txt"
  figure "$(wc -l <"$prefix/node-libraries.txt") libraries taken from the node, $(find "$prefix/unloadable" -type f | wc -l) Open MPI components not loadable here"
}

# check_manifest <bundle folder>: every file of MANIFEST.tsv is there with its sha256.
check_manifest() {
  local folder="$1"
  [[ -f $folder/MANIFEST.tsv ]] || die "$bundle has no MANIFEST.tsv: make it again with tests/gpu/bundle.sh"
  grep -v '^#' "$folder/MANIFEST.tsv" | tail -n +2 | awk -F'\t' '{ print $8 "  " $6 }' >"$state/sha256"
  (cd "$folder" && sha256sum --quiet -c "$state/sha256") ||
    die "the bundle's files do not match MANIFEST.tsv: copy $bundle again (or make it again with tests/gpu/bundle.sh)"
}

# prefer_node_libraries <prefix> <bundle folder>: a library of a package the bundle carries only
# as a dependency (libcurl, Kerberos, ...) is removed from the prefix where the node's loader
# already has a working one of the same name: LD_LIBRARY_PATH puts the prefix first for every
# program, and the node's own programs (cmake, git) must keep their own, newer, copies.
prefer_node_libraries() {
  local prefix="$1" folder="$2" file path name node ldconfig node_cache
  ldconfig="$(command -v ldconfig || echo /sbin/ldconfig)"
  node_cache="$("$ldconfig" -p 2>/dev/null || true)"
  while IFS=$'\t' read -r _ _ _ role _ file _; do
    [[ $role == dependency ]] || continue
    while read -r path; do
      name="$(basename "$path")"
      node="$(awk -v n="$name" '$1 == n && /x86-64|AArch64/ { print $NF; exit }' <<<"$node_cache")"
      [[ -n $node && $(od -An -c -N4 "$node" 2>/dev/null | tr -d ' ') == 177ELF ]] || continue
      echo "using the node's $node instead of the bundle's"
      echo "$node" >>"$prefix/node-libraries.txt"
      rm -f "$prefix/$path"
    done < <(dpkg-deb -c "$folder/$file" | awk '{ print $6 }' | grep -E '^\./usr/lib/.*\.so\.[0-9]+$' || true)
  done < <(grep -v '^#' "$folder/MANIFEST.tsv")
}

# check_prefix_libraries <prefix>: every program and library of the prefix finds all it needs.
check_prefix_libraries() {
  local prefix="$1" missing
  missing="$(missing_libraries "$prefix/usr")"
  if [[ -n $missing ]]; then
    printf '%s\n' "$missing"
    [[ $missing == *GLIBC_* || $missing == *GLIBCXX_* ]] &&
      echo "This node's C or C++ library is older than Debian 12's (glibc 2.36, GCC 12): use a node image based on Debian 12 / Ubuntu 24.04 or newer."
    die "libraries are missing (above): install the packages that hold them on the node, or add them to runtime_packages in tests/gpu/bundle.sh and make the bundle again"
  fi
  echo "ldd: every program and library of the prefix finds what it needs"
}

# add_h5py_if_missing <bundle folder>: the DDP benchmark reads and writes HDF5 with h5py; where
# the node's Python lacks it, the bundle's wheel for this Python is unpacked into prefix/python.
add_h5py_if_missing() {
  local folder="$1" tag wheel
  "$python" -c 'import h5py' 2>/dev/null && { echo "h5py: the node's"; return 0; }
  tag="$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
  wheel="$(find "$folder/wheels" -name "h5py-*-$tag-*.whl" -print -quit 2>/dev/null)"
  if [[ -z $wheel ]]; then
    echo "h5py: missing and the bundle has no wheel for $tag: the DDP benchmark will be skipped (pip install h5py, or make the bundle with SCALEBENCH_BUNDLE_PYTHON=<this Python's version>)"
    return 0
  fi
  "$python" -m zipfile -e "$wheel" "$prefix/python"
  echo "h5py: $(basename "$wheel") unpacked into $prefix/python"
}

# ---- mpi ----------------------------------------------------------------------------------
step_mpi() {
  need_prefix
  x mpirun --version
  x mpirun -np 2 hostname | tee "$state/mpi.out"
  # An MPI program built with the prefix's mpicc: MPI_Init, a reduction over shared memory.
  x mpicc "$repo/tests/slurm/mpi_hello.c" -o "$state/mpi_hello"
  x mpirun -np 2 "$state/mpi_hello" | tee "$state/mpi_hello.out"
  ((dry_run)) && return 0
  [[ $(wc -l <"$state/mpi.out") -eq 2 ]] || die "mpirun -np 2 hostname printed $(wc -l <"$state/mpi.out") lines instead of 2 (see above)"
  figure "mpirun -np 2 hostname: 2 ranks on $(sort -u "$state/mpi.out" | paste -sd, -); $(cat "$state/mpi_hello.out")"
}

# ---- configure ----------------------------------------------------------------------------
step_configure() {
  need_prefix
  local torch_prefix launcher=() false_wrapper
  torch_prefix="$(x "$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')" ||
    die "$python cannot import torch: load the site's PyTorch module (or pass --python)"
  ((dry_run)) && torch_prefix="<torch.utils.cmake_prefix_path>"
  # The preset compiles through ccache; a node without it compiles directly.
  command -v ccache >/dev/null || launcher=(-DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER=)
  # Debian's h5cc wrapper has /usr compiled in and lists -lcurl -lcrypto -lsz -lz, whose .so
  # links are in -dev packages the bundle leaves out: told that the wrapper fails, FindHDF5
  # searches CMAKE_PREFIX_PATH and finds the prefix's libhdf5.so and libhdf5_cpp.so.
  false_wrapper="$(type -P false)"
  (cd "$repo" && x cmake --preset release -B "$build" \
    "-DCMAKE_PREFIX_PATH=$prefix/usr;$torch_prefix" \
    "-DCMAKE_IGNORE_PREFIX_PATH=${SCALEBENCH_VERIFY_IGNORE_PREFIX-/usr;/usr/local}" \
    "-DSCALEBENCH_PYTHON=$(command -v "$python")" \
    "-DHDF5_C_COMPILER_EXECUTABLE=$false_wrapper" "-DHDF5_CXX_COMPILER_EXECUTABLE=$false_wrapper" \
    "${launcher[@]}") | tee "$state/configure.out"
  x check_found_in_prefix "$build/CMakeCache.txt" "$torch_prefix"
  ((dry_run)) && return 0
  grep -qF 'GPU code is compiled' "$state/configure.out" && echo yes >"$state/gpu_code" || echo no >"$state/gpu_code"
  figure "$(grep -m1 -oE 'LibTorch [^ ]+' "$state/configure.out"), GPU code compiled: $(cat "$state/gpu_code")"
  grep -m1 -oE 'NCCL [^ ]+' "$state/configure.out" | while read -r line; do figure "$line"; done
}

# check_found_in_prefix <CMakeCache.txt> <torch prefix>: every package the build found comes
# from the prefix (LibTorch from PyTorch), never from the system.
check_found_in_prefix() {
  local cache="$1" torch_prefix="$2" entry value failed=0 real_prefix real_torch
  real_prefix="$(realpath "$prefix")"
  real_torch="$(realpath "$torch_prefix")"
  for entry in MPI_C_HEADER_DIR MPI_mpi_LIBRARY MPIEXEC_EXECUTABLE HDF5_C_INCLUDE_DIR \
    HDF5_hdf5_LIBRARY_RELEASE HDF5_hdf5_cpp_LIBRARY_RELEASE Boost_DIR Boost_INCLUDE_DIR \
    Boost_LOG_LIBRARY_RELEASE Boost_LOG_SETUP_LIBRARY_RELEASE yaml-cpp_DIR nlohmann_json_DIR \
    valijson_DIR CLI11_DIR GTest_DIR Torch_DIR; do
    value="$(sed -n "s/^$entry:[A-Z]*=//p" "$cache")"
    local want="$real_prefix"
    [[ $entry == Torch_DIR ]] && want="$real_torch"
    if [[ -z $value || $value == *NOTFOUND ]]; then
      echo "not found: $entry"
      failed=1
    elif [[ $(realpath "$value") != "$want"/* ]]; then
      echo "outside $want: $entry = $value"
      failed=1
    else
      printf '%-32s %s\n' "$entry" "$value"
    fi
  done
  ((failed == 0)) ||
    die "CMake found packages elsewhere than in the prefix (above): check CMAKE_PREFIX_PATH and SCALEBENCH_VERIFY_IGNORE_PREFIX, or the bundle"
  echo "every package from the prefix, LibTorch from $torch_prefix"
}

# ---- build --------------------------------------------------------------------------------
step_build() {
  need_prefix
  x cmake --build "$build" -j "${SCALEBENCH_JOBS:-$(nproc)}"
}

# ---- detect -------------------------------------------------------------------------------
step_detect() {
  need_build
  local query
  query='import torch
n = torch.cuda.device_count() if torch.cuda.is_available() else 0
print(n)
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
      + ", ".join(torch.cuda.get_device_name(i) for i in range(n)))'
  x nvidia-smi -L || true
  x nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  x "$python" -c "$query" | tee "$state/torch_gpus"
  ((dry_run)) && return 0
  if ! nvidia-smi -L >/dev/null 2>&1 || [[ $(head -n 1 "$state/torch_gpus") == 0 ]]; then
    echo "no GPU"
    figure "no GPU (nvidia-smi -L fails or torch.cuda.is_available() is False)"
    exit "$no_gpu_status"
  fi
  head -n 1 "$state/torch_gpus" >"$state/gpus"
  figure "$(gpus) GPU(s): $(tail -n 1 "$state/torch_gpus"); driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)"
  [[ $(cat "$state/gpu_code") == yes ]] ||
    die "GPUs are present but the build has no GPU code (see the configure log: LibTorch without CUDA, or the CUDA toolkit / NCCL not found): load the CUDA module or set CUDAToolkit_ROOT, then run --from configure"
}

# ---- gpu-tests ----------------------------------------------------------------------------
step_gpu_tests() {
  need_build
  local rc=0
  x ctest --test-dir "$build" -L gpu -V --timeout 300 2>&1 | tee "$state/ctest.out" || rc=$?
  ((dry_run)) && return 0
  figure "$(grep -E '% tests passed' "$state/ctest.out" || echo 'no ctest summary')"
  figure "$(grep -c '\[  SKIPPED \]' "$state/ctest.out" || true) GoogleTest(s) skipped"
  grep -E '\[  (SKIPPED|FAILED  ) \]|tests passed|The following tests|\(Failed\)|\(Timeout\)' \
    "$state/ctest.out" | sort -u >"$state/ctest.lines" || true
  detail_file "$state/ctest.lines" "ctest -L gpu: failures and skips"
  return "$rc"
}

# ---- selftest -----------------------------------------------------------------------------
step_selftest() {
  need_build
  local rc=0
  x mpirun -np "$(ranks)" "$build/bin/scalebench" selftest | tee "$state/selftest.out" || rc=$?
  ((dry_run)) && return 0
  figure "$(grep -E '^selftest:' "$state/selftest.out" || echo 'no selftest summary line')"
  detail_file "$state/selftest.out" "scalebench selftest"
  return "$rc"
}

# ---- probe --------------------------------------------------------------------------------
step_probe() {
  need_build
  local rc=0
  keep_aside "$out/probe.h5"
  x mpirun -np "$(ranks)" "$build/bin/scalebench" probe -o "$out/probe.h5" | tee "$state/probe.out" || rc=$?
  ((dry_run)) && return 0
  figure "$(grep -c 'WRONG' "$state/probe.out" || true) wrong results; largest allreduce: $(grep -E '^ *allreduce' "$state/probe.out" | tail -n 1 | tr -s ' ')"
  detail_file "$state/probe.out" "scalebench probe"
  return "$rc"
}

# ---- sweep --------------------------------------------------------------------------------
step_sweep() {
  need_build
  local rc=0 matrix="$here/gpu_verify.yaml"
  x "$build/bin/scalebench" validate "$matrix"
  keep_aside "$out/sweep.h5"
  x mpirun -np 2 "$build/bin/scalebench" run "$matrix" -o "$out/sweep.h5" || rc=$?
  ((dry_run)) && return 0
  [[ -f $out/sweep.h5 ]] || return "$rc"
  x "$build/bin/scalebench" info "$out/sweep.h5" | tee "$state/sweep.info"
  x "$build/bin/scalebench" info "$out/sweep.h5" --format json >"$state/sweep.json"
  figure "$(awk '/^#/ { next } NF > 1 { n++ } END { print n - 1 }' "$state/sweep.info") cell rows; $(sweep_batch_figures)"
  detail_file "$state/sweep.info" "scalebench info sweep.h5"
  return "$rc"
}

# sweep_batch_figures: the auto cell's boundary (max_batch_ok, oom_batch, recommended_batch),
# wherever `info --format json` holds them.
sweep_batch_figures() {
  "$python" - "$state/sweep.json" <<'EOF' || echo "batch auto figures unreadable"
import json, sys
found = {}
def walk(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("max_batch_ok", "oom_batch", "recommended_batch") and key not in found:
                found[key] = value
            walk(value)
    elif isinstance(node, list):
        for value in node:
            walk(value)
walk(json.load(open(sys.argv[1])))
print("batch auto: " + (", ".join(f"{k} {v}" for k, v in sorted(found.items())) or "no figures"))
EOF
}

# ---- ddp-bench ----------------------------------------------------------------------------
step_ddp_bench() {
  need_build
  local world rc=0
  if ((dry_run)); then
    world=G
  else
    "$python" -c 'import h5py' 2>/dev/null ||
      { figure "skipped: no h5py for $python (see the unpack log)"; exit "$no_gpu_status"; }
    world="$(gpus)"
    ((world <= 8)) || world=8
  fi
  x "$python" "$repo/tests/perf/ddp_vs_torch.py" "$build" --device cuda --world "$world" |
    tee "$state/ddp.out" || rc=$?
  ((dry_run)) && return 0
  grep '^TABLE|' "$state/ddp.out" | cut -d'|' -f3- | sed 's/|/ | /g' | while read -r line; do figure "$line"; done
  detail_file "$state/ddp.out" "tests/perf/ddp_vs_torch.py"
  return "$rc"
}

# ---- the run ------------------------------------------------------------------------------
# run_one_step <name>: the step's function (called as verify.sh --run-step NAME, so that `set -e`
# holds inside it and one `timeout` limits it all).
run_one_step() {
  local name="$1"
  cd "$repo"
  "step_${name//-/_}"
}

# record <name> <result> <seconds>
record() {
  printf '%s\t%s\t%s\n' "$2" "$3" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$state/$1.status"
}

# launch <index> <name>: runs a step under its time limit; returns its status.
launch() {
  local index="$1" name="$2" log start rc=0
  log="$out/logs/$(printf '%02d' "$index")-$name.log"
  rm -f "$state/$name.figures" "$state/$name.details"
  printf '==> %02d %-10s %s (limit %s s) ... ' "$index" "$name" "${title[$name]}" "${limit_s[$name]}"
  start=$SECONDS
  timeout --kill-after=30 "${limit_s[$name]}" "$self" --run-step "$name" --out "$out" \
    --bundle "$bundle" --python "$python" >"$log" 2>&1 || rc=$?
  local seconds=$((SECONDS - start)) result
  case "$rc" in
    0) result=passed ;;
    124 | 137) result="timed out" ;;
    "$no_gpu_status") result=skipped ;;  # detect: no GPU; ddp-bench: no h5py
    *) result=failed ;;
  esac
  [[ $name == detect && $result == skipped ]] && result="no GPU"
  record "$name" "$result" "$seconds"
  echo "$result ($seconds s; log $log)"
  ((rc == 0 || rc == no_gpu_status)) || tail -n 15 "$log" | sed 's/^/    /'
  return "$rc"
}

# dry_run_steps: every step with its limit and commands.
dry_run_steps() {
  local index=0 name
  echo "tests/gpu/verify.sh --dry-run: bundle $bundle, out $out, python $python"
  for name in "${steps[@]}"; do
    index=$((index + 1))
    printf '%02d %-10s limit %4s s  %s\n' "$index" "$name" "${limit_s[$name]}" "${title[$name]}"
    run_step_name="$name"
    (cd "$repo" && "step_${name//-/_}") 3>&1
  done
  echo "then: $out/summary.md"
}

# run_steps: from --from to --until; a failed build-side step (unpack..detect) ends the run,
# a failed GPU check does not (the next one is independent).
run_steps() {
  local index=0 name started=0 rc
  [[ -z $from ]] && started=1
  for name in "${steps[@]}"; do
    index=$((index + 1))
    [[ $name == "$from" ]] && started=1
    ((started)) || continue
    rc=0
    launch "$index" "$name" || rc=$?
    if ((rc == no_gpu_status)) && [[ $name == detect ]]; then
      echo "no GPU: stopped after the build (nothing else to run here)"
      mark_not_run "$index" "no GPU"
      return 0
    fi
    if ((rc != 0 && rc != no_gpu_status && index <= 5)); then
      mark_not_run "$index" "$name failed"
      return 0
    fi
    [[ $name == "$until" ]] && return 0
  done
  return 0
}

# mark_not_run <index> <reason>: the steps after step <index>, which this run leaves out.
mark_not_run() {
  local name
  for name in "${steps[@]:$1}"; do
    record "$name" "not run ($2)" 0
    rm -f "$state/$name.figures" "$state/$name.details"
  done
}

# failed_in_this_run: true when a step of this run failed or ran out of time.
failed_in_this_run() {
  local name result
  for name in "${steps[@]}"; do
    [[ $state/$name.status -nt $state/run-started ]] || continue
    IFS=$'\t' read -r result _ <"$state/$name.status"
    [[ $result == failed || $result == "timed out" ]] && return 0
  done
  return 1
}

main() {
  parse_options "$@"
  if [[ -n $run_step_name ]]; then
    run_one_step "$run_step_name"
    return
  fi
  if ((dry_run)); then
    # The steps' captured output (nothing, in a dry run) goes to a folder of its own.
    state="$(mktemp -d)"
    trap 'rm -rf "$state"' EXIT
    dry_run_steps
    return 0
  fi
  mkdir -p "$out/logs" "$out/state"
  touch "$state/run-started"
  run_steps
  write_summary
  if failed_in_this_run; then return 1; fi
}

main "$@"
