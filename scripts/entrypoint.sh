#!/usr/bin/env bash
# The image's entry point, run in the mounted checkout (/workspace, or the current directory):
#
#   fusebench-entrypoint [bench options]     python3 -m fusebench bench [bench options]  (make bench)
#   fusebench-entrypoint COMMAND [ARGS...]   runs COMMAND there (make shell: bash; make in-image)
#
# Off the image it is the same path: `scripts/entrypoint.sh --quick` from a checkout runs
# `python3 -m fusebench bench --quick` with the python3 on PATH.
set -euo pipefail

root=${FUSEBENCH_ROOT:-$PWD}
if [[ ! -f "$root/fusebench/__main__.py" ]]; then
    echo "fusebench-entrypoint: $root is not a fusebench checkout (mount it: -v \"\$PWD\":/workspace)" >&2
    exit 2
fi
cd "$root"

if [[ $# -eq 0 || $1 == -* ]]; then
    exec python3 -m fusebench bench "$@"
fi
exec "$@"
