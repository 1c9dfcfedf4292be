"""Compile-only checks of the CUDA kernels; run without a GPU (nvcc needed for most)."""

import functools
import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

from fusebench.kernels import cuda_check

NVCC = cuda_check.find_nvcc()
needs_nvcc = pytest.mark.skipif(
    NVCC is None, reason="nvcc not found (PATH, $CUDA_HOME, /usr/local/cuda)"
)
SOURCES = cuda_check.cuda_sources()
#: Each op's .cu file by name (kernels/<op>/<name>.cu).
SRC = {p.name: p for p in SOURCES}

# Real `nvcc -c -arch=sm_90 -Xptxas -v -O3 -maxrregcount=24` output (nvcc 13.0) for a
# kernel holding 48 live floats.
SPILLING_PTXAS = """\
ptxas info    : Overriding maximum register limit 256 for '_Z6spillyPKfPf' with  24 of maxrregcount option
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z6spillyPKfPf' for 'sm_90'
ptxas info    : Function properties for _Z6spillyPKfPf
    200 bytes stack frame, 204 bytes spill stores, 316 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 200 bytes cumulative stack size
ptxas info    : Compiling entry function '_Z4finePf' for 'sm_90'
ptxas info    : Function properties for _Z4finePf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]
"""

SPILLY_CU = """\
__global__ void spilly(const float* x, float* y) {
  float a[48];
#pragma unroll
  for (int i = 0; i < 48; ++i) a[i] = x[threadIdx.x + i * 1024];
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 48; ++i) s += a[i] * a[47 - i] + a[(i * 7) % 48];
  y[threadIdx.x] = s;
}
"""


@functools.cache
def compiled(name: str) -> cuda_check.FileResult:
    return cuda_check.compile_file(SRC[name], arch="sm_90")


def test_sources_present_and_standalone():
    assert {p.name for p in SOURCES} >= {"gelu.cu", "softmax.cu"}
    for p in [*SOURCES, cuda_check.CUDA_DIR / "common.cuh", cuda_check.CUDA_DIR / "sm90.cuh"]:
        includes = [ln for ln in p.read_text().splitlines() if ln.lstrip().startswith("#include")]
        assert not [i for i in includes if "torch" in i or "ATen" in i or "c10" in i], p.name


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("name", [p.name for p in SOURCES])
def test_compiles_for_sm90_without_warnings(name):
    r = compiled(name)
    assert r.returncode == 0, r.output
    assert "warning" not in r.output.lower(), r.output
    assert r.kernels, f"no ptxas function report parsed for {name}:\n{r.output}"


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("name", [p.name for p in SOURCES])
def test_compiles_for_sm80_without_warnings(name):
    # The extension also builds sm_80, where code used only by sm_90 kernel bodies is unused: a
    # warning there fails the build (it did once, on the H200). Spills are checked for sm_90.
    r = cuda_check.compile_file(SRC[name], arch="sm_80")
    assert r.returncode == 0, r.output
    assert "warning" not in r.output.lower(), r.output


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("name", [p.name for p in SOURCES])
def test_no_kernel_spills(name):
    r = compiled(name)
    assert all(k.registers is not None for k in r.kernels)
    assert r.problems() == []


def test_parser_reports_spilling_kernel():
    kernels = cuda_check.parse_ptxas(SPILLING_PTXAS)
    assert [(k.name, k.registers, k.spill_stores, k.spill_loads, k.spills) for k in kernels] == [
        ("_Z6spillyPKfPf", 24, 204, 316, True),
        ("_Z4finePf", 8, 0, 0, False),
    ]
    result = cuda_check.FileResult(Path("spilly.cu"), 0, SPILLING_PTXAS, kernels)
    (problem,) = result.problems()
    assert problem.startswith("spilly.cu: kernel ") and "spilly" in problem
    assert "204 bytes spill stores, 316 bytes spill loads" in problem


@pytest.mark.slow
@needs_nvcc
def test_check_fails_on_real_spill_and_compile_error(tmp_path):
    spilly = tmp_path / "spilly.cu"
    spilly.write_text(SPILLY_CU)
    broken = tmp_path / "broken.cu"
    broken.write_text("__global__ void k(float* y) { y[0] = undeclared; }\n")
    spill_res, broken_res = cuda_check.check([spilly, broken], extra_flags=("-maxrregcount=24",))
    assert any("spills" in p and "spilly" in p for p in spill_res.problems()), spill_res.output
    assert broken_res.problems()[0].startswith("broken.cu: compile failed")
    assert cuda_check.main(["-q", str(spilly)]) == 0  # without the register cap it fits


