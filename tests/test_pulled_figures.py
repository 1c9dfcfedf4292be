"""Issue 56, items 6 to 9: one check of every number and field of a file from another host, used
by collect and by every reader (``fusebench/storage/untrusted.py``): an integer of 400 digits, a
result of another GPU model in a machine's folder, a record without its result, a
``benchmarks.json`` asv's publish stops on, and the fields outside the figures (ceiling, peak,
repeats, bytes, rounds, date) are each one line naming the file, exit 2, in collect and in the
readers. Fast: the hosts are made of the committed H200 files (``test_safe_pull``'s)."""

import json
import shutil
from pathlib import Path

import pytest
from committed import committed, committed_folder
from test_safe_pull import HEAD8, _folder, _run

from fusebench.metrictable import BY_NAME
from fusebench.paths import PROJECT_ROOT
from fusebench.record import decode, encode
from fusebench.storage import collect, runrecord, untrusted

RESULT = f"{HEAD8}-existing-py3.12.json"


def _paths(results: Path) -> tuple[Path, Path]:
    """The result file and the run record of HEAD8 under ``results`` (and its records folder)."""
    return results / "h200" / RESULT, runrecord.records_dir(results) / "h200" / f"{HEAD8}.json.xz"


def _edit(path: Path, change) -> None:
    """Change the JSON of a result file or a record in place (a record stays compressed)."""
    data = json.loads(decode(path.read_bytes(), path.name))
    change(data)
    path.write_bytes(encode(data) if path.name.endswith(".xz") else json.dumps(data).encode())


def _poisoned(tmp_path: Path, where: str, change) -> tuple[Path, Path]:
    """A results folder of HEAD8 on h200 whose result (``where="result"``) or record was changed
    by ``change``; and that file."""
    results = _folder(tmp_path, "record", 0.018)
    path = _paths(results)[0 if where == "result" else 1]
    _edit(path, change)
    return results, path


def _one_error(code: int, err: list[str], prog: str, path: Path, *words: str) -> str:
    """The one error line of a refused command: exit 2 (never 1: a regression or a conflict),
    naming ``path`` and each of ``words``; no traceback."""
    errors = [line for line in err if "error" in line]
    assert code == 2 and len(errors) == 1, err
    assert errors[0].startswith(f"{prog}: error: ") and str(path) in errors[0], err
    assert all(w in errors[0] for w in words), (words, errors[0])
    assert not any("Traceback" in line or "OverflowError" in line for line in err), err
    return errors[0]


def _collect(capsys, tmp_path: Path, source: Path) -> tuple[int, list[str]]:
    code, err = _run(capsys, "collect", "--into", tmp_path / "into" / "results", source)
    assert not (tmp_path / "into" / "results" / "h200").exists(), "something was written"
    return code, err


# -- item 6: an integer of 400 digits ------------------------------------------------------------

def _huge_figure(where: str):
    def change(d):
        if where == "result":
            d["results"]["suite.Gelu.track_device_time"][0][0] = 10**400
        else:
            d["records"][0]["device_time_ms"] = 10**400
    return change


@pytest.mark.parametrize("where", ["result", "record"])
def test_an_integer_of_400_digits_is_refused_by_collect_naming_the_file(tmp_path, capsys, where):
    """Item 6: ``collect`` exited 1 (the conflict code) with ``OverflowError: int too large to
    convert to float``, no file named."""
    source, bad = _poisoned(tmp_path, where, _huge_figure(where))
    code, err = _collect(capsys, tmp_path, source)
    _one_error(code, err, "collect", bad, "an integer of 401 digits")


