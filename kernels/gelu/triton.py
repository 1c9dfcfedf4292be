"""GELU (tanh approximation) as one elementwise Triton kernel.

``y = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`` (Hendrycks & Gimpel 2016,
arXiv:1606.08415; the same formula as ``torch.nn.functional.gelu(x, approximate="tanh")``).
The kernel evaluates the identical form ``x * sigmoid(2u) = x / (1 + exp(-2u))`` with
``u = sqrt(2/pi) * (x + 0.044715 * x**3)``: one ``exp``, no ``tanh`` (``tl.extra`` libdevice
moved between Triton versions), and no cancellation in ``1 + tanh(u)`` for negative ``u``.

Cost: every element is read once and written once, ``2 * itemsize`` bytes per element (8 for
float32, 4 for bfloat16/float16), and about a dozen flops: memory-bound on any GPU, so the
kernel is written to stream at copy bandwidth (large blocks, 16-byte vector loads).
"""

import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

try:  # Triton >= 3.4 (grid dependency control, for programmatic dependent launch)
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # pragma: no cover - older Triton: GeluConfig(pdl=True) fails at compile time
    gdc_launch_dependents = gdc_wait = None

__all__ = ["GeluConfig", "gelu"]

#: Launch table: itemsize (bytes) -> (BLOCK_SIZE elements per program, num_warps): 16 elements
#: (fp32: four 16-byte vector loads) per thread in 256 threads, 16 KiB in and out per program;
#: 16-bit: 32 elements (four vectors) per thread in 128 threads, 8 KiB (ahead of 8192 / 8;
#: docs/tuning/gelu.md).
_LAUNCH = {4: (4096, 8), 2: (4096, 4)}

_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
#: SM count assumed for CPU tensors (the Triton interpreter): an H200's.
_INTERPRETER_SM_COUNT = 132


@dataclass(frozen=True)
class GeluConfig:
    """How :func:`gelu` launches (for tuning; the default comes from ``_LAUNCH``).

    Attributes:
        block: elements per program and loop step (power of two).
        num_warps: warps per program (power of two).
        programs_per_sm: 0: one program per block (grid ``cdiv(numel, block)``); k > 0: a
            persistent grid of ``k x SM count`` programs, each looping over blocks with a grid
            stride (no more programs than blocks).
        even: with ``programs_per_sm``: each program takes one contiguous run of
            ``cdiv(blocks, grid)`` blocks instead of a grid stride, so every SM has the same
            work and they finish together (no tail of a few busy SMs). Slower than the
            one-program-per-block default (docs/tuning/gelu.md).
        evict_first: load the input with ``eviction_policy="evict_first"`` (it is never reread).
        streaming_store: store with ``cache_modifier=".cs"`` (streaming: likely accessed once).
        pdl: launch as a programmatic dependent launch (sm_90+; ``launch_pdl``): each program
            first waits for the previous kernel of the stream to complete (``griddepcontrol.wait``,
            so its output is visible) and then lets the next kernel launch
            (``griddepcontrol.launch_dependents``): back-to-back launches overlap the next
            kernel's launch and block scheduling with this one's tail. CUDA C++ Programming
            Guide, "Programmatic Dependent Launch and Synchronization". GPU only.
    """

    block: int
    num_warps: int
    programs_per_sm: int = 0
    evict_first: bool = False
    streaming_store: bool = False
    pdl: bool = False
    even: bool = False

    def __post_init__(self) -> None:
        for name in ("block", "num_warps"):
            v = getattr(self, name)
            if v < 1 or v & (v - 1):
                raise ValueError(f"GeluConfig: {name} must be a power of two, got {v}")
        if self.programs_per_sm < 0:
            raise ValueError(f"GeluConfig: programs_per_sm must be >= 0, got {self.programs_per_sm}")
        if self.even and not self.programs_per_sm:
            raise ValueError("GeluConfig: even needs programs_per_sm > 0")


@triton.jit
def _gelu_block(
    x_ptr,
    y_ptr,
    n_elements,
    b,
    BLOCK_SIZE: tl.constexpr,
    EVICT_FIRST: tl.constexpr,
    STREAM_STORE: tl.constexpr,
):
    offs = tl.cast(b, tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # int64: numel may exceed 2**31
    mask = offs < n_elements
    if EVICT_FIRST:
        x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    else:
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    x = x.to(tl.float32)
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)  # sqrt(2/pi) * (...)
    y = (x / (1.0 + tl.exp(-2.0 * u))).to(y_ptr.dtype.element_ty)  # == 0.5 * x * (1 + tanh(u))
    if STREAM_STORE:
        tl.store(y_ptr + offs, y, mask=mask, cache_modifier=".cs")
    else:
        tl.store(y_ptr + offs, y, mask=mask)


