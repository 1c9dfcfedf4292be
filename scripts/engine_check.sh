#!/usr/bin/env bash
# Which container engine `make image` and `make bench` use here, and what is missing.
#
#   scripts/engine_check.sh --find             prints the engine to use: the first of docker,
#                                              podman, buildah on PATH (docker when none is)
#   scripts/engine_check.sh [-v] ENGINE        can `make bench` run in the image with the GPUs?
#   scripts/engine_check.sh --build [-v] ENGINE   can `make image` build it?
#
# ENGINE: docker, podman or buildah, or a path to one (its name says which). Exit 0 when nothing
# is missing (printing nothing, or with -v one line naming the engine); otherwise one line,
# "<engine> found; missing: <what>" or "<engine> not found (...)", and exit 1.
#   docker: its daemon, the NVIDIA container runtime (--gpus), an NVIDIA GPU;
#   podman: a working podman (rootless is fine), the NVIDIA CDI spec (--device nvidia.com/gpu=all,
#           `nvidia-ctk cdi generate`), an NVIDIA GPU;
#   buildah: builds only; running needs docker or podman.
set -uo pipefail

if [[ ${1:-} == --find ]]; then
    for engine in docker podman buildah; do
        if command -v "$engine" >/dev/null 2>&1; then
            echo "$engine"
            exit 0
        fi
    done
    echo docker
    exit 0
fi
mode=run
verbose=
while [[ ${1:-} == -* ]]; do
    case $1 in
        --build) mode=build ;;
        -v) verbose=1 ;;
        *) echo "engine_check: unknown option $1"; exit 2 ;;
    esac
    shift
done
engine=${1:-docker}
kind=$(basename "$engine")

missing() { echo "$kind found; missing: $*"; exit 1; }

if ! command -v "$engine" >/dev/null 2>&1; then
    echo "$kind not found ($engine is not on PATH; docker, podman or buildah: CONTAINER=...)"
    exit 1
fi
case $kind in
    docker)
        runtimes=$("$engine" info --format '{{json .Runtimes}}' 2>/dev/null) \
            || missing "its daemon ($engine info failed)"
        ;;
    podman)
        "$engine" info --format '{{.Host.OCIRuntime.Name}}' >/dev/null 2>&1 \
            || missing "a working podman ($engine info failed)"
        ;;
    buildah)
        [[ $mode == build ]] || missing "an engine that runs the image (docker or podman): buildah only builds"
        ;;
    *)
        echo "$kind: not a container engine fusebench knows (docker, podman or buildah)"
        exit 1
        ;;
esac
if [[ $mode == run ]]; then
    if [[ $kind == docker && $runtimes != *nvidia* ]] && ! command -v nvidia-container-runtime-hook >/dev/null 2>&1 \
            && ! command -v nvidia-ctk >/dev/null 2>&1; then
        missing "the NVIDIA container runtime (not among docker's runtimes; no nvidia-ctk)"
    fi
    if [[ $kind == podman ]] && ! { nvidia-ctk cdi list 2>/dev/null | grep '^nvidia.com/gpu=' >/dev/null \
            || grep -qs 'nvidia.com/gpu' /etc/cdi/*.yaml /etc/cdi/*.json /var/run/cdi/*.yaml /var/run/cdi/*.json; }; then
        missing "the NVIDIA CDI spec for --device nvidia.com/gpu=all (nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml)"
    fi
    if ! nvidia-smi -L 2>/dev/null | grep '^GPU ' >/dev/null; then
        missing "an NVIDIA GPU (nvidia-smi -L lists none)"
    fi
fi
[[ -z $verbose ]] || echo "$kind found; nothing missing to ${mode} the image"
exit 0
