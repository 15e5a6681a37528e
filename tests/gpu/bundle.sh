#!/usr/bin/env bash
# tests/gpu/bundle.sh [OUT_DIR]: fetches the Debian 12 packages that build and test scalebench
# on a bare GPU node (PyTorch, CUDA, cmake, ninja, a C++ compiler and python3, but no Open MPI,
# HDF5, Boost, yaml-cpp, nlohmann-json, valijson, CLI11 or GoogleTest) into one archive,
# OUT_DIR/scalebench-gpu-bundle.tar, to carry to a node without network. Nothing is installed:
# `apt-get download` into a temporary folder, no root needed. tests/gpu/verify.sh unpacks it.
# Prints the archive's size against the goal of 40 MiB. See docs/gpu-verification.md.
#
#   OUT_DIR   default: ${XDG_CACHE_HOME:-~/.cache}/scalebench-gpu-bundle
#
# Environment:
#   SCALEBENCH_BUNDLE_PYTHON  Python version of the node, for the h5py wheel the DDP benchmark
#                             reads and writes its files with (default 3.12, the lent node's;
#                             "" leaves the wheel out)
#   SCALEBENCH_BUNDLE_PIP_PYTHON  a Python with pip, to download that wheel (default python3)
#
# Note [GPU bundle contents]
# A -dev package is taken alone: the build reads its headers, CMake package files and .so
# links, never what Debian makes it depend on (valijson's adapters for Qt, Poco and five other
# JSON libraries; HDF5's Fortran and high-level libraries, libcurl-dev and libssl-dev for the
# h5cc wrapper that verify.sh does not use; libicu-dev; the GoogleTest sources). Runtime
# packages come with their dependencies, recursively, except those on every node image
# (assumed_present) and those left out on purpose (not_needed, each with its reason). Then every
# ELF file of the bundle is checked: each library it needs is in the bundle or in an
# assumed-present package, so a node that has those has everything.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/gpu/prefix.sh
source "$here/prefix.sh"
out_dir="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/scalebench-gpu-bundle}"
bundle_name=scalebench-gpu-bundle
goal_mib=40
python_version="${SCALEBENCH_BUNDLE_PYTHON-3.12}"
pip_python="${SCALEBENCH_BUNDLE_PIP_PYTHON:-python3}"

