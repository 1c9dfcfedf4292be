"""Run records stored compressed (``records/<machine>/<sha8>.json.xz``, ``records/README.md``):
compact JSON in one xz stream, the plain ``<sha8>.json`` of older hosts still read, and the
decompression of a file from another host bounded: a bomb, a truncated or corrupt stream refused
in one line naming it, nothing written."""

import json
import lzma
import os
import shutil
import struct
import subprocess
import sys
import zlib
from dataclasses import asdict
from pathlib import Path

import pytest
from committed import committed, committed_folder

from fusebench.errors import UsageError
from fusebench.paths import PROJECT_ROOT
from fusebench.record import MAX_JSON, Record, Sweep, decode
from fusebench.storage import collect, runrecord, transaction, untrusted

COMMIT = "b34537daa35e35ef4d13d50f6e068f35a1ddeda0"  # a committed H200 run, 54 KB compressed
STORED = PROJECT_ROOT / "records" / "h200" / f"{COMMIT[:8]}.json.xz"


def _sweep(commit: str, op: str, ms: float) -> Sweep:
    return Sweep({"git_commit": commit}, 4000.0, "default",
                 [Record(op, "torch", "1024", "float32", device_time_ms=ms)], rounds=3)


def _host(folder: Path, name: str, data: bytes) -> Path:
    """A host's output folder holding one record file ``name`` of h200 and a result file of its
    commit (a record is collected only beside its run's results)."""
    (folder / "records" / "h200").mkdir(parents=True)
    (folder / "records" / "h200" / name).write_bytes(data)
    _result(folder / "results", name[:8])
    return folder


def _result(results: Path, sha8: str) -> None:
    """The committed H200 result of COMMIT, as the result of a commit starting ``sha8``, and its
    machine.json, in ``results/h200/``."""
    (results / "h200").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PROJECT_ROOT / "results" / "h200" / "machine.json", results / "h200" / "machine.json")
    data = json.loads((PROJECT_ROOT / "results" / "h200" / f"{COMMIT[:8]}-existing-py3.12.json").read_text())
    data["commit_hash"] = sha8 + data["commit_hash"][8:]
    (results / "h200" / f"{sha8}-existing-py3.12.json").write_text(json.dumps(data))


def _committed_json() -> dict:
    return json.loads(decode(STORED.read_bytes(), STORED.name))


# -- the stored form -------------------------------------------------------------------------------

def test_a_record_is_stored_as_compact_json_in_one_xz_stream(tmp_path):
    sweep = _sweep("a" * 40, "gelu", 1.5)
    path = runrecord.save(sweep, tmp_path, "h200", "a" * 40)
    assert path == tmp_path / "h200" / "aaaaaaaa.json.xz"
    raw = path.read_bytes()
    assert raw[:6] == b"\xfd7zXZ\x00"  # the xz magic
    text = lzma.decompress(raw).decode()
    assert text == json.dumps(asdict(sweep), separators=(",", ":"))
    assert runrecord.read(path) == sweep


def test_a_run_stored_over_a_plain_record_merges_it_and_removes_it(tmp_path):
    """A host that stored a plain record before (an older commit) then runs another op of the same
    commit: the ops it did not run are kept, and only the compressed file is left."""
    commit = "a" * 40
    plain = runrecord.plain_path(tmp_path, "h200", commit)
    plain.parent.mkdir(parents=True)
    plain.write_text(runrecord.to_json(_sweep(commit, "gelu", 1.0)))
    path = runrecord.save(_sweep(commit, "softmax", 2.0), tmp_path, "h200", commit)
    assert sorted(os.listdir(tmp_path / "h200")) == ["aaaaaaaa.json.xz"]
    assert {r.op: r.device_time_ms for r in runrecord.read(path).records} == {"gelu": 1.0, "softmax": 2.0}


def test_a_staged_record_replaces_its_plain_form_when_the_transaction_commits(tmp_path):
    commit = "a" * 40
    results, records = tmp_path / "results", tmp_path / "records"
    plain = runrecord.plain_path(records, "h200", commit)
    plain.parent.mkdir(parents=True)
    plain.write_text(runrecord.to_json(_sweep(commit, "gelu", 1.0)))
    with transaction.locked(results, "bench", (records,)):
        txn = transaction.Transaction(results, (records,))
        path = runrecord.stage(_sweep(commit, "softmax", 2.0), records, "h200", commit, txn)
        assert plain.exists() and not path.exists()  # nothing stored before the commit
        txn.commit()
    assert sorted(os.listdir(records / "h200")) == ["aaaaaaaa.json.xz"]
    assert {r.op for r in runrecord.read(path).records} == {"gelu", "softmax"}


