#!/usr/bin/env bash
# The reference backends' wheels (requirements-reference.lock) for a GPU host with no network, in
# pieces small enough to travel there (README "On an offline GPU host").
#
#   scripts/offline_wheels.sh download [--python 3.12] [--dir .refwheels] [--budget-b 48]
#       (a machine with network) pip-downloads the group's wheels for CPython 3.12 (manylinux
#       x86_64), every hash checked against the lock, and lays them out in two folders:
#         <dir>/a/  only the first part of the one wheel over 40 MB (nvidia-cutlass-dsl-libs-cu13,
#                   92 MB), split with `split -b`;
#         <dir>/b/  the second part and every other wheel, at most --budget-b MB (1 MB = 1e6 B) in
#                   all, so that b and .device/ travel together in one call (64 MiB at most);
#       the first part is as large as it must be for b to fit (at least 46 MiB, at most 62 MiB).
#   scripts/offline_wheels.sh install DIR... [--target /tmp/site2]
#       (the GPU host) joins the parts found in the DIRs, installs every wheel with
#       `pip install --no-index --no-deps --require-hashes` into the target (the hashes are the
#       lock's), and prints the line to eval for this shell:
#         eval "$(scripts/offline_wheels.sh install /tmp/refa .refwheels/b)"
#   scripts/offline_wheels.sh env [--target /tmp/site2]
#       prints that line again (a later command on the same host).
#
# --target installs skip .pth files, so the CuTe DSL's own path (nvidia_cutlass_dsl/dsl_packages,
# `import cutlass`) goes on PYTHONPATH beside the target. Exit status 2 on bad input, one line.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOCK="$ROOT/requirements-reference.lock"
PYTHON_BIN=${PYTHON:-python3}
SPLIT_OVER=$((40 * 1000 * 1000))   # a wheel larger than this is split
PART_MIN=$((46 * 1024 * 1024))     # the first part: at least 46 MiB ...
PART_MAX=$((62 * 1024 * 1024))     # ... and at most 62 MiB (64 MiB per call, the checkout beside it)

die() { echo "offline_wheels: $*" >&2; exit 2; }

export_line() {
    local target=$1
    [ -d "$target" ] || die "$target does not exist: run '$0 install DIR...' first"
    echo "export PYTHONPATH=$target:$target/nvidia_cutlass_dsl/dsl_packages\${PYTHONPATH:+:\$PYTHONPATH}"
}

download() {
    local python=3.12 dir="$ROOT/.refwheels" budget=48
    while [ $# -gt 0 ]; do
        case $1 in
            --python) python=${2:?}; shift 2 ;;
            --dir) dir=${2:?}; shift 2 ;;
            --budget-b) budget=${2:?}; shift 2 ;;
            *) die "unknown option '$1' (download takes --python, --dir, --budget-b)" ;;
        esac
    done
    case $python in 3.11|3.12|3.13) ;; *) die "--python $python: the lock is for 3.11, 3.12, 3.13" ;; esac
    local tag="cp${python/./}"
    tmp=$(mktemp -d)  # global: the EXIT trap reads it
    trap 'rm -rf "$tmp"' EXIT
    # no pip configuration: PyPI only, like scripts/lock.py
    PIP_CONFIG_FILE=/dev/null "$PYTHON_BIN" -m pip download --quiet --no-deps --require-hashes \
        --only-binary=:all: --python-version "$python" --implementation cp --abi "$tag" --abi abi3 --abi none \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --dest "$tmp" -r "$LOCK" >&2
    local big=() others=0 f size
    for f in "$tmp"/*.whl; do
        size=$(stat -c %s "$f")
        if [ "$size" -gt "$SPLIT_OVER" ]; then big+=("$f"); else others=$((others + size)); fi
    done
    [ ${#big[@]} -eq 1 ] || die "expected one wheel over $((SPLIT_OVER / 1000000)) MB, found ${#big[@]}"
    local whl=${big[0]} name bigsize part
    name=$(basename "$whl")
    bigsize=$(stat -c %s "$whl")
    # the first part takes what b cannot: b = (big - part) + others <= budget
    part=$((bigsize + others - budget * 1000 * 1000))
    part=$(( (part + 1048575) / 1048576 * 1048576 ))
    [ "$part" -ge "$PART_MIN" ] || part=$PART_MIN
    [ "$part" -le "$PART_MAX" ] || die "b cannot fit in $budget MB: the first part would need $((part / 1048576)) MiB"
    rm -rf "$dir/a" "$dir/b"
    mkdir -p "$dir/a" "$dir/b"
    split -b "$part" -d -a 2 "$whl" "$tmp/$name.part-"
    [ ! -e "$tmp/$name.part-02" ] || die "$name split into more than two parts"
    mv "$tmp/$name.part-00" "$dir/a/"
    mv "$tmp/$name.part-01" "$dir/b/"
    rm "$whl"
    mv "$tmp"/*.whl "$dir/b/"
    du -b "$dir/a" "$dir/b" | awk '{printf "offline_wheels: %s %.1f MB\n", $2, $1 / 1e6}' >&2
    echo "offline_wheels: carry $dir/a in one call (copy it to /tmp there), then $dir/b with .device in the next" >&2
}

install() {
    local target=/tmp/site2 dirs=()
    while [ $# -gt 0 ]; do
        case $1 in
            --target) target=${2:?}; shift 2 ;;
            -*) die "unknown option '$1' (install takes DIR... and --target)" ;;
            *) [ -d "$1" ] || die "$1: no such folder"; dirs+=("$1"); shift ;;
        esac
    done
    [ ${#dirs[@]} -gt 0 ] || die "install needs the folders holding the wheels and parts (e.g. /tmp/refa .refwheels/b)"
    local joined stem
    joined=$(mktemp -d)
    cp "${dirs[@]/%//}"*.whl "$joined/" 2>/dev/null || true
    # each split wheel: its parts, from every folder, in order
    for stem in $(find "${dirs[@]}" -maxdepth 1 -name '*.whl.part-*' -printf '%f\n' | sed 's/\.part-[0-9]*$//' | sort -u); do
        find "${dirs[@]}" -maxdepth 1 -name "$stem.part-*" -printf '%f %p\n' | sort | cut -d' ' -f2- \
            | xargs cat > "$joined/$stem"
    done
    [ -n "$(ls "$joined")" ] || die "no wheels in ${dirs[*]}"
    # the lock's hashes check every wheel, the joined one included
    "$PYTHON_BIN" -m pip install --quiet --no-index --no-deps --require-hashes --find-links "$joined" \
        --target "$target" --upgrade -r "$LOCK" >&2
    rm -rf "$joined"
    echo "offline_wheels: installed into $target" >&2
    # QuACK's CuTe DSL needs cuda-bindings (requirements.lock's CUDA build; torch's CUDA wheels bring it)
    "$PYTHON_BIN" -c "import cuda.bindings" 2>/dev/null \
        || echo "offline_wheels: warning: no cuda-bindings here: quack will be skipped (import cutlass fails)" >&2
    export_line "$target"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
    download) download "$@" ;;
    install) install "$@" ;;
    env) if [ "${1:-}" = --target ]; then export_line "${2:?}"; else export_line /tmp/site2; fi ;;
    -h|--help|help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' ;;
    *) die "usage: $0 download|install|env (see $0 --help)" ;;
esac