# Headers, CMake package files and .so links the build reads (taken without dependencies).
dev_packages=(
  libopenmpi-dev            # mpi.h, libmpi.so; FindMPI runs its mpicc (openmpi-bin)
  libhdf5-dev               # hdf5.h, H5Cpp.h, libhdf5{,_cpp}.so (FindHDF5 searches for them)
  libboost1.74-dev          # Boost headers, BoostConfig.cmake
  libboost-log1.74-dev      # Boost.Log and the components its CMake files ask for:
  libboost-atomic1.74-dev   #   atomic, chrono, filesystem, regex, thread
  libboost-chrono1.74-dev
  libboost-filesystem1.74-dev
  libboost-regex1.74-dev
  libboost-thread1.74-dev
  libyaml-cpp-dev
  nlohmann-json3-dev        # header-only, as are valijson and CLI11
  libvalijson-dev
  libcli11-dev
  libgtest-dev              # static libraries + GTestConfig.cmake (GTest and GMock targets)
  libgmock-dev
)
# Libraries and programs that run, fetched with their dependencies.
runtime_packages=(
  openmpi-bin libopenmpi3   # mpirun, orted, the MCA components
  libpmix2                  # Open MPI's process management (export_prefix_env in prefix.sh)
  libhdf5-103-1 libhdf5-cpp-103-1
  libboost-log1.74.0 libboost-atomic1.74.0 libboost-chrono1.74.0 libboost-filesystem1.74.0
  libboost-regex1.74.0 libboost-thread1.74.0
  libyaml-cpp0.7
)
# On every node image this kit is for (Debian 12 or newer, Ubuntu 24.04 or newer): the C
# library and the base system, apt's libraries, the compiler, Python and Perl. Never fetched;
# verify.sh checks with ldd that the node really has what the bundle's libraries need.
assumed_present=(
  # C and C++ runtime, base system
  libc6 libgcc-s1 libstdc++6 gcc-12-base zlib1g libzstd1 liblzma5 libbz2-1.0 liblz4-1
  libcrypt1 libselinux1 libpcre2-8-0 libudev1 libsystemd0 libcap2 libcap-ng0 libaudit1
  libaudit-common libacl1 libattr1 libblkid1 libmount1 libuuid1 libmd0 libbsd0 libtinfo6
  libncursesw6 libpam0g libpam-modules libpam-modules-bin libsemanage2 libsemanage-common
  libsepol2 libdb5.3 libgcrypt20 libgpg-error0 libseccomp2 libxxhash0 libssl3 libcom-err2
  libkeyutils1 libtirpc3 libtirpc-common libnsl2
  base-files base-passwd bash coreutils dash debconf debianutils dpkg tar passwd adduser
  lsb-base sysvinit-utils init-system-helpers mount util-linux login
  # apt's libraries (Debian and Ubuntu images keep apt). Not libunistring2: Ubuntu 24.04 has
  # libunistring.so.5 only, and libpsl (libcurl's, HDF5's) needs .so.2 (seen on a GPU node)
  apt libapt-pkg6.0 libgnutls30 libhogweed6 libnettle8 libgmp10 libp11-kit0 libtasn1-6
  libidn2-0 libffi8
  # the compiler
  gcc gcc-12 g++ g++-12 cpp cpp-12 binutils binutils-common binutils-x86-64-linux-gnu
  libbinutils libctf0 libctf-nobfd0 libgprofng0 libjansson4 libc6-dev libc-dev-bin
  linux-libc-dev libcrypt-dev libnsl-dev libtirpc-dev rpcsvc-proto libstdc++-12-dev
  libgcc-12-dev libgomp1 libatomic1 libquadmath0 libitm1 libasan8 liblsan0 libtsan2
  libubsan1 libcc1-0 libisl23 libmpc3 libmpfr6
  # Python and Perl
  python3 python3-minimal python3.11 python3.11-minimal libpython3-stdlib
  libpython3.11-minimal libpython3.11-stdlib libexpat1 libsqlite3-0 libreadline8
  readline-common media-types mime-support perl perl-base perl-modules-5.36 libperl5.36
  libgdbm6 libgdbm-compat4
)
# Left out although a package depends on it: name and reason.
not_needed=(
  "openssh-client: mpirun starts every rank on this node (verify.sh sets OMPI_MCA_plm=isolated); no remote shell"
  "libhwloc-plugins: hwloc's optional plugins (PCI, OpenCL, X11 NV-CONTROL) load from /usr/lib/x86_64-linux-gnu/hwloc only, never from a prefix; the CPU topology is built into libhwloc15"
)
# Open MPI's network transports (InfiniBand, Omni-Path, libfabric, UCX): ranks on one node talk
# through shared memory (btl vader), and GPUs through NCCL, which brings its own. Open MPI opens
# its components with dlopen; verify.sh removes those whose libraries the node lacks
# (remove_unloadable_components in verify.sh), so none is tried and none warns.
for package in libucx0 libfabric1 libpsm2-2 libpsm-infinipath1 libibverbs1 ibverbs-providers \
  librdmacm1 libnl-3-200 libnl-route-3-200 libnuma1; do
  not_needed+=("$package: an Open MPI network transport; one node needs none")
done
# Files that may need a library the bundle lacks: Open MPI's components (loaded with dlopen,
# removed by verify.sh where the node lacks what they need).
component_pattern='/openmpi3/mca_[^/]*[.]so$|/libmca_common_[^/]*[.]so'

die() {
  echo "bundle.sh: $*" >&2
  exit 1
}

check_tools() {
  local tool
  for tool in apt-get apt-cache dpkg-deb readelf sha256sum tar awk; do
    command -v "$tool" >/dev/null ||
      die "needs $tool: run this on Debian 12 with apt (readelf: apt-get install binutils)"
  done
  local codename
  codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
  [[ $codename == bookworm ]] ||
    echo "bundle.sh: warning: this is '$codename', not Debian 12 (bookworm); the package names and versions are Debian 12's" >&2
}