def test_a_plain_record_still_reads_and_the_compressed_one_wins_where_both_are(tmp_path):
    folder = tmp_path / "h200"
    folder.mkdir()
    (folder / "bbbbbbbb.json").write_text(runrecord.to_json(_sweep("b" * 40, "gelu", 1.0)))
    (folder / "cccccccc.json").write_text(runrecord.to_json(_sweep("c" * 40, "gelu", 1.0)))
    (folder / "cccccccc.json.xz").write_bytes(runrecord.to_stored(_sweep("c" * 40, "gelu", 3.0)))
    (folder / "notes.txt").write_text("not a record")
    assert runrecord.record_files(folder) == [folder / "bbbbbbbb.json", folder / "cccccccc.json.xz"]
    assert runrecord.all_records(tmp_path) == [("h200", folder / "bbbbbbbb.json"),
                                              ("h200", folder / "cccccccc.json.xz")]
    assert runrecord.find(tmp_path, "h200", "c" * 40) == folder / "cccccccc.json.xz"
    assert runrecord.load(tmp_path, "h200", "b" * 40).records[0].device_time_ms == 1.0
    assert runrecord.load(tmp_path, "h200", "c" * 40).records[0].device_time_ms == 3.0
    assert runrecord.sha8(folder / "cccccccc.json.xz") == "cccccccc"


@pytest.mark.slow  # decompresses and checks all 22 committed records, and asks git for their old form
def test_every_committed_record_reads_as_its_plain_form_did(tmp_path):
    """The records were rewritten once from indented JSON: each reads (``runrecord.read``,
    checked as untrusted input) as the same Sweep, and decompresses to the same JSON, as the
    plain file it replaced (from git's history, where the checkout has it)."""
    paths = committed("records/*/*.json.xz")
    assert len(paths) >= 22 and not committed("records/*/*.json")
    folder = committed_folder("records")
    for path in paths:
        rel = path.relative_to(PROJECT_ROOT).as_posix()
        old = rel.removesuffix(".xz")
        gone = subprocess.run(["git", "log", "-1", "--format=%H", "--diff-filter=D", "--", old],
                              cwd=PROJECT_ROOT, capture_output=True, text=True).stdout.strip()
        if not gone:
            pytest.skip(f"no git history of {old} in this checkout")
        plain = tmp_path / path.parent.name / Path(old).name
        plain.parent.mkdir(exist_ok=True)
        plain.write_bytes(subprocess.run(["git", "show", f"{gone}^:{old}"], cwd=PROJECT_ROOT,
                                         capture_output=True, check=True).stdout)
        new = folder / path.relative_to(PROJECT_ROOT / "records")
        assert json.loads(decode(new.read_bytes(), new.name)) == json.loads(plain.read_bytes()), rel
        assert runrecord.read(new) == runrecord.read(plain), rel


# -- bounded decompression: untrusted input ---------------------------------------------------------

@pytest.fixture(scope="module")
def bomb() -> bytes:
    """10 KB of xz that decompress to one byte more than a record's JSON may take."""
    data = lzma.compress(b" " * (MAX_JSON + 1), preset=0)
    assert len(data) < 16 << 10
    return data


def _big_dictionary() -> bytes:
    """A tiny xz stream whose header asks the decoder for a 4 GiB dictionary."""
    raw = bytearray(lzma.compress(b"{}"))
    assert raw[12:16] == b"\x02\x00\x21\x01"  # block header: 12 bytes, one filter, LZMA2, 1 property
    raw[16] = 40  # the dictionary size code: 4 GiB - 1
    raw[20:24] = struct.pack("<I", zlib.crc32(bytes(raw[12:20])))  # the header's CRC32
    return bytes(raw)


BOMB_WHY = ("decompresses to more than the 64 MB a record's JSON may take; refused unread (a compressed "
            "bomb, or no record a run writes)")
