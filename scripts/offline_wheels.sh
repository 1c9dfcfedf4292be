#!/usr/bin/env bash
# The reference backends' wheels (requirements-reference.lock) for a GPU host with no network, in
# folders small enough to travel there (docs/reference-backends.md, "On an offline GPU host").
#
#   scripts/offline_wheels.sh download [--python 3.12] [--dir .refwheels] [--headroom 1] [--beside-last MiB]
#       (a machine with network) pip-downloads the group's wheels for CPython 3.12 (manylinux
#       x86_64), every hash checked against the lock, and lays them out in folders <dir>/a, b, c...
#       Each folder travels in one call (`run`'s carry) with the checkout (tracked files and
#       untracked files git does not ignore, measured now), at most 64 MiB per call in all:
#         every folder but the last: one part of the largest wheel (nvidia-cutlass-dsl-libs-cu13,
#                   92 MB) alone, as large as the call allows, split with `split -b`;
#         the last: what remains of that wheel (if anything) and every other wheel, small enough
#                   to travel beside .device/ too (its measured size; 16 MiB where it is absent;
#                   --beside-last MiB says it).
#       --headroom MiB (default 1) is kept free in every call, for the checkout's later growth.
#       One line per folder says its size and how to carry it.
#   scripts/offline_wheels.sh relayout DIR... [--dir .refwheels] [--headroom 1] [--beside-last MiB]
#       the same layout from wheels and parts already here (e.g. an older layout's folders):
#       joins the parts, checks every wheel's sha256 against the lock, then replaces <dir>'s
#       folders a, b, c...; nothing is removed where a check fails.
#   scripts/offline_wheels.sh install DIR... [--target /tmp/site2]
#       (the GPU host) joins the parts found in the DIRs, installs every wheel with
#       `pip install --no-index --no-deps --require-hashes` into the target (the hashes are the
#       lock's), and prints the line to eval for this shell:
#         eval "$(scripts/offline_wheels.sh install /tmp/refa .refwheels/c)"
#   scripts/offline_wheels.sh join DIR... --into OUT
#       only the joining: every wheel and every joined wheel of the DIRs into the folder OUT.
#   scripts/offline_wheels.sh env [--target /tmp/site2]
#       prints that line again (a later command on the same host).
#
# Parts are named <wheel>.part-NN; they are joined in the order of their number (not of their
# name, folder or the locale), and a missing or repeated number is refused. --target installs skip
# .pth files, so the CuTe DSL's own path (nvidia_cutlass_dsl/dsl_packages, `import cutlass`) goes
# on PYTHONPATH beside the target. OFFLINE_WHEELS_CALL_BYTES (default 67108864, 64 MiB) is the
# limit per call (tests set a small one). Exit status 2 on bad input, one line.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOCK="$ROOT/requirements-reference.lock"
PYTHON_BIN=${PYTHON:-python3}
CALL=${OFFLINE_WHEELS_CALL_BYTES:-$((64 * 1024 * 1024))}   # what one call carries, checkout included
DEVICE_DEFAULT=$((16 * 1024 * 1024))                       # .device/ where it is not here to measure
MIB=1048576

die() { echo "offline_wheels: $*" >&2; exit 2; }

# bytes of a size in MiB (decimals allowed); dies naming the option on anything else
mib_bytes() {
    awk -v m="$2" 'BEGIN { if (m !~ /^[0-9]+(\.[0-9]+)?$/) exit 1; printf "%d\n", m * 1048576 }' \
        || die "$1 $2: a size in MiB (e.g. 1 or 0.5)"
}

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

size_of() { stat -c %s "$1"; }

# the sum of the numbers on stdin, one a line
total() { awk '{ s += $1 } END { printf "%d\n", s }'; }

# bytes of the files under a folder
tree_bytes() { find "$1" -type f -printf '%s\n' | total; }

# bytes of what travels beside a carried folder: tracked files and untracked files git does not ignore
checkout_bytes() {
    git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1 \
        || die "$ROOT is not a git checkout: cannot measure what travels beside the wheels"
    # a tracked file deleted from the tree has no size: stat's complaint is dropped
    (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard \
        | { xargs -0 -r stat -c %s -- 2>/dev/null || true; }) | total
}

