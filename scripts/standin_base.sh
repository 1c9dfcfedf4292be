#!/usr/bin/env bash
# The CPU stand-in for the CUDA base (make image-test): Debian 12 (bookworm) made from Debian's
# packages with debootstrap, with the Dockerfile's SYSTEM_PACKAGES installed, packed as a root
# file system tarball. Cached: built only when this script, the package list or the mirror
# changed; older tarballs are removed.
#
#   scripts/standin_base.sh CACHE_DIR    prints the tarball's path, then (second line) its python3
#                                        version (X.Y)
#
# Needs root and debootstrap (apt-get install debootstrap). Takes about 1-2 minutes and ~550 MB
# unpacked when not cached. Errors: one line on stderr, exit 2 (bad use) or 1 (the build failed).
set -euo pipefail

suite=bookworm
mirror=${FUSEBENCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:-}
if [[ -z $cache ]]; then
    echo "standin_base: usage: standin_base.sh CACHE_DIR" >&2
    exit 2
fi
if [[ $(id -u) != 0 ]]; then
    echo "standin_base: debootstrap needs root (run make image-test as root)" >&2
    exit 2
fi
if ! command -v debootstrap >/dev/null 2>&1; then
    echo "standin_base: debootstrap not found (apt-get install debootstrap)" >&2
    exit 2
fi

# The package list is the Dockerfile's, so the stand-in has what the CUDA base's apt line installs.
packages=$(sed -n 's/^ARG SYSTEM_PACKAGES="\(.*\)"$/\1/p' "$here/../Dockerfile")
if [[ -z $packages ]]; then
    echo "standin_base: no ARG SYSTEM_PACKAGES=\"...\" line in the Dockerfile" >&2
    exit 2
fi
key=$( { cat "$0"; echo "$suite $mirror $packages"; } | sha256sum | cut -c1-16)
tarball=$cache/standin-$key.tar
if [[ -s $tarball && -s $tarball.python ]]; then
    echo "$tarball"
    cat "$tarball.python"
    exit 0
fi

mkdir -p "$cache"
rm -f "$cache"/standin-*.tar "$cache"/standin-*.tar.python
work=$(mktemp -d "$cache/standin-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
if ! debootstrap --variant=minbase --include="${packages// /,}" "$suite" "$work/rootfs" "$mirror" \
        > "$work/debootstrap.log" 2>&1; then
    echo "standin_base: debootstrap $suite failed; the end of its log:" >&2
    tail -n 5 "$work/debootstrap.log" >&2
    exit 1
fi
rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/*
python=$(chroot "$work/rootfs" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
tar --numeric-owner -C "$work/rootfs" -cf "$work/rootfs.tar" .
mv "$work/rootfs.tar" "$tarball"
echo "$python" > "$tarball.python"
echo "$tarball"
echo "$python"
