"""Which machines' results belong in the repository: GPU machines' are committed, a CPU's
(``make bench`` on a laptop: ``cpu-<arch>``) are ignored by git, and the README says so
(issue 13, item 8)."""

import json
import subprocess

from committed import committed_folder

from fusebench.paths import PROJECT_ROOT


def _ignored(path: str) -> bool:
    return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=PROJECT_ROOT).returncode == 0


def test_cpu_results_records_and_plots_are_ignored_gpu_ones_are_not():
    assert _ignored("results/cpu-x86_64/d0a40cb8-existing-py.json")
    assert _ignored("records/cpu-x86_64/d0a40cb8.json.xz")
    assert not _ignored("records/h200/d0a40cb8.json.xz")
    assert _ignored("plots/cpu-aarch64/gelu-bandwidth.png")
    assert not _ignored("results/h200/d0a40cb8-existing-py.json")
    assert not _ignored("plots/h200/gelu-bandwidth.png")
    assert not _ignored("results/benchmarks.json")
    # fusebench table --doc cpu-x86_64 left its page untracked (??): ignored too, h200's is kept
    assert _ignored("docs/results/cpu-x86_64.md") and _ignored("docs/results/cpu-aarch64.md")
    assert not _ignored("docs/results/h200.md") and not _ignored("docs/results/README.md")


def test_the_readme_says_which_results_to_commit():
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert "**Which results belong in the repository.**" in readme
    assert "git ignores both folders" in readme


def test_every_committed_result_is_drawn_so_publish_is_quiet():
    """Issue 29: every make publish told the user to remove a committed file (312c2cc0, a merged
    branch's commit). Decided once: such a file is dropped in a commit (its figures stay in git's
    history); publish then has nothing to say about the committed results."""
    from fusebench.site import drawable

    assert drawable.undrawn(committed_folder("results")) == []


def test_each_machines_committed_results_are_one_series_per_case():
    """Issue 41, item 3: asv draws a series per distinct set of machine fields; host details (CPU
    count, RAM, kernel build, python path, where it ran) are kept out of them, so every committed
    result file of a machine carries the same fields: one line per case across every commit."""
    from committed import committed

    from fusebench.asv import store

    by_machine: dict[str, set[str]] = {}
    for path in committed("results/*/*.json"):
        if path.name != "machine.json":
            data = json.loads(path.read_text())
            by_machine.setdefault(path.parent.name, set()).add(json.dumps(data["params"], sort_keys=True))
            assert not set(store.HOST_FIELDS) & set(data["params"]), path
            assert data["env_name"] == f"existing-py{data['params']['python']}", path
    assert by_machine and all(len(fields) == 1 for fields in by_machine.values()), by_machine
    (h200,) = by_machine["h200"]
    assert json.loads(h200) == {"machine": "h200", "arch": "x86_64", "gpu": "NVIDIA H200",
                                "driver": "580.159.04", "cuda": "13.0", "torch": "2.11.0+cu130",
                                "triton": "3.6.0", "python": "3.12"}
