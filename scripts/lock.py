"""``make lock``: one hash-pinned requirements.lock for the CPU build of torch and the CUDA build.

    python -m scripts.lock compile [--in requirements.in] [--out requirements.lock]
    python -m scripts.lock cuda [LOCK]         # the lock as the image installs it (CUDA build)
    python -m scripts.lock check [LOCK] [--python-version 3.12]
    python -m scripts.lock reference [--check]   # requirements-reference.lock (the reference backends)
    python -m scripts.lock dev [--check]         # requirements-dev.lock (the tools of development)

PEP 508 has no marker for "this machine takes the CUDA build", so the lock spells the choice with
the ``extra`` marker, which pip evaluates as ``extra == ""`` on a requirement file's lines:

- ``torch==2.13.0+cpu ; extra != "cuda" --hash=...`` (one physical line): PyTorch's CPU wheels,
  one hash per Python of :data:`PYTHONS` on Linux x86_64, each named in a comment under the line;
  pip finds them through the lock's own ``--find-links`` (:data:`CPU_FIND_LINKS`, PyTorch's CPU
  index page of torch), or through a machine's own find-links;
- ``torch==2.13.0 ; extra == "cuda"`` with the hashes of PyPI's CUDA wheels, and the same marker
  on every package only that build needs (cuda-toolkit, nvidia-*, ...).

So a plain ``pip install --require-hashes -r requirements.lock`` (the CPU venv, CI) installs the
CPU build and skips the CUDA lines. The Dockerfile installs the lock as if with ``extra=cuda``:
``sed -e '/ ; extra != "cuda"/d' -e 's/ ; extra == "cuda"//'`` (what ``cuda`` prints). Two torch
lines, not one with both builds' hashes: pip prefers a candidate whose hash its index announces,
so it would take PyPI's CUDA wheel over the local CPU one.

Where each wheel comes from: every package from PyPI, except the CPU build of torch, from
PyTorch's CPU index (:data:`CPU_FIND_LINKS`), the one ``--find-links`` line of the lock. A
find-links page, not ``--extra-index-url``: pip then asks that host for torch only, not for every
package (where the host cannot be reached, as on a machine with a local wheel mirror, an index
would cost a failed request with retries per package).

The Pythons fusebench supports are :data:`PYTHONS` (Linux x86_64), the same in ``pyproject.toml``
(``requires-python``), the README and the lock's header (tests/test_lock.py checks that).

``compile`` runs pip-compile twice over ``requirements.in`` with the interpreter running it, both
with no pip configuration (public indexes only):

1. with ``--find-links`` :data:`CPU_FIND_LINKS`, which resolves the CPU build (``2.13.0+cpu``);
   its torch hashes are then narrowed to :data:`PYTHONS`' Linux x86_64 wheels, read with their
   file names from that page (:func:`cpu_wheels`);
2. PyPI only, which resolves PyPI's torch, the CUDA build;

then writes their union as above (a package pinned by both at one version: one line, both
resolutions' hashes). Two resolutions pinning a package at versions that differ other than by a
local label (``+cpu``) is an error (exit 2). pip-tools downloads every wheel of each pinned version
to hash it: expect tens of minutes.

Two groups over this lock are pinned exactly by hand in their ``.in`` file (every package, its
dependencies written out) and locked the same way (:data:`GROUPS`):

- ``reference``: ``requirements-reference.lock``, the reference backends' libraries, installed with
  ``--no-deps`` over this lock so that none brings another torch or triton;
- ``dev``: ``requirements-dev.lock``, the tools of development (pytest, hypothesis, ruff,
  hadolint), installed by ``make venv`` in one pip command with this lock (so with ``--require-hashes``
  pip refuses a dependency neither file pins), and never by the image.

No pip-compile (it would resolve torch again): pip is asked, per Python of :data:`PYTHONS` on Linux
x86_64, which wheel it would take for each pin with ``--no-deps`` (metadata only), and the lock
gets every such wheel's hash. ``<group> --check`` asks the same and fails (exit 1) when a wheel is
not hashed in the lock, the lock and its ``.in`` pin different packages, a package is pinned by both
the group and requirements.lock, or (``dev``) a wheel requires a package that neither pins.

``check`` asks pip (``--dry-run --report``, metadata only: no wheel is downloaded), with no pip
configuration, what it would install for the CUDA build on Linux x86_64 for each Python of
:data:`PYTHONS` (or ``--python-version``), and fails (exit 1) when a package or a wheel hash it
would take is not in the lock, or when the CPU torch line names no wheel for that Python. The CUDA
build's packages are a superset of the CPU build's (the same torch release, plus ``nvidia-*`` and
``cuda-*``), so this covers every package of the CPU build too, but torch's CPU wheel itself:
its host may not be reachable from where the check runs, so that wheel's hash is checked only
where its file is at hand (``make venv`` installs it with ``--require-hashes``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from fusebench.cli import run_main
from fusebench.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
CUDA_MARKER = 'extra == "cuda"'
CPU_MARKER = 'extra != "cuda"'

#: The Python versions fusebench supports on Linux x86_64 (``make venv``, CI: the CPU build;
#: the image: 3.12, the CUDA build).
PYTHONS = ("3.11", "3.12", "3.13")
#: PyTorch's CPU index page of torch: where the CPU build's wheels come from.
CPU_FIND_LINKS = "https://download.pytorch.org/whl/cpu/torch/"

#: The optional group of the reference backends (kernels/reference_libs.py) and its lock.
REFERENCE_IN = ROOT / "requirements-reference.in"
REFERENCE_LOCK = ROOT / "requirements-reference.lock"
#: The tools of development (tests, lint) and their lock: make venv, never the image.
DEV_IN = ROOT / "requirements-dev.in"
DEV_LOCK = ROOT / "requirements-dev.lock"
MAIN_LOCK = ROOT / "requirements.lock"

#: The image's platform for ``check``: Ubuntu 24.04 x86_64 (glibc 2.39). pip does not widen an
#: explicit manylinux_2_X tag to older ones, so each is named.
PLATFORM_ARGS = [a for x in range(39, 4, -1) for a in ("--platform", f"manylinux_2_{x}_x86_64")] + [
    "--platform", "manylinux2014_x86_64", "--platform", "linux_x86_64"]

HEADER = f"""\
# fusebench's hash-pinned dependencies: generated by `make lock` (scripts/lock.py) from
# requirements.in; do not edit by hand.
#
# Python {PYTHONS[0]} to {PYTHONS[-1]}, Linux x86_64. Every wheel comes from PyPI, except torch's CPU
# build: PyTorch's CPU index, the --find-links line below (one wheel per Python, named under it).
#
# One file for the image, a local run and CI, each taking the torch build its platform allows.
# pip evaluates a requirement file's markers with no extra (`extra == ""`), so:
# - `pip install --require-hashes -r requirements.lock` (make venv, CI: a machine with no GPU)
#   takes the lines marked `extra != "cuda"` (torch's CPU wheel) and skips those marked
#   `extra == "cuda"`;
# - the image (Dockerfile) installs it as if with extra=cuda: its sed deletes the `extra != "cuda"`
#   lines and drops the `extra == "cuda"` markers (same as `python scripts/lock.py cuda`), which
#   gives PyPI's torch, its CUDA 13 build, and everything it needs (cuda-toolkit, nvidia-*, ...).
# Lines with no marker are for both. The tools of development (pytest, ruff, ...) are not here:
# requirements-dev.lock, which make venv installs with this file (the image does not).
#
--find-links {CPU_FIND_LINKS}