@pytest.mark.parametrize("where", ["result", "record"])
def test_an_integer_of_400_digits_in_a_stored_file_is_one_line_for_every_reader(tmp_path, capsys, where):
    """Item 6: stored by a pull, compare exited 1 (the regression code), and table, store and
    plots exited 1 with OverflowError."""
    results, bad = _poisoned(tmp_path, where, _huge_figure(where))
    code, err = _run(capsys, "compare", "--machine", "h200", "--base", HEAD8, "--head", HEAD8,
                     "--head-results", results)
    _one_error(code, err, "compare", bad, "an integer of 401 digits")
    if where == "record":
        for argv in (("table", bad), ("store", bad)):
            code, err = _run(capsys, *argv)
            _one_error(code, err, argv[0], bad, "an integer of 401 digits")
    else:
        code, err = _run(capsys, "plots", "--results", results, "--out", tmp_path / "plots")
        assert code == 2 and any(line.startswith(f"plots: error: cannot read {bad}: an integer of 401 "
                                                 "digits") for line in err), err
        refused = untrusted.checked_copy(results, tmp_path / "site")
        assert [(r.path, r.why.split(" (")[0]) for r in refused] == [(bad, "an integer of 401 digits")]


def test_a_large_integer_figure_is_judged_as_an_integer_never_converted():
    """Item 6: ``figure_problem`` called ``math.isfinite`` on an int (10**400: OverflowError);
    an integer a file may hold (19 digits) is compared as an int."""
    metric = BY_NAME["track_device_time"]
    assert untrusted.figure_problem(10**400, metric) == ("is larger than 3.6e+06, more than any run can "
                                                         "measure")
    assert untrusted.figure_problem(10**18, metric, asv=True).startswith("is larger than 3600,")
    assert untrusted.figure_problem(2, metric, asv=True) is None
    assert untrusted.figure_problem(True, metric) == "is not a finite number"
    assert untrusted.number_problem(10**400, untrusted.ANY_NUMBER).startswith("is larger than 1e+15")


# -- item 7: one GPU model per machine folder; a record beside its result -------------------------

def _a100(d):
    if "params" in d:
        d["params"]["gpu"] = "NVIDIA A100-SXM4-80GB"
    else:
        d["environment"]["gpu"] = "NVIDIA A100-SXM4-80GB"


def test_a_result_and_record_of_another_gpu_in_a_machines_folder_are_refused_by_collect(tmp_path, capsys):
    """Item 7: a result whose ``params.gpu`` and record said A100 in ``results/h200/`` (whose
    machine.json says H200) was collected, exit 0."""
    source = _folder(tmp_path, "record", 0.018)
    result, record = _paths(source)
    _edit(result, _a100)
    _edit(record, _a100)
    code, err = _collect(capsys, tmp_path, source)
    errors = [line for line in err if "error:" in line and "refused" not in line]
    assert code == 2 and [e.split(": ran on GPU")[0] for e in errors] == [
        f"collect: error: {result}", f"collect: error: {record}"], err
    assert all("'NVIDIA A100-SXM4-80GB' but its machine folder h200/ holds 'NVIDIA H200'" in e
               for e in errors)


def test_a_stored_result_of_another_gpu_is_refused_by_the_readers(tmp_path, capsys):
    """Item 7: the readers judge a pulled file by collect's rule: compare names it, publish
    leaves it out."""
    results = _folder(tmp_path, "record", 0.018)
    result, _ = _paths(results)
    _edit(result, _a100)
    code, err = _run(capsys, "compare", "--machine", "h200", "--base", HEAD8, "--head", HEAD8,
                     "--head-results", results)
    _one_error(code, err, "compare", result, "ran on GPU 'NVIDIA A100-SXM4-80GB'")
    refused = untrusted.checked_copy(results, tmp_path / "site")
    assert [r.path for r in refused] == [result]
    assert not (tmp_path / "site" / "h200" / RESULT).exists()


def test_a_record_whose_result_is_in_another_machines_folder_is_refused(tmp_path, capsys):
    """Item 7: a record collected into ``records/h200/`` whose result was in
    ``results/cpu-x86_64/`` was accepted, leaving a record with no result."""
    source = _folder(tmp_path, "record", 0.018)
    shutil.move(source / "h200", source / "cpu-x86_64")
    for path in (source / "cpu-x86_64").iterdir():
        _edit(path, lambda d: d.update(machine="cpu-x86_64") if "version" in d and "machine" in d
              else d["params"].update(machine="cpu-x86_64"))
    record = _paths(source)[1]
    code, err = _collect(capsys, tmp_path, source)
    _one_error(code, err, "collect", record, f"a run record with no result file of commit {HEAD8} in "
                                             f"{tmp_path / 'into' / 'results' / 'h200'}/")


