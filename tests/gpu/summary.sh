# shellcheck shell=bash disable=SC2154  # the globals are verify.sh's
# OUT/summary.md of tests/gpu/verify.sh (sourced by it): per step passed / failed / skipped,
# its time and key figures, where to resume, and each step's details. Uses verify.sh's
# globals: steps, state, out, bundle, python, repo.

# write_summary: OUT/summary.md from the steps' status, figures and details files.
write_summary() {
  local file="$out/summary.md" name result seconds when resume="" not_run="" figures again
  again="--bundle $bundle --out $out"
  [[ $python == python3 ]] || again+=" --python $python"
  {
    echo "# scalebench GPU verification"
    echo
    local dirty=""
    [[ -n $(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null) ]] && dirty=" (dirty)"
    echo "$(uname -n), $(date -u +%Y-%m-%dT%H:%M:%SZ); commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')$dirty"
    echo "bundle $bundle ($(sha256sum "$bundle" 2>/dev/null | cut -c1-12 || echo missing)); python $python"
    echo
    echo "| step | result | time | key figures |"
    echo "|---|---|---|---|"
    for name in "${steps[@]}"; do
      if [[ ! -f $state/$name.status ]]; then
        echo "| $name | not run | | |"
        [[ -n $not_run ]] || not_run="$name"
        continue
      fi
      IFS=$'\t' read -r result seconds when <"$state/$name.status"
      [[ $state/$name.status -nt $state/run-started ]] || result="$result (earlier run, $when)"
      figures="$(awk 'NR > 1 { printf "; " } { gsub(/\|/, "\\|"); printf "%s", $0 }' "$state/$name.figures" 2>/dev/null || true)"
      [[ $result == "not run"* ]] && seconds="" || seconds="$seconds s"
      echo "| $name | $result | $seconds | $figures |"
      if [[ -z $resume && $result != passed* && $result != skipped* && $result != *"no GPU"* ]]; then
        resume="$name"
      fi
    done
    echo
    if [[ -n $resume ]]; then
      echo "Resume with: \`tests/gpu/verify.sh --from $resume $again\`"
    elif [[ -n $not_run ]]; then
      echo "Every step run passed; continue with: \`tests/gpu/verify.sh --from $not_run $again\`"
    else
      echo "Every step passed."
    fi
    echo
    echo "Logs: $out/logs/"
    for name in "${steps[@]}"; do
      [[ -s $state/$name.details ]] || continue
      echo
      echo "### $name"
      echo
      cat "$state/$name.details"
    done
  } >"$file"
  echo "summary: $file"
}
