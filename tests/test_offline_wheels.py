"""scripts/offline_wheels.sh: the reference wheels laid out in folders that each travel in one call
(the checkout beside every folder, .device/ beside the last), and the parts joined by number
whatever the folders' order or the locale. Small fake wheels in a throwaway git checkout, a small
per-call limit (OFFLINE_WHEELS_CALL_BYTES) instead of 64 MiB; no network."""

import hashlib
import os
import random
import shutil
import subprocess

import pytest

from fusebench.paths import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "scripts" / "offline_wheels.sh"
BIG = "big_libs-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
OTHERS = {"small_a-1.0-py3-none-any.whl": 3_000, "small_b-2.0-py3-none-any.whl": 2_000}


def _bytes(n, seed):
    return random.Random(seed).randbytes(n)


@pytest.fixture
def checkout(tmp_path):
    """A git checkout holding the script, a lock with the fake wheels' hashes and a .gitignore; the
    wheels (BIG 100 000 B, OTHERS) in wheels/ outside it. Returns (root, wheels, checkout bytes)."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "scripts" / SCRIPT.name)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    sizes = {BIG: 100_000, **OTHERS}
    lock = []
    for i, (name, size) in enumerate(sizes.items()):
        (wheels / name).write_bytes(_bytes(size, i))
        digest = hashlib.sha256((wheels / name).read_bytes()).hexdigest()
        lock.append(f"{name.split('-')[0]}==1.0 \\\n    --hash=sha256:{digest}\n")
    (root / "requirements-reference.lock").write_text("".join(lock))
    (root / ".gitignore").write_text("/.device/\n/.refwheels/\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    files = (root / "scripts" / SCRIPT.name, root / "requirements-reference.lock", root / ".gitignore")
    tracked = sum(p.stat().st_size for p in files)
    return root, wheels, tracked


def _run(root, *args, call=None, env=None):
    environ = dict(os.environ, **(env or {}))
    if call is not None:
        environ["OFFLINE_WHEELS_CALL_BYTES"] = str(call)
    return subprocess.run(["bash", str(root / "scripts" / SCRIPT.name), *map(str, args)], cwd=root,
                          capture_output=True, text=True, env=environ)


def _device(root, size):
    (root / ".device").mkdir()
    (root / ".device" / "repo.bundle").write_bytes(b"\0" * size)


def _files(folder):
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir())}


def test_folders_hold_the_largest_parts_a_call_allows_and_the_last_fits_beside_device(checkout):
    root, wheels, tracked = checkout
    _device(root, 4_000)
    out = _run(root, "relayout", wheels, "--headroom", 0, call=tracked + 40_000)
    assert out.returncode == 0, out.stderr
    layout = root / ".refwheels"
    assert sorted(p.name for p in layout.iterdir()) == ["a", "b", "c"]
    # 40 000 B per call beside the checkout: the last folder has 40 000 - 4 000 (.device) - 5 000
    # (the other wheels) = 31 000 B for a part, so two parts of 40 000 B go alone, 20 000 B remain
    assert _files(layout / "a") == {f"{BIG}.part-00": 40_000}
    assert _files(layout / "b") == {f"{BIG}.part-01": 40_000}
    assert _files(layout / "c") == {f"{BIG}.part-02": 20_000, **OTHERS}
    lines = out.stderr.splitlines()
    assert [line.split()[1] for line in lines] == [".refwheels/a", ".refwheels/b", ".refwheels/c"]
    assert "carry .refwheels/c and .device" in lines[2]
    assert 'install /tmp/refa .refwheels/c)"' in lines[2]
    assert "cp .refwheels/a/* /tmp/refa/" in lines[0]


def test_the_last_folder_is_only_the_other_wheels_where_the_parts_fill_the_early_ones(checkout):
    root, wheels, tracked = checkout
    _device(root, 20_000)  # the last folder has 15 000 B for a part: 100 000 B need three early folders
    out = _run(root, "relayout", wheels, "--headroom", 0, call=tracked + 40_000)
    assert out.returncode == 0, out.stderr
    layout = root / ".refwheels"
    assert [_files(layout / d) for d in "abcd"] == [
        {f"{BIG}.part-00": 40_000}, {f"{BIG}.part-01": 40_000}, {f"{BIG}.part-02": 20_000}, OTHERS]
    assert "carry .refwheels/d and .device (+ checkout" in out.stderr.splitlines()[3]


def test_headroom_and_beside_last_shrink_the_folders(checkout):
    root, wheels, tracked = checkout
    # no .device here: --beside-last says its size (0.01 MiB = 10 485 B); --headroom 0.005 MiB = 5 242 B
    out = _run(root, "relayout", wheels, "--headroom", 0.005, "--beside-last", 0.01, call=tracked + 45_242)
    assert out.returncode == 0, out.stderr
    layout = root / ".refwheels"
    room = 40_000
    assert _files(layout / "a") == {f"{BIG}.part-00": room}
    last = _files(layout / "c")
    assert sum(last.values()) + 10_485 <= room
    assert last == {f"{BIG}.part-02": 20_000, **OTHERS}


def test_without_device_sixteen_mib_are_kept_for_it(checkout):
    root, wheels, tracked = checkout
    out = _run(root, "relayout", wheels, call=tracked + 40_000)
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1
    assert "and .device (16.0 MiB) do not fit" in out.stderr
    assert not (root / ".refwheels").exists()


def test_everything_in_one_folder_where_it_fits(checkout):
    root, wheels, tracked = checkout
    out = _run(root, "relayout", wheels, "--headroom", 0, "--beside-last", 0, call=tracked + 105_000)
    assert out.returncode == 0, out.stderr
    assert _files(root / ".refwheels" / "a") == {BIG: 100_000, **OTHERS}
    assert 'install .refwheels/a)"' in out.stderr and len(out.stderr.splitlines()) == 1


def _many_parts(root, wheels, tracked):
    """BIG in 12 parts: 9 000 B per call, 1 000 B of .device and 5 000 B of other wheels leave 3 000 B."""
    _device(root, 1_000)
    out = _run(root, "relayout", wheels, "--headroom", 0, call=tracked + 9_000)
    assert out.returncode == 0, out.stderr
    folders = sorted((root / ".refwheels").iterdir())
    assert [f.name for f in folders] == list("abcdefghijkl")
    assert [_files(f) for f in folders[:11]] == [{f"{BIG}.part-{i:02d}": 9_000} for i in range(11)]
    assert _files(folders[11]) == {f"{BIG}.part-11": 1_000, **OTHERS}
    return folders


def test_join_orders_parts_by_number_whatever_the_folders_order_and_locale(checkout, tmp_path):
    root, wheels, tracked = checkout
    folders = _many_parts(root, wheels, tracked)
    shuffled = folders[::-1]
    random.Random(0).shuffle(shuffled)
    locales = subprocess.run(["locale", "-a"], capture_output=True, text=True).stdout.split()
    locale = "en_US.UTF-8" if {"en_US.utf8", "en_US.UTF-8"} & set(locales) else "C.UTF-8"
    into = tmp_path / "joined"
    out = _run(root, "join", *shuffled, "--into", into, env={"LC_ALL": locale})
    assert out.returncode == 0, out.stderr
    joined = {p.name: p.read_bytes() for p in into.iterdir()}
    assert joined == {p.name: p.read_bytes() for p in wheels.iterdir()}


def test_join_reads_the_part_number_not_its_spelling(checkout, tmp_path):
    root, wheels, _ = checkout
    data = (wheels / BIG).read_bytes()
    dirs = [tmp_path / d for d in ("x", "y")]
    for d in dirs:
        d.mkdir()
    for number, (d, piece) in zip(("1", "000", "02"), ((dirs[1], data[:10]), (dirs[0], data[10:20]),
                                                       (dirs[1], data[20:]))):
        # "1" holds the first bytes only to show the number, not the name's order, decides
        (d / f"{BIG}.part-{number}").write_bytes(piece)
    out = _run(root, "join", *dirs, "--into", tmp_path / "joined")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "joined" / BIG).read_bytes() == data[10:20] + data[:10] + data[20:]


def test_install_refuses_a_missing_part_in_one_line(checkout):
    root, wheels, tracked = checkout
    folders = _many_parts(root, wheels, tracked)
    (folders[3] / f"{BIG}.part-03").unlink()
    out = _run(root, "install", *folders, "--target", root / "site")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [f"offline_wheels: {BIG}: part 3 missing (parts 0 to 11 expected in "
                                       f"{' '.join(map(str, folders))})"]
    assert not (root / "site").exists()


def test_install_refuses_a_repeated_part_in_one_line(checkout, tmp_path):
    root, wheels, tracked = checkout
    folders = _many_parts(root, wheels, tracked)
    extra = tmp_path / "extra"
    extra.mkdir()
    shutil.copy(folders[5] / f"{BIG}.part-05", extra / f"{BIG}.part-005")
    out = _run(root, "install", *folders, extra)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [f"offline_wheels: {BIG}: part 5 twice ({folders[5]}/{BIG}.part-05 and "
                                       f"{extra}/{BIG}.part-005)"]


def test_relayout_from_old_folders_replaces_them_and_keeps_them_on_a_failed_check(checkout):
    root, wheels, tracked = checkout
    folders = _many_parts(root, wheels, tracked)
    before = {f.name: _files(f) for f in folders}
    # a wheel the lock does not know: refused, nothing replaced
    (folders[0] / "stranger-1.0-py3-none-any.whl").write_bytes(b"x" * 10)
    out = _run(root, "relayout", *folders, "--headroom", 0, call=tracked + 60_000)
    assert out.returncode == 2
    assert out.stderr == ("offline_wheels: stranger-1.0-py3-none-any.whl: its sha256 is not in "
                          "requirements-reference.lock\n")
    (folders[0] / "stranger-1.0-py3-none-any.whl").unlink()
    assert {f.name: _files(f) for f in sorted((root / ".refwheels").iterdir())} == before
    # the 12 folders become 2: 60 000 B alone, then 40 000 B beside .device (1 000 B) and the others
    out = _run(root, "relayout", *folders, "--headroom", 0, call=tracked + 60_000)
    assert out.returncode == 0, out.stderr
    layout = root / ".refwheels"
    assert sorted(p.name for p in layout.iterdir()) == ["a", "b"]
    assert _files(layout / "a") == {f"{BIG}.part-00": 60_000}
    assert _files(layout / "b") == {f"{BIG}.part-01": 40_000, **OTHERS}


@pytest.mark.parametrize("args, line", [
    (["download", "--budget-b", "48"],
     "--budget-b is gone: the folders' sizes follow from the checkout and .device "
     "(--beside-last, --headroom)"),
    (["relayout", "x", "--dir", "scripts"],
     "--dir scripts: git does not ignore it, so it would travel in every call"),
    (["relayout", "nowhere"], "nowhere: no such folder"),
    (["download", "--headroom", "lots"], "--headroom lots: a size in MiB (e.g. 1 or 0.5)"),
    (["join", "scripts"], "join needs --into OUT"),
])
def test_bad_input_is_one_line_and_exit_2(checkout, args, line):
    root, _, _ = checkout
    (root / "x").mkdir()
    out = _run(root, *args)
    assert out.returncode == 2 and out.stderr == f"offline_wheels: {line}\n"
