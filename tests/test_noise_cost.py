"""The history at less cost (issue 26, item 5): the files two commits differ in, in what runs
(``noise._git_changed``), read with one ``git cat-file --batch`` per pair and the texts shared by a
history's pairs; a class's sigma computed once per history and pair left out."""

import math
import statistics
import subprocess

import pytest

from fusebench import git
from fusebench.gate import noise

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@t", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"}


def _commit(repo, files: dict[str, bytes | None]) -> str:
    for name, data in files.items():
        path = repo / name
        if data is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    git = ["git", "-C", str(repo)]
    subprocess.run([*git, "add", "-A"], check=True, env=ENV)
    subprocess.run([*git, "commit", "-qm", "x"], check=True, env=ENV)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, env=ENV, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, env=ENV)
    a = _commit(tmp_path, {
        "kernels/gelu/triton.py": b'def f(x):\n    """Doc."""\n    return x + 1\n',
        "kernels/gelu/fused.py": b"def g(x):\n    return x * 2\n",
        "kernels/cuda/k.cu": b"__global__ void k(float* y) { y[0] = 1.0f; }\n",
        "kernels/table.txt": b"a\nb\n",
        "fusebench/ops/gone.py": b"x = 1\n",
        "README.md": b"hello\n"})
    b = _commit(tmp_path, {
        "kernels/gelu/triton.py": b"def f(x):\n    # why\n    return x + 1\n",  # comments only
        "kernels/gelu/fused.py": b"def g(x):\n    return x * 3\n",  # code
        "kernels/cuda/k.cu": b"__global__ void k(float* y) {\n  // store\n  y[0] = 1.0f;\n}\n",
        "kernels/table.txt": b"a\r\nb\r\n",  # line ends only: read as git's text output was
        "fusebench/ops/gone.py": None,  # removed: not in b
        "fusebench/ops/new.py": b"y = 2\n",  # added: not in a
        "README.md": b"hello, world\n"})  # outside the measured roots: changed without a look
    return tmp_path, a, b


def test_only_what_runs_counts_as_changed(repo):
    root, a, b = repo
    want = {"kernels/gelu/fused.py", "fusebench/ops/gone.py", "fusebench/ops/new.py", "README.md"}
    assert noise._git_changed(root, a, b) == want
    assert noise._git_changed(root, b, a) == want
    assert noise._git_changed(root, a, a) == set()
    assert noise._git_changed(root, a, "0" * 40) is None  # git cannot say


def test_the_texts_are_read_once_for_all_pairs(repo, monkeypatch):
    root, a, b = repo
    texts: dict = {}
    calls = []
    run = subprocess.run
    monkeypatch.setattr(git.subprocess, "run", lambda args, **kw: calls.append(args[3]) or run(args, **kw))
    first = noise._git_changed(root, a, b, texts)
    assert calls == ["diff", "cat-file"]  # one process for every file of the pair
    assert texts[f"{a}:fusebench/ops/gone.py"] is not None and texts[f"{b}:fusebench/ops/gone.py"] is None
    assert texts[f"{a}:kernels/gelu/triton.py"] == texts[f"{b}:kernels/gelu/triton.py"]
    assert noise._git_changed(root, b, a, texts) == first
    assert calls == ["diff", "cat-file", "diff"]  # the texts read already: no second cat-file


def test_git_failing_to_read_counts_as_changed(repo, monkeypatch):
    root, a, b = repo
    monkeypatch.setattr(noise, "_texts", lambda root, specs: None)
    assert noise._git_changed(root, a, b) == {
        "kernels/gelu/triton.py", "kernels/gelu/fused.py", "kernels/cuda/k.cu",
        "kernels/table.txt", "fusebench/ops/gone.py", "fusebench/ops/new.py", "README.md"}


def test_a_class_sigma_is_computed_once_and_is_the_median_of_its_samples(monkeypatch):
    hist = noise.History([], None)
    pairs = [frozenset((f"a{i}", f"b{i}")) for i in range(10)]
    keys = [("gelu", "triton", str(n), "float32") for n in (1024, 2048)]
    ds = [0.01 * (i + 1) for i in range(10)]
    hist.samples = {("device_time_ms", k): [noise.Sample(p, d * (j + 1)) for p, d in zip(pairs, ds)]
                    for j, k in enumerate(keys)}
    hist.bands = {("device_time_ms", k): 0 for k in keys}
    medians = []
    median = statistics.median
    monkeypatch.setattr(noise.statistics, "median", lambda xs: medians.append(len(xs)) or median(xs))
    left_out = tuple(pairs[0])
    first = [hist.limit("device_time_ms", k, exclude=left_out) for k in keys]
    assert medians == [18]  # one class, its 20 samples less the pair left out: computed once
    sizes = ds[1:] + [2 * d for d in ds[1:]]
    cls = noise.ROBUST * median(sizes)
    own = ds[1:]
    want = math.exp(noise.K * math.sqrt((sum(d * d for d in own) + noise.PRIOR_PAIRS * cls * cls)
                                        / (len(own) + noise.PRIOR_PAIRS)))
    assert first[0].limit == want and first[0].n == 9
    assert [hist.limit("device_time_ms", k, exclude=left_out) for k in keys] == first
    assert hist.limit("device_time_ms", keys[0]).n == 10 and medians == [18, 20]  # another exclusion