"""

REFERENCE_HEADER = f"""\
# The reference backends' libraries, hash-pinned: generated by `python scripts/lock.py reference`
# from requirements-reference.in; do not edit by hand.
#
# Python {PYTHONS[0]} to {PYTHONS[-1]}, Linux x86_64, every wheel from PyPI. An optional group over
# requirements.lock, installed after it with --no-deps (no second torch or triton):
#   pip install --no-deps --require-hashes -r requirements-reference.lock
# (make venv REFERENCE=1; the GPU image). Every runtime dependency is a line of its own here.

"""

DEV_HEADER = f"""\
# The tools of development (tests, lint), hash-pinned: generated by `python -m scripts.lock dev`
# from requirements-dev.in; do not edit by hand.
#
# Python {PYTHONS[0]} to {PYTHONS[-1]}, Linux x86_64, every wheel from PyPI. Installed by make venv in one
# pip command with requirements.lock, which pins what these need besides each other (packaging):
#   pip install --require-hashes -r requirements.lock -r requirements-dev.lock
# Never by the image (Dockerfile): it runs the suite, not its tests.

"""


@dataclass
class Block:
    """One pinned package of a pip-compile output: the requirement line, its hashes, its comments."""

    name: str
    version: str
    marker: str | None = None
    hashes: list[str] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)

    def render(self) -> str:
        """pip-compile's layout; a CPU-only requirement on one physical line (so that one line
        deletion drops it: the Dockerfile's sed)."""
        head = f"{self.name}=={self.version}" + (f" ; {self.marker}" if self.marker else "")
        hashes = [f"--hash={h}" for h in self.hashes]
        if self.marker == CPU_MARKER:
            text = " ".join([head, *hashes]) + "\n"
        else:
            text = " \\\n    ".join([head, *hashes]) + "\n"
        return text + "".join(f"    {c}\n" for c in self.comments)