# -- item 8: benchmarks.json by asv's own rule ----------------------------------------------------

def test_a_benchmark_with_fewer_parameter_names_than_axes_is_refused(tmp_path, capsys):
    """Item 8: ``param_names: ["a"]`` against 3 parameter axes passed collect; publish then died
    in asv's traceback with no ``publish: error`` line and no site."""
    source = _folder(tmp_path, "record", 0.018)
    bench = source / "benchmarks.json"
    shutil.copyfile(PROJECT_ROOT / "results" / "benchmarks.json", bench)
    _edit(bench, lambda d: d["suite.Gelu.track_device_time"].update(param_names=["a"]))
    code, err = _collect(capsys, tmp_path, source)
    _one_error(code, err, "collect", bench, "benchmark suite.Gelu.track_device_time: 1 parameter name(s) "
                                            "for 3 parameter axes")
    refused = untrusted.checked_copy(source, tmp_path / "site")  # what publish builds the site from
    assert [(r.path, r.why.split(":")[0]) for r in refused] == [
        (bench, "benchmark suite.Gelu.track_device_time")]
    kept = json.loads((tmp_path / "site" / "benchmarks.json").read_text())
    assert "suite.Gelu.track_device_time" not in kept and "suite.Gelu.track_bandwidth" in kept


def test_what_the_benchmark_check_accepts_asvs_publish_accepts():
    """asv's own check (``asv.commands.publish.check_benchmark_params``) passes every committed
    benchmark, and refuses what :func:`untrusted.check_benchmark` refuses."""
    from asv.commands.publish import check_benchmark_params

    data = json.loads((committed_folder("results") / "benchmarks.json").read_text())
    for name, bm in data.items():
        if name != "version":
            untrusted.check_benchmark(Path("b.json"), name, bm)
            check_benchmark_params(name, dict(bm))
    bad = dict(data["suite.Gelu.track_device_time"], param_names=["a"])
    with pytest.raises(ValueError):
        check_benchmark_params("suite.Gelu.track_device_time", bad)
    with pytest.raises(untrusted.Refused):
        untrusted.check_benchmark(Path("b.json"), "suite.Gelu.track_device_time", bad)


# -- item 9: the fields outside the figures -------------------------------------------------------

#: (name, where, change, the words of the refusal)
FIELDS = [
    ("ceiling nan", "record", lambda d: d.update(ceiling_gbps=float("nan")),
     "ceiling_gbps 'nan' is not a finite"),
    ("ceiling -5", "record", lambda d: d.update(ceiling_gbps=-5.0), "ceiling_gbps '-5.0' is not positive"),
    ("ceiling 0", "record", lambda d: d.update(ceiling_gbps=0), "ceiling_gbps '0' is not positive"),
    ("peak inf", "record", lambda d: d.update(peak_tflops=float("inf")), "peak_tflops 'inf' is not a finite"),
    ("repeats 0", "record", lambda d: d["records"][0].update(repeats=0), "records[0].repeats '0' is below 1"),
    ("bytes -1", "record", lambda d: d["records"][0].update(bytes_moved=-1),
     "records[0].bytes_moved '-1' is negative"),
    ("rounds 4000 digits", "record", lambda d: d.update(rounds=10**3999), "an integer of 4000 digits"),
    ("rounds 1000", "record", lambda d: d.update(rounds=1000), "rounds '1000' is larger than 100"),
    ("round repeats", "record", lambda d: d["records"][0]["rounds"][0].update(repeats=-3),
     "records[0].rounds[0].repeats '-3' is below 1"),
    ("date 1e30", "result", lambda d: d.update(date=1e30), "date '1e+30' is not an integer"),
    ("date 10**18", "result", lambda d: d.update(date=10**18),
     "is larger than 7.25812e+12, a date after 2200"),
    ("started_at", "result", lambda d: d["results"]["suite.Gelu.track_device_time"].__setitem__(3, -1),
     "started_at of suite.Gelu.track_device_time '-1' is negative"),
    ("result count", "result", lambda d: d["results"]["suite.Gelu.track_device_time"][0].pop(),
     "191 values for 192 parameter combinations"),
]


