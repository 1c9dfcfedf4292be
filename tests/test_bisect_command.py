"""fusebench bisect: git's first-parent line, worktrees, the child measurer, the command end to end
on the CPU (a throwaway repository of this checkout's code with a slowdown in one commit)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import throwaway
from throwaway import SLOW, git

from fusebench import commands
from fusebench.commands import bisect_child
from fusebench.errors import UsageError
from fusebench.gate import bisect_git, bisect_probe
from fusebench.gate.bisect import Commit, ProbeFailed
from fusebench.measure.environment import machine_name
from fusebench.paths import PROJECT_ROOT

CHILD = Path(bisect_child.__file__).read_text()
CASE = "gelu/torch/16384/float32"  # the cpu-quick grid's GELU shape
@pytest.fixture
def repo(tmp_path):
    """A repository of this checkout's code: base, a no-op, GELU torch 2 ms slower, a no-op."""
    return throwaway.make(tmp_path)


def test_first_parent_line(repo):
    repo, shas = repo
    line = bisect_git.first_parent_line(repo, "HEAD~3", "main")
    assert [c.sha for c in line] == shas
    assert [c.subject for c in line] == ["base", "a note", "gelu: torch backend sleeps 2 ms", "another note"]
    with pytest.raises(UsageError, match="same commit"):
        bisect_git.first_parent_line(repo, "HEAD", "main")
    with pytest.raises(UsageError, match="not on the first-parent line of BAD"):
        bisect_git.first_parent_line(repo, "HEAD", "HEAD~2")
    with pytest.raises(UsageError, match="unknown revision 'nope'"):
        bisect_git.first_parent_line(repo, "nope", "HEAD")
    with pytest.raises(UsageError, match="unknown revision '--all'"):
        bisect_git.resolve(repo, "--all")


def test_worktree_per_commit_made_once_and_remade_when_edited(repo, tmp_path):
    repo, shas = repo
    root = tmp_path / "cache" / "worktrees"
    tree = bisect_git.worktree(repo, root, shas[1])
    assert tree == root / bisect_git.repo_key(repo) / shas[1] and (tree / "notes.txt").read_text() == "one\n"
    assert SLOW[0] in (tree / "kernels" / "gelu" / "__init__.py").read_text()
    (tree / "marker").write_text("kept")  # untracked: the tree is reused
    assert bisect_git.worktree(repo, root, shas[1]) == tree and (tree / "marker").exists()
    (tree / "notes.txt").write_text("edited\n")  # a tracked file edited: made again
    bisect_git.worktree(repo, root, shas[1])
    assert (tree / "notes.txt").read_text() == "one\n" and not (tree / "marker").exists()
    (tree.parent / "link").symlink_to(tree)
    with pytest.raises(UsageError, match="symbolic link"):
        bisect_git.worktree(repo, root, "link")


def test_two_clones_never_share_a_worktree_in_one_cache(repo, tmp_path):
    """A worktree belongs to the repository that made it (its git data is written there): a
    second clone with the same cache gets its own, and each is listed by its own repository."""
    repo, shas = repo
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    root = tmp_path / "cache" / "worktrees"
    mine, theirs = (bisect_git.worktree(r, root, shas[1]) for r in (repo, clone))
    assert mine != theirs and mine.name == theirs.name == shas[1]
    assert bisect_git.repo_key(repo) != bisect_git.repo_key(clone)
    assert bisect_git.repo_key(repo).startswith(repo.name + "-")
    assert f"worktree {mine}" in git(repo, "worktree", "list", "--porcelain")
    assert f"worktree {theirs}" in git(clone, "worktree", "list", "--porcelain")
    assert str(mine) not in git(clone, "worktree", "list", "--porcelain")
    # a worktree of another repository found where this one's belongs is not taken, nor removed
    shutil.rmtree(theirs)
    git(clone, "worktree", "prune")
    git(repo, "worktree", "add", "-q", "--detach", "--force", str(theirs), shas[1])
    with pytest.raises(UsageError, match="is not a worktree fusebench made of"):
        bisect_git.worktree(clone, root, shas[1])
    assert f"worktree {theirs}" in git(repo, "worktree", "list", "--porcelain")


