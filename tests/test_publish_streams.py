"""Publishing streams what it reads (issue 42 item 12): the A/A history and the Runs page read one
run record at a time and keep none, the history reads a machine's newest records only, and the
nesting check reads the file's text as the parsed value would say."""

import json
import os
import shutil
import weakref

import pytest
from committed import committed

from fusebench.gate import noise
from fusebench.site import site
from fusebench.storage import runrecord, untrusted


class Tracked:
    """Records handed out one at a time, each watched: :attr:`most` is the largest number of
    earlier records still alive when the next one was asked for."""

    def __init__(self, read):
        self.read, self.alive, self.most, self.count = read, [], 0, 0

    def __call__(self, *args, **kwargs):
        self.alive = [r for r in self.alive if r() is not None]
        self.most = max(self.most, len(self.alive))
        sweep = self.read(*args, **kwargs)
        self.alive.append(weakref.ref(sweep))
        self.count += 1
        return sweep


def _records(tmp_path, n=4):
    """``n`` committed H200 records in ``tmp_path/records/h200/``."""
    folder = tmp_path / "records" / "h200"
    folder.mkdir(parents=True)
    for path in committed("records/h200/*.json.xz")[:n]:
        shutil.copyfile(path, folder / path.name)
    return folder


def test_history_keeps_no_record(tmp_path, monkeypatch):
    """The A/A history summarises each record as it is read: when a record is read, at most the
    one before it is still alive (all of them were, held for the pairs)."""
    folder = _records(tmp_path)
    tracked = Tracked(runrecord.read)
    monkeypatch.setattr(runrecord, "read", tracked)
    history = noise.from_records(folder, tmp_path)  # no git there: no pair, every record read
    assert tracked.count == 4
    assert tracked.most <= 1
    assert history.pairs == 0


def test_history_reads_the_newest_records_only(tmp_path, monkeypatch):
    """Of a machine's records, the history reads the HISTORY_RUNS newest (by file time without
    git), and a history of those alone equals the history of the same records read in full."""
    folder = _records(tmp_path)
    paths = sorted(folder.glob("*.json.xz"))
    for i, path in enumerate(paths):
        os.utime(path, (1000 + i, 1000 + i))
    monkeypatch.setattr(noise, "HISTORY_RUNS", 2)
    tracked = Tracked(runrecord.read)
    monkeypatch.setattr(runrecord, "read", tracked)
    noise.from_records(folder, tmp_path)
    assert tracked.count == 2
    assert noise.newest(paths, tmp_path, 2) == paths[2:]
    assert noise.newest(paths, tmp_path, 10) == paths


def test_history_from_an_iterator_equals_from_a_list():
    """Summaries change no sample: records given as a list or read from an iterator give the same
    pairs and samples."""
    sweeps = [runrecord.read(p) for p in committed("records/h200/*.json.xz")]
    a = noise.History(sweeps, lambda x, y: set())
    b = noise.History(iter(sweeps), lambda x, y: set())
    assert a.pairs == b.pairs > 0
    assert dict(a.samples) == dict(b.samples) and a.bands == b.bands
    assert sum(len(v) for v in a.samples.values()) > 0


def test_runs_page_keeps_no_record(tmp_path, monkeypatch):
    """The Runs page is written as each record is read: at most the record before is alive when
    the next is read, and the page has every record's section."""
    folder = _records(tmp_path)
    tracked = Tracked(runrecord.read)
    monkeypatch.setattr(runrecord, "read", tracked)
    page = site.write_runs_page(tmp_path / "html", folder.parent).read_text()
    assert tracked.count == 4
    assert tracked.most <= 1
    assert page.count('">h200 ') == 4
    assert page.rstrip().endswith("</html>")


@pytest.mark.parametrize("value", [[], {}, 1, "x[[{", [[[1]], {"a": [2, {"b": "]}"}]}],
                                   {"a\\\"[": [[]]}, json.loads("[" * 20 + "]" * 20)])
def test_text_depth_is_the_values_depth(value):
    """The nesting read off the text is the parsed value's (capped past MAX_DEPTH)."""
    text = json.dumps(value).encode()
    assert untrusted.text_depth(text) == min(untrusted.depth(value), untrusted.MAX_DEPTH + 1)
