"""Every entry point of ``fusebench.kernels.cuda_ext`` refuses a tensor the extension does not take (not on a
CUDA device, or not float32/bfloat16/float16) with a one-line ValueError naming the op, before
the extension is called, as every other argument check of cuda_ext. The CPU
tests stand a stub in for the extension that fails if it is touched; the GPU test sends real
float64 CUDA tensors. A refusal or failed launch of the extension itself comes back as a value and
becomes a RuntimeError."""

from types import SimpleNamespace

import pytest
import torch
from fusebench.kernels import cuda_ext

#: entry point -> a call of it with its defaults (the op name its refusals carry)
ENTRY_POINTS = {
    "gelu": lambda x: cuda_ext.gelu(x),
    "softmax": lambda x: cuda_ext.softmax(x),
    "softmax_online": lambda x: cuda_ext.softmax_variant(x, "online"),
    "softmax_tma": lambda x: cuda_ext.softmax_tma(x),
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


class _Failing:
    """An extension whose every op reports a failed launch, as the real one does: (None, why)."""

    def __getattr__(self, name):
        return lambda *args: (None, f"{name}: CUDA launch failed: too many resources requested for launch")


@pytest.mark.parametrize("op", ["gelu", "softmax", "softmax_warp", "softmax_split_row"])
def test_a_failure_the_extension_returns_is_a_runtime_error(op, monkeypatch):
    monkeypatch.setattr(cuda_ext, "_module", _Failing)
    monkeypatch.setattr(cuda_ext, "_check_input", lambda x, op: None)  # a CPU tensor stands in
    monkeypatch.setattr(cuda_ext, "_refuse", lambda *args, **kwargs: None)
    message = r"^\w+: CUDA launch failed: too many resources requested for launch$"
    with pytest.raises(RuntimeError, match=message):
        ENTRY_POINTS[op](torch.ones(4, 8))


def test_a_result_without_error_is_its_tensor():
    y = torch.ones(3)
    assert cuda_ext._value((y, "")) is y
    with pytest.raises(RuntimeError, match="^gelu: pdl must be -1, 0 or 1, got 5$"):
        cuda_ext._value((None, "gelu: pdl must be -1, 0 or 1, got 5"))


#: Refusals and a failed launch of the extension itself, made straight at the module (cuda_ext
#: would refuse the first two first): each must come back as (None, why), and the process live.
_PROBE = """
import torch
from fusebench.kernels import cuda_ext
print("start")
m = cuda_ext._module()
print("loaded")
x = torch.ones(8, 256, device="cuda")
calls = (lambda: m.gelu(x, 5, -1), lambda: m.softmax(x.double()),
         lambda: m.softmax_cluster(x[:, :250], 12345))
for call in calls:
    y, why = call()
    print("returned:", y, why)
print("done")
"""


@pytest.mark.gpu
def test_the_extension_returns_its_errors_and_the_process_lives():
    """The extension's refusals and failed launches come back as values: run in a child process,
    since on the H200 its refusals once killed the process (SIGSEGV; docs/cuda-extension.md);
    -X faulthandler names the call that died."""
    import subprocess
    import sys

    from fusebench.paths import PROJECT_ROOT

    done = subprocess.run([sys.executable, "-X", "faulthandler", "-u", "-c", _PROBE], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"died ({done.returncode}) after {done.stdout!r}: {done.stderr[-1500:]}"
    lines = done.stdout.splitlines()[2:]
    assert lines[0] == "returned: None gelu: pdl must be -1, 0 or 1, got 5", done.stdout
    dtype_refusal = "softmax: dtype must be float32, bfloat16 or float16, got Double"
    assert lines[1] == f"returned: None {dtype_refusal}", done.stdout
    assert lines[2].startswith("returned: None softmax_cluster: invalid argument (needs sm_90+"), done.stdout