@pytest.mark.parametrize("where, change, words", [f[1:] for f in FIELDS], ids=[f[0] for f in FIELDS])
def test_a_field_outside_the_figures_is_refused_by_collect_and_the_readers(tmp_path, capsys, where, change,
                                                                          words):
    """Item 9: ``ceiling_gbps`` NaN, -5 or 0, ``peak_tflops`` inf, ``repeats`` 0, ``bytes_moved``
    -1, a 4000-digit ``rounds`` and ``date`` 1e30 passed and were stored."""
    source, bad = _poisoned(tmp_path, where, change)
    code, err = _collect(capsys, tmp_path, source)
    _one_error(code, err, "collect", bad, words)
    code, err = _run(capsys, "compare", "--machine", "h200", "--base", HEAD8, "--head", HEAD8,
                     "--head-results", source)
    _one_error(code, err, "compare", bad, words)


def test_a_date_no_run_writes_is_left_out_of_the_commits_a_hint_names(tmp_path):
    """Item 9: the commits ``make compare`` suggests are read lightly, by date: 10**18 ms
    overflowed the date shown (``OverflowError``)."""
    from fusebench.storage import results as results_mod

    results, bad = _poisoned(tmp_path, "result", lambda d: d.update(date=10**18))
    shutil.copyfile(PROJECT_ROOT / "results" / "h200" / "0a5fc94f-existing-py3.12.json",
                    results / "h200" / "0a5fc94f-existing-py3.12.json")
    assert [c[:8] for c, _ in results_mod.stored_commits(results, "h200")] == ["0a5fc94f"]
    assert results_mod.compare_hint(results, "h200") == "h200 has one commit (0a5fc94f) stored (make bench " \
                                                       "stores this machine's)"


def test_deeply_nested_stored_files_are_named_by_the_light_reads_too(tmp_path):
    """The reads before the checks (the commits a hint names, the files publish and plots count)
    parse as the checks do: 100,000 nested brackets were a RecursionError there."""
    from fusebench.storage import results as results_mod

    results = _folder(tmp_path, "record", 0.018)
    deep = "[" * 100000 + "]" * 100000
    (results / "benchmarks.json").write_text(deep)
    nested = results / "h200" / f"ffffffff-{RESULT.split('-', 1)[1]}"
    nested.write_text(deep)
    assert [c[:8] for c, _ in results_mod.stored_commits(results, "h200")] == [HEAD8]
    reader = results_mod.Reader(results)
    assert [(u.path, u.reason) for u in reader.check()] == [
        (results / "benchmarks.json", "JSON nested deeper than 16 levels"),
        (nested, "JSON nested deeper than 16 levels")]
    from fusebench.site import drawable, site_pages

    assert nested not in [u.path for u in drawable.undrawn(results)]
    (results / "h200" / "machine.json").write_text(deep)
    assert site_pages.gpu_title(results, "h200") == "h200"


def test_the_record_a_multi_gpu_bench_deals_cases_by_is_checked(tmp_path):
    """Item 6: ``make bench`` on several GPUs reads the newest stored record of its grid for the
    cases' costs: a pulled record whose round holds 10**400 repeats is passed over, never
    multiplied into a float."""
    import os

    from fusebench.measure import workers

    results = _folder(tmp_path, "record", 0.018)
    good = _paths(results)[1]
    bad = good.with_name("deadbeef.json")
    data = json.loads(decode(good.read_bytes(), good.name))
    data["environment"]["git_commit"] = "deadbeef" + "0" * 32
    data["records"][0]["rounds"][0]["repeats"] = 10**400
    bad.write_text(json.dumps(data))
    os.utime(good, (1_700_000_000, 1_700_000_000))  # the poisoned record is the newest
    earlier = workers.newest_record(good.parent.parent, "NVIDIA H200", "default", read=runrecord.read)
    assert earlier is not None and earlier.environment["git_commit"].startswith(HEAD8)


# -- every committed file passes every check --------------------------------------------------------

