"""Every entry point of ``kernels.cuda_ext`` refuses a tensor the extension does not take (not on a
CUDA device, or not float32/bfloat16/float16) with a one-line ValueError naming the op, before
the extension is called: the extension's own refusals killed the process on the H200. The CPU
tests stand a stub in for the extension that fails if it is touched; the GPU test sends real
float64 CUDA tensors."""

from types import SimpleNamespace

import pytest
import torch

from kernels import cuda_ext

#: entry point -> a call of it with its defaults (the op name its refusals carry)
ENTRY_POINTS = {
    "gelu": lambda x: cuda_ext.gelu(x),
    "softmax": lambda x: cuda_ext.softmax(x),
    "softmax_online": lambda x: cuda_ext.softmax_variant(x, "online"),
    "softmax_tma": lambda x: cuda_ext.softmax_tma(x),
    "softmax_tma_grid": lambda x: cuda_ext.softmax_tma_grid(x),
    "softmax_coop": lambda x: cuda_ext.softmax_coop(x),
    "softmax_cluster": lambda x: cuda_ext.softmax_cluster(x),
    "softmax_split_row": lambda x: cuda_ext.softmax_split(x),
    "softmax_warp": lambda x: cuda_ext.softmax_warp(x, 1),
}


class _Untouchable:
    def __getattr__(self, name):
        raise AssertionError(f"the extension's {name} was called")


@pytest.mark.parametrize("op", ENTRY_POINTS)
def test_a_cpu_tensor_is_refused_before_the_extension(op, monkeypatch):
    monkeypatch.setattr(cuda_ext, "_module", _Untouchable)
    with pytest.raises(ValueError, match=rf"^{op}: expected a CUDA tensor, got device cpu$"):
        ENTRY_POINTS[op](torch.ones(4, 8))


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.float8_e4m3fn], ids=str)
def test_another_dtype_is_refused_with_its_name(dtype):
    x = SimpleNamespace(device=torch.device("cuda", 0), dtype=dtype)  # no GPU needed to check
    message = rf"^softmax: dtype must be float32, bfloat16 or float16, got {dtype}$"
    with pytest.raises(ValueError, match=message):
        cuda_ext._check_input(x, "softmax")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_the_three_dtypes_on_a_cuda_device_pass(dtype):
    assert cuda_ext._check_input(SimpleNamespace(device=torch.device("cuda", 0), dtype=dtype), "gelu") is None


def test_the_extension_being_unavailable_comes_first(monkeypatch):
    def unavailable():
        raise RuntimeError("fusebench CUDA extension unavailable: no nvcc")

    monkeypatch.setattr(cuda_ext, "_module", unavailable)
    for call in ENTRY_POINTS.values():
        with pytest.raises(RuntimeError, match="unavailable"):
            call(torch.ones(4, 8, dtype=torch.float64))


@pytest.mark.gpu
@pytest.mark.parametrize("op", ENTRY_POINTS)
def test_a_float64_cuda_tensor_is_refused_on_the_gpu(op):
    message = rf"^{op}: dtype must be float32, bfloat16 or float16, got torch.float64$"
    with pytest.raises(ValueError, match=message):
        ENTRY_POINTS[op](torch.ones(4, 1024, device="cuda", dtype=torch.float64))


#: The extension's own refusal of a bad ``pdl``, made straight at the module (cuda_ext would refuse
#: it first): checked before the op's tensors exist, unlike the refusals that crashed.
_PROBE = """
import torch
from kernels import cuda_ext
try:
    cuda_ext._module().gelu(torch.ones(8, device="cuda"), 5, -1)
except RuntimeError as exc:
    print("raised:", str(exc).splitlines()[0])
"""


@pytest.mark.gpu
def test_a_refusal_of_the_extension_itself_raises_and_the_process_lives():
    """Whether a TORCH_CHECK of the extension can raise on this host at all (a failed launch has
    no other way to report): run in a child process, since on the H200 such refusals have killed
    the process (SIGSEGV) so far."""
    import subprocess
    import sys

    from fusebench.paths import PROJECT_ROOT

    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"the extension's refusal killed the process (exit {done.returncode})"
    assert "raised: gelu: pdl must be -1, 0 or 1, got 5" in done.stdout, done.stdout + done.stderr
