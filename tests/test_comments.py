"""Code comments hold no measurement history (no commit ids: those go to docs/tuning/<op>.md and
commit messages), and every repository path a comment, docstring or document names exists (a moved
file breaks this test, not a reader's trust)."""

import ast
import functools
import glob
import io
import re
import subprocess
import tokenize
from pathlib import Path

from fusebench.paths import PROJECT_ROOT

#: A commit id: 7 to 40 hex digits, at least one a-f and one 0-9, not part of a longer word or number.
COMMIT = re.compile(r"(?<![\w.:/-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])")

CODE_DIRS = ("fusebench", "benchmarks", "scripts", "tests")
C_SUFFIXES = (".cu", ".cuh", ".cpp", ".h")
#: Path-like words: a folder or two, then a file with an extension, or a lone Markdown file.
PATH = re.compile(r"(?<![\w./<>{}$-])((?:\.\./|\./)?(?:[\w.*-]+/)+[\w.*-]+\.[a-z]{1,5}|[\w-]+\.md)(?![\w/])")


@functools.cache
def _tracked(*patterns: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "--", *patterns], cwd=PROJECT_ROOT, check=True,
                         capture_output=True, text=True).stdout.split()
    return [p for p in out if (PROJECT_ROOT / p).is_file()]


def python_prose(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every comment and docstring of a Python source."""
    out = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
           if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.append((body[0].lineno, body[0].value.value))
    return out


def c_prose(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every ``//`` and ``/* */`` comment of a C, C++ or CUDA source."""
    return [(source.count("\n", 0, m.start()) + 1, m.group(0))
            for m in re.finditer(r"//[^\n]*|/\*.*?\*/", source, re.S)]


def hash_prose(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every ``#`` comment (shell, Makefile, YAML, TOML, Dockerfile)."""
    return [(i, line[line.index("#"):]) for i, line in enumerate(source.splitlines(), 1)
            if "#" in line and not line.lstrip().startswith("#!")]


def prose(path: str) -> list[tuple[int, str]]:
    """The comments and docstrings of a tracked code file."""
    text = (PROJECT_ROOT / path).read_text()
    if path.endswith(".py"):
        return python_prose(text)
    if path.endswith(C_SUFFIXES):
        return c_prose(text)
    return hash_prose(text)


def code_files() -> list[str]:
    files = [p for p in _tracked(*CODE_DIRS)
             if p.endswith((".py", ".sh", *C_SUFFIXES)) and not p.startswith("tests/data/")]
    return files + ["Makefile", "Dockerfile", "fusebench.yaml", "pyproject.toml", ".ci/run",
                    *_tracked("deploy")]


def doc_files() -> list[str]:
    return [p for p in _tracked("*.md") if not p.startswith(("tests/data/", "nsys/examples/", "reports/"))]


def test_the_commit_pattern_finds_ids_and_not_numbers():
    found = [m.group(0) for m in COMMIT.finditer(
        "at 1d5e605 -> 962f5d8 (a1ed741); 16777216 float32, 0x7fffffff, deadbeef, sha256:" + "ab12" * 16
        + ", nsys/gelu-h200-312c2cc.md, 4096x65536, 2^24, abcdef1234567890abcdef1234567890abcdef12")]
    assert found == ["1d5e605", "962f5d8", "a1ed741", "abcdef1234567890abcdef1234567890abcdef12"]


def test_no_code_comment_holds_a_commit_id():
    # tests may name a committed record by its commit (records/h200/<sha8>.json.xz): data, not history
    offenders = []
    for path in (p for p in code_files() if not p.startswith("tests/")):
        for line, text in prose(path):
            offenders += [f"{path}:{line + text.count(chr(10), 0, m.start())}: {m.group(0)}"
                          for m in COMMIT.finditer(text)]
    assert not offenders, ("commit ids in code comments (the history belongs in docs/tuning/<op>.md and "
                           "the commit message):\n" + "\n".join(offenders))


def _resolves(ref: str, base: Path) -> bool:
    for root in (base, PROJECT_ROOT):
        target = root / ref
        if "*" in ref:
            if glob.glob(str(target)):
                return True
        elif target.exists():
            return True
    return False


def _ignored(ref: str) -> bool:
    """An output path (git ignores it: ``nsys/...nsys-rep``, ``results/cpu-*``), not a source."""
    return subprocess.run(["git", "check-ignore", "-q", "--no-index", ref.lstrip("./")],
                          cwd=PROJECT_ROOT).returncode == 0


@functools.cache
def _top_level() -> frozenset[str]:
    return frozenset(p.split("/")[0] for p in _tracked())


def _repo_refs(path: str, texts: list[tuple[int, str]]):
    top = _top_level()
    for line, text in texts:
        for m in PATH.finditer(text):
            ref = m.group(1).rstrip(".")
            head = ref.split("/")[0]
            if "/" in ref and head not in top and not (ref.startswith("..") and path.endswith(".md")):
                continue  # not a path into this repository: /opt/venv/..., a page's relative URL
            yield line, ref


def test_every_path_a_comment_or_document_names_exists():
    missing = []
    sources = [(p, prose(p)) for p in code_files()]
    sources += [(p, list(enumerate((PROJECT_ROOT / p).read_text().splitlines(), 1))) for p in doc_files()]
    for path, texts in sources:
        base = (PROJECT_ROOT / path).parent
        for line, ref in _repo_refs(path, texts):
            if not _resolves(ref, base) and not _ignored(ref):
                missing.append(f"{path}:{line}: {ref}")
    assert not missing, "references to files that do not exist:\n" + "\n".join(missing)