def test_every_committed_file_passes_the_checks_and_collects_whole(tmp_path):
    """What the checks accept includes every committed result, record, machine.json and
    benchmarks.json: each passes, of its folder's GPU model, each record beside its result; and
    the whole committed history collects into an empty folder."""
    files = committed("results/*/*.json") + committed("records/*/*.json.xz")
    assert len(files) > 40
    for path in files:
        kind = ("machine" if path.name == "machine.json" else "result" if path.parts[-3] == "results"
                else "record")
        checked = untrusted.check(path, kind, path.parent.name)
        gpu = untrusted.folder_gpu(PROJECT_ROOT / "results" / path.parent.name)
        assert gpu is not None and checked.gpu in (gpu, None), path
        if kind == "record":
            assert committed(f"results/{path.parent.name}/{runrecord.sha8(path)}-*.json"), path
    untrusted.check(PROJECT_ROOT / "results" / "benchmarks.json", "benchmarks")
    plan = collect.plan([committed_folder("results")], tmp_path / "results")
    assert not plan.refused, (plan.unreadable + plan.conflicts)[:3]
    assert len(plan.copies) == len(files)


# -- item 13: a stored session (ab --from) is a file from another host -----------------------------

@pytest.fixture(scope="module")
def session() -> dict:
    """A stored session (``ab.json``) of synthetic figures, one case 6 % slower at head."""
    from test_ab import CASES, A, B, Fake, both

    from fusebench.gate import ab

    return ab.run(None, Fake(both(CASES, {"gelu/triton/1048576/float32": 1.06}), seed=2), A, B).to_dict()


def _session_file(tmp_path: Path, session: dict, change=None, raw: str | None = None) -> Path:
    data = json.loads(json.dumps(session))
    if change:
        change(data)
    path = tmp_path / "s" / "ab.json"
    path.parent.mkdir()
    path.write_text(raw(data) if raw else json.dumps(data))
    return path


HOSTILE = [
    ("big int", lambda d: d.update(min_pairs=10**400), None, "an integer of 401 digits"),
    ("big figure", lambda d: d["cases"][0]["head"][0].update(device_time_ms=10**400), None,
     "an integer of 401 digits"),
    ("big in bounds", lambda d: d.update(max_pairs=10**18), None, "max_pairs: not a finite number above 0, "
                                                                  "at most 1e+06"),
    ("nested 100k", None, lambda d: json.dumps(d)[:-1] + ', "x": ' + "[" * 100000 + "]" * 100000 + "}",
     "JSON nested deeper than 16 levels"),
    ("top-level list", None, lambda d: "[1, 2]", "not a JSON object"),
    ("phase", lambda d: d.update(phases={"rounds": "long"}), None, "phases.rounds: not a finite number"),
]


