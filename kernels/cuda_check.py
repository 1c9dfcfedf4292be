"""Compile-only check of the standalone CUDA kernels; needs nvcc, no GPU, no torch.

Each ``kernels/*/*.cu`` file is compiled on its own (no torch headers) with

    nvcc -c -arch=<arch> -Xptxas -v --Werror all-warnings -O3 <file>.cu -o <tmp>.o

and ptxas's per-function report is parsed; a file that fails to compile or
warns, or any kernel that spills registers to local memory, is a problem.
``python -m fusebench.kernels.cuda_check`` is the command-line entry point.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

#: The shared headers (common.cuh, sm90.cuh, fusebench_cuda.h) and the binding; the include path.
CUDA_DIR = Path(__file__).resolve().parent / "cuda"
NVCC_FLAGS = ("-O3", "-Xptxas", "-v", "--Werror", "all-warnings")

_FUNC = re.compile(r"(?:Compiling entry function '([^']+)'|Function properties for (\S+))")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS = re.compile(r"Used (\d+) registers")


@dataclass
class KernelInfo:
    """ptxas's report for one function (name as ptxas prints it, i.e. mangled)."""

    name: str
    registers: int | None = None
    stack_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0

    @property
    def spills(self) -> bool:
        return self.spill_stores > 0 or self.spill_loads > 0


@dataclass
class FileResult:
    """One ``nvcc -Xptxas -v`` compile: exit status, compiler output, and each kernel's registers,
    stack and spill bytes (``problems()`` lists warnings, errors and spills)."""

    path: Path
    returncode: int
    output: str
    kernels: list[KernelInfo] = field(default_factory=list)

    def problems(self) -> list[str]:
        """One line per problem: failed compile, warning, spilling kernel."""
        if self.returncode != 0:
            first = next((ln for ln in self.output.splitlines() if "error" in ln.lower()), "")
            return [f"{self.path.name}: compile failed (rc {self.returncode}): {first.strip()}"]
        out = [
            f"{self.path.name}: {ln.strip()}"
            for ln in self.output.splitlines()
            if "warning" in ln.lower()
        ]
        out += [
            f"{self.path.name}: kernel {demangle(k.name)} spills "
            f"({k.spill_stores} bytes spill stores, {k.spill_loads} bytes spill loads)"
            for k in self.kernels
            if k.spills
        ]
        return out


def parse_ptxas(text: str) -> list[KernelInfo]:
    """Per-function register/stack/spill figures from ``-Xptxas -v`` output, in order."""
    kernels: dict[str, KernelInfo] = {}
    current: KernelInfo | None = None
    for line in text.splitlines():
        if m := _FUNC.search(line):
            name = m.group(1) or m.group(2)
            current = kernels.setdefault(name, KernelInfo(name))
        elif current is not None and (m := _FRAME.search(line)):
            current.stack_bytes, current.spill_stores, current.spill_loads = map(int, m.groups())
        elif current is not None and (m := _REGS.search(line)):
            current.registers = int(m.group(1))
    return list(kernels.values())


def find_nvcc() -> str | None:
    """Path of nvcc on PATH, else under $CUDA_HOME / $CUDA_PATH / /usr/local/cuda."""
    if found := shutil.which("nvcc"):
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (p := Path(root, "bin", "nvcc")).is_file():
            return str(p)
    return None


def cuda_sources() -> list[Path]:
    """Every ``kernels/*/*.cu`` file, sorted."""
    return sorted(CUDA_DIR.parent.glob("*/*.cu"))


def compile_file(
    path: Path, arch: str = "sm_90", extra_flags: tuple[str, ...] = (), nvcc: str | None = None
) -> FileResult:
    """Compile one .cu file to a throwaway object; raises FileNotFoundError without nvcc."""
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise FileNotFoundError("nvcc not found")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            nvcc,
            "-c",
            f"-arch={arch}",
            *NVCC_FLAGS,
            "-I",
            str(CUDA_DIR),
            *extra_flags,
            str(path),
            "-o",
            f"{tmp}/k.o",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    output = proc.stdout + proc.stderr
    return FileResult(Path(path), proc.returncode, output, parse_ptxas(output))


def check(
    files: list[Path] | None = None, arch: str = "sm_90", extra_flags: tuple[str, ...] = ()
) -> list[FileResult]:
    """Compile ``files`` (default: every kernels/*/*.cu) in parallel."""
    files = cuda_sources() if files is None else files
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(lambda f: compile_file(f, arch, extra_flags), files))


def demangle(name: str) -> str:
    """Readable kernel name: demangled by c++filt when present, namespaces and
    parameter list dropped; the mangled name otherwise."""
    if (cxxfilt := shutil.which("c++filt")) is None:
        return name
    out = subprocess.run([cxxfilt, name], capture_output=True, text=True, check=False).stdout
    out = out.strip() or name
    out = re.sub(r"\(anonymous namespace\)::|fusebench::cuda::", "", out)
    return re.sub(r"\((?:[^()]|\([^()]*\))*\)$", "", out)


def main(argv: list[str] | None = None) -> int:
    """``python -m fusebench.kernels.cuda_check``: 0 when every file compiles clean without spills, 1 when one
    does not (named), 2 when nvcc is missing."""
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path, help="default: kernels/*/*.cu")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("-q", "--quiet", action="store_true", help="print problems only")
    args = ap.parse_args(argv)
    if find_nvcc() is None:
        print("check_cuda: nvcc not found (PATH, $CUDA_HOME, /usr/local/cuda)")
        return 2
    results = check(args.files or None, args.arch)
    problems = [p for r in results for p in r.problems()]
    if not args.quiet:
        for r in results:
            print(f"{r.path.name}: rc {r.returncode}, {len(r.kernels)} functions")
            for k in r.kernels:
                print(
                    f"  {k.registers!s:>3} regs  {k.stack_bytes:>4} B stack  "
                    f"{k.spill_stores}/{k.spill_loads} B spill st/ld  {demangle(k.name)}"
                )
    for p in problems:
        print(f"PROBLEM {p}")
    print("check_cuda: " + (f"{len(problems)} problem(s)" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
