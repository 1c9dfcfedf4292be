# fusebench's benchmark image: one Dockerfile, two bases, every version pinned.
#
#   make image        # builds it (docker, podman or buildah: CONTAINER=...), tagged fusebench:<git sha>
#   make bench        # builds it (cached) and runs the suite inside, GPUs and results mounted
#   make image-test   # builds this same file on the CPU stand-in base and runs it (CI)
#
# The CUDA image (the default): nvidia/cuda:13.0.1-devel-ubuntu24.04 pinned by its manifest-list
# digest. The digest is the one published for that tag in public repositories' Dockerfiles and
# runbooks (found with a code search; docker hub cannot be reached from where this file was
# written): confirm it with
#   docker buildx imagetools inspect nvidia/cuda:13.0.1-devel-ubuntu24.04
# and override both with --build-arg BASE_IMAGE=... --build-arg BASE_DIGEST=sha256:...
#
# The CPU stand-in (scripts/image_test.py): Debian 12 from Debian's packages (debootstrap, with the
# SYSTEM_PACKAGES below; scripts/standin_base.sh), imported as a local image and built with
#   --build-arg BASE_IMAGE=localhost/fusebench-standin --build-arg BASE_DIGEST=sha256:<its digest>
#   --build-arg FLAVOUR=cpu --volume <wheelhouse>:/tmp/wheels:ro
# Everything after FROM is shared. The lines that differ are these five, each marked `differs (n)`:
#   1. FROM: the CUDA base and its digest | the stand-in and its digest (BASE_IMAGE, BASE_DIGEST);
#   2. Nsight Systems from NVIDIA's CUDA apt repository | skipped (FLAVOUR=cpu);
#   3. the lock's CUDA view from PyPI (scripts/lock_view.sh cuda: CUDA torch and what it needs) |
#      its CPU view (lock_view.sh cpu: the CPU torch, no triton) from the mounted wheelhouse, no index;
#   4. the reference backends' libraries (requirements-reference.lock) installed | skipped;
#   5. the `cuda` backend's extension built and `nsys --version` checked | skipped (no nvcc, no GPU).
# Python is the base's own python3 (3.12 on Ubuntu 24.04, 3.11 on Debian 12; the lock has wheels for
# both): no version is written here.
ARG BASE_IMAGE=nvidia/cuda:13.0.1-devel-ubuntu24.04
ARG BASE_DIGEST=sha256:7d2f6a8c2071d911524f95061a0db363e24d27aa51ec831fcccf9e76eb72bc92
# differs (1)
FROM ${BASE_IMAGE}@${BASE_DIGEST}

ARG BASE_IMAGE
ARG BASE_DIGEST
# cuda (the GPU image) or cpu (the stand-in): selects the lines 2-4 above.
ARG FLAVOUR=cuda
# sha256 of requirements.lock; the Makefile passes it and the build checks it.
ARG LOCK_HASH=
# Distribution packages, the same names on Ubuntu 24.04 and Debian 12 (the stand-in's debootstrap
# reads this line): python3 with venv and headers (the extension build, Inductor's C++ kernels on
# the CPU), git (asv stores results per commit), make (the user's commands inside), g++ and ninja
# (torch's extension builder).
ARG SYSTEM_PACKAGES="python3 python3-venv python3-dev g++ git make ninja-build ca-certificates"
# Nsight Systems from NVIDIA's CUDA apt repository (configured in the CUDA base; its ubuntu2404
# x86_64 pool has nsight-systems-2025.3.2_2025.3.2.474-1_amd64.deb); 2025.3 or newer: older
# versions silently drop the ranges of the `nvtx` package.
ARG NSYS_VERSION=2025.3.2
ARG NSYS_PACKAGE_VERSION=2025.3.2.474-1
# The extension's own -gencode flags (kernels/cuda_ext.py: sm_80, sm_90, compute_90 PTX) take
# precedence; this says the same for anything else torch builds here.
ARG TORCH_CUDA_ARCH_LIST="8.0;9.0+PTX"
ARG USER_ID=10001