_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)(?:\s*;\s*(.+?))?$")


def normalize(name: str) -> str:
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(text: str) -> list[Block]:
    """Pinned requirements of a requirements file in pip-compile's layout, in order.

    Option lines (``--index-url`` ...) and the header are dropped; raises ValueError on a
    requirement line that is not ``name==version [; marker]``.
    """
    blocks: list[Block] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if not raw[0].isspace() and not line.startswith(("#", "-")):
            req, *hashes = re.split(r"\s+--hash=", line.rstrip(" \\"))
            m = _REQ.match(req.strip())
            if m is None:
                raise ValueError(f"not a pinned requirement: {line!r}")
            blocks.append(Block(normalize(m.group(1)), m.group(2), m.group(3), hashes))
        elif blocks and raw[0].isspace() and line.startswith("--hash="):
            blocks[-1].hashes.append(line.removeprefix("--hash=").rstrip(" \\"))
        elif blocks and raw[0].isspace() and line.startswith("#"):
            blocks[-1].comments.append(line)
    return blocks


def merge(cpu: list[Block], cuda: list[Block]) -> list[Block]:
    """The union lock of a CPU and a CUDA resolution (see the module docstring), sorted by name.

    Raises ValueError when the two pin one package at versions that differ other than by a local
    label, or when a resolution already carries markers."""
    by_cpu, by_cuda = {b.name: b for b in cpu}, {b.name: b for b in cuda}
    out: list[Block] = []
    for name in sorted(set(by_cpu) | set(by_cuda)):
        a, b = by_cpu.get(name), by_cuda.get(name)
        if (a and a.marker) or (b and b.marker):
            raise ValueError(f"{name}: pip-compile wrote a marker; expected none")
        if a and b and a.version == b.version:
            out.append(Block(name, a.version, None, sorted(set(a.hashes) | set(b.hashes)), b.comments))
        elif a and b and a.version.split("+")[0] != b.version.split("+")[0]:
            raise ValueError(f"{name}: the CPU resolution pins {a.version}, the CUDA one {b.version}")
        else:
            if a:
                out.append(Block(name, a.version, CPU_MARKER, a.hashes, a.comments))
            if b:
                out.append(Block(name, b.version, CUDA_MARKER, b.hashes, b.comments))
    return out


def activate_cuda(text: str) -> str:
    """The lock's text as the image installs it: CPU-only lines deleted, the CUDA lines' marker
    removed (line for line what the Dockerfile's sed does)."""
    lines = [ln for ln in text.splitlines(keepends=True) if f" ; {CPU_MARKER}" not in ln]
    return "".join(ln.replace(f" ; {CUDA_MARKER}", "") for ln in lines)


