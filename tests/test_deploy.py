"""deploy/: the Kubernetes manifest checked against Kubernetes' own schemas (kubernetes-validate,
offline: the schemas ship in its wheel) and the Slurm batch script checked by bash and
ShellCheck, then run with stand-ins for srun and nvidia-smi to read the command it composes; the
GitHub Actions workflow of make ab checked against GitHub's workflow schema (check-jsonschema's
vendored copy) and by actionlint (ShellCheck over its run: blocks), its shell step run with a
stand-in make and its comment script with node and a stand-in client.

None ran on a real cluster or on GitHub here. The tools come from deploy/tools.lock (hash-pinned),
installed by pip into a temporary folder: they are test-only and requirements.lock is rewritten
only by a full ``make lock``."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from fusebench.measure.environment import slug
from fusebench.paths import PROJECT_ROOT

MANIFEST = PROJECT_ROOT / "deploy" / "kubernetes" / "fusebench-job.yaml"
SBATCH = PROJECT_ROOT / "deploy" / "slurm" / "fusebench.sbatch"
#: The Kubernetes release whose schemas the manifest is checked against (batch/v1 Indexed Jobs
#: are GA since 1.24; 1.31 is the oldest release kubernetes-validate 1.37 ships that is not EOL
#: on every managed platform).
K8S_VERSION = "1.31.0"


@pytest.fixture(scope="module")
def tools(tmp_path_factory) -> Iterator[Path]:
    """deploy/tools.lock installed (hashes checked, no dependency resolution) into a folder."""
    target = tmp_path_factory.mktemp("deploy-tools")
    lock = PROJECT_ROOT / "deploy" / "tools.lock"
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--require-hashes", "--no-deps",
                          "--only-binary=:all:", "--target", str(target), "-r", str(lock)],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or ["no output"])[-1]
        if os.environ.get("CI"):
            pytest.fail(f"pip could not install deploy/tools.lock: {why}")
        pytest.skip(f"pip could not install deploy/tools.lock (PyPI unreachable?): {why}")
    with pytest.MonkeyPatch.context() as mp:  # importable while this module's tests run, then not
        mp.syspath_prepend(str(target))
        yield target


def _docs() -> list[dict]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


@pytest.mark.slow
def test_the_manifest_is_valid_against_the_kubernetes_schemas(tools):
    import kubernetes_validate

    docs = _docs()
    assert [d["kind"] for d in docs] == ["Job"]
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)  # raises on any error


@pytest.mark.slow
@pytest.mark.parametrize("break_it", [
    lambda job: job["spec"].update(completionsMode="Indexed"),  # a misspelt field (strict)
    lambda job: job["spec"]["template"]["spec"]["containers"][0].update(args="--no-publish"),  # not a list
    lambda job: job["spec"].update(completions="two"),
])
def test_the_validator_rejects_a_broken_manifest(tools, break_it):
    import kubernetes_validate

    job = _docs()[0]
    break_it(job)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)


def test_the_job_is_indexed_one_pod_per_gpu_model_with_the_pinned_image_and_a_results_volume():
    job = _docs()[0]
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"]
    (bench,) = pod["containers"]
    (clone,) = pod["initContainers"]
    image = re.fullmatch(r"[^@\s]+@(sha256:[0-9a-f]{64})", bench["image"])
    assert image, "the image is pinned by digest"
    assert clone["image"] == bench["image"]
    env = {e["name"]: e for e in bench["env"]}
    assert env["FUSEBENCH_IMAGE_DIGEST"]["value"] == image.group(1)
    assert bench["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert bench["resources"]["requests"]["nvidia.com/gpu"] == 1
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "nvidia.com/gpu.product"
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert anti["labelSelector"]["matchLabels"].items() <= labels.items()
    # results and records of each pod in a folder of its own on the results volume
    mounts = {m["name"]: m["mountPath"] for m in bench["volumeMounts"]}
    assert mounts["results"] == "/out"
    args = bench["args"]
    assert args[args.index("--results") + 1] == "/out/$(NODE_NAME)-$(JOB_INDEX)/results"
    assert {"NODE_NAME", "JOB_INDEX"} <= env.keys()  # declared, so Kubernetes expands $(...)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["results"]["persistentVolumeClaim"]["claimName"] == "fusebench-results"
    assert mounts["workspace"] == "/workspace" and clone["command"][-2:] == ["/src", "/workspace"]


# --- Slurm ------------------------------------------------------------------------------------------

def test_the_batch_script_parses_and_passes_shellcheck(tools):
    assert subprocess.run(["bash", "-n", str(SBATCH)], capture_output=True).returncode == 0
    shellcheck = tools / "bin" / "shellcheck"
    scripts = [str(SBATCH), str(PROJECT_ROOT / "scripts" / "slurm_test.sh")]
    out = subprocess.run([str(shellcheck), "--shell=bash", *scripts], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    head = SBATCH.read_text()
    assert re.search(r"^#SBATCH --array=\d+-\d+$", head, re.M)
    assert re.search(r"^#SBATCH --gres=gpu:1$", head, re.M)


def _fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/bash\n{body}\n")
    path.chmod(0o755)


def _sbatch(tmp_path: Path, srun_status: int = 0, **env) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run the batch script as Slurm would, with an ``srun`` that records its arguments (and
    exits with ``srun_status``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    _fake(bin_dir, "srun", f'printf "%s\\n" "$@" > {tmp_path}/srun.args; exit {srun_status}')
    _fake(bin_dir, "nvidia-smi", 'echo "NVIDIA H100 80GB HBM3"')
    full = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path), "TMPDIR": str(tmp_path),
            "SLURM_SUBMIT_DIR": str(PROJECT_ROOT), "SLURM_ARRAY_TASK_ID": "3",
            "FUSEBENCH_OUT": str(tmp_path / "fleet"),
            "FUSEBENCH_IMAGE": "registry.example.com#fusebench@sha256:" + "0" * 64, **env}
    out = subprocess.run(["bash", str(SBATCH)], env=full, capture_output=True, text=True, timeout=300)
    args = (tmp_path / "srun.args").read_text().splitlines() if (tmp_path / "srun.args").exists() else []
    return out, args


def test_the_batch_script_runs_the_entry_point_in_the_image_per_task(tmp_path):
    out, args = _sbatch(tmp_path, FUSEBENCH_PER_NODE="1")
    assert out.returncode == 0, out.stderr
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
    task = tmp_path / "fleet" / f"{host}-3"
    assert task.is_dir() and f"results in {task}/results" in out.stdout
    assert args[0] == "--container-image=registry.example.com#fusebench@sha256:" + "0" * 64
    mounts = next(a for a in args if a.startswith("--container-mounts=")).split("=", 1)[1].split(",")
    assert f"{task}:/out" in mounts and any(m.endswith(":/workspace") for m in mounts)
    entry = args.index("fusebench-entrypoint")
    assert args[entry + 1:] == ["--results", "/out/results", "--no-publish"]
    # one asv machine per node: the GPU model's slug, as fusebench names it, and the host
    assert f"FUSEBENCH_MACHINE={slug('NVIDIA H100 80GB HBM3')}-{host}" in args[:entry]
    assert not list(tmp_path.glob("fusebench.*"))  # the node-local clone is removed


def test_the_batch_script_with_apptainer_and_refusals(tmp_path):
    out, args = _sbatch(tmp_path, FUSEBENCH_RUNTIME="apptainer", FUSEBENCH_IMAGE="fusebench.sif",
                        FUSEBENCH_BENCH_ARGS="--ops gelu --quick")
    assert out.returncode == 0, out.stderr
    assert args[:3] == ["apptainer", "exec", "--nv"] and "fusebench.sif" in args
    assert not any(a.startswith("FUSEBENCH_MACHINE=") for a in args)  # the GPU model's machine
    assert args[-6:] == ["--results", "/out/results", "--no-publish", "--ops", "gelu", "--quick"]
    # a task folder that already holds results is never measured into
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
    (tmp_path / "fleet" / f"{host}-3" / "results").mkdir()
    out, _ = _sbatch(tmp_path, FUSEBENCH_RUNTIME="apptainer", FUSEBENCH_IMAGE="fusebench.sif")
    assert out.returncode == 2 and "exists; not measuring into it (never overwrite results)" in out.stderr
    out, _ = _sbatch(tmp_path, FUSEBENCH_RUNTIME="docker")
    assert out.returncode == 2 and "give pyxis, apptainer or host" in out.stderr
    out, _ = _sbatch(tmp_path, FUSEBENCH_IMAGE="")
    assert out.returncode != 0 and "set FUSEBENCH_IMAGE" in out.stderr


def test_the_batch_script_in_host_mode_runs_its_share_and_marks_an_unfinished_task(tmp_path):
    """FUSEBENCH_RUNTIME=host (no container: what make slurm-test runs on a real Slurm), the
    task's share from FUSEBENCH_TASK_ARGS, and the UNFINISHED marker make collect refuses."""
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
    array = {"FUSEBENCH_RUNTIME": "host", "FUSEBENCH_IMAGE": "", "FUSEBENCH_PYTHON": "/opt/py/bin/python",
             "FUSEBENCH_BENCH_ARGS": "--quick", "FUSEBENCH_TASK_ARGS": "--ops gelu,matmul;--ops softmax",
             "SLURM_ARRAY_TASK_COUNT": "2", "SLURM_ARRAY_TASK_MIN": "2", "SLURM_ARRAY_JOB_ID": "77"}
    out, args = _sbatch(tmp_path, **array)  # task 3 of --array=2-3: the second share
    assert out.returncode == 0, out.stderr
    task = tmp_path / "fleet" / f"{host}-3"
    assert args[0].startswith("--chdir=") and args[0].endswith("/checkout") and args[1] == "env"
    python = args.index("/opt/py/bin/python")
    assert args[python:] == ["/opt/py/bin/python", "-m", "fusebench", "bench", "--results", f"{task}/results",
                             "--no-publish", "--quick", "--ops", "softmax"]
    assert not (task / "UNFINISHED").exists()  # finished: the marker removed
    # one entry per task, or the task refuses before measuring
    out, _ = _sbatch(tmp_path, **dict(array, SLURM_ARRAY_TASK_COUNT="3"))
    assert out.returncode == 2
    assert "FUSEBENCH_TASK_ARGS has 2 entries for 3 array tasks; give one per task" in out.stderr
    # a task whose step fails leaves the marker, saying which task and how
    out, _ = _sbatch(tmp_path, srun_status=3, **dict(array, SLURM_ARRAY_TASK_ID="2"))
    assert out.returncode == 3
    assert (tmp_path / "fleet" / f"{host}-2" / "UNFINISHED").read_text() == \
        f"task 77_2 on {host} failed (exit 3): see its Slurm output\n"
    assert not list(tmp_path.glob("fusebench.*"))  # the node-local clone removed on every exit


