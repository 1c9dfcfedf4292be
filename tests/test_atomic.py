"""One atomic writer (fusebench/atomic.py) for every file fusebench keeps (issue 43, item 3): a
unique temporary name, fsync, rename; a failed write leaves the old file and nothing else."""

import ast
import os
import threading

import pytest

from fusebench import atomic
from fusebench.paths import PROJECT_ROOT

#: Modules that rename files for another reason than writing one: the store's transaction (its
#: journal's renames) and publish (the new site swapped in for the old).
RENAMERS = {"fusebench/atomic.py", "fusebench/storage/transaction.py", "fusebench/site/site.py"}


def _renames(path):
    """Lines of ``path`` calling ``os.replace``/``os.rename`` or a method ``.replace(x)`` /
    ``.rename(x)`` with one argument and no keyword (a Path's rename; ``str.replace`` takes two,
    ``dataclasses.replace`` keywords)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("replace", "rename"):
            owner = node.func.value
            named = owner.id if isinstance(owner, ast.Name) else None
            if named == "os" or (len(node.args) == 1 and not node.keywords and named != "dataclasses"):
                lines.append(node.lineno)
    return lines


def test_no_module_writes_by_renaming_but_the_writer():
    files = [p for folder in ("fusebench", "kernels") for p in (PROJECT_ROOT / folder).rglob("*.py")]
    hits = {str(p.relative_to(PROJECT_ROOT)): n for p in files if (n := _renames(p))}
    assert set(hits) <= RENAMERS, {k: v for k, v in hits.items() if k not in RENAMERS}
    assert "fusebench/atomic.py" in hits


def test_a_write_replaces_the_file_with_a_plain_files_mode_and_leaves_nothing_else(tmp_path):
    path = tmp_path / "sub" / "a.json"
    atomic.write_atomic(path, "one")
    atomic.write_json(path, {"x": float("nan"), "t": (1, 2)}, indent=None)
    assert path.read_text() == '{"x": null, "t": [1, 2]}'
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask
    assert [p.name for p in path.parent.iterdir()] == ["a.json"]


def test_a_failed_write_leaves_the_old_file_and_no_part(tmp_path, monkeypatch):
    path = tmp_path / "a.txt"
    path.write_text("old")

    def broken(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", broken)
    with pytest.raises(OSError, match="No space left"):
        atomic.write_atomic(path, "new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_writers_of_one_file_at_once_never_collide(tmp_path):
    path = tmp_path / "a.txt"
    errors = []

    def write(i):
        try:
            for _ in range(20):
                atomic.write_atomic(path, f"writer {i}")
        except Exception as exc:  # a shared temporary name fails here (O_EXCL) or mixes contents
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and path.read_text() in {f"writer {i}" for i in range(4)}
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]