# the path as the user will type it from the repository's root
shown() { case $1 in "$ROOT"/*) echo "${1#"$ROOT"/}" ;; *) echo "$1" ;; esac; }

export_line() {
    local target=$1
    [ -d "$target" ] || die "$target does not exist: run '$0 install DIR...' first"
    echo "export PYTHONPATH=$target:$target/nvidia_cutlass_dsl/dsl_packages\${PYTHONPATH:+:\$PYTHONPATH}"
}

# join_parts OUT DIR...: copies every *.whl of the DIRs into OUT and joins every <wheel>.part-NN
# set, wherever each part sits among the DIRs, in the order of NN; refuses a missing or repeated NN.
join_parts() {
    local out=$1; shift
    local -A part=() last=()
    local f base stem num n i
    find "$@" -maxdepth 1 -type f -name '*.whl' -exec cp -t "$out" {} +
    while IFS= read -r -d '' f; do
        base=${f##*/}; stem=${base%.part-*}; num=${base##*.part-}
        [[ $num =~ ^[0-9]+$ ]] || die "$f: the part number '$num' is not a number"
        n=$((10#$num))
        [ -z "${part[$stem/$n]:-}" ] || die "$stem: part $n twice (${part[$stem/$n]} and $f)"
        part[$stem/$n]=$f
        [ "${last[$stem]:--1}" -ge "$n" ] || last[$stem]=$n
    done < <(find "$@" -maxdepth 1 -type f -name '*.whl.part-*' -print0)
    for stem in "${!last[@]}"; do
        for ((i = 0; i <= last[$stem]; i++)); do
            [ -n "${part[$stem/$i]:-}" ] || die "$stem: part $i missing (parts 0 to ${last[$stem]} expected in $*)"
        done
    done
    for stem in "${!last[@]}"; do
        for ((i = 0; i <= last[$stem]; i++)); do cat "${part[$stem/$i]}"; done > "$out/$stem"
    done
}

# layout SRC DIR HEADROOM BESIDE: lays the whole wheels of SRC out in DIR/a, b, c... (see the top)
layout() {
    local src=$1 dir=$2 headroom=$3 beside=$4
    local wheels=() f big="" bigsize=0 others=0 n_others=0 size h
    for f in "$src"/*.whl; do
        [ -e "$f" ] || die "no wheels to lay out"
        h=$(sha256sum "$f" | cut -d' ' -f1)
        grep -q "sha256:$h" "$LOCK" || die "${f##*/}: its sha256 is not in $(shown "$LOCK")"
        wheels+=("$f")
    done
    for f in "${wheels[@]}"; do
        size=$(size_of "$f")
        if [ "$size" -gt "$bigsize" ]; then
            [ -z "$big" ] || { others=$((others + bigsize)); n_others=$((n_others + 1)); }
            big=$f; bigsize=$size
        else
            others=$((others + size)); n_others=$((n_others + 1))
        fi
    done
    local checkout room lastroom
    checkout=$(checkout_bytes)
    room=$((CALL - checkout - headroom))   # one folder's bytes in a call
    lastroom=$((room - beside - others))   # the part the last folder can take beside the rest
    [ "$lastroom" -ge 0 ] || die "the other wheels ($(mib "$others") MiB) and .device ($(mib "$beside") MiB)" \
        "do not fit beside the checkout ($(mib "$checkout") MiB) and --headroom in $(mib "$CALL") MiB"
    local early=0
    if [ "$bigsize" -gt "$lastroom" ]; then
        [ "$room" -gt 0 ] || die "nothing fits beside the checkout ($(mib "$checkout") MiB) in $(mib "$CALL") MiB"
        early=$(( (bigsize - lastroom + room - 1) / room ))   # folders holding a part alone
    fi
    [ "$early" -lt 26 ] || die "${big##*/} would need $((early + 1)) folders"
    # staged beside the folders it replaces (same file system: the replacing is renames only)
    local letters=({a..z}) name=${big##*/} i parts=()
    mkdir -p "$dir"
    stage=$(mktemp -d "$dir/.layout.XXXXXX")
    for ((i = 0; i <= early; i++)); do mkdir "$stage/${letters[i]}"; done
    local last="$stage/${letters[early]}"
    if [ "$early" -gt 0 ]; then
        split -b "$room" -d -a 2 "$big" "$stage/$name.part-"
        parts=("$stage/$name.part-"*)
        for ((i = 0; i < ${#parts[@]}; i++)); do
            if [ "$i" -lt "$early" ]; then mv "${parts[i]}" "$stage/${letters[i]}/"; else mv "${parts[i]}" "$last/"; fi
        done
        rm "$big"
    fi
    mv "$src"/*.whl "$last/"
    # every wheel is in place: only now are the old folders replaced
    for f in "$dir"/[a-z]; do [ ! -d "$f" ] || rm -rf "$f"; done
    for ((i = 0; i <= early; i++)); do mv "$stage/${letters[i]}" "$dir/"; done
    rmdir "$stage"
    local d what total carry there
    for ((i = 0; i <= early; i++)); do
        d="$dir/${letters[i]}"
        size=$(tree_bytes "$d")
        if [ "$i" -lt "$early" ]; then
            what="part $(printf %02d "$i") alone"
            total=$((checkout + size))
            carry="carry $(shown "$d") (+ checkout $(mib "$checkout") MiB = $(mib "$total") of $(mib "$CALL") MiB)"
            there="there: mkdir -p /tmp/refa && cp $(shown "$d")/* /tmp/refa/"
        else
            if [ "$early" -eq 0 ]; then what="$((n_others + 1)) wheels"
            elif [ -e "$d/$name.part-$(printf %02d "$early")" ]; then what="part $(printf %02d "$early") and $n_others wheels"
            else what="$n_others wheels"; fi
            total=$((checkout + beside + size))
            carry="carry $(shown "$d") and .device (+ checkout $(mib "$checkout") + .device $(mib "$beside") MiB = $(mib "$total") of $(mib "$CALL") MiB)"
            there="there: eval \"\$(scripts/offline_wheels.sh install $([ "$early" -eq 0 ] || echo "/tmp/refa ")$(shown "$d"))\""
        fi
        echo "offline_wheels: $(shown "$d") $(mib "$size") MiB, $what; $carry; $there" >&2
    done
}

# the options download and relayout share: sets dir, headroom, beside; the rest goes to rest[]
layout_options() {
    dir="$ROOT/.refwheels" headroom=$MIB beside="" rest=()
    while [ $# -gt 0 ]; do
        case $1 in
            --dir) dir=${2:?}; shift 2 ;;
            --headroom) headroom=$(mib_bytes "$1" "${2:?}"); shift 2 ;;
            --beside-last) beside=$(mib_bytes "$1" "${2:?}"); shift 2 ;;
            --budget-b) die "--budget-b is gone: the folders' sizes follow from the checkout and .device (--beside-last, --headroom)" ;;
            *) rest+=("$1"); shift ;;
        esac
    done
    case $dir in /*) ;; *) dir="$PWD/$dir" ;; esac
    if [ -z "$beside" ]; then
        if [ -d "$ROOT/.device" ]; then
            beside=$(tree_bytes "$ROOT/.device")
        else
            beside=$DEVICE_DEFAULT
        fi
    fi
    # a folder git does not ignore would travel with the checkout in every call
    case $dir/ in
        "$ROOT"/*) git -C "$ROOT" check-ignore -q "$dir/a" \
            || die "--dir $(shown "$dir"): git does not ignore it, so it would travel in every call" ;;
    esac
}

work="" stage=""
cleanup() { rm -rf ${work:+"$work"} ${stage:+"$stage"}; }
trap cleanup EXIT

download() {
    local python=3.12 dir headroom beside rest
    layout_options "$@"
    set -- ${rest[@]+"${rest[@]}"}
    while [ $# -gt 0 ]; do
        case $1 in
            --python) python=${2:?}; shift 2 ;;
            *) die "unknown option '$1' (download takes --python, --dir, --headroom, --beside-last)" ;;
        esac
    done
    case $python in 3.11|3.12|3.13) ;; *) die "--python $python: the lock is for 3.11, 3.12, 3.13" ;; esac
    local tag="cp${python/./}"
    work=$(mktemp -d)
    # no pip configuration: PyPI only, like scripts/lock.py
    PIP_CONFIG_FILE=/dev/null "$PYTHON_BIN" -m pip download --quiet --no-deps --require-hashes \
        --only-binary=:all: --python-version "$python" --implementation cp --abi "$tag" --abi abi3 --abi none \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --dest "$work" -r "$LOCK" >&2
    layout "$work" "$dir" "$headroom" "$beside"
}

relayout() {
    local dir headroom beside rest dirs=() d
    layout_options "$@"
    for d in ${rest[@]+"${rest[@]}"}; do
        case $d in -*) die "unknown option '$d' (relayout takes DIR..., --dir, --headroom, --beside-last)" ;; esac
        [ -d "$d" ] || die "$d: no such folder"
        dirs+=("$d")
    done
    [ ${#dirs[@]} -gt 0 ] || die "relayout needs the folders holding the wheels and parts (e.g. .refwheels/a .refwheels/b)"
    work=$(mktemp -d)
    join_parts "$work" "${dirs[@]}"
    layout "$work" "$dir" "$headroom" "$beside"
}

# DIR... [--OPTION VALUE]: sets dirs[] and the one option's value
dirs_and() {
    local option=$1 usage=$2; shift 2
    dirs=()
    while [ $# -gt 0 ]; do
        case $1 in
            "$option") value=${2:?}; shift 2 ;;
            -*) die "unknown option '$1' ($usage)" ;;
            *) [ -d "$1" ] || die "$1: no such folder"; dirs+=("$1"); shift ;;
        esac
    done
    [ ${#dirs[@]} -gt 0 ] || die "no folders given ($usage)"
}

join() {
    local dirs value=""
    dirs_and --into "join takes DIR... --into OUT" "$@"
    [ -n "$value" ] || die "join needs --into OUT"
    mkdir -p "$value"
    join_parts "$value" "${dirs[@]}"
}

install() {
    local dirs value=/tmp/site2 target
    dirs_and --target "install takes DIR... and --target, e.g. /tmp/refa .refwheels/c" "$@"
    target=$value
    work=$(mktemp -d)
    join_parts "$work" "${dirs[@]}"
    [ -n "$(ls "$work")" ] || die "no wheels in ${dirs[*]}"
    # the lock's hashes check every wheel, the joined ones included
    "$PYTHON_BIN" -m pip install --quiet --no-index --no-deps --require-hashes --find-links "$work" \
        --target "$target" --upgrade -r "$LOCK" >&2
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
    relayout) relayout "$@" ;;
    install) install "$@" ;;
    join) join "$@" ;;
    env) if [ "${1:-}" = --target ]; then export_line "${2:?}"; else export_line /tmp/site2; fi ;;
    -h|--help|help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' ;;
    *) die "usage: $0 download|relayout|install|join|env (see $0 --help)" ;;
esac