#: how a record file is spoiled -> the one line's reason
SPOILED = {
    "truncated": (lambda raw: raw[: len(raw) // 2], "truncated: its xz stream ends before its end marker"),
    "corrupt": (lambda raw: raw[:1000] + bytes([raw[1000] ^ 0xFF]) + raw[1001:],
                "not a whole xz stream (Corrupt input data); corrupt or not xz"),
    "not xz": (lambda raw: b'{"format_version": 2}',
               "not a whole xz stream (Input format not supported by decoder); corrupt or not xz"),
    "bytes after it": (lambda raw: raw + b"\0\0\0\0trailing", "12 bytes after its xz stream"),
    "a 4 GiB dictionary": (lambda raw: _big_dictionary(),
                           "not a whole xz stream (Memory usage limit exceeded); corrupt or not xz"),
}


def test_a_compressed_bomb_is_refused_by_every_reader_in_one_line(tmp_path, bomb):
    path = tmp_path / "h200" / f"{COMMIT[:8]}.json.xz"
    path.parent.mkdir()
    path.write_bytes(bomb)
    with pytest.raises(untrusted.Refused) as refused:
        untrusted.check(path, "record", "h200")
    assert str(refused.value) == f"{path}: {BOMB_WHY}"
    with pytest.raises(UsageError) as exc:
        runrecord.read(path)
    assert str(exc.value) == f"cannot read run record {path}: {BOMB_WHY}"
    with pytest.raises(ValueError, match="decompresses to more than the 64 MB"):
        Sweep.load(path)


@pytest.mark.parametrize("case", sorted(SPOILED))
def test_a_spoiled_compressed_record_is_named_and_refused(tmp_path, case):
    spoil, why = SPOILED[case]
    path = tmp_path / "h200" / STORED.name
    path.parent.mkdir()
    path.write_bytes(spoil(STORED.read_bytes()))
    with pytest.raises(untrusted.Refused) as refused:
        untrusted.check(path, "record", "h200")
    assert str(refused.value) == f"{path}: {why}"


def test_collect_refuses_a_bomb_and_a_truncated_record_writing_nothing(tmp_path, bomb):
    dest = tmp_path / "dest" / "results"
    host = _host(tmp_path / "host", "deadbeef.json.xz", bomb)
    (host / "records" / "h200" / STORED.name).write_bytes(STORED.read_bytes()[:2000])
    plan = collect.plan([host], dest)
    records = host / "records" / "h200"
    assert plan.unreadable == [f"{records / 'b34537da.json.xz'}: {SPOILED['truncated'][1]}",
                               f"{records / 'deadbeef.json.xz'}: {BOMB_WHY}"]
    with pytest.raises(UsageError, match="refused"):
        collect.apply(plan, dest)
    assert not dest.exists() and not runrecord.records_dir(dest).exists()


@pytest.mark.slow  # the command in a fresh process
def test_make_collect_of_a_bomb_is_one_line_exit_2_and_nothing_written(tmp_path, bomb):
    dest = tmp_path / "dest" / "results"
    host = _host(tmp_path / "host", "deadbeef.json.xz", bomb)
    out = subprocess.run([sys.executable, "-m", "fusebench", "collect", str(host), "--into", str(dest)],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    bad = host / "records" / "h200" / "deadbeef.json.xz"
    assert [ln for ln in out.stderr.splitlines() if ln.startswith("collect: error:")] == [
        f"collect: error: {bad}: {BOMB_WHY}"]
    assert "Traceback" not in out.stderr
    assert not dest.exists() and not runrecord.records_dir(dest).exists()


def test_a_symlinked_compressed_record_is_refused_unread(tmp_path):
    link = tmp_path / "h200" / STORED.name
    link.parent.mkdir()
    link.symlink_to(STORED)
    with pytest.raises(UsageError, match="a symlink; files from another host must be regular files"):
        runrecord.read(link)


# -- collect: records of hosts running an older commit -----------------------------------------------

def test_collect_stores_an_older_hosts_plain_record_compressed_keeping_its_time(tmp_path):
    data = _committed_json()
    host = _host(tmp_path / "old-host", f"{COMMIT[:8]}.json", json.dumps(data, indent=1).encode())
    plain = host / "records" / "h200" / f"{COMMIT[:8]}.json"
    os.utime(plain, (1_700_000_000, 1_700_000_000))
    dest = tmp_path / "dest" / "results"
    with collect.locked(dest):
        written = collect.apply(collect.plan([host], dest), dest)
    stored = runrecord.records_dir(dest) / "h200" / STORED.name
    assert stored in written and os.listdir(stored.parent) == [STORED.name]
    assert stored.read_bytes() == STORED.read_bytes()  # the same bytes the committed record has
    assert stored.stat().st_mtime == 1_700_000_000
    # the compressed form of the same record, collected into a folder holding the plain one: the same
    into = tmp_path / "into" / "results"
    shutil.copytree(host / "records", runrecord.records_dir(into))
    shutil.copytree(host / "results", into)
    plan = collect.plan([_host(tmp_path / "new-host", STORED.name, STORED.read_bytes())], into)
    assert not plan.refused and plan.copies == [] and plan.merges == {}
    assert runrecord.records_dir(into) / "h200" / STORED.name in plan.same


def test_a_share_merged_into_a_stored_plain_record_replaces_it(tmp_path):
    commit = "c3519fe813c0" + "0" * 28
    dest = tmp_path / "dest" / "results"
    records = runrecord.records_dir(dest)
    plain = runrecord.plain_path(records, "h200", commit)
    plain.parent.mkdir(parents=True)
    gelu = Sweep({"git_commit": commit}, 30.0, "cpu-quick", [
        Record("gelu", "eager", "16384", "float32", wall_time_ms=1.0, rounds=[{"wall_time_ms": 1.0}] * 3)],
        rounds=3, ceilings_gbps=[30.0])
    plain.write_text(runrecord.to_json(gelu))
    softmax = Sweep(dict(gelu.environment), 30.0, "cpu-quick", [
        Record("softmax", "eager", "16384", "float32", wall_time_ms=2.0, rounds=[{"wall_time_ms": 2.0}] * 3)],
        rounds=3, ceilings_gbps=[30.0])
    host = _host(tmp_path / "host", f"{commit[:8]}.json.xz", runrecord.to_stored(softmax))
    _result(dest, commit[:8])
    with collect.locked(dest):
        written = collect.apply(collect.plan([host], dest), dest)
    stored = runrecord.record_path(records, "h200", commit)
    assert stored in written and os.listdir(records / "h200") == [stored.name]
    assert {r.op for r in runrecord.read(stored).records} == {"gelu", "softmax"}