@pytest.mark.parametrize("change, raw, words", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_a_hostile_session_is_one_line_exit_2(tmp_path, capsys, session, change, raw, words):
    """Item 13: big ints, 100k nesting and a top-level list each exited 1 (the regression code)
    with a Python exception."""
    path = _session_file(tmp_path, session, change, raw)
    code, err = _run(capsys, "ab", "--from", path)
    _one_error(code, err, "ab", path, f"not a valid session: {words}")


#: Terminal escapes (clear the screen, colour, an OSC 8 hyperlink), HTML and markdown links.
EVIL = ("\x1b[2J\x1b[31mRED\x1b[0m <img src=x onerror=alert(1)> [click](http://evil.example) | col "
        "\x1b]8;;http://evil.example\x07link\x1b]8;;\x07 www.evil.example `code` **bold**\u202e")


def test_a_sessions_text_reaches_the_terminal_and_the_markdown_escaped(tmp_path, capsys, session):
    """Item 13: terminal escapes, HTML and markdown links in ``stopped`` / ``failed`` passed raw
    into the text and into the markdown table a PR comment posts."""
    def change(d):
        d["cases"][0]["stopped"], d["cases"][0]["failed"] = EVIL, EVIL
    path = _session_file(tmp_path, session, change)
    out = tmp_path / "verdict"
    for fmt in ("text", "markdown"):
        code, err = _run(capsys, "ab", "--from", path, "--format", fmt, "--output", out)
        assert code == 1 and not any("\x1b" in line for line in err), err  # the session's regression
        shown = out.read_text()
        assert "RED" in shown and "link" in shown  # the text is kept, its escapes are not
        assert not any(ch in shown for ch in "\x1b\x07\u202e")
        if fmt == "markdown":
            rows = [ln for ln in shown.splitlines() if "RED" in ln]
            assert rows and all(ln.replace("\\|", "").count("|") == 10 for ln in rows)  # no extra column
            assert "<" not in "".join(rows)
            for escaped in ("&lt;img src=x onerror=alert(1)&gt;", "\\[click\\](http\\://evil.example)",
                            "www\\.evil", "\\`code\\`", "\\*\\*bold\\*\\*"):
                assert escaped in rows[0], escaped


def test_the_two_helpers_for_text_from_elsewhere():
    from fusebench.errors import markdown_cell, terminal

    assert terminal("a\x1b[2Jb\x1b]8;;http://x\x07c\x1b]8;;\x1b\\d\u202ee\nf\tg\x00") == "abcde f g"
    assert markdown_cell("<b>&[a](http://x) | `c` *d* _e_ ~f~ www.x a@b 1.05x") == (
        "&lt;b&gt;&amp;\\[a\\](http\\://x) \\| \\`c\\` \\*d\\* \\_e\\_ \\~f\\~ www\\.x a\\@b 1.05x")


def test_each_claim_of_the_document_names_a_test_that_exists():
    """docs/untrusted-input.md's section on figures and schemas names, for each claim, the test
    holding it: each named test is defined (in this file unless its file is named)."""
    import re

    text = (PROJECT_ROOT / "docs" / "untrusted-input.md").read_text()
    section = text.split("## Figures and schemas a pulled commit cannot slip in")[1].split("\n## ")[0]
    named = re.findall(r"`(?:(tests/\w+\.py)::)?(test_\w+)`", section)
    assert len(named) >= 15
    for file, name in named:
        source = (PROJECT_ROOT / (file or "tests/test_pulled_figures.py")).read_text()
        assert f"def {name}(" in source, (file, name)


def test_a_stored_result_store_would_merge_into_is_checked_first(tmp_path, capsys):
    """Item 6: ``fusebench store`` merges a record into the result stored for its commit: one
    holding 10**400 (reached by a pull) is named, never carried into the file it writes."""
    results, bad = _poisoned(tmp_path, "result", _huge_figure("result"))
    before = bad.read_bytes()
    code, err = _run(capsys, "store", _paths(results)[1])
    assert code == 2 and err[-1] == (f"store: error: cannot read the stored {bad} (an integer of 401 digits "
                                     "(no field holds more than 19: 10**400 overflows every float "
                                     "conversion)); move it away and store again"), err
    assert bad.read_bytes() == before


def test_a_commit_subject_reaches_bisects_text_without_its_escapes():
    """Item 13: the same helper guards bisect's text, whose subjects come from git (another
    author's commit)."""
    from fusebench.commands import bisect as bisect_command
    from fusebench.gate.bisect import Commit, Outcome

    first = Commit("c" * 40, "fix \x1b[2J\x1b]8;;http://evil.example\x07speed\x1b]8;;\x07\nup")
    out = Outcome("found", Commit("a" * 40, "good"), Commit("b" * 40, "bad"), 2, "track_device_time", 1.04,
                  0.05, [], 3, [], first, [first], 10.0)
    text = bisect_command.text(out, Path("records"), "h200")
    assert "first BAD commit: cccccccc fix speed up (0 probes, " in text
    assert not any(ch in text for ch in "\x1b\x07")


def test_a_sessions_case_has_a_shape_a_record_accepts(tmp_path, capsys, session):
    """Item 13: a case name is held to the record's shape (``fusebench.record.SHAPE``), as the
    case file is: a 5000-digit dimension is refused in one line."""
    def change(d):
        d["cases"][0]["case"] = "gelu/triton/" + "9" * 5000 + "/float32"
    path = _session_file(tmp_path, session, change)
    code, err = _run(capsys, "ab", "--from", path)
    _one_error(code, err, "ab", path, "not a valid session: cases[0]: bad case name")
