"""``make image-test``: the Dockerfile built on the CPU stand-in base with buildah, and run.

    python scripts/image_test.py            (as root: debootstrap, buildah's vfs storage, chown)

1. The stand-in base: Debian 12 from Debian's packages (``scripts/standin_base.sh``), a root file
   system tarball cached in ``FUSEBENCH_IMAGE_CACHE`` (default ``/var/cache/fusebench/image-test``)
   until its inputs change, imported as ``localhost/fusebench-standin`` and pinned by its digest.
2. The wheels of the lock's CPU view (``scripts/lock_view.sh cpu``) for the stand-in's python3,
   fetched by this Python's pip (the same indexes as ``make venv``), cached per lock hash; the build
   installs them with every hash checked and no index (the Dockerfile's ``FLAVOUR=cpu`` lines).
3. ``make image CONTAINER=buildah``: the repository's Dockerfile, with the stand-in's build args,
   in a buildah storage of its own (vfs driver, chroot isolation) that is deleted at the end.
4. The image's own entry point (its config's ``Entrypoint``) on the quick CPU grid in one round
   (the image is tested, not the CPU's timings) as the caller's uid, then on its gelu cases as the
   image's default user (the same path; a second full grid would only add minutes), each in a
   fresh clone of the checkout mounted at /workspace with a results folder mounted at
   /workspace/results, with no network (a network namespace of its own with only ``lo``: nothing
   can be downloaded at run time).

Asserted: the build and both runs pass; the image's user and the run's uid are not root; the
results are in the mounted folder, every file owned by the run's uid; the asv machine file
records the image's id as ``image_digest`` and requirements.lock's sha256 as ``lock_hash``. The
caller is ``SUDO_UID`` or the current uid; as root (CI) an unprivileged uid, 4321, stands in for
the caller (the engines' commands never run the image as root). The last line gives the wall time
of each phase.

Exit status: 0 passed, 1 a step or an assertion failed (its one line, then the end of its log),
2 cannot set up here (not root, buildah, debootstrap or unshare missing).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STANDIN = "localhost/fusebench-standin"
STANDIN_CALLER = (4321, 4321)
# The uid, then the network interfaces, a run sees (/proc/net/dev: two header lines, one per interface).
PROBE = ("import os; print(os.getuid()); "
         "print(*sorted(ln.split(':')[0].strip() for ln in open('/proc/net/dev').readlines()[2:]))")
TOOLS = {"buildah": "buildah", "debootstrap": "debootstrap", "unshare": "util-linux", "git": "git"}


class Failed(Exception):
    """A step or an assertion failed: its one-line message (and the end of its log, if any)."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


def sh(args: list[str], env: dict | None = None, log: Path | None = None, what: str = "") -> str:
    """Run ``args``; return stdout. Raises :class:`Failed` naming the step, with the end of its
    output, when it exits non-zero. ``log``: also write stdout and stderr there."""
    out = subprocess.run(args, capture_output=True, text=True, env=env)
    if log is not None:
        log.write_text(out.stdout + out.stderr)
    if out.returncode != 0:
        tail = "\n".join((out.stdout + out.stderr).splitlines()[-25:])
        raise Failed(f"{what or args[0]} failed (exit {out.returncode}): {' '.join(args)[:300]}", tail)
    return out.stdout


def check(condition: bool, message: str) -> None:
    """Raise :class:`Failed` with ``message`` unless ``condition``."""
    if not condition:
        raise Failed(message)


def caller() -> tuple[int, int]:
    """(uid, gid) the first run uses: ``SUDO_UID``/``SUDO_GID``, or this process's; root's is
    replaced by :data:`STANDIN_CALLER`."""
    uid = int(os.environ.get("SUDO_UID", os.getuid()))
    gid = int(os.environ.get("SUDO_GID", os.getgid()))
    return STANDIN_CALLER if uid == 0 else (uid, gid)


def wheels(cache: Path, python: str, lock_hash: str) -> Path:
    """The wheelhouse of the lock's CPU view for CPython ``python`` (``"3.11"``), fetched once per
    lock hash into ``cache``; older wheelhouses are removed."""
    house = cache / f"wheels-{lock_hash[:16]}-py{python}"
    if (house / ".complete").exists():
        return house
    for old in cache.glob("wheels-*"):
        shutil.rmtree(old)
    view = cache / "lock-cpu-view.txt"
    view.write_text(sh([str(ROOT / "scripts" / "lock_view.sh"), "cpu", str(ROOT / "requirements.lock")]))
    sh([sys.executable, "-m", "pip", "download", "--quiet", "--require-hashes", "--no-deps",
        "--only-binary=:all:", "--python-version", python, "--dest", str(house), "-r", str(view)],
       what="fetching the stand-in's wheels (pip download)")
    (house / ".complete").touch()
    return house