def test_the_child_runs_the_worktree_s_code_with_its_own_extension_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", f"/tmp/site{os.pathsep}/opt/x")
    env = bisect_probe.ChildMeasurer(CHILD, tmp_path, tmp_path / "cache", tmp_path / "logs").env(
        tmp_path / "wt", "ab" * 20)
    assert env["PYTHONPATH"].split(os.pathsep) == [str(tmp_path / "wt"), "/tmp/site", "/opt/x"]
    assert env["FUSEBENCH_EXT_DIR"] == str(tmp_path / "cache" / "ext" / ("ab" * 20))


def test_the_child_is_handed_its_commit_s_own_case_file_in_its_request(tmp_path):
    assert json.loads(bisect_probe.request(tmp_path / "wt", ["gelu/torch/1024/float32"])) == {
        "root": str(tmp_path / "wt"), "cases": ["gelu/torch/1024/float32"],
        "config": str(tmp_path / "wt" / "fusebench.yaml")}


def test_the_child_sends_the_fields_the_parent_reads():
    assert bisect_child.FIELDS == bisect_probe.FIELDS


def test_figures_from_the_child_are_checked():
    fig = {"device_time_ms": 0.5, "device_time_cold_ms": None, "wall_time_ms": 0.6, "repeats": 100,
           "contamination": ["another process on the GPU: pid 7 (500 MiB)"], "others": [2, 2]}
    assert bisect_probe.checked("c", fig)["device_time_ms"] == 0.5
    for bad in ({**fig, "device_time_ms": "0.5"}, {**fig, "wall_time_ms": float("nan")},
                {**fig, "repeats": -1}, {**fig, "contamination": "x"}, {**fig, "others": [True]}, [1]):
        with pytest.raises(ProbeFailed, match="not valid"):
            bisect_probe.checked("c", bad)


def test_our_own_children_do_not_contaminate_a_round():
    fig = {"contamination": ["throttled: sw_power_cap", "another process on the GPU: pid 7 (500 MiB)"],
           "others": [2, 2]}
    assert bisect_probe.without_siblings(fig, 2)["contamination"] == ["throttled: sw_power_cap"]
    # one process more than our own children: a stranger
    assert bisect_probe.without_siblings(fig, 1)["contamination"] == fig["contamination"]
    assert bisect_probe.without_siblings({"contamination": [], "others": []}, 2)["contamination"] == []


