# Reads `apt-cache depends --important PKG...` and prints, for each dependency group of each
# package that is not yet satisfied, the package to fetch and the package that needs it:
#   <package>\t<needed by>
# A group is satisfied when one of its alternatives (or a provider of a virtual alternative)
# is named in SKIP_FILE (assumed present on the node, known not to be needed, or already
# chosen). Otherwise its first concrete alternative is taken, or the first provider of its first
# virtual one, which is what apt itself would install. Used by tests/gpu/bundle.sh.
#
# Usage: awk -v skip_file=FILE -f pick_dependencies.awk
BEGIN {
  while ((getline line < skip_file) > 0) skip[line] = 1
  close(skip_file)
}

# The alternatives of the current group: alt[1..n]; providers[i] holds the providers of a
# virtual alternative, separated by blanks.
function flush_group(   i, p, count, names, choice) {
  if (n == 0) return
  choice = ""
  for (i = 1; i <= n; i++) {
    if (alt[i] in skip) { n = 0; return }
    count = split(providers[i], names, " ")
    for (p = 1; p <= count; p++) if (names[p] in skip) { n = 0; return }
  }
  for (i = 1; i <= n && choice == ""; i++) {
    if (alt[i] !~ /^</) { choice = alt[i]; break }
    count = split(providers[i], names, " ")
    if (count > 0) choice = names[1]
  }
  if (choice != "") print choice "\t" parent
  else print "bundle.sh: nothing provides " alt[1] " (needed by " parent "): check it by hand" > "/dev/stderr"
  n = 0
}

function strip_arch(name) {
  sub(/:(any|amd64|arm64|all|native)$/, "", name)
  return name
}

# "package" at column 0 starts its block.
/^[^ ]/ { flush_group(); parent = $1; group_open = 0; next }

# "  Depends: x" ends its group; " |Depends: x" is followed by another alternative.
/^ [ |](Pre)?Depends: / {
  if (!group_open) flush_group()
  n++
  alt[n] = strip_arch($2)
  providers[n] = ""
  group_open = (substr($0, 2, 1) == "|")
  next
}

# "    provider" under a virtual alternative.
/^    [^ ]/ { if (n > 0) providers[n] = providers[n] " " strip_arch($1); next }

END { flush_group() }