# resolve_packages: prints "package<TAB>role<TAB>why" for every package of the bundle.
resolve_packages() {
  local skip="$work/skip" level=() next=() line package parent
  printf '%s\n' "${assumed_present[@]}" >"$skip"
  for line in "${not_needed[@]}"; do echo "${line%%:*}" >>"$skip"; done
  for package in "${dev_packages[@]}"; do
    printf '%s\tdev\tbuild (headers, CMake files)\n' "$package"
    echo "$package" >>"$skip"
  done
  for package in "${runtime_packages[@]}"; do
    printf '%s\truntime\tbuild and run\n' "$package"
    echo "$package" >>"$skip"
    level+=("$package")
  done
  # Breadth first: one apt-cache call per level of the dependency tree.
  while ((${#level[@]})); do
    mapfile -t next < <(apt-cache depends --important "${level[@]}" |
      awk -v skip_file="$skip" -f "$here/pick_dependencies.awk")
    level=()
    for line in "${next[@]}"; do
      package="${line%%$'\t'*}"
      parent="${line#*$'\t'}"
      grep -qxF "$package" "$skip" && continue
      echo "$package" >>"$skip"
      printf '%s\tdependency\tneeded by %s\n' "$package" "$parent"
      level+=("$package")
    done
  done
}

# download <package...>: the .deb files of the candidate versions, into the current folder.
download() {
  local sandbox=()
  # As root, apt hands the download to the user _apt, which cannot write a private temp folder.
  [[ $(id -u) -eq 0 ]] && sandbox=(-o APT::Sandbox::User=root)
  apt-get -q "${sandbox[@]}" download "$@" >"$work/download.log" 2>&1 || {
    cat "$work/download.log" >&2
    die "apt-get download failed: refresh the package lists (sudo apt-get update) and run again"
  }
}

# download_wheel: the h5py wheel for the node's Python (manylinux, with its own libhdf5).
download_wheel() {
  [[ -n $python_version ]] || return 0
  "$pip_python" -m pip --version >/dev/null 2>&1 ||
    die "$pip_python has no pip, which the h5py wheel is downloaded with: set SCALEBENCH_BUNDLE_PIP_PYTHON to a Python with pip (a virtualenv's), or SCALEBENCH_BUNDLE_PYTHON= to leave the wheel out"
  "$pip_python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --implementation cp --python-version "$python_version" \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$stage/wheels" 'h5py>=3.10' ||
    die "pip download of h5py for Python $python_version failed: check the network, or set SCALEBENCH_BUNDLE_PYTHON= to leave it out"
}

# check_libraries: every DT_NEEDED of every ELF file is in the bundle or assumed present.
check_libraries() {
  local tree="$work/tree" triplet file soname owner path line failed=0
  triplet="$(multiarch_triplet)"
  unpack_debs "$tree" "$stage"/debs/*.deb
  find "$tree" \( -type f -o -type l \) -name '*.so*' -printf '%f\n' | sort -u >"$work/provided"
  while IFS= read -r -d '' file; do
    [[ $(od -An -c -N4 "$file" | tr -d ' ') == 177ELF ]] || continue
    readelf -d "$file" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
      awk -v file="${file#"$tree"}" '{ print $0 "\t" file }'
  done < <(find "$tree" -type f \( -perm -u+x -o -name '*.so*' \) -print0) | sort -u >"$work/needed"
  cut -f1 "$work/needed" | sort -u | grep -vxFf "$work/provided" >"$work/missing" || true
  [[ -s $work/missing ]] || return 0
  # Which installed package holds each missing library (one dpkg -S for all: each call reads
  # the whole package database).
  declare -A owner_of=() assumed=() components=()
  for owner in "${assumed_present[@]}"; do assumed[$owner]=1; done
  while IFS= read -r line; do
    owner="${line%%: *}"
    path="${line#*: }"
    owner_of[$(basename "$path")]="${owner%%:*}"
  done < <(sed -e "s|^|/lib/$triplet/|" -e "p" -e "s|^/lib/|/usr/lib/|" "$work/missing" |
    xargs dpkg -S 2>/dev/null || true)
  while IFS=$'\t' read -r soname file; do
    grep -qxF "$soname" "$work/missing" || continue
    owner="${owner_of[$soname]:-}"
    if [[ -n $owner && -n ${assumed[$owner]:-} ]]; then
      continue
    elif [[ $file =~ $component_pattern ]]; then
      components[$(basename "$file")]=1
    elif [[ -z $owner ]]; then
      echo "bundle.sh: cannot tell which package provides $soname (needed by $file): install it here (apt-get install the package that has it) so that dpkg -S knows, then run again" >&2
      failed=1
    else
      echo "bundle.sh: $soname (package $owner) is needed by $file but is neither in the bundle nor assumed present: add $owner to runtime_packages in tests/gpu/bundle.sh" >&2
      failed=1
    fi
  done <"$work/needed"
  if ((${#components[@]})); then
    echo "bundle.sh: Open MPI components for left-out transports (removed where the node lacks their libraries): $(printf '%s\n' "${!components[@]}" | sort | paste -sd' ' -)"
  fi
  return "$failed"
}

# write_manifest <resolved list>: MANIFEST.tsv, one row per file of the bundle.
write_manifest() {
  local manifest="$stage/MANIFEST.tsv" package role why deb version arch file
  {
    echo "# scalebench GPU bundle (tests/gpu/bundle.sh), read by tests/gpu/verify.sh"
    echo "# made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), bundle.sh sha256 $(sha256sum "$0" | cut -d' ' -f1)"
    echo "# assumed present on the node: ${assumed_present[*]}"
    for why in "${not_needed[@]}"; do echo "# not needed: $why"; done
    printf 'package\tversion\tarchitecture\trole\twhy\tfile\tbytes\tsha256\n'
    while IFS=$'\t' read -r package role why; do
      deb="$(find "$stage/debs" -name "${package}_*.deb" -print -quit)"
      [[ -n $deb ]] || die "no .deb was downloaded for $package"
      version="$(dpkg-deb -f "$deb" Version)"
      arch="$(dpkg-deb -f "$deb" Architecture)"
      file="debs/$(basename "$deb")"
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$package" "$version" "$arch" "$role" "$why" \
        "$file" "$(stat -c %s "$deb")" "$(sha256sum "$deb" | cut -d' ' -f1)"
    done <"$1"
    for file in "$stage"/wheels/*.whl; do
      [[ -e $file ]] || continue
      printf 'h5py\t-\tpython%s\twheel\tDDP benchmark (tests/perf) where the node has no h5py\twheels/%s\t%s\t%s\n' \
        "$python_version" "$(basename "$file")" "$(stat -c %s "$file")" "$(sha256sum "$file" | cut -d' ' -f1)"
    done
  } >"$manifest"
}

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# report <archive>: its size against the goal and what takes the most room.
report() {
  local bytes
  bytes="$(stat -c %s "$1")"
  echo "bundle: $1"
  echo "  $(grep -vc '^#' "$stage/MANIFEST.tsv" | awk '{ print $1 - 1 }') files, $(mib "$bytes") MiB (goal <= $goal_mib MiB: $(
    awk -v b="$bytes" -v g="$goal_mib" 'BEGIN { print (b <= g * 1048576) ? "met" : "NOT met" }'))"
  echo "  largest:"
  grep -v '^#' "$stage/MANIFEST.tsv" | tail -n +2 | sort -t$'\t' -k7,7nr | awk 'NR <= 5' |
    while IFS=$'\t' read -r package _ _ role _ _ size _; do
      printf '    %6s MiB  %s (%s)\n' "$(mib "$size")" "$package" "$role"
    done
}

main() {
  check_tools
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  stage="$work/$bundle_name"
  mkdir -p "$stage/debs" "$stage/wheels" "$out_dir"
  resolve_packages >"$work/resolved"
  echo "bundle.sh: $(wc -l <"$work/resolved") Debian packages; downloading"
  local packages
  mapfile -t packages < <(cut -f1 "$work/resolved")
  (cd "$stage/debs" && download "${packages[@]}")
  download_wheel
  check_libraries || die "the bundle is incomplete (see above)"
  write_manifest "$work/resolved"
  local archive="$out_dir/$bundle_name.tar"
  tar -C "$work" -cf "$archive.partial" "$bundle_name"
  mv "$archive.partial" "$archive"
  report "$archive"
}

main
