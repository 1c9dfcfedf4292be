"""A figure stored in results/ is what it says: the commit's measured files, run natively (issue 13, 1-2)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fusebench.errors import UsageError
from fusebench.measure import provenance
from fusebench.paths import PROJECT_ROOT


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          cwd=root, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A committed checkout with a file in measured and unmeasured places."""
    root = tmp_path / "checkout"
    for rel, text in {"kernels/gelu.py": "x = 1\n", "fusebench/ops/old.py": "y = 2\n",
                      "fusebench/measure/timing.py": "t = 1\n", "benchmarks/suite.py": "s = 1\n",
                      "Dockerfile": "FROM scratch\n", "README.md": "# readme\n",
                      "results/h200/a.json": "{}\n", "plots/h200/p.png": "png\n",
                      ".gitignore": "__pycache__/\n/.device/\n/.asv/\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def test_changes_outside_the_measured_files_leave_the_tree_clean(repo):
    assert provenance.changed_files(repo) == []
    (repo / "README.md").write_text("# edited\n")
    (repo / "results/h200/a.json").write_text('{"new": 1}\n')
    (repo / "results/h200/b.json").write_text("{}\n")
    (repo / "plots/h200/p.png").write_text("other\n")
    (repo / "notes.txt").write_text("a note\n")
    # ignored: the GPU host's .device/, byte-code caches, scratch results
    (repo / ".device").mkdir()
    (repo / ".device/state").write_text("x\n")
    (repo / "fusebench/ops/__pycache__").mkdir()
    (repo / "fusebench/ops/__pycache__/gelu.cpython-311.pyc").write_bytes(b"\0")
    (repo / ".asv/dirty-results").mkdir(parents=True)
    # a mode change and a rewrite with the same content (a copied tree): nothing measured changed
    (repo / "kernels/gelu.py").chmod(0o755)
    (repo / "fusebench/measure/timing.py").write_text("t = 1\n")
    assert provenance.changed_files(repo) == []


def test_every_kind_of_change_to_a_measured_file_counts(repo):
    (repo / "kernels/gelu.py").write_text("x = 1  # a comment\n")   # modified
    (repo / "fusebench/ops/new.py").write_text("n = 1\n")                  # untracked
    (repo / "fusebench/measure/timing.py").write_text("t = 2\n")
    git(repo, "add", "fusebench/measure/timing.py")                          # staged
    (repo / "benchmarks/suite.py").unlink()                          # deleted
    (repo / "Dockerfile").write_text("FROM other\n")                  # a measured top-level file
    git(repo, "mv", "fusebench/ops/old.py", "fusebench/ops/renamed.py")          # renamed: both names
    assert provenance.changed_files(repo) == [
        "Dockerfile", "benchmarks/suite.py", "fusebench/measure/timing.py", "fusebench/ops/new.py",
        "fusebench/ops/old.py", "fusebench/ops/renamed.py", "kernels/gelu.py"]


def test_describe_names_the_first_few():
    assert provenance.describe(["a", "b"]) == "a, b"
    assert provenance.describe(["a", "b", "c", "d", "e"]) == "a, b, c and 2 more"


def test_measured_list_names_files_that_exist():
    for rel in provenance.MEASURED:
        assert (PROJECT_ROOT / rel).exists(), rel


def test_a_dirty_tree_is_refused_for_results_and_let_through_with_dirty(repo):
    (repo / "kernels/gelu.py").write_text("x = 1  # a comment\n")
    with pytest.raises(UsageError) as err:
        provenance.before_sweep(repo / "results", ["eager"], gpu=False, root=repo)
    assert str(err.value) == (
        "measured files differ from HEAD (kernels/gelu.py): results/ keeps only committed code; "
        "commit them, or measure anyway into .asv/dirty-results with make bench DIRTY=1 (--dirty)")
    checked = provenance.before_sweep(repo / "results", ["eager"], gpu=False, dirty=True, root=repo)
    assert checked.results == repo / ".asv/dirty-results"
    env = {}
    assert checked.after(env) == repo / ".asv/dirty-results"
    assert env["provenance"]["dirty"] is True
    assert env["provenance"]["changed_files"] == ["kernels/gelu.py"]
    # scratch folders take a dirty tree as they are, marked
    quick = repo / ".asv/quick-results"
    assert provenance.before_sweep(quick, ["eager"], gpu=False, root=repo).results == quick


def test_a_clean_tree_stores_into_results_and_dirty_changes_nothing(repo):
    for dirty in (False, True):
        checked = provenance.before_sweep(repo / "results", ["eager"], gpu=False, dirty=dirty, root=repo)
        env = {}
        assert checked.after(env) == repo / "results"
        assert env["provenance"] == {"dirty": False, "changed_files": [], "native": True,
                                     "modes_checked": sorted({m.setting for m in provenance.MODES})}


def test_a_file_edited_during_the_sweep_sends_the_run_to_the_scratch_folder(repo, capsys):
    checked = provenance.before_sweep(repo / "results", ["eager"], gpu=False, root=repo)
    (repo / "kernels/gelu.py").write_text("x = 3\n")
    env = {}
    assert checked.after(env) == repo / ".asv/dirty-results"
    assert env["provenance"]["dirty"] is True
    assert "changed during the sweep (kernels/gelu.py)" in capsys.readouterr().err


@pytest.fixture
def native(monkeypatch):
    """No non-native setting in the environment (conftest sets TRITON_INTERPRET=1 on the CPU)."""
    for name in {m.setting for m in provenance.MODES}:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_triton_interpreter_is_refused_for_triton_only(native):
    provenance.refuse_non_native(["eager", "torch", "compile", "triton", "cuda"], gpu=True)
    native.setenv("TRITON_INTERPRET", "1")
    provenance.refuse_non_native(["eager", "torch"], gpu=True)
    provenance.refuse_non_native(["compile"], gpu=False)  # Inductor on the CPU writes C++, not Triton
    with pytest.raises(UsageError) as err:
        provenance.refuse_non_native(["eager", "triton"], gpu=False)
    assert str(err.value) == (
        "TRITON_INTERPRET is set: triton would run in Triton's interpreter (emulated on the host), "
        "not triton's own figures, which are never stored; unset TRITON_INTERPRET, "
        "or leave triton out (BACKENDS=eager)")
    with pytest.raises(UsageError, match="compile would run with Inductor's Triton kernels"):
        provenance.refuse_non_native(["compile"], gpu=True)


@pytest.mark.parametrize("value, on", [("true", True), ("ON", True), ("0", False), ("", False)])
def test_triton_interpreter_read_as_triton_reads_it(native, value, on):
    native.setenv("TRITON_INTERPRET", value)
    assert bool(provenance.non_native(["triton"], gpu=False)) is on


@pytest.mark.parametrize("name", ["TORCH_COMPILE_DISABLE", "TORCHDYNAMO_DISABLE"])
def test_compile_switched_off_is_refused(native, name):
    native.setenv(name, "1")
    provenance.refuse_non_native(["eager", "triton"], gpu=True)
    with pytest.raises(UsageError, match=f"^{name} is set: compile would run as the eager function"):
        provenance.refuse_non_native(["eager", "compile"], gpu=False)


def test_gpu_only_modes_touch_every_backend_on_a_gpu_only(native):
    native.setenv("CUDA_LAUNCH_BLOCKING", "1")
    assert provenance.non_native(["eager", "torch"], gpu=False) == []
    [(mode, touched)] = provenance.non_native(["eager", "torch"], gpu=True)
    assert (mode.setting, touched) == ("CUDA_LAUNCH_BLOCKING", ["eager", "torch"])
    with pytest.raises(UsageError, match="; unset CUDA_LAUNCH_BLOCKING$"):
        provenance.refuse_non_native(["eager"], gpu=True)


def bench(args, env, cwd=PROJECT_ROOT, timeout=120):
    return subprocess.run([sys.executable, "-m", "fusebench", "bench", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env)


def clean_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {m.setting for m in provenance.MODES}}
    return {**env, "HOME": str(tmp_path)}


@pytest.mark.slow
def test_bench_refuses_a_dirty_tree_before_measuring(tmp_path):
    """A copy of the checkout, committed, then a comment added to a kernel: make bench OP=softmax."""
    root = tmp_path / "checkout"
    ignore = shutil.ignore_patterns("__pycache__", "*.so")
    for rel in (*provenance.MEASURED, "scripts", ".gitignore"):
        src = PROJECT_ROOT / rel.rstrip("/")
        if src.is_dir():
            shutil.copytree(src, root / rel, ignore=ignore, dirs_exist_ok=True)
        else:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / rel)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "copy")
    with open(root / "kernels/gelu/__init__.py", "a") as f:
        f.write("# a comment\n")
    out = bench(["--ops", "softmax"], clean_env(tmp_path), cwd=root)
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.strip() == (
        "bench: error: measured files differ from HEAD (kernels/gelu/__init__.py): results/ keeps only "
        "committed code; commit them, or measure anyway into .asv/dirty-results with make bench DIRTY=1 "
        "(--dirty)")
    assert not (root / "results").exists() and not (root / ".asv").exists()  # nothing measured
    # the way out it prints runs (issue 29): make bench DIRTY=1 is bench --dirty; its dry run passes
    done = bench(["--ops", "softmax", "--dirty", "--dry-run"], clean_env(tmp_path), cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.strip().endswith(f"would store in {root / '.asv/dirty-results'})")


@pytest.mark.slow
def test_bench_refuses_the_triton_interpreter_before_measuring(tmp_path):
    """TRITON_INTERPRET=1 make bench OP=gelu: refused at once, wherever it would be stored."""
    out = bench(["--quick", "--ops", "gelu", "--results", str(tmp_path / "results"), "--no-publish"],
                {**clean_env(tmp_path), "TRITON_INTERPRET": "1"}, timeout=60)
    assert out.returncode == 2, out.stderr[-2000:]
    # the reference backend flaggems is Triton kernels too; liger and quack have no GELU: the way
    # out names only backends that apply to gelu (issue 29: BACKENDS=...,quack was refused)
    assert out.stderr.strip().startswith("bench: error: TRITON_INTERPRET is set: triton and "
                                         "flaggems would run in Triton's interpreter")
    assert out.stderr.strip().endswith("leave triton and flaggems out (BACKENDS=eager,torch,compile,cuda)")
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_make_dirty_passes_the_flag():
    out = subprocess.run(["make", "-n", "--no-print-directory", "bench-local", "DIRTY=1", "OP=gelu",
                          f"SYSTEM_PYTHON={sys.executable}"], cwd=PROJECT_ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == f"{sys.executable} -m fusebench bench --ops gelu --dirty"