def cpu_wheel_name(version: str, python: str) -> str:
    """The file name of torch ``version``'s CPU wheel for CPython ``python`` ("3.12") on Linux
    x86_64: ``torch-2.13.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl``."""
    tag = "cp" + python.replace(".", "")
    return f"torch-{version}-{tag}-{tag}-manylinux_2_28_x86_64.whl"


_CPU_LINK = re.compile(r'href="[^"]*/(torch-[^"/#]+\.whl)#sha256=([0-9a-f]{64})"')


def cpu_wheels(html: str) -> dict[str, str]:
    """``{wheel file name: "sha256:<hex>"}`` of a PyTorch index page (:data:`CPU_FIND_LINKS`),
    whose links are ``<a href="/whl/cpu/torch-2.13.0%2Bcpu-cp312-...whl#sha256=<hex>">``."""
    return {name.replace("%2B", "+"): f"sha256:{digest}" for name, digest in _CPU_LINK.findall(html)}


def torch_cpu_block(block: Block, wheels: dict[str, str]) -> Block:
    """The CPU torch ``block`` with one hash per Python of :data:`PYTHONS` (Linux x86_64), each
    named in a comment, from ``wheels`` (:func:`cpu_wheels`).

    Raises ValueError when ``wheels`` has no wheel of ``block``'s version for one of them."""
    names = [cpu_wheel_name(block.version, py) for py in PYTHONS]
    if missing := [n for n in names if n not in wheels]:
        raise ValueError(f"{CPU_FIND_LINKS} lists no {', '.join(missing)}")
    comments = [f"# from {CPU_FIND_LINKS}:", *(f"#   {n} {wheels[n]}" for n in names)]
    kept = [c for c in block.comments if not c.startswith(("# from ", "#   torch-"))]  # pip-compile's
    return Block(block.name, block.version, block.marker, [wheels[n] for n in names], comments + kept)


def recorded_cpu_wheels(block: Block) -> dict[str, str]:
    """``{wheel file name: hash}`` named in the comments under the CPU torch line whose hash is
    also one of the line's hashes."""
    out = {}
    for c in block.comments:
        parts = c.lstrip("# ").split()
        if len(parts) == 2 and parts[0].endswith(".whl") and parts[1] in block.hashes:
            out[parts[0]] = parts[1]
    return out


def render_lock(blocks: list[Block]) -> str:
    """The lock's text: the header (with its ``--find-links`` line), then every block."""
    return HEADER + "".join(b.render() for b in blocks)


def pip_compile(req_in: Path, out: Path, env: dict, extra: list[str] = ()) -> None:
    """Run pip-compile (hashes, no index options emitted) into ``out``; raises UsageError on failure."""
    cmd = [sys.executable, "-m", "piptools", "compile", "--quiet", "--generate-hashes", "--allow-unsafe",
           "--strip-extras", "--no-emit-index-url", "--no-emit-find-links", "--no-header", *extra,
           "--output-file", str(out), str(req_in)]
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise UsageError(f"pip-compile failed (exit {proc.returncode}): {tail}")


def no_pip_config(env: dict) -> dict:
    """``env`` with pip's configuration files and PIP_* variables removed: PyPI only."""
    clean = {k: v for k, v in env.items() if not k.startswith("PIP_")}
    clean.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    return clean


def compile_lock(req_in: Path, out: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="fusebench-lock-") as tmp:
        cpu_out, cuda_out = Path(tmp, "cpu.txt"), Path(tmp, "cuda.txt")
        pip_compile(req_in, cpu_out, no_pip_config(dict(os.environ)), ["--find-links", CPU_FIND_LINKS])
        pip_compile(req_in, cuda_out, no_pip_config(dict(os.environ)))
        cpu, cuda = parse(cpu_out.read_text()), parse(cuda_out.read_text())
    if not any(b.name == "torch" and "+" in b.version for b in cpu):
        raise UsageError(f"the CPU resolution found no +cpu torch wheel at {CPU_FIND_LINKS}")
    try:
        with urllib.request.urlopen(CPU_FIND_LINKS, timeout=60) as page:
            wheels = cpu_wheels(page.read().decode())
        cpu = [torch_cpu_block(b, wheels) if b.name == "torch" else b for b in cpu]
        merged = merge(cpu, cuda)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    out.write_text(render_lock(merged))
    n_cuda = sum(1 for b in merged if b.marker == CUDA_MARKER)
    print(f"lock: wrote {out} ({len(merged)} packages, {n_cuda} only for the CUDA build)", file=sys.stderr)
    return 0


