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
        assert f"lock check: CUDA build, Python {v}: 67 packages, all pinned and hashed" in out.stdout
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
