# shellcheck shell=bash
# Debian packages unpacked into a prefix instead of installed: shared by tests/gpu/bundle.sh
# (to check the bundle) and tests/gpu/verify.sh (to use it). Sourced; bash only.
#
# `dpkg -x` writes a package's files but runs none of its maintainer scripts, so what those
# scripts would have made is made here: the update-alternatives links (Debian's openmpi-bin
# installs mpirun as mpirun.openmpi and links /usr/bin/mpirun to it from its postinst;
# libopenmpi-dev links libmpi.so and the mpi include folder the same way). Absolute symbolic
# links inside the packages are pointed into the prefix, so that nothing leads back to /.

# multiarch_triplet: the library folder name of this machine's architecture.
multiarch_triplet() {
  case "$(uname -m)" in
    x86_64) echo x86_64-linux-gnu ;;
    aarch64) echo aarch64-linux-gnu ;;
    *) echo "$(uname -m)-linux-gnu" ;;
  esac
}

# unpack_debs <prefix> <deb...>: the files of each package, its alternatives links and its
# absolute links made relative to the prefix.
unpack_debs() {
  local prefix="$1" deb
  shift
  mkdir -p "$prefix"
  for deb in "$@"; do dpkg-deb -x "$deb" "$prefix"; done
  for deb in "$@"; do _link_alternatives "$prefix" "$deb"; done
  _relink_absolute_links "$prefix"
}

# _link_alternatives <prefix> <deb>: for every `update-alternatives --install LINK NAME PATH`
# and `--slave LINK NAME PATH` of the package's postinst, prefix/LINK -> prefix/PATH (a
# relative link), where prefix/PATH exists.
_link_alternatives() {
  local prefix="$1" deb="$2" script link path
  script="$(dpkg-deb --ctrl-tarfile "$deb" | tar -xOf - ./postinst 2>/dev/null)" || return 0
  # Join continued lines, then take the three words after each --install / --slave.
  while read -r link path; do
    [[ -e $prefix$path && ! -e $prefix$link ]] || continue
    mkdir -p "$(dirname "$prefix$link")"
    ln -s "$(realpath -m --relative-to="$(dirname "$prefix$link")" "$prefix$path")" "$prefix$link"
  done < <(printf '%s\n' "$script" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta' |
    grep -oE -- '--(install|slave) +[^ ]+ +[^ ]+ +[^ ]+' | awk '{ print $2, $4 }')
}

# _relink_absolute_links <prefix>: /x/y -> the relative way to prefix/x/y.
_relink_absolute_links() {
  local prefix="$1" link target
  while IFS= read -r -d '' link; do
    target="$(readlink "$link")"
    ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$prefix$target")" "$link"
  done < <(find "$prefix" -type l -lname '/*' -print0)
}

# prefix_library_dirs <prefix>: the folders the bundle's shared libraries live in, one a line.
prefix_library_dirs() {
  local usr="$1/usr" triplet
  triplet="$(multiarch_triplet)"
  echo "$usr/lib/$triplet"
  echo "$usr/lib/$triplet/openmpi/lib"
  echo "$usr/lib/$triplet/pmix2/lib"
  echo "$usr/lib"
}

# export_prefix_env <prefix>: the environment under which the prefix's programs and libraries
# work as if installed. Note [Open MPI from a prefix]:
#   * OPAL_PREFIX relocates Open MPI (its MCA components, help files and the wrapper compilers'
#     -I/-L, which FindMPI reads from `mpicc -showme`); OPAL_SYSCONFDIR points at the prefix's
#     openmpi-mca-params.conf, whose Debian defaults (no ofi/ucx/openib) would be missed.
#   * PMIx does not follow OPAL_PREFIX: Debian configured it with absolute folders, so the
#     folder of its plugins and of its help texts are given (without them mpirun still runs
#     but prints "Sorry! You were supposed to get help about: unavailable").
#   * OMPI_MCA_plm=isolated starts every rank on this node without ssh, which the bundle does
#     not carry; verification runs on one node.
#   * LD_LIBRARY_PATH: the Debian libraries are not in the node's loader cache.
export_prefix_env() {
  local prefix="$1" usr="$1/usr" triplet dirs
  triplet="$(multiarch_triplet)"
  dirs="$(prefix_library_dirs "$prefix" | paste -sd: -)"
  export PATH="$usr/bin:$PATH"
  export LD_LIBRARY_PATH="$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export OPAL_PREFIX="$usr"
  export OPAL_SYSCONFDIR="$prefix/etc/openmpi"
  export PMIX_MCA_mca_base_component_path="$usr/lib/$triplet/pmix2/lib/pmix"
  export PMIX_PKGDATADIR="$usr/lib/$triplet/pmix2/share/pmix"
  export OMPI_MCA_plm=isolated
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1
  # A node without zlib for PMIx (seen on a GPU node) would print a page of advice per run.
  export PMIX_MCA_pcompress_base_silence_warning=1
}

# remove_unloadable_components <prefix>: Open MPI components whose libraries are missing here
# (the network transports the bundle leaves out, Note [GPU bundle contents] in bundle.sh) move
# to prefix/unloadable, so that Open MPI never tries to open them.
remove_unloadable_components() {
  local prefix="$1" lib file report
  lib="$prefix/usr/lib/$(multiarch_triplet)"
  mkdir -p "$prefix/unloadable"
  for file in "$lib"/libmca_common_*.so.* "$lib"/openmpi/lib/openmpi3/mca_*.so; do
    [[ -f $file && ! -L $file ]] || continue
    report="$(ldd "$file" 2>&1)" && [[ $report != *"not found"* ]] && continue
    mv "$file" "$prefix/unloadable/"
  done
  echo "Open MPI components without their libraries here (not loaded): $(find "$prefix/unloadable" -type f -printf '%f ')"
}

# missing_libraries <folder...>: for each program and library under the folders (a usr/share
# among them skipped) whose libraries the loader cannot all find, its path and ldd's
# "not found" lines; nothing when every one finds what it needs.
missing_libraries() {
  local file report
  while IFS= read -r -d '' file; do
    [[ $(od -An -c -N4 "$file" | tr -d ' ') == 177ELF ]] || continue
    report="$(ldd "$file" 2>&1)" || true
    [[ $report == *"not found"* ]] && printf '%s:\n%s\n' "$file" "$(grep 'not found' <<<"$report")"
  done < <(find "$@" -path '*/usr/share' -prune -o -type f \( -perm -u+x -o -name '*.so*' \) -print0)
  return 0
}