@pytest.mark.parametrize("argv, message", [
    (["bisect", "HEAD~1", "HEAD"], "required: --case"),
    (["bisect", "HEAD~1", "HEAD", "--case", "gelu/torch/16384"], "bad case 'gelu/torch/16384'"),
    (["bisect", "HEAD~1", "HEAD", "--case", "gelu/torchy/16384/float32"], "unknown backend 'torchy'"),
    (["bisect", "HEAD~1", "HEAD", "--case", "gelu/torch/16384/fp8"], "unknown dtype 'fp8'"),
    (["bisect", "HEAD~1", "HEAD", "--case", CASE, "--rounds", "4", "--max-rounds", "3"],
     "--max-rounds 3 is below"),
    (["bisect", "HEAD~1", "HEAD", "--case", CASE, "--metric", "bandwidth"], "invalid choice: 'bandwidth'"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        commands.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_a_commit_that_cannot_be_measured_says_why(repo, tmp_path):
    repo, shas = repo
    m = bisect_probe.ChildMeasurer(CHILD, repo, tmp_path / "cache", tmp_path / "logs")
    with pytest.raises(ProbeFailed, match="no op 'nosuchop' at this commit"):
        m.start(Commit(shas[0]), ["nosuchop/torch/16384/float32"])
    m.stop(Commit(shas[0]))
    assert m.children == {}


@pytest.mark.slow
def test_bisect_names_the_slow_commit_on_the_cpu(repo, tmp_path, capsys):
    """The real measurer: worktrees and child processes, 2 probes of 3 commits, wall time.

    On a CPU shared with other work every round is contaminated (``environment.contamination``:
    host load; on a GPU, this test process's own CUDA context is another process), so GOOD -> BAD
    is no regression by the gate's rule: the test then skips, naming the cause."""
    repo, shas = repo
    records = tmp_path / "records"
    with pytest.raises(SystemExit) as exc:
        commands.main(["bisect", shas[0], "main", "--case", CASE, "--metric", "wall_time",
                       "--max-rounds", "3",
                       "--repo", str(repo), "--cache", str(tmp_path / "cache"), "--records", str(records),
                       "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    judged = [c[k] for c in out["reference"] + [c for p in out["probes"] for c in p["cases"]]
              for k in ("reference", "from_good", "to_bad")]
    dirty = [j["note"] for j in judged if j["status"] == "contaminated"]
    if out["status"] != "found" and dirty:
        pytest.skip(f"the rounds were contaminated: {dirty[0]}")
    noisy = [j for j in judged if j["status"] == "within noise"]
    if out["status"] == "range" and noisy:  # a probe the gate itself could not call on a busy CPU
        pytest.skip(f"a probe within noise on this CPU's wall time: {noisy[0]}")
    assert exc.value.code == 0, out
    assert out["status"] == "found" and out["first_bad"]["sha"] == shas[2]
    assert out["machine"] == machine_name() and out["machine"].startswith("cpu-")
    assert [(p["sha"], p["verdict"]) for p in out["probes"]] == [(shas[1], "good"), (shas[2], "bad")]
    probe = out["probes"][1]["cases"][0]
    assert probe["from_good"]["status"] == "regression" and probe["from_good"]["slowdown"] > 10
    assert probe["to_bad"]["status"] == "same"
    assert probe["probe_ms"] > 2.0 > out["probes"][0]["cases"][0]["probe_ms"]
    session = next(records.iterdir())
    assert sorted(p.name for p in session.iterdir()) == [
        "bisect.json", "logs", f"probe-001-{shas[1][:8]}.json", f"probe-002-{shas[2][:8]}.json"]
    trees = tmp_path / "cache" / "worktrees" / bisect_git.repo_key(repo)
    assert [p.name for p in trees.parent.iterdir()] == [trees.name]
    assert sorted(p.name for p in trees.iterdir()) == sorted(shas)
    assert json.loads((session / "bisect.json").read_text())["first_bad"]["sha"] == shas[2]


# Issue 41, item 9: what can be measured is checked before any worktree is made; make help names
# METRIC=; make clean removes the worktrees make bisect made.

@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a GPU measures device time")
def test_a_device_time_on_a_cpu_host_is_refused_before_any_worktree(repo, tmp_path, capsys):
    repo, shas = repo
    cache, records = tmp_path / "cache", tmp_path / "records"
    with pytest.raises(SystemExit) as exc:
        commands.main(["bisect", shas[0], "main", "--case", CASE, "--repo", str(repo), "--cache", str(cache),
                       "--records", str(records)])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err == (f"bisect: error: no CUDA GPU here: hot device time cannot be measured, only wall time; "
                   f"give --metric wall_time (make bisect GOOD={shas[0]} BAD=main CASE={CASE} "
                   "METRIC=wall_time)\n")
    assert not cache.exists() and not records.exists()
    assert git(repo, "worktree", "list").count("\n") == 0  # the repository's own tree only


# Issue 54 item 8, issue 56 item 11: a case no run here would measure is refused before any
# worktree is made (a shape in no grid, as make bench SHAPES= and make ab refuse it; a shape the
# memory cannot hold, as bench refuses it).

@pytest.mark.parametrize("case, message", [
    ("gelu/torch/999/float32", "bisect: error: gelu/torch/999/float32: unknown shape '999'; valid shapes: "),
    ("gelu/eager/3000000000/float32", "bisect: error: gelu/eager/3000000000/float32: unknown shape "),
    ("gelu/eager/16384x16384/float32", "bisect: error: gelu shape 16384x16384: 2.68e+08 elements need "),
    ("newop/eager/3000000000/float32", "bisect: error: newop shape 3000000000: 3e+09 elements need about "),
])
def test_a_case_in_no_grid_or_too_big_for_memory_is_refused_before_any_worktree(case, message, repo,
                                                                                tmp_path, capsys,
                                                                                monkeypatch):
    from fusebench.commands import bench

    monkeypatch.setattr(bench, "device_memory", lambda dev: (4 * 10 ** 9, "this host's RAM"))
    repo, shas = repo
    cache, records = tmp_path / "cache", tmp_path / "records"
    with pytest.raises(SystemExit) as exc:
        commands.main(["bisect", shas[0], "main", "--case", case, "--metric", "wall_time",
                       "--repo", str(repo), "--cache", str(cache), "--records", str(records)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith(message) and err.count("\n") == 1, err
    assert "GB of this host's RAM; nothing measured (give a case of a smaller shape)" in err or "grids" in err
    assert not cache.exists() and not records.exists()


def _make(*args, cwd=PROJECT_ROOT, **env):
    top = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(["make", "--no-print-directory", "-f", str(PROJECT_ROOT / "Makefile"), *args,
                           f"SYSTEM_PYTHON={sys.executable}"], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**top, **env})


def test_make_help_names_the_bisect_variables():
    out = _make("help")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    bisect = [ln for ln in lines if ln.startswith("  bisect: ") or "device_time_graph|" in ln]
    assert "METRIC=device_time|device_time_cold|" in bisect[0] and "CASE=op/backend/shape/dtype" in bisect[0]
    assert "wall_time (a CPU measures wall_time only)" in bisect[1]


def test_make_clean_removes_the_bisect_worktrees_it_made_and_no_other(repo, tmp_path):
    repo, shas = repo
    cache = tmp_path / "home" / ".cache" / "fusebench" / "bisect"
    made = [bisect_git.worktree(repo, cache / "worktrees", sha) for sha in shas[:2]]
    other = tmp_path / "mine"
    git(repo, "worktree", "add", "-q", "--detach", str(other), shas[0])
    sessions = [repo / "bisect" / "aaaa-bbbb-1", repo / ".asv" / "ab" / "aaaa-bbbb-1"]  # bisect's, ab's
    for folder in sessions:
        folder.mkdir(parents=True)
        (folder / "ab.json").write_text("{}")
    (repo / "results").mkdir(exist_ok=True)
    out = _make("clean", cwd=repo, HOME=str(tmp_path / "home"))
    assert out.returncode == 0, out.stderr
    said = sorted(out.stdout.splitlines()[-2:])
    assert said == sorted(f"clean: removed the bisect worktree {t}" for t in made), out.stdout
    assert not any(t.exists() for t in made) and other.exists()
    assert not any(f.exists() for f in sessions) and (repo / "results").is_dir()
    listed = git(repo, "worktree", "list", "--porcelain")
    assert f"worktree {other}" in listed and "fusebench/bisect" not in listed


DASH = "unknown revision '-x' (a revision never starts with '-')"


@pytest.mark.parametrize("args, first_line", [
    (["compare", "BASE=-x"], f"compare: error: {DASH}"),
    (["compare", "BASE=HEAD", "HEAD=-x"], f"compare: error: {DASH}"),
    (["ab", "BASE=-x"], f"ab: error: {DASH}"),
    (["ab", "BASE=HEAD", "HEAD=-x"], f"ab: error: {DASH}"),
    (["bisect", "GOOD=-x", "BAD=HEAD", f"CASE={CASE}"], f"bisect: error: {DASH}"),
    (["bisect", "GOOD=HEAD~1", "BAD=-x", f"CASE={CASE}"], f"bisect: error: {DASH}"),
    (["bisect", "GOOD=HEAD~1", "BAD=HEAD", "CASE=-x"],
     "bisect: error: bad case '-x'; give op/backend/shape/dtype, e.g. gelu/triton/16777216/float32"),
])
def test_a_revision_starting_with_a_dash_is_the_commands_own_message_through_make(args, first_line, tmp_path):
    """``make compare BASE=-x`` said 'argument --base: expected one argument' (argparse took -x for an
    option): the Makefile passes --base=REV, and bisect's GOOD BAD after --."""
    out = _make("-s", *args, f"BISECT_CACHE={tmp_path / 'cache'}")
    assert out.returncode == 2
    assert out.stderr.splitlines()[0] == first_line, out.stderr
    assert not (tmp_path / "cache").exists()