def test_cluster_chunk_mirrors_agree():
    """kClusterChunkElems (fusebench_cuda.h) against its mirrors: the Python constant, the refusal's
    and the binding's messages and cluster_dispatch's cases in softmax_cluster.cu."""
    pytest.importorskip("torch")
    from fusebench.kernels import cuda_ext

    header = (cuda_check.CUDA_DIR / "fusebench_cuda.h").read_text()
    chunks = tuple(int(c) for c in re.search(r"kClusterChunkElems\[\] = \{([^}]*)\}", header)[1].split(","))
    assert chunks == cuda_ext.CLUSTER_CHUNKS
    listed = ", ".join(map(str, chunks))
    refusal = SRC["softmax_tma.cu"].read_text()
    assert f"chunk must be 0 or one of ({listed}), got %d" in refusal
    binding = re.sub(r'"\s+"', "", (cuda_check.CUDA_DIR / "binding.cpp").read_text())  # joined literals
    assert f"chunk_elems 0, {', '.join(map(str, chunks[:-1]))} or {chunks[-1]}," in binding
    source = SRC["softmax_cluster.cu"].read_text()
    dispatch = re.search(r"cudaError_t cluster_dispatch\(.*?\n}\n", source, re.S)[0]
    assert tuple(int(c) for c in re.findall(r"case (\d+): return cluster_launch", dispatch)) == chunks


def test_unavailable_reason_without_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present: the GPU test suite covers the built extension")
    from fusebench.kernels import cuda_ext

    reason = cuda_ext.unavailable_reason()
    assert isinstance(reason, str) and reason
    with pytest.raises(RuntimeError, match="unavailable"):
        cuda_ext.gelu(torch.ones(4))


@pytest.mark.slow
def test_binding_cpp_compiles_against_torch_headers(tmp_path):
    """Syntax-check binding.cpp with the host compiler and torch's headers.

    A CPU-only torch lacks the generated c10/cuda/impl/cuda_cmake_macros.h;
    a one-line stand-in is supplied then. Linking needs a CUDA torch and a GPU
    host, so this catches C++ errors only.
    """
    torch_ext = pytest.importorskip("torch.utils.cpp_extension")
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no host C++ compiler (c++, g++) on PATH")
    roots = [
        *([Path(NVCC).resolve().parents[1]] if NVCC else []),
        *(Path(p) for p in (os.environ.get("CUDA_HOME"), "/usr/local/cuda") if p),
    ]
    cuda_inc = next(
        (r / "include" for r in roots if (r / "include" / "cuda_runtime_api.h").is_file()), None
    )
    if cuda_inc is None:
        pytest.skip(f"no CUDA headers: no cuda_runtime_api.h under {[str(r) for r in roots]}/include")
    includes = torch_ext.include_paths()
    if not any(Path(p, "c10/cuda/impl/cuda_cmake_macros.h").is_file() for p in includes):
        stub = tmp_path / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
        stub.parent.mkdir(parents=True)
        stub.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        includes = [*includes, str(tmp_path)]
    cmd = [cxx, "-fsyntax-only", "-std=c++20", "-fPIC", "-Wall", "-Werror",
           "-DTORCH_API_INCLUDE_EXTENSION_H", "-DTORCH_EXTENSION_NAME=fusebench_cuda",
           *(f"-I{p}" for p in includes), f"-I{sysconfig.get_path('include')}", f"-I{cuda_inc}",
           str(cuda_check.CUDA_DIR / "binding.cpp")]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_one_binding_preamble_and_one_launch_helper():
    """The shared set-up is written once: binding.cpp's ops check their input (input_error) and go
    through OpIO (the only guard, contiguous copy and output allocation), returning errors as
    values, and the .cu files launch through common.cuh's
    launch() (the only cudaLaunchKernelEx and launch attributes)."""
    binding = (cuda_check.CUDA_DIR / "binding.cpp").read_text()
    for once in ("CUDAGuard guard", ".contiguous()", "getCurrentCUDAStream()", "x.is_cuda()"):
        assert binding.count(once) == 1, once
    ops = re.findall(r"^Result (\w+)\(const at::Tensor& x[,)]", binding, re.M)
    assert {"gelu", "softmax_impl", "softmax_tuned", "softmax_cluster", "softmax_tma"} <= set(ops)
    for op in ops:
        body = re.search(rf"^Result {op}\(.*?^}}$", binding, re.M | re.S)[0]
        checked = "input_error(x, op); !why.empty()) return fail(why);\n  const OpIO io(x);" in body
        assert checked or re.search(r"return softmax_impl\(", body), op
    # errors are values, messages joined without iostreams (binding.cpp's Result says why)
    code = re.sub(r"//[^\n]*", "", binding)
    assert not re.search(r"TORCH_CHECK|\bthrow\b|TORCH_INTERNAL_ASSERT|AT_ERROR|c10::str|stream>", code)
    common = (cuda_check.CUDA_DIR / "common.cuh").read_text()
    assert common.count("cudaLaunchKernelEx(&cfg") == 1
    for src in SOURCES:
        text = src.read_text()
        for token in (r"cudaLaunchKernelEx", r"\bcudaLaunchAttribute\b", r"cudaLaunchConfig_t",
                      r"\.id = cudaLaunchAttribute"):
            assert not re.search(token, text), f"{src.name} sets up a launch itself: use launch()"
        opt_in = "cudaFuncAttributeMaxDynamicSharedMemorySize"
        assert opt_in not in text, f"{src.name}: use allow_dynamic_smem"
        assert re.search(r"\breturn launch\(", text), src.name