LABEL org.opencontainers.image.title="fusebench" \
      org.opencontainers.image.description="fusebench: fused GPU kernels (GELU, softmax) benchmarked with asv" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      org.opencontainers.image.base.digest="${BASE_DIGEST}" \
      dev.fusebench.flavour="${FLAVOUR}" \
      dev.fusebench.lock-hash="${LOCK_HASH}" \
      dev.fusebench.nsys-version="${NSYS_VERSION}"

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# The distribution's packages are not version-pinned: its archive drops superseded builds, so exact
# pins stop building; the base digest fixes the distribution they come from, and none of them is
# measured. Nsight Systems is pinned exactly.
# differs (2): Nsight Systems, for the cuda flavour only
# hadolint ignore=DL3008
RUN read -ra packages <<< "${SYSTEM_PACKAGES}" \
 && if [ "${FLAVOUR}" = cuda ]; then packages+=("nsight-systems-${NSYS_VERSION}=${NSYS_PACKAGE_VERSION}"); fi \
 && apt-get update \
 && apt-get install -y --no-install-recommends "${packages[@]}" \
 && rm -rf /var/lib/apt/lists/* \
 && git config --system --add safe.directory '*'
# (safe.directory: the repository is bind-mounted and owned by the calling user's uid, which git
# refuses without it.)

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/opt/nvidia/nsight-systems/${NSYS_VERSION}/bin:${PATH} \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST}

# Every Python dependency from the hash-pinned lock, copied before the sources so this layer is
# cached until the lock changes. The build first checks the lock against LOCK_HASH (the label and
# the recorded hash are then the lock installed), then installs the flavour's view of it
# (scripts/lock_view.sh) with every hash checked, and checks torch's build.
COPY requirements.lock scripts/lock_view.sh /tmp/lock/
# differs (3): the lock's view and where its wheels come from
RUN test -n "${LOCK_HASH}" || { echo "LOCK_HASH is required: make image passes it" >&2; exit 1; } \
 && echo "${LOCK_HASH}  /tmp/lock/requirements.lock" | sha256sum --check --quiet \
 && python3 -m venv /opt/venv \
 && /tmp/lock/lock_view.sh "${FLAVOUR}" /tmp/lock/requirements.lock > /tmp/lock/view.txt \
 && case "${FLAVOUR}" in \
        cuda) pip install --require-hashes -r /tmp/lock/view.txt ;; \
        cpu) pip install --require-hashes --no-index --find-links /tmp/wheels -r /tmp/lock/view.txt ;; \
        *) echo "FLAVOUR must be cuda or cpu, not '${FLAVOUR}'" >&2; exit 1 ;; \
    esac \
 && pip check \
 && python -c "import sys, torch; c = torch.version.cuda; assert (c or '').startswith('13') if sys.argv[1] == 'cuda' else c is None, (torch.__version__, c)" "${FLAVOUR}" \
 && rm -rf /tmp/lock

# The reference backends' libraries (Liger-Kernel, QuACK, FlagGems: kernels/reference_libs.py), the
# optional group requirements-reference.lock, installed over the lock with --no-deps so that none of
# them brings another torch or triton (that file pins each runtime dependency on a line of its own),
# every hash checked. No `pip check` after it: the packages' metadata names what --no-deps leaves out
# on purpose (nvidia-cutlass-dsl's libs-cu12, replaced by libs-cu13 for CUDA 13; flag-gems' exact pins
# of numpy, packaging and pyyaml, taken from requirements.lock). The CPU stand-in skips it: these
# backends need a GPU, and `make image-test` (CI) stays fast without ~110 MB more wheels.
COPY requirements-reference.lock /tmp/reflock/
# differs (4)
RUN if [ "${FLAVOUR}" = cuda ]; then pip install --no-deps --require-hashes -r /tmp/reflock/requirements-reference.lock; fi \
 && rm -rf /tmp/reflock

# The `cuda` backend's extension, built now (no GPU needed: `python -m fusebench.kernels.cuda_ext`) into
# <FUSEBENCH_EXT_DIR>/<key>, the key a hash of its sources, flags and toolchain (docs/cuda-extension.md):
# `make bench` in the image computes the same key from the mounted checkout of the same sources and
# imports this build, compiling nothing; changed sources get a folder of their own beside it (lost
# with the container). World-writable: the container runs as the calling user's uid, and torch
# takes a lock file in a folder it builds.
ENV FUSEBENCH_EXT_DIR=/opt/fusebench/cuda_ext
WORKDIR /workspace
COPY fusebench/ /workspace/fusebench/
COPY kernels/ /workspace/kernels/
# differs (5)
RUN if [ "${FLAVOUR}" = cuda ]; then python -m fusebench.kernels.cuda_ext && nsys --version; fi \
 && mkdir -p /opt/fusebench/cuda_ext \
 && chmod -R a+rwX /opt/fusebench/cuda_ext

# Caches that must outlive a container (Triton and Inductor compile caches) live on a volume at
# /cache; HOME is writable by any uid (for the tools that keep files under ~). FUSEBENCH_IN_IMAGE
# makes the Makefile run everything locally inside (no engine in the engine). FUSEBENCH_IMAGE_DIGEST,
# the image's own id, is only known after the build: `make bench` passes it to the engine's run.
ENV TRITON_CACHE_DIR=/cache/triton \
    TORCHINDUCTOR_CACHE_DIR=/cache/inductor \
    HOME=/home/fusebench \
    FUSEBENCH_IN_IMAGE=1 \
    FUSEBENCH_LOCK_HASH=${LOCK_HASH} \
    FUSEBENCH_BASE_DIGEST=${BASE_DIGEST}
RUN useradd --uid "${USER_ID}" --no-create-home --home-dir /home/fusebench --shell /bin/bash fusebench \
 && mkdir -p /cache/triton /cache/inductor /home/fusebench \
 && chmod 1777 /cache /cache/triton /cache/inductor /home/fusebench
VOLUME ["/cache"]

# The entry point runs in the mounted checkout: `python3 -m fusebench bench "$@"`, or a command.
COPY scripts/entrypoint.sh /usr/local/bin/fusebench-entrypoint
USER ${USER_ID}
ENTRYPOINT ["/usr/local/bin/fusebench-entrypoint"]