def check(lock: Path, python_versions: list[str]) -> int:
    """:func:`check_cuda` and :func:`check_cpu_torch` for each Python; 1 when one failed, else 0."""
    failed = 0
    for version in python_versions:
        failed |= check_cpu_torch(lock, version)
        failed |= check_cuda(lock, version)
    return failed


def check_cpu_torch(lock: Path, python_version: str) -> int:
    """1 (with a line saying why) when the lock has no ``--find-links`` :data:`CPU_FIND_LINKS`
    line, or its CPU torch line names no hashed Linux x86_64 wheel for ``python_version``."""
    text = lock.read_text()
    cpu = [b for b in parse(text) if b.name == "torch" and b.marker == CPU_MARKER]
    problem = None
    if f"--find-links {CPU_FIND_LINKS}" not in text.splitlines():
        problem = f"no '--find-links {CPU_FIND_LINKS}' line"
    elif len(cpu) != 1:
        problem = f"{len(cpu)} CPU torch lines, expected 1"
    elif cpu_wheel_name(cpu[0].version, python_version) not in recorded_cpu_wheels(cpu[0]):
        problem = f"no hashed wheel {cpu_wheel_name(cpu[0].version, python_version)} under the CPU torch line"
    print(f"lock check: CPU torch, Python {python_version}: " + (f"PROBLEM {problem}" if problem else
          f"{cpu_wheel_name(cpu[0].version, python_version)} hashed, from {CPU_FIND_LINKS}"))
    return 1 if problem else 0


def check_cuda(lock: Path, python_version: str) -> int:
    """Compare what pip would install for the CUDA build with the lock (see the module docstring)."""
    blocks = {b.name: b for b in parse(activate_cuda(lock.read_text()))}
    pins = [f"{b.name}=={b.version}" for b in blocks.values()]
    with tempfile.TemporaryDirectory(prefix="fusebench-lockcheck-") as tmp:
        report = Path(tmp, "report.json")
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
               "--only-binary=:all:", *PLATFORM_ARGS, "--python-version", python_version,
               "--target", str(Path(tmp, "t")), "--report", str(report), *pins]
        proc = subprocess.run(cmd, env=no_pip_config(dict(os.environ)), capture_output=True, text=True)
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines() or ["(no output)"]
            tail = next((ln for ln in lines if ln.startswith("ERROR")), lines[-1])
            print(f"lock check: pip cannot resolve the CUDA build for Python {python_version}: {tail}")
            return 1
        items = json.loads(report.read_text())["install"]
    problems = []
    for item in items:
        meta, info = item["metadata"], item["download_info"]
        name, version = normalize(meta["name"]), meta["version"]
        digest = "sha256:" + info.get("archive_info", {}).get("hashes", {}).get("sha256", "?")
        block = blocks.get(name)
        if block is None or block.version != version:
            problems.append(f"{name}=={version} is not in the lock")
        elif digest not in block.hashes:
            wheel = info["url"].rsplit("/", 1)[-1]
            problems.append(f"{name}=={version}: wheel {wheel} ({digest}) not hashed")
    for p in problems:
        print(f"PROBLEM {p}")
    print(f"lock check: CUDA build, Python {python_version}: {len(items)} packages, "
          + (f"{len(problems)} problem(s)" if problems else "all pinned and hashed"))
    return 1 if problems else 0


@dataclass(frozen=True)
class PinnedGroup:
    """A group over requirements.lock whose ``.in`` pins every package exactly (see the module
    docstring): its lock is made and checked per Python by asking pip, not by pip-compile."""

    name: str  # the subcommand: python -m scripts.lock <name> [--check]
    req_in: Path
    lock: Path
    header: str
    label: str  # in the check's last line
    # True: installed with its dependencies (dev): every Requires-Dist of its wheels must be pinned
    # by the group or requirements.lock; False: installed with --no-deps (reference), whose wheels'
    # metadata names what is left out on purpose (see requirements-reference.in).
    with_deps: bool


