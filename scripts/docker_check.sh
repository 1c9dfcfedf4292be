#!/usr/bin/env bash
# Can `make bench` run in the image here? Exit 0, printing nothing, when the docker client, its
# daemon, the NVIDIA container runtime and a GPU are all there; otherwise print the one-line
# reason (the first thing missing) and exit 1.
#
#   scripts/docker_check.sh [DOCKER]      DOCKER: the docker command (default: docker)
set -uo pipefail

docker=${1:-docker}
if ! command -v "$docker" >/dev/null 2>&1; then
    echo "docker not found ($docker is not on PATH)"
    exit 1
fi
if ! runtimes=$("$docker" info --format '{{json .Runtimes}}' 2>/dev/null); then
    echo "docker daemon not reachable ($docker info failed)"
    exit 1
fi
if [[ $runtimes != *nvidia* ]] && ! command -v nvidia-container-runtime-hook >/dev/null 2>&1 \
        && ! command -v nvidia-ctk >/dev/null 2>&1; then
    echo "NVIDIA container runtime missing (not among docker's runtimes; no nvidia-ctk)"
    exit 1
fi
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "no NVIDIA GPU (nvidia-smi -L lists none)"
    exit 1
fi
exit 0
