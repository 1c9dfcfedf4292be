"""Every committed run record reads through the record module and writes back the same JSON: the
stored values unchanged, only the fields added since it was written filled with their defaults.
Stored as compact JSON in xz (``records/<machine>/<sha8>.json.xz``), it writes back the same bytes."""

import json
import shutil
import subprocess
from dataclasses import MISSING, fields

import pytest
from committed import committed

from fusebench.paths import PROJECT_ROOT
from fusebench.record import FORMAT_VERSION, SEED, Record, Sweep, decode


def committed_records():
    """The committed run records: git's, not the folder's (a CPU run's record lies beside them,
    ignored)."""
    return committed("records/*/*.json.xz")


def stored_json(path):
    """The JSON of a stored record, decompressed."""
    return json.loads(decode(path.read_bytes(), path.name))


COMMITTED = committed_records()
FIELDS = {f.name for f in fields(Record)}
#: A record field's value when the stored file predates the field.
DEFAULTS = {f.name: f.default if f.default is not MISSING else f.default_factory()
            for f in fields(Record) if f.default is not MISSING or f.default_factory is not MISSING}


def test_the_records_are_committed():
    machines = {p.parent.name for p in COMMITTED}
    assert len(COMMITTED) >= 12 and {"h200", "h100-80gb-hbm3"} <= machines
    assert not any(m.startswith("cpu-") for m in machines)


def test_a_cpu_runs_record_is_not_taken_for_a_committed_one():
    """Issue 41, item 1: `make bench` then `make test` on a CPU. The run leaves its record in
    records/cpu-<arch>/ (ignored by git); the tests read the committed records only."""
    planted = PROJECT_ROOT / "records" / "cpu-testplanted" / "0123abcd.json.xz"
    assert not planted.parent.exists()
    try:
        planted.parent.mkdir()
        shutil.copyfile(COMMITTED[-1], planted)
        ignored = subprocess.run(["git", "check-ignore", "-q", str(planted)], cwd=PROJECT_ROOT)
        assert ignored.returncode == 0, ".gitignore no longer ignores a CPU machine's records"
        assert committed_records() == COMMITTED and planted not in COMMITTED
    finally:
        shutil.rmtree(planted.parent, ignore_errors=True)


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_committed_record_round_trips(path, tmp_path):
    stored = stored_json(path)
    sweep = Sweep.load(path)
    assert sweep.format_version == FORMAT_VERSION and len(sweep.records) == len(stored["records"]) > 0
    sweep.save(tmp_path / "again.json.xz")
    written = (tmp_path / "again.json.xz").read_bytes()
    again = stored_json(tmp_path / "again.json.xz")
    for key, value in stored.items():
        if key != "records":
            assert again[key] == value, key
    assert set(again) - set(stored) <= {"methods", "timing", "energy_scope"}
    assert again.get("energy_scope", "all") == stored.get("energy_scope", "all")  # before the scope: all
    assert again.get("methods", {}) == stored.get("methods", {})
    assert again.get("timing", {}) == stored.get("timing", {})  # before the stopping rule: none
    for old, new in zip(stored["records"], again["records"], strict=True):
        assert {k: new[k] for k in old} == old
        assert {k: v for k, v in new.items() if k not in old} == {k: DEFAULTS[k] for k in new if k not in old}
    if set(again) == set(stored) and all(set(r) == FIELDS for r in stored["records"]):
        assert written == path.read_bytes()  # a record of today's fields: the very same bytes
    Sweep.load(tmp_path / "again.json.xz").save(tmp_path / "thrice.json.xz")
    assert (tmp_path / "thrice.json.xz").read_bytes() == written


#: Record fields added after the newest committed GPU run (no committed record can hold them until
#: the next one is stored; empty this set then).
NOT_YET_RUN: set[str] = set()


def test_the_newest_fields_are_byte_identical_somewhere():
    """At least one committed record has every field of today's Record (less :data:`NOT_YET_RUN`),
    so the byte check runs."""
    assert NOT_YET_RUN <= FIELDS
    assert any(all(set(r) == FIELDS - NOT_YET_RUN for r in stored_json(p)["records"])
               for p in COMMITTED)


def test_a_record_of_another_format_is_refused(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format_version": FORMAT_VERSION - 1, "records": []}))
    with pytest.raises(ValueError, match=f"not a fusebench sweep of format {FORMAT_VERSION}"):
        Sweep.load(path)


def test_a_new_record_carries_the_inputs_seed():
    from fusebench.measure import inputs

    assert Record("gelu", "torch", "1024", "float32").seed == SEED == inputs.SEED == 20261129
