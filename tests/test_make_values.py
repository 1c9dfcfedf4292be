"""Issue 56, item 12: a make variable reaches its command as one argument, never as shell code
(the rule at the top of the Makefile). A git branch name may hold ``;``, ``$``, ``(``, ``)`` and
backquotes, and CI passes branch names: each payload below created its file through make."""

import os
import subprocess

import pytest

from fusebench.paths import PROJECT_ROOT

#: (make arguments, the argument fusebench must get), ``{P}`` the file a payload would create.
PAYLOADS = [
    (["ab", "BASE=$$(touch {P})"], "--base=$(touch {P})"),
    (["ab", "BASE=`touch {P}`"], "--base=`touch {P}`"),
    (["ab", "BASE=HEAD", "HEAD=x;touch {P}"], "--head=x;touch {P}"),
    (["ab", "BASE=x", "BISECT_CACHE=/tmp/it's; touch {P}"], "/tmp/it's; touch {P}"),
    (["bisect", "GOOD=x;touch {P}", "BAD=y", "CASE=gelu/torch/1/float32"], "x;touch {P}"),
    (["bisect", "GOOD=x", "BAD=y", "CASE=a/b/c/d$$(touch$${IFS}{P})"], "--case=a/b/c/d$(touch${IFS}{P})"),
    (["plots", "MACHINE=x;touch {P}"], "x;touch {P}"),
    (["compare", "BASE=x", "MACHINE=h200'; touch {P}; '"], "h200'; touch {P}; '"),
    (["compare", "BASE=x", "FACTOR=1.04|touch {P}"], "1.04|touch {P}"),
    (["collect", "FROM=x;touch$${IFS}{P}"], "x;touch${IFS}{P}"),
    (["collect", "FROM=a", "INTO=>{P}"], ">{P}"),
    (["list", "OP=gelu&&touch {P}"], "gelu&&touch {P}"),
    (["profile", "OP=gelu", "DTYPES=`touch {P}`"], "`touch {P}`"),
]

#: A stand-in for the interpreter: prints each argument it gets on a line of its own.
FAKE = "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n"


@pytest.fixture
def fake_python(tmp_path):
    path = tmp_path / "python"
    path.write_text(FAKE)
    path.chmod(0o755)
    return path


def _make(*args, env=None):
    top = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(["make", "-s", "--no-print-directory", *args, "DEPS="], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120, env={**top, **(env or {})})


@pytest.mark.parametrize("args, argument", PAYLOADS, ids=[" ".join(a) for a, _ in PAYLOADS])
def test_a_value_is_one_argument_never_shell(tmp_path, fake_python, args, argument):
    target = tmp_path / "created"
    args = [a.replace("{P}", str(target)) for a in args]
    out = _make(*args, f"PYTHON={fake_python}")
    assert out.returncode == 0, out.stderr
    assert not target.exists()
    assert argument.replace("{P}", str(target)) in out.stdout.splitlines(), out.stdout


def test_a_home_with_a_quote_is_no_shell_syntax_error(tmp_path, fake_python):
    """Item 15: a HOME holding ' was a shell syntax error in make ab (the cache was '$(HOME)/...');
    the cache now defaults to fusebench's own (``fusebench.paths.cache_dir``), not a make string."""
    home = tmp_path / "it's home"
    home.mkdir()
    out = _make("ab", "BASE=x", f"PYTHON={fake_python}", env={"HOME": str(home)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["-m", "fusebench", "ab", "--base=x"]
