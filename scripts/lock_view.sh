#!/usr/bin/env bash
# What an image installs from requirements.lock, printed on stdout (the Dockerfile runs it at build
# time; make image-test runs it on the host to fetch the stand-in's wheels):
#
#   scripts/lock_view.sh cuda [LOCK]   the CUDA image: the `extra != "cuda"` lines (the CPU torch)
#                                      deleted, the `extra == "cuda"` markers dropped, as
#                                      `python scripts/lock.py cuda` does, line for line
#   scripts/lock_view.sh cpu  [LOCK]   the CPU stand-in: the `extra == "cuda"` blocks deleted, the
#                                      `extra != "cuda"` markers dropped, and triton's block deleted
#                                      (its backend needs a CUDA GPU and is skipped on the CPU;
#                                      its wheel is most of the image's size)
#
# LOCK defaults to requirements.lock. A block is a requirement line and the indented lines after it
# (its --hash lines and `# via` comments). Bad input: one line on stderr, exit 2.
set -euo pipefail

usage="usage: lock_view.sh cuda|cpu [LOCK]"
view=${1:-}
lock=${2:-requirements.lock}
if [[ $view != cuda && $view != cpu ]]; then
    echo "lock_view: $usage" >&2
    exit 2
fi
if [[ ! -r $lock ]]; then
    echo "lock_view: $lock: no such file" >&2
    exit 2
fi

if [[ $view == cuda ]]; then
    exec sed -e '/ ; extra != "cuda"/d' -e 's/ ; extra == "cuda"//' "$lock"
fi
exec awk '
    /^[^ \t#]/ {
        name = tolower($0); sub(/[=<>!~ ;].*/, "", name); gsub(/[-_.]+/, "-", name)
        keep = index($0, " ; extra == \"cuda\"") == 0 && name != "triton"
        sub(/ ; extra != "cuda"/, "")
    }
    /^#/ || /^$/ { print; next }
    keep { print }
' "$lock"