GROUPS = {
    "reference": PinnedGroup("reference", REFERENCE_IN, REFERENCE_LOCK, REFERENCE_HEADER, "reference group",
                             with_deps=False),
    "dev": PinnedGroup("dev", DEV_IN, DEV_LOCK, DEV_HEADER, "dev tools", with_deps=True),
}


def exact_pins(req_in: Path) -> list[str]:
    """The ``name==version`` lines of a requirements file (comments and options dropped).

    Raises:
        UsageError: a requirement is not pinned exactly (``name==version``).
    """
    pins = []
    for raw in req_in.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        if _REQ.match(line) is None or ";" in line:
            raise UsageError(f"{req_in.name}: {line!r} is not pinned exactly (name==version, no marker)")
        pins.append(line)
    return pins


@dataclass(frozen=True)
class Wheel:
    """The wheel pip takes for one pin, and what its metadata requires (Requires-Dist)."""

    name: str
    version: str
    file: str
    digest: str  # "sha256:<hex>"
    requires: tuple[str, ...] = ()


def wheels_for(pins: list[str], python_version: str) -> list[Wheel]:
    """The wheel pip takes for each pin, with ``--no-deps``, for CPython ``python_version`` on Linux
    x86_64 (metadata only, nothing downloaded).

    Raises:
        UsageError: pip cannot find a wheel for a pin (its error line quoted).
    """
    with tempfile.TemporaryDirectory(prefix="fusebench-grouplock-") as tmp:
        report = Path(tmp, "report.json")
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-deps",
               "--ignore-installed", "--only-binary=:all:", *PLATFORM_ARGS, "--python-version",
               python_version, "--target", str(Path(tmp, "t")), "--report", str(report), *pins]
        proc = subprocess.run(cmd, env=no_pip_config(dict(os.environ)), capture_output=True, text=True)
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines() or ["(no output)"]
            tail = next((ln for ln in lines if ln.startswith("ERROR")), lines[-1])
            raise UsageError(f"pip finds no wheels of {', '.join(pins[:3])}... for Python {python_version}: "
                             f"{tail}")
        items = json.loads(report.read_text())["install"]
    return [Wheel(normalize(i["metadata"]["name"]), i["metadata"]["version"],
                  i["download_info"]["url"].rsplit("/", 1)[-1],
                  "sha256:" + i["download_info"].get("archive_info", {}).get("hashes", {}).get("sha256", "?"),
                  tuple(i["metadata"].get("requires_dist") or ()))
            for i in items]


def unpinned_requirements(wheel: Wheel, pinned: set[str], python_version: str) -> list[str]:
    """The Requires-Dist lines of ``wheel`` that apply on CPython ``python_version`` on Linux x86_64
    with no extra and name a package not in ``pinned`` (normalized names)."""
    from packaging.requirements import Requirement

    env = {"python_version": python_version, "python_full_version": f"{python_version}.0",
           "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
           "os_name": "posix", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "extra": ""}
    out = []
    for line in wheel.requires:
        req = Requirement(line)
        if (req.marker is None or req.marker.evaluate(env)) and normalize(req.name) not in pinned:
            out.append(line)
    return out


def compile_pinned(group: PinnedGroup) -> int:
    """Write ``group``'s lock: each pin with the hash of its wheel for every Python of
    :data:`PYTHONS` (one wheel shared by several Pythons: one hash), each wheel named under it."""
    pins = exact_pins(group.req_in)
    blocks: dict[str, Block] = {}
    for python in PYTHONS:
        for w in wheels_for(pins, python):
            via = f"# via -r {group.req_in.name}"
            block = blocks.setdefault(w.name, Block(w.name, w.version, comments=[via]))
            if w.digest not in block.hashes:
                block.hashes.append(w.digest)
                block.comments.append(f"#   {w.file} {w.digest}")
    order = [normalize(p.split("==")[0]) for p in pins]
    group.lock.write_text(group.header + "".join(blocks[n].render() for n in order))
    print(f"lock: wrote {group.lock} ({len(blocks)} packages, Python {', '.join(PYTHONS)})", file=sys.stderr)
    return 0