def test_make_slurm_tests_case_file_measures_the_cpu_quick_grid():
    """scripts/slurm_test_cases.yaml narrows only asv's parameters: its cases are fusebench.yaml's
    CPU quick grid, case for case (fusebench list prints the same lines)."""
    def listed(*config):
        out = subprocess.run([sys.executable, "-m", "fusebench", "list", "--quick", *config],
                             cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout + out.stderr

    import torch

    if torch.cuda.is_available():
        pytest.skip("fusebench list --quick lists the CPU quick grid on a machine without a GPU")
    text = listed("--config", "scripts/slurm_test_cases.yaml")
    assert text == listed() and "case(s) of the cpu-quick grid" in text


# --- GitHub Actions: make ab on a pull request (deploy/github/ab.yml) --------------------------------

WORKFLOW = PROJECT_ROOT / "deploy" / "github" / "ab.yml"
ACTIONLINT_CONFIG = PROJECT_ROOT / "deploy" / "github" / "actionlint.yaml"
AB_COMMAND = ("make in-image CMD='make ab BASE=origin/main FORMAT=markdown AB_OUT=ab.md "
              "BISECT_CACHE=/cache/bisect'")


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _step(name_starts: str) -> dict:
    (step,) = [s for s in _workflow()["jobs"]["ab"]["steps"] if s["name"].startswith(name_starts)]
    return step


def _check_jsonschema(tools: Path, path: Path) -> subprocess.CompletedProcess:
    """check-jsonschema with the GitHub workflow schema vendored in its wheel (no download)."""
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema",
                           "vendor.github-workflows", str(path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(tools)})