def image_id(env: dict, image: str) -> str:
    """``sha256:<hex>`` of ``image`` in buildah's storage (what ``docker image inspect {{.Id}}`` gives)."""
    out = sh(["buildah", "images", "--no-trunc", "--format", "{{.ID}}", image], env).split()
    check(len(out) == 1, f"buildah images {image}: expected one id, got {out}")
    return out[0] if out[0].startswith("sha256:") else f"sha256:{out[0]}"


def image_config(env: dict, image: str) -> dict:
    """The OCI config of ``image`` (User, Entrypoint, Env, Labels) from ``buildah inspect``."""
    return json.loads(sh(["buildah", "inspect", "--type", "image", image], env))["OCIv1"]["config"]


def run_once(env: dict, image: str, digest: str, entrypoint: list[str], uid: int | None, gid: int | None,
             work: Path, label: str, lock_hash: str, grid: list[str], log: Path) -> None:
    """One run of the entry point on the quick CPU grid (see the module's docstring) and its asserts.
    ``uid=None``: the image's default user (then the mounted folders are made that user's)."""
    config = image_config(env, image)
    run_uid = uid if uid is not None else int(config["User"].split(":")[0])
    run_gid = gid if gid is not None else run_uid
    checkout, results = work / f"checkout-{label}", work / f"results-{label}"
    sh(["git", "clone", "--quiet", "--depth", "1", f"file://{ROOT}", str(checkout)], what="git clone")
    # asv.conf.json's branch, main, must exist (asv refuses to store otherwise): a clone of another
    # branch (a developer's) gets a main at its HEAD, in this throwaway clone only.
    if sh(["git", "-C", str(checkout), "branch", "--show-current"]).strip() != "main":
        sh(["git", "-C", str(checkout), "branch", "main", "HEAD"], what="git branch main")
    results.mkdir()
    sh(["chown", "-R", f"{run_uid}:{run_gid}", str(checkout), str(results)])
    ctr = sh(["buildah", "from", "--quiet", image], env).strip()
    try:
        sh(["buildah", "config", "--env", f"FUSEBENCH_IMAGE_DIGEST={digest}", ctr], env)
        user = [] if uid is None else ["--user", f"{uid}:{gid}"]
        mounts = ["--volume", f"{checkout}:/workspace", "--volume", f"{results}:/workspace/results"]
        # unshare --net: the run's network namespace has only lo, down: nothing can be fetched.
        run = ["unshare", "--net", "buildah", "run", "--isolation", "chroot", *user, *mounts, ctr, "--"]
        probe = sh([*run, "python3", "-c", PROBE], env, what=f"{label}: probe").split("\n")
        check(probe[0] == str(run_uid) and run_uid != 0,
              f"{label}: ran as uid {probe[0]}, not {run_uid} (non-root)")
        check(probe[1] == "lo", f"{label}: network interfaces {probe[1]!r}, not only lo")
        sh([*run, *entrypoint, *grid, "--results", "/workspace/results", "--no-publish"], env,
           log=log, what=f"{label}: the entry point, {' '.join(grid)} (its output: {log})")
    finally:
        subprocess.run(["buildah", "rm", ctr], capture_output=True, env=env)
    machines = [p.parent for p in results.glob("*/machine.json")]
    check(len(machines) == 1,
          f"{label}: expected one machine folder in the mounted results, found {machines}")
    machine = json.loads((machines[0] / "machine.json").read_text())
    check(machine.get("image_digest") == digest,
          f"{label}: machine.json image_digest {machine.get('image_digest')!r}, not the image's {digest}")
    check(machine.get("lock_hash") == lock_hash,
          f"{label}: machine.json lock_hash {machine.get('lock_hash')!r}, not the lock's {lock_hash}")
    stored = [p for p in machines[0].glob("*.json") if p.name != "machine.json"]
    check(bool(stored), f"{label}: no result file beside machine.json in {machines[0]}")
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in [results, *results.rglob("*")]}
    check(owners == {(run_uid, run_gid)},
          f"{label}: results owned by {sorted(owners)}, not {run_uid}:{run_gid}")


