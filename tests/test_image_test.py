"""make image-test's own logic, checked without building (the build and the runs themselves are
`make image-test`, which CI runs after the tests): who the caller is, the one-line refusals when
it cannot set up, and the stand-in script's bad input."""

import os
import subprocess
import sys

import pytest

from fusebench.paths import PROJECT_ROOT
from scripts import image_test


def test_the_caller_is_sudos_user_or_this_one_and_never_root(monkeypatch):
    monkeypatch.setattr(os, "getuid", lambda: 0)
    monkeypatch.setattr(os, "getgid", lambda: 0)
    monkeypatch.delenv("SUDO_UID", raising=False)
    monkeypatch.delenv("SUDO_GID", raising=False)
    assert image_test.caller() == (4321, 4321) == image_test.STANDIN_CALLER
    monkeypatch.setenv("SUDO_UID", "1000")
    monkeypatch.setenv("SUDO_GID", "1001")
    assert image_test.caller() == (1000, 1001)
    monkeypatch.delenv("SUDO_UID")
    monkeypatch.delenv("SUDO_GID")
    monkeypatch.setattr(os, "getuid", lambda: 1500)
    monkeypatch.setattr(os, "getgid", lambda: 1600)
    assert image_test.caller() == (1500, 1600)


def test_a_failing_step_names_itself_with_the_end_of_its_output():
    with pytest.raises(image_test.Failed) as e:
        image_test.sh(["sh", "-c", "echo one; echo two >&2; exit 3"], what="the step")
    assert str(e.value).startswith("the step failed (exit 3): sh -c")
    assert e.value.log == "one\ntwo"
    assert image_test.sh(["sh", "-c", "echo ok"]) == "ok\n"


@pytest.mark.skipif(os.getuid() != 0, reason="the missing-tool refusal is reached only as root")
def test_cannot_set_up_without_the_tools_is_one_line_and_exit_2(tmp_path):
    out = subprocess.run([sys.executable, "-m", "scripts.image_test"], capture_output=True,
                         text=True, env={"PATH": str(tmp_path)})
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == ("image-test: cannot set up: not found: buildah (apt-get install buildah), "
                          "debootstrap (apt-get install debootstrap), unshare (apt-get install util-linux), "
                          "git (apt-get install git)\n")


def test_standin_base_bad_use_is_one_line():
    out = subprocess.run([str(PROJECT_ROOT / "scripts" / "standin_base.sh")], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr == "standin_base: usage: standin_base.sh CACHE_DIR\n"