@triton.jit
def _gelu_kernel(
    x_ptr,
    y_ptr,
    n_elements,
    BLOCK_SIZE: tl.constexpr,
    PERSISTENT: tl.constexpr,
    EVICT_FIRST: tl.constexpr,
    STREAM_STORE: tl.constexpr,
    PDL: tl.constexpr,
    EVEN: tl.constexpr,
):
    if PDL:  # the previous kernel's writes are visible past the wait; then let the next launch
        gdc_wait()
        gdc_launch_dependents()
    if EVEN:  # one contiguous run of blocks per program
        n_blocks = tl.cdiv(n_elements, BLOCK_SIZE)
        span = tl.cdiv(n_blocks, tl.num_programs(0))
        first = tl.program_id(0) * span
        for b in range(first, tl.minimum(first + span, n_blocks)):
            _gelu_block(x_ptr, y_ptr, n_elements, b, BLOCK_SIZE, EVICT_FIRST, STREAM_STORE)
    elif PERSISTENT:  # grid-stride loop over the blocks
        n_blocks = tl.cdiv(n_elements, BLOCK_SIZE)
        for b in range(tl.program_id(0), n_blocks, tl.num_programs(0)):
            _gelu_block(x_ptr, y_ptr, n_elements, b, BLOCK_SIZE, EVICT_FIRST, STREAM_STORE)
    else:
        _gelu_block(x_ptr, y_ptr, n_elements, tl.program_id(0), BLOCK_SIZE, EVICT_FIRST, STREAM_STORE)


def _launch_config(itemsize: int, pdl: bool = False) -> GeluConfig:
    """The default :class:`GeluConfig` for an element size in bytes (4 or 2)."""
    block, warps = _LAUNCH[itemsize]
    return GeluConfig(block, warps, pdl=pdl)


def _device_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


@functools.cache
def _pdl_default(device_index: int) -> bool:
    """Programmatic dependent launch by default: on sm_90+ with a Triton that has grid
    dependency control (faster in a stream of calls; docs/tuning/gelu.md)."""
    return gdc_wait is not None and torch.cuda.get_device_capability(device_index)[0] >= 9


def _sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return _INTERPRETER_SM_COUNT
    return torch.cuda.get_device_properties(device).multi_processor_count


def gelu(x: torch.Tensor, *, _config: GeluConfig | None = None) -> torch.Tensor:
    """GELU, tanh approximation, elementwise.

    Args:
        x: any shape, float32, bfloat16 or float16, on a CUDA device (or on the CPU under
            ``TRITON_INTERPRET=1``). A non-contiguous ``x`` is first copied with
            ``.contiguous()`` (one extra read and write; the kernel itself needs flat storage).

    Returns:
        A new contiguous tensor of ``x``'s shape and dtype. Arithmetic is float32 throughout;
        the result is rounded once to ``x``'s dtype. An empty ``x`` gives an empty tensor and no
        launch.

        _config: force a launch configuration (tuning, tests); default ``_LAUNCH`` for the
            element size, with ``pdl`` on sm_90+ GPUs.

    Raises:
        TypeError: ``x`` has another dtype.
        ValueError: a forced ``pdl`` config on a CPU tensor (the interpreter has no grid
            dependency control).

    Bytes moved: ``2 * x.element_size()`` per element (one read, one write); memory-bound.
    """
    if x.dtype not in _DTYPES:
        raise TypeError(f"gelu: unsupported dtype {x.dtype}; expected float32, bfloat16 or float16")
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return y
    if _config is not None:
        c = _config
    else:
        on_gpu = x.device.type == "cuda"
        c = _launch_config(x.element_size(), pdl=on_gpu and _pdl_default(_device_index(x.device)))
    if c.pdl and x.device.type != "cuda":
        raise ValueError("gelu: a pdl config needs a CUDA device (sm_90+)")
    # 1-D grid, one program per BLOCK_SIZE consecutive elements of the flattened tensor; the
    # last program is masked. At 2**24 fp32 elements that is 4096 programs, ~31 per SM on a
    # 132-SM H200: enough waves that the tail wave costs little. A persistent config instead
    # launches programs_per_sm x SMs programs that stride over the blocks.
    n_blocks = triton.cdiv(n, c.block)
    persistent = c.programs_per_sm > 0
    grid = (min(n_blocks, c.programs_per_sm * _sm_count(x.device)) if persistent else n_blocks,)
    _gelu_kernel[grid](
        x,
        y,
        n,
        BLOCK_SIZE=c.block,
        PERSISTENT=persistent,
        EVICT_FIRST=c.evict_first,
        STREAM_STORE=c.streaming_store,
        PDL=c.pdl,
        EVEN=c.even,
        num_warps=c.num_warps,
        **({"launch_pdl": True} if c.pdl else {}),
    )
    return y