def main() -> int:
    start = time.monotonic()
    if os.getuid() != 0:
        print("image-test: cannot set up: needs root (debootstrap, buildah's storage, chown)",
              file=sys.stderr)
        return 2
    missing = [f"{tool} (apt-get install {pkg})" for tool, pkg in TOOLS.items() if not shutil.which(tool)]
    if missing:
        print(f"image-test: cannot set up: not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    cache = Path(os.environ.get("FUSEBENCH_IMAGE_CACHE", "/var/cache/fusebench/image-test"))
    lock_hash = hashlib.sha256((ROOT / "requirements.lock").read_bytes()).hexdigest()
    times: dict[str, float] = {}
    work = Path(tempfile.mkdtemp(prefix="fusebench-image-test."))
    conf = work / "storage.conf"
    conf.write_text(f'[storage]\ndriver = "vfs"\nrunroot = "{work}/run"\ngraphroot = "{work}/storage"\n')
    env = dict(os.environ, CONTAINERS_STORAGE_CONF=str(conf), BUILDAH_ISOLATION="chroot")
    image = "localhost/fusebench-image-test:latest"

    def phase(name: str, t0: float) -> None:
        times[name] = time.monotonic() - t0

    try:
        t0 = time.monotonic()
        cached = bool(list(cache.glob("standin-*.tar")))
        tarball, python = sh([str(ROOT / "scripts" / "standin_base.sh"), str(cache)],
                             what="the stand-in base (debootstrap)").split()[:2]
        phase("base (cached)" if cached else "base", t0)

        t0 = time.monotonic()
        house = wheels(cache, python, lock_hash)
        phase("wheels", t0)

        t0 = time.monotonic()
        ctr = sh(["buildah", "from", "--quiet", "scratch"], env).strip()
        sh(["buildah", "add", "--quiet", ctr, tarball, "/"], env, what="importing the stand-in base")
        sh(["buildah", "commit", "--quiet", "--rm", ctr, f"{STANDIN}:latest"], env)
        base_digest = sh(["buildah", "images", "--digests", "--format", "{{.Digest}}", f"{STANDIN}:latest"],
                         env).strip()
        check(base_digest.startswith("sha256:"), f"the stand-in's digest: {base_digest!r}")
        phase("import", t0)

        t0 = time.monotonic()
        opts = (f"--build-arg BASE_IMAGE={STANDIN} --build-arg BASE_DIGEST={base_digest} "
                f"--build-arg FLAVOUR=cpu --volume {house}:/tmp/wheels:ro")
        build_log = cache / "build.log"
        sh(["make", "-C", str(ROOT), "--no-print-directory", "image", "CONTAINER=buildah", f"IMAGE={image}",
            f"BUILD_OPTS={opts}", f"PYTHON={sys.executable}", "DEPS="], env, log=build_log,
           what=f"make image CONTAINER=buildah (the stand-in build; its output: {build_log})")
        digest = image_id(env, image)
        config = image_config(env, image)
        labels = config.get("Labels") or {}
        check(labels.get("dev.fusebench.lock-hash") == lock_hash,
              f"the image's lock-hash label {labels.get('dev.fusebench.lock-hash')!r}, not {lock_hash}")
        user = config.get("User", "")
        check(user not in ("", "0", "root") and not user.startswith(("0:", "root:")),
              f"the image's user is {config.get('User')!r}: root at run time")
        entrypoint = config.get("Entrypoint") or []
        check(bool(entrypoint), "the image has no entry point")
        phase("build", t0)

        uid, gid = caller()
        t0 = time.monotonic()
        run_once(env, image, digest, entrypoint, uid, gid, work, "caller", lock_hash,
                 ["--quick", "--rounds", "1"], cache / "run-caller.log")
        phase(f"run as the caller ({uid})", t0)
        t0 = time.monotonic()
        run_once(env, image, digest, entrypoint, None, None, work, "image-user", lock_hash,
                 ["--quick", "--ops", "gelu", "--rounds", "1"], cache / "run-image-user.log")
        phase(f"run as the image's user ({config['User']})", t0)
    except Failed as e:
        print(f"image-test: FAILED: {e}", file=sys.stderr)
        if e.log:
            print(e.log, file=sys.stderr)
        return 1
    finally:
        subprocess.run(["buildah", "rm", "--all"], capture_output=True, env=env)
        subprocess.run(["buildah", "rmi", "--all", "--force"], capture_output=True, env=env)
        shutil.rmtree(work, ignore_errors=True)
        if work.exists():
            print(f"image-test: could not remove {work} (buildah's storage); remove it by hand",
                  file=sys.stderr)
    spent = ", ".join(f"{k} {v:.0f} s" for k, v in times.items())
    print(f"image-test: passed in {time.monotonic() - start:.0f} s ({spent}); image {digest}, "
          f"FROM {STANDIN}@{base_digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
