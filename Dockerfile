# fusebench's benchmark image: one stage on an exact CUDA 13 devel base, every version pinned.
#
#   make image        # docker build with LOCK_HASH, tagged fusebench:<git short sha>
#   make bench        # builds it (cached) and runs the suite inside, GPUs and results mounted
#
# Base: nvidia/cuda:13.0.1-devel-ubuntu24.04 pinned by its manifest-list digest. The digest is the
# one published for that tag in public repositories' Dockerfiles and runbooks (found with a code
# search; docker hub cannot be reached from where this file was written): confirm it with
#   docker buildx imagetools inspect nvidia/cuda:13.0.1-devel-ubuntu24.04
# and override both with --build-arg BASE_IMAGE=... --build-arg BASE_DIGEST=sha256:...
ARG BASE_IMAGE=nvidia/cuda:13.0.1-devel-ubuntu24.04
ARG BASE_DIGEST=sha256:7d2f6a8c2071d911524f95061a0db363e24d27aa51ec831fcccf9e76eb72bc92
FROM ${BASE_IMAGE}@${BASE_DIGEST}

ARG BASE_IMAGE
ARG BASE_DIGEST
# sha256 of requirements.lock; the Makefile passes it and the build checks it.
ARG LOCK_HASH=
# Nsight Systems from NVIDIA's CUDA apt repository (configured in the base image; its ubuntu2404
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
      dev.fusebench.lock-hash="${LOCK_HASH}" \
      dev.fusebench.nsys-version="${NSYS_VERSION}"

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# System tools: Python 3.12 (venv, headers for the extension build), git (asv stores results per
# commit), make (the user's commands inside), g++ and ninja (torch's extension builder), Nsight
# Systems at an exact version. Ubuntu's own packages are not version-pinned: its archive drops
# superseded builds, so exact pins stop building; the base digest fixes the distribution they
# come from, and none of them is measured.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        python3.12 python3.12-venv python3.12-dev g++ git make ninja-build ca-certificates \
        "nsight-systems-${NSYS_VERSION}=${NSYS_PACKAGE_VERSION}" \
 && rm -rf /var/lib/apt/lists/*

# The repository is bind-mounted and owned by the calling user's uid, which git refuses without this.
RUN git config --system --add safe.directory '*'

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/opt/nvidia/nsight-systems/${NSYS_VERSION}/bin:${PATH} \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST}

# Every Python dependency from the hash-pinned lock, copied before the sources so this layer is
# cached until the lock changes. The build first checks the lock against LOCK_HASH (the label and
# the recorded hash are then the lock installed), then takes it as if with extra=cuda (see the
# lock's header: the CPU torch line goes, the CUDA build's lines lose their marker; same as
# `python scripts/lock.py cuda`) and installs every line with its hashes checked.
COPY requirements.lock /tmp/requirements.lock
RUN test -n "${LOCK_HASH}" || { echo "LOCK_HASH is required: make image passes it" >&2; exit 1; } \
 && echo "${LOCK_HASH}  /tmp/requirements.lock" | sha256sum --check --quiet \
 && python3.12 -m venv /opt/venv \
 && sed -e '/ ; extra != "cuda"/d' -e 's/ ; extra == "cuda"//' /tmp/requirements.lock \
        > /tmp/requirements-cuda.lock \
 && pip install --require-hashes -r /tmp/requirements-cuda.lock \
 && pip check \
 && python -c "import torch; assert torch.version.cuda and torch.version.cuda.startswith('13'), torch.version.cuda" \
 && rm /tmp/requirements.lock /tmp/requirements-cuda.lock

# The `cuda` backend's extension, built now (no GPU needed: `python -m kernels.cuda_ext`) into the
# directory the runtime loads it from. Built from /workspace, where the checkout is mounted at run
# time, so the sources have the same paths and torch reuses this build (it re-links only when a
# source changed). World-writable: the container runs as the calling user's uid, and torch takes
# a lock file there.
ENV FUSEBENCH_EXT_DIR=/opt/fusebench/torch_extensions
WORKDIR /workspace
COPY fusebench/ /workspace/fusebench/
COPY kernels/ /workspace/kernels/
RUN python -m kernels.cuda_ext \
 && chmod -R a+rwX /opt/fusebench/torch_extensions \
 && nsys --version

# Caches that must outlive a container (Triton and Inductor compile caches) live on a volume at
# /cache; HOME is writable by any uid (asv keeps ~/.asv-machine.json there). FUSEBENCH_IN_IMAGE
# makes the Makefile run everything locally inside (no docker in docker). FUSEBENCH_IMAGE_DIGEST,
# the image's own id, is only known after the build: `make bench` passes it to `docker run`.
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

# The entry point runs in the mounted checkout: `python scripts/bench.py "$@"`, or a command.
COPY scripts/entrypoint.sh /usr/local/bin/fusebench-entrypoint
USER ${USER_ID}
ENTRYPOINT ["/usr/local/bin/fusebench-entrypoint"]