def check_pinned(group: PinnedGroup, python_versions: list[str], main_lock: Path = MAIN_LOCK) -> int:
    """1 (with a line per problem) when ``group``'s lock and its ``.in`` pin different packages or
    versions, a package is pinned by the group and ``main_lock`` both, a wheel pip would take for a
    Python is not hashed in the lock, or (``with_deps``) a wheel requires a package that neither
    lock pins; else 0."""
    blocks = {b.name: b for b in parse(group.lock.read_text())}
    main = {b.name for b in parse(main_lock.read_text())}
    problems = []
    wanted = {normalize(p.split("==")[0]): p.split("==")[1] for p in exact_pins(group.req_in)}
    if {n: b.version for n, b in blocks.items()} != wanted:
        problems.append(f"{group.lock.name} and {group.req_in.name} pin different packages or versions: "
                        f"run python -m scripts.lock {group.name}")
    if both := sorted(set(blocks) & main):
        problems.append(f"pinned in {group.lock.name} and {main_lock.name} both: {', '.join(both)}")
    for python in python_versions:
        pinned = [f"{n}=={b.version}" for n, b in blocks.items()]
        for w in wheels_for(pinned, python):
            if w.digest not in blocks[w.name].hashes:
                problems.append(f"{w.name}=={w.version}: wheel {w.file} ({w.digest}) not hashed")
            if group.with_deps:
                for req in unpinned_requirements(w, set(blocks) | main, python):
                    problems.append(f"{w.name}=={w.version} requires {req!r} (Python {python}), "
                                    f"pinned in neither {group.lock.name} nor {main_lock.name}")
    for p in problems:
        print(f"PROBLEM {p}")
    print(f"lock check: {group.label}, Python {', '.join(python_versions)}: {len(blocks)} packages, "
          + (f"{len(problems)} problem(s)" if problems else "all pinned and hashed"))
    return 1 if problems else 0


def main() -> int:
    ap = argparse.ArgumentParser(prog="lock", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="regenerate the lock (needs pip-tools and PyPI)")
    c.add_argument("--in", dest="req_in", type=Path, default=ROOT / "requirements.in")
    c.add_argument("--out", type=Path, default=ROOT / "requirements.lock")
    a = sub.add_parser("cuda", help="print the lock with the CUDA build's lines activated")
    a.add_argument("lock", nargs="?", type=Path, default=ROOT / "requirements.lock")
    k = sub.add_parser("check", help="check the lock for each supported Python (needs PyPI)")
    k.add_argument("lock", nargs="?", type=Path, default=ROOT / "requirements.lock")
    k.add_argument("--python-version", action="append", choices=PYTHONS,
                   help=f"one of {', '.join(PYTHONS)} (repeatable; default: all)")
    for group in GROUPS.values():
        g = sub.add_parser(group.name, help=f"regenerate {group.lock.name} from {group.req_in.name} "
                           "(needs PyPI)")
        g.add_argument("--check", action="store_true", help="check it instead (exit 1 on a problem)")
    args = ap.parse_args()

    if args.cmd in GROUPS:
        group = GROUPS[args.cmd]
        if not group.req_in.is_file():
            raise UsageError(f"{group.req_in}: no such file")
        if args.check:
            return check_pinned(group, list(PYTHONS))
        return compile_pinned(group)
    if args.cmd == "compile":
        if not args.req_in.is_file():
            raise UsageError(f"{args.req_in}: no such file")
        return compile_lock(args.req_in, args.out)
    if not args.lock.is_file():
        raise UsageError(f"{args.lock}: no such file")
    if args.cmd == "cuda":
        sys.stdout.write(activate_cuda(args.lock.read_text()))
        return 0
    return check(args.lock, args.python_version or list(PYTHONS))


if __name__ == "__main__":
    run_main(main, "lock")
