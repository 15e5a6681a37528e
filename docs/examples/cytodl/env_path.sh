# shellcheck shell=bash
# Sourced by setup.sh, tests/run_all.sh and run_example.sh: where CytoDL's environment lives
# unless SCALEBENCH_CYTODL_VENV says otherwise. In the user's cache, beside the compiler cache:
# nothing in it belongs to a clone (setup_env.sh remakes its links to torch on every call),
# so a fresh clone (CI) finds it ready when its stamp matches.
cytodl_venv="${SCALEBENCH_CYTODL_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/scalebench-cytodl-venv}"
