# shellcheck shell=bash
# The kit of tests/gpu/device_check.sh, packed: shared by tests/gpu/prebuild.sh (the real one)
# and tests/gpu/test_kit.sh (one of this machine's build, to check device_check.sh without a
# GPU). Sourced; bash only.
here_kit="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/gpu/prefix.sh
source "$here_kit/prefix.sh"

# pack_kit <out dir> <torch version> <xz|none> <binary...>: OUT/kit.tar.xz (or kit.tar) holding
# kit/bin (the binaries, stripped) and kit/prefix (the bundle's runtime and dependency
# packages, unpacked; the bundle is made when missing), and OUT/kit.txt (torch version, commit).
pack_kit() {
  local out="$1" torch_version="$2" compress="$3" file stage bundle
  shift 3
  bundle="${XDG_CACHE_HOME:-$HOME/.cache}/scalebench-gpu-bundle/scalebench-gpu-bundle.tar"
  [[ -f $bundle ]] || "$here_kit/bundle.sh" "$(dirname "$bundle")"
  stage="$out/stage/kit"
  rm -rf "$out/stage" "$out/bundle" "$out"/kit.tar*
  mkdir -p "$stage/bin" "$out/bundle"
  for file in "$@"; do
    strip --strip-all -o "$stage/bin/$(basename "$file")" "$file"
  done
  tar -xf "$bundle" -C "$out/bundle" --strip-components=1
  local debs
  mapfile -t debs < <(awk -F'\t' '!/^#/ && ($4 == "runtime" || $4 == "dependency") { print "'"$out/bundle/"'" $6 }' "$out/bundle/MANIFEST.tsv")
  unpack_debs "$stage/prefix" "${debs[@]}"
  rm -rf "$stage/prefix/usr/share/doc" "$stage/prefix/usr/share/man" "$stage/prefix/usr/share/lintian"
  if [[ $compress == xz ]]; then
    tar -cJf "$out/kit.tar.xz" -C "$out/stage" kit
  else
    tar -cf "$out/kit.tar" -C "$out/stage" kit
  fi
  printf 'torch %s\ncommit %s\nmade %s\n' "$torch_version" \
    "$(git -C "$here_kit/../.." rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$(date -u +%FT%TZ)" >"$out/kit.txt"
  rm -rf "$out/stage" "$out/bundle"
}