def _actionlint(tools: Path, path: Path, *config: str) -> subprocess.CompletedProcess:
    """actionlint, with the wheel's shellcheck on PATH (it then checks every run: block)."""
    return subprocess.run([str(tools / "bin" / "actionlint"), "-no-color", *config, str(path)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": f"{tools / 'bin'}:{os.environ['PATH']}"})


@pytest.mark.slow
def test_the_ab_workflow_is_valid_against_githubs_workflow_schema(tools, tmp_path):
    out = _check_jsonschema(tools, WORKFLOW)
    assert out.returncode == 0 and "ok -- validation done" in out.stdout, out.stdout + out.stderr
    broken = tmp_path / "ab.yml"
    broken.write_text(WORKFLOW.read_text().replace("\n    runs-on:", "\n    run-on:", 1))
    out = _check_jsonschema(tools, broken)
    assert out.returncode == 1 and "Schema validation errors were encountered" in out.stdout


def test_actionlint_passes_the_ab_workflow_and_shellchecks_its_run_blocks(tools, tmp_path):
    config = ("-config-file", str(ACTIONLINT_CONFIG))
    out = _actionlint(tools, WORKFLOW, *config)
    assert out.returncode == 0, out.stdout + out.stderr
    # the runner's label is declared in the config, and a run: block is given to ShellCheck
    out = _actionlint(tools, WORKFLOW)
    assert out.returncode == 1 and 'label "gpu" is unknown' in out.stdout
    broken = tmp_path / "ab.yml"
    broken.write_text(WORKFLOW.read_text().replace("rm -f ab.md", "rm -f ab.md $RUNNER_TEMP/x", 1))
    out = _actionlint(tools, broken, *config)
    assert out.returncode == 1 and "SC2086" in out.stdout, out.stdout


def test_the_ab_workflow_runs_make_ab_on_a_gpu_runner_for_a_pull_request():
    flow = _workflow()
    assert list(flow[True]) == ["pull_request"]  # YAML 1.1 reads the key `on` as True
    assert flow["permissions"] == {"contents": "read", "pull-requests": "write"}
    job = flow["jobs"]["ab"]
    assert job["runs-on"][0] == "self-hosted" and "gpu" in job["runs-on"]
    assert yaml.safe_load(ACTIONLINT_CONFIG.read_text())["self-hosted-runner"]["labels"] == ["gpu"]
    checkout = _step("Check out")
    assert checkout["uses"].startswith("actions/checkout@")
    assert checkout["with"] == {"fetch-depth": 0, "persist-credentials": False}  # origin/main exists
    for step in job["steps"]:  # every action pinned to a commit
        assert "uses" not in step or re.fullmatch(r"[\w-]+/[\w-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
    assert AB_COMMAND in _step("make ab")["run"].splitlines()[2]
    post = _step("Post the table")
    assert post["uses"].startswith("actions/github-script@") and post["continue-on-error"] is True
    assert post["if"] == "${{ !cancelled() && steps.ab.outputs.status != '' }}"
    fail = _step("Fail unless")
    assert fail["if"] == "${{ !cancelled() && steps.ab.outputs.status != '0' }}"
    assert fail["env"]["AB_STATUS"] == "${{ steps.ab.outputs.status }}"


@pytest.mark.parametrize("status", [0, 1, 2])
def test_the_ab_step_keeps_make_abs_exit_status_and_the_table(tmp_path, status):
    """The step's script run as the runner runs it (bash -eo pipefail), with a make that writes the
    table and exits ``status``: the step passes, with the status as its output; the last step then
    fails the job unless it is 0."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake(bin_dir, "make", f'printf "%s\\n" "$@" > make.args; echo "| case | ratio |" > ab.md; exit {status}')
    (tmp_path / "ab.md").write_text("a stale table\n")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "GITHUB_OUTPUT": str(tmp_path / "output"), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary")}
    out = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", _step("make ab")["run"]],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "make.args").read_text().splitlines() == [
        "in-image", "CMD=make ab BASE=origin/main FORMAT=markdown AB_OUT=ab.md BISECT_CACHE=/cache/bisect"]
    assert (tmp_path / "output").read_text() == f"status={status}\n"
    assert (tmp_path / "summary").read_text() == "| case | ratio |\n"
    fail = subprocess.run(["bash", "-eo", "pipefail", "-c", _step("Fail unless")["run"]],
                          env={**env, "AB_STATUS": str(status)}, capture_output=True, text=True)
    assert fail.returncode == 1 and f"::error::make ab exited {status}:" in fail.stdout


COMMENT_HARNESS = """
const fs = require("fs");
const [script, calls] = [fs.readFileSync(process.argv[2], "utf8"), []];
const existing = JSON.parse(process.env.EXISTING);
const rest = {issues: {
  listComments: "listComments",
  createComment: async (a) => calls.push(["create", a]),
  updateComment: async (a) => calls.push(["update", a])}};
const github = {rest, paginate: async (fn, args) => { calls.push([fn, args]); return existing; }};
const context = {repo: {owner: "o", repo: "r"}, issue: {number: 7}, runId: 9, serverUrl: "https://github.com",
                 payload: {pull_request: {head: {sha: "0123456789abcdef0123"}}}};
const AsyncFunction = (async () => {}).constructor;
new AsyncFunction("require", "github", "context", script)(require, github, context)
  .then(() => console.log(JSON.stringify(calls)));
"""


def _comment(tmp_path: Path, existing: list, status: str = "1") -> list:
    """The post step's script run by node with a stand-in for github-script's client; its calls."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node here to run the github-script step")
    (tmp_path / "script.js").write_text(_step("Post the table")["with"]["script"])
    (tmp_path / "harness.js").write_text(COMMENT_HARNESS)
    env = {**os.environ, "AB_STATUS": status, "EXISTING": json.dumps(existing)}
    out = subprocess.run([node, "harness.js", "script.js"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_post_step_writes_one_comment_and_then_updates_it(tmp_path):
    (tmp_path / "ab.md").write_text("| case | ratio |\n| gelu/triton | 1.06 |\n")
    someone = {"id": 1, "user": {"type": "User"}, "body": "<!-- fusebench-ab -->"}
    calls = _comment(tmp_path, existing=[someone])
    assert calls[0] == ["listComments", {"owner": "o", "repo": "r", "issue_number": 7, "per_page": 100}]
    kind, args = calls[1]
    assert kind == "create" and args["issue_number"] == 7  # a person's comment is never edited
    body = args["body"]
    assert body.startswith("<!-- fusebench-ab -->\n**fusebench ab**")
    assert body.endswith("| gelu/triton | 1.06 |\n")
    assert "(head 0123456789ab): make ab exited 1: a regression" in body
    assert "([run](https://github.com/o/r/actions/runs/9))" in body
    mine = {"id": 5, "user": {"type": "Bot"}, "body": body}
    calls = _comment(tmp_path, existing=[mine], status="0")
    kind, args = calls[1]
    assert kind == "update" and args["comment_id"] == 5 and "): no regression (" in args["body"]
    # no table: said so; a table over GitHub's limit of a comment: cut
    (tmp_path / "ab.md").unlink()
    assert "make ab wrote no table: see the run's log." in _comment(tmp_path, [], "2")[1][1]["body"]
    (tmp_path / "ab.md").write_text("x" * 70000)
    body = _comment(tmp_path, [], "0")[1][1]["body"]
    assert len(body) < 65536
    assert body.endswith("(cut at 60000 characters: the whole table is in the run's summary)")
