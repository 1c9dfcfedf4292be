"""Hand-written CUDA kernels (kernels/*/*.cu) as a lazily built torch extension.

Nothing is compiled or touches CUDA at import time. The first call that needs
the extension builds it once per process with
``torch.utils.cpp_extension.load`` (``-O3``, sm_80 and sm_90 SASS plus
compute_90 PTX for newer GPUs, no ``--use_fast_math``, warnings as errors), or
``start_build()`` starts that build in a background thread (a run does, as soon as it knows it
will measure a ``cuda`` case on a GPU, so that nvcc runs while the other backends' cases build;
the first ``cuda`` case then waits for it). The build directory is ``<root>/<key>``: root
``$FUSEBENCH_EXT_DIR`` if set, else ``~/.cache/fusebench/cuda_ext``; key a hash of everything
that decides the binary (``cache_key``: every file the build reads, the flags, nvcc's and the host
compiler's ``--version``, torch's version and CUDA, the Python ABI). A folder that holds a
finished build (its ``built.json``) is imported as it is, with no compiler run: two revisions
never build over each other, and a second run of the same sources compiles nothing. ``build()``
does the same build ahead of time with no GPU (the image runs ``python -m
fusebench.kernels.cuda_ext`` at build time). docs/cuda-extension.md has the rest.

All ops take a CUDA tensor of dtype float32, bfloat16 or float16, make it
contiguous (a copy when it is not), and return a new contiguous tensor of the
same shape and dtype, computed in fp32 and launched on the current stream.
They are memory-bound: ideal traffic is one read and one write, i.e.
``2 * itemsize`` bytes per element. Errors: ``RuntimeError`` quoting ``unavailable_reason()``
when the extension cannot be used; then ``ValueError`` (one line), raised here before the
extension is called, for a non-CUDA tensor, another dtype, or an argument the op cannot take (a
forced softmax variant and the row length, a chunk, a block size). The extension has the same
checks and returns every refusal and failed launch as a value, ``(None, "<op>: why")``, which
becomes ``RuntimeError`` here (``_value``): on the H200 (torch 2.11, CUDA 13.0) its refusals killed
the process until they were neither exceptions nor messages built with c10::str
(kernels/cuda/binding.cpp, ``Result``, says what was seen).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sysconfig
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable

import torch
from fusebench.kernels.cuda_check import find_nvcc

from fusebench.atomic import write_json
from fusebench.backends import shared_build
from fusebench.errors import SkipCase

_OPS = Path(__file__).resolve().parent
#: The shared binding and headers (the include path); each op's .cu files live in its own folder.
_SRC = _OPS / "cuda"
#: The module's name; torch names its library ``fusebench_cuda.so`` in the build directory.
NAME = "fusebench_cuda"
#: Written into a build directory once its build has finished and imported: its key's inputs.
BUILT = "built.json"
#: Suffixes of the files of an op's folder that the build reads (``kernels/<op>/``).
OP_SUFFIXES = (".cu", ".cuh", ".h")


def compiled_sources(root: Path = _OPS) -> list[Path]:
    """The translation units: the binding, then every op's ``kernels/<op>/*.cu``, sorted (read
    from the folders: a new op's .cu file is compiled without being listed anywhere)."""
    return [root / "cuda" / "binding.cpp", *sorted(root.glob("*/*.cu"))]


def source_files(root: Path = _OPS) -> list[Path]:
    """Every file the build reads, sorted: each file of ``kernels/cuda/`` (the binding and the
    shared headers on the include path) and each op's ``.cu``, ``.cuh`` and ``.h`` files. Hidden
    files (an editor's) are left out."""
    shared = [p for p in (root / "cuda").iterdir() if p.is_file() and not p.name.startswith(".")]
    ops = [p for p in root.glob("*/*") if p.parent.name != "cuda" and p.suffix in OP_SUFFIXES
           and p.is_file() and not p.name.startswith(".")]
    return sorted(shared + ops)


SOURCES = compiled_sources()
CFLAGS = ["-O3", "-Wall", "-Werror"]
CUDA_CFLAGS = [
    "-O3",
    "-gencode", "arch=compute_80,code=sm_80",
    "-gencode", "arch=compute_90,code=sm_90",
    "-gencode", "arch=compute_90,code=compute_90",
    "-Werror", "all-warnings",
    "-Xcompiler", "-Wall,-Werror",
]  # fmt: skip

# softmax_variant(x, variant) codes (SoftmaxVariant in kernels/cuda/fusebench_cuda.h).
# 6 is unused (a removed variant): the other codes stay as the run records name them.
VARIANTS = {
    "auto": 0, "warp_per_row": 1, "block_per_row": 2, "online": 3, "split_row": 4, "online_l2": 5,
    "cluster": 7, "tma": 8,
}  # fmt: skip
WARP_PER_ROW_MAX_COLS = 1024
BLOCK_PER_ROW_MAX_COLS = 32768
#: Chunks (elements of a row per CTA) softmax_cluster accepts, and the default (chunk 0;
#: softmax_cluster_chunk in softmax_cluster.cu).
CLUSTER_CHUNKS = (4096, 8192, 16384, 32768)
#: Knobs of softmax_tma (TmaConfig, kTmaChunkBytes, kTmaThreads in
#: kernels/cuda/fusebench_cuda.h; 0 is always the default): KB of a row per CTA, threads per
#: CTA, bulk copies (pieces) per CTA's chunk.
TMA_CHUNK_KB = (16, 32, 48, 64, 96, 128, 192)
TMA_THREADS = (128, 256, 512)
TMA_PIECES = (1, 2, 4, 8)


@dataclass(frozen=True)
class Toolchain:
    """What decides the binary besides the sources and the flags, as text: ``nvcc --version``'s
    and the host compiler's ``--version`` output ("" where there is none), torch's version, the
    CUDA version torch was built with, the Python ABI (``SOABI``)."""

    nvcc: str
    host_compiler: str
    torch: str
    torch_cuda: str
    python_abi: str


def _version_text(program: str | None) -> str:
    """``<program> --version``'s output, stripped; "" when there is no such program or it fails."""
    if not program:
        return ""
    try:
        out = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def nvcc_path() -> str | None:
    """The nvcc torch's build runs: ``$PYTORCH_NVCC``, else ``<CUDA_HOME>/bin/nvcc`` as torch finds
    CUDA_HOME, else the first nvcc ``find_nvcc`` finds."""
    if env := os.environ.get("PYTORCH_NVCC"):
        return env
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME and (p := Path(CUDA_HOME, "bin", "nvcc")).is_file():
        return str(p)
    return find_nvcc()


@functools.cache
def toolchain() -> Toolchain:
    """This process's :class:`Toolchain` (runs ``nvcc --version`` and ``$CXX --version`` once)."""
    return Toolchain(nvcc=_version_text(nvcc_path()),
                     host_compiler=_version_text(os.environ.get("CXX", "c++")),
                     torch=torch.__version__, torch_cuda=str(torch.version.cuda),
                     python_abi=str(sysconfig.get_config_var("SOABI")))


#: Hex digits of a key (80 bits: a collision between two builds is not a concern).
KEY_LENGTH = 20


def key_inputs(files: Iterable[Path], root: Path, cflags: Iterable[str], cuda_cflags: Iterable[str],
               tools: Toolchain) -> dict:
    """What :func:`cache_key` hashes, as a JSON-ready dict: each file by its path relative to
    ``root`` (so that two checkouts of the same sources share a key) and the sha256 of its bytes,
    the flags, the toolchain's texts."""
    return {"files": {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                      for p in sorted(files)},
            "cflags": list(cflags), "cuda_cflags": list(cuda_cflags), "toolchain": asdict(tools)}


def cache_key(inputs: dict) -> str:
    """The build directory's name: the first :data:`KEY_LENGTH` hex digits of the sha256 of
    ``inputs`` (:func:`key_inputs`) written as canonical JSON."""
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_LENGTH]


def current_inputs() -> dict:
    """:func:`key_inputs` of this checkout's sources, flags and toolchain (read now: a source
    edited since the last call gives another key)."""
    return key_inputs(source_files(), _OPS, CFLAGS, CUDA_CFLAGS, toolchain())


def extension_root() -> Path:
    """The folder the keyed build directories live in: ``$FUSEBENCH_EXT_DIR`` if set, else
    ``~/.cache/fusebench/cuda_ext``."""
    if env := os.environ.get("FUSEBENCH_EXT_DIR"):
        return Path(env)
    return Path.home() / ".cache" / "fusebench" / "cuda_ext"


def build_directory(key: str | None = None) -> Path:
    """Where the extension of ``key`` (None: this checkout's, :func:`current_inputs`) is built and
    cached: ``<extension_root()>/<key>``."""
    return extension_root() / (key or cache_key(current_inputs()))


def _first_error_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    for ln in lines[1:]:
        if re.search(r"\berror\b", ln, re.IGNORECASE):
            return ln
    return lines[0] if lines else type(exc).__name__


def _import(library: Path):
    """Import a finished build's library (what torch's loader does once it has built it)."""
    spec = importlib.util.spec_from_file_location(NAME, library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compile(verbose: bool = False, inputs: dict | None = None, load: Callable | None = None):
    """Import the extension of ``inputs`` (None: :func:`current_inputs`) from its build directory
    when a build there has finished (its :data:`BUILT` file), else compile it there, import it and
    write :data:`BUILT` (the key's inputs: what the folder holds, for whoever wonders).

    Makes no CUDA call: the architectures come from ``CUDA_CFLAGS`` (its ``-gencode`` flags make
    torch ignore ``TORCH_CUDA_ARCH_LIST`` and never query a GPU), and importing the module only
    registers functions. No compiler runs for a finished build: its key already says its sources
    are these (ninja, which torch's loader runs, would rebuild from file times alone: a checkout
    mounted over the image's copy of the same sources is newer). ``load``: what compiles and
    imports (``torch.utils.cpp_extension.load``'s arguments; None: that function). Raises whatever
    it raises.
    """
    inputs = current_inputs() if inputs is None else inputs
    directory = build_directory(cache_key(inputs))
    library = directory / f"{NAME}.so"
    if (directory / BUILT).is_file() and library.is_file():
        return _import(library)
    if load is None:
        from torch.utils.cpp_extension import load

    directory.mkdir(parents=True, exist_ok=True)
    module = load(
        name=NAME,
        sources=[str(s) for s in compiled_sources()],
        extra_cflags=CFLAGS,
        extra_cuda_cflags=CUDA_CFLAGS,
        extra_include_paths=[str(_SRC)],
        build_directory=str(directory),
        verbose=verbose,
    )
    write_json(directory / BUILT, inputs)
    return module


def build() -> Path:
    """Build the extension ahead of time, with no GPU needed (the image does it at build time);
    a finished build of the same key is only imported.

    Returns the build directory. Raises RuntimeError (one line) when torch has no CUDA build or
    nvcc is missing, or when the build fails (the first error line of the compiler's output).
    """
    if torch.version.cuda is None:
        raise RuntimeError("cannot build the CUDA extension: torch built without CUDA")
    if find_nvcc() is None:
        raise RuntimeError("cannot build the CUDA extension: nvcc not found")
    inputs = current_inputs()
    try:
        _compile(verbose=True, inputs=inputs)
    except Exception as exc:  # noqa: BLE001 - reported as one line
        raise RuntimeError(f"CUDA extension build failed: {_first_error_line(exc)}") from None
    return build_directory(cache_key(inputs))


def missing_toolchain() -> str | None:
    """Why the extension cannot be built here ("torch built without CUDA", "nvcc not found"), or
    None."""
    if torch.version.cuda is None:
        return "torch built without CUDA"
    if find_nvcc() is None:
        return "nvcc not found"
    return None


def _attempt(compile: Callable[[], object],
             check: Callable[[], str | None] = missing_toolchain) -> tuple[object | None, str | None]:
    """``(compile(), None)``, or ``(None, why)`` in one line: what ``check`` finds missing, or the
    build's first error line."""
    if why := check():
        return None, why
    try:
        return compile(), None
    except Exception as exc:  # noqa: BLE001 - any build or import failure is reported, not raised
        return None, f"build failed: {_first_error_line(exc)}"


class Build:
    """The extension's build and import, done once: in a background thread once :meth:`start` is
    called, else in the caller's thread at the first :meth:`result`.

    ``compile``: what builds and imports it (:func:`_compile`); ``check``: why it cannot be built
    here, or None (:func:`missing_toolchain`); a test gives its own. Nothing here touches CUDA:
    the build needs only the compilers.
    """

    def __init__(self, compile: Callable[[], object] | None = None,
                 check: Callable[[], str | None] = missing_toolchain) -> None:
        self._compile, self._check = compile or _compile, check
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._result: tuple[object | None, str | None] | None = None

    def start(self) -> bool:
        """Start the build in a background thread; False (nothing done) when it has already been
        started or done. Returns at once."""
        with self._lock:
            if self._thread is not None or self._result is not None:
                return False
            self._thread = threading.Thread(target=self._run, name="fusebench-cuda-ext", daemon=True)
            self._thread.start()
            return True

    def _run(self) -> None:
        self._result = _attempt(self._compile, self._check)

    @property
    def started(self) -> bool:
        """Whether a build was started or done."""
        return self._thread is not None or self._result is not None

    def result(self) -> tuple[object | None, str | None]:
        """``(module, None)`` or ``(None, why)`` (:func:`_attempt`): waits for the background
        build when one was started, else builds now (once; a second caller waits for the first)."""
        with self._lock:
            thread = self._thread
            if thread is None and self._result is None:
                self._result = _attempt(self._compile, self._check)
        if thread is not None:
            thread.join()
        return self._result


#: This process's build (:func:`start_build`, :func:`unavailable_reason`).
_BUILD = Build()


def start_build() -> Build:
    """This process's build, started in a background thread unless it was started or done
    already: its ``result()`` waits for it, and the first call that needs the extension (the
    run's first ``cuda`` case) does too. Meant for a GPU host: the module is only usable with a
    GPU (:func:`unavailable_reason`)."""
    _BUILD.start()
    return _BUILD


@shared_build("cuda")
def _start_in_background() -> Callable[[], object]:
    """What a run starts before building its cases (``fusebench.backends.start_builds``): this
    process's build in the background; returns what waits for it."""
    return start_build().result


@functools.cache
def _load():
    """(module, None) once built, else (None, reason); runs once per process."""
    if torch.version.cuda is None:
        return None, "torch built without CUDA"
    if not torch.cuda.is_available():
        return None, "no CUDA GPU"
    return _BUILD.result()


def unavailable_reason() -> str | None:
    """None when the extension is usable; otherwise why not, in one line
    ("torch built without CUDA", "no CUDA GPU", "nvcc not found", or
    "build failed: <first error line>"). Builds the extension on first call
    when everything is present."""
    return _load()[1]


def require(x: torch.Tensor):
    """This module, ready for ``x`` (the extension is built on first use): what the ``cuda``
    backends call before their first launch.

    Raises:
        SkipCase: ``x`` is not on a CUDA device, or the extension cannot be built or loaded here
            (no nvcc, torch without CUDA, a compile error), with that reason.
    """
    import sys

    if not x.is_cuda:
        raise SkipCase("needs a CUDA GPU")
    if reason := unavailable_reason():
        raise SkipCase(f"cuda extension unavailable: {reason}")
    return sys.modules[__name__]


_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _check_input(x: torch.Tensor, op: str) -> None:
    """Raise ValueError (``<op>: ...``, the extension's wording) when ``x`` is not a CUDA tensor of
    float32, bfloat16 or float16.

    Checked here so that a bad input is a ValueError, as every other argument check of this
    module. (The extension checks it too and returns the refusal as a value: kernels/cuda/binding.cpp,
    ``Result``, and docs/cuda-extension.md.)
    """
    if x.device.type != "cuda":
        raise ValueError(f"{op}: expected a CUDA tensor, got device {x.device}")
    if x.dtype not in _DTYPES:
        raise ValueError(f"{op}: dtype must be float32, bfloat16 or float16, got {x.dtype}")


def _module():
    module, reason = _load()
    if module is None:
        raise RuntimeError(f"fusebench CUDA extension unavailable: {reason}")
    return module


def _value(result: tuple[torch.Tensor | None, str]) -> torch.Tensor:
    """The tensor of an extension op's ``(y, error)`` result; RuntimeError(error) when it failed.

    The extension reports every refusal and failed launch as a value, never as a C++ exception
    (kernels/cuda/binding.cpp, ``Result``, says why)."""
    y, error = result
    if error:
        raise RuntimeError(error)
    return y


def _ready(x: torch.Tensor, op: str):
    """The extension's module, for ``x`` passed to ``op``: RuntimeError when it cannot be used
    (``_module``), then ValueError when ``x`` is not an input it takes (``_check_input``)."""
    module = _module()
    _check_input(x, op)
    return module


#: Threads per block that the CUDA GELU is built for (``gelu(threads=...)``; kernels/gelu/gelu.cu).
GELU_THREADS = (128, 256, 512)


def gelu(x: torch.Tensor, pdl: bool | None = None, threads: int | None = None) -> torch.Tensor:
    """GELU, tanh approximation, elementwise: any shape, float32/bfloat16/float16.

    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in fp32 (``tanhf``).
    float32 uses ``tanhf``; bfloat16/float16 the identical
    x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3))) with hardware exp2 and
    reciprocal (``ex2.approx.ftz``, ``rcp.approx.ftz``; fp32 error ~1e-6, far below 16-bit
    rounding; fewer instructions so the 16-bit kernel stays memory-bound).
    Moves 2 * itemsize bytes per element (memory-bound). Launch: 128-thread
    blocks, each thread four 16-byte vectors (4 fp32 or 8 16-bit elements),
    grid = ceil(numel / (512 * elems_per_vector)); unaligned data uses scalar
    accesses with the same geometry.

    ``pdl`` (tuning; ``None``: the library's default, on): launch as a programmatic
    dependent launch (sm_90+, ignored below): each block waits for the previous
    kernel of the stream, then lets the next one launch, so back-to-back
    launches overlap (CUDA C++ Programming Guide, "Programmatic Dependent
    Launch and Synchronization").

    ``threads`` (tuning; ``None``: the library's default, 128): threads per block, one of
    :data:`GELU_THREADS`; the grid is resized so each thread still moves four vectors.

    Returns a new tensor of x's shape and dtype. Raises RuntimeError when the extension cannot be
    used here (``unavailable_reason()``) or the launch fails; ValueError for another ``threads``,
    a tensor not on a CUDA device, or another dtype, all checked before the extension (see
    ``_check_input``).
    """
    if threads is not None and threads not in GELU_THREADS:
        raise ValueError(f"gelu: threads must be one of {', '.join(map(str, GELU_THREADS))}, got {threads!r}")
    module = _ready(x, "gelu")
    return _value(module.gelu(x, -1 if pdl is None else int(bool(pdl)), -1 if threads is None else threads))


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of x (any shape; viewed as
    (numel / x.shape[-1], x.shape[-1])), float32/bfloat16/float16, fp32 math,
    max-subtracted, exp computed as Triton computes ``tl.exp`` (x * log2(e), then
    the ``ex2.approx.ftz.f32`` instruction: at most 2 ulp, results below 2^-126 flushed to
    zero; ``exp_approx`` in kernels/cuda/common.cuh), so both hand-written backends have the same
    numerics but for those subnormal results.
    Moves 2 * itemsize bytes per element ideally
    (memory-bound; the Online and SplitRow variants re-read the row, from L2
    when it fits; Cluster and Tma read it from DRAM once). The variant comes from
    ``pick_variant``; see ``softmax_variant`` for each variant's launch geometry.

    Returns a new tensor of x's shape and dtype. Raises RuntimeError when the extension cannot be
    used here (``unavailable_reason()``) or the launch fails; ValueError for a tensor not on a CUDA
    device or another dtype, checked before the extension (see ``_check_input``).
    """
    return _value(_ready(x, "softmax").softmax(x))


def softmax_variant(x: torch.Tensor, variant: int | str) -> torch.Tensor:
    """``softmax`` with a forced variant (a ``VARIANTS`` name or code):

    - 1 warp_per_row, cols <= 1024: row in registers, 128-thread blocks.
      16-byte-aligned rows with cols a multiple of 16 bytes: a group of
      L = min(32, pow2(cols * itemsize / 16)) lanes per row, each lane one
      16-byte vector per row slice, and each group R / (vectors per lane)
      rows (at least 1), so every thread has ~R vectors in flight, R = 4 for
      float32 and 2 for 16-bit types (128 bf16 columns: 16 lanes x 2 rows,
      16 rows per block). Otherwise a warp per
      row, 4 rows per block; grid = ceil(rows / rows per block).
    - 2 block_per_row, cols <= 32768: a block per row (32..1024 threads,
      about 256 when each thread can hold up to 32 values), row in
      registers; grid = rows.
    - 3 online: a 512-thread block per row, online max/sum then a reverse
      normalizing pass; grid = rows.
    - 4 split_row: rows <= 65535; each row split into chunks of 16384
      elements, halved while there would be fewer blocks than SMs (at most
      1024 chunks per row), 128-thread blocks,
      grid = (chunks, rows), two kernels and a rows * chunks * 8-byte
      workspace; on sm_90+ kernel 2 is a programmatic dependent launch that
      loads its x chunk while kernel 1 finishes.
    - 5 online_l2: as online, but 1024-thread blocks, one per SM, each
      looping over rows, so only sm_count rows are in flight and the second
      pass re-reads from L2; grid = min(rows, sm_count).
    - 7 cluster: see ``softmax_cluster`` (default chunk).
    - 8 tma: see ``softmax_tma`` (default knobs).
    Raises ValueError when the variant is unknown or cannot take x, x included (checked here,
    before the extension); RuntimeError when the extension cannot be used or a launch fails.
    """
    code = VARIANTS[variant] if isinstance(variant, str) and variant in VARIANTS else variant
    if code not in VARIANTS.values():
        raise ValueError(f"softmax_variant: unknown variant {variant!r}; valid: {', '.join(VARIANTS)}")
    _refuse(x, int(code), 0)
    return _value(_module().softmax_variant(x, int(code)))


def _cols(x: torch.Tensor) -> int:
    return x.shape[-1] if x.dim() else 1


def refusal(rows: int, cols: int, elem_size: int, variant: int | str, *, cc_major: int,
            aligned: bool = True, chunk: int = 0, **tma: int) -> str | None:
    """Why softmax ``variant`` (a ``VARIANTS`` name or code) cannot take a (rows, cols) problem of
    ``elem_size``-byte elements on a GPU of compute capability ``cc_major`` (rows 16-byte aligned
    or not); None when it can. ``chunk``: cluster's chunk; ``tma``: chunk_kb, threads, pieces,
    bulk_store of tma (0 = default).

    The rules live in the extension (``softmax_refusal`` in kernels/softmax/softmax_tma.cu, the one
    source; the launchers refuse with the same function), so this needs it built (RuntimeError
    quoting ``unavailable_reason()`` otherwise). Raises ValueError for an unknown variant name.
    """
    code = VARIANTS[variant] if isinstance(variant, str) and variant in VARIANTS else variant
    if code not in VARIANTS.values():
        raise ValueError(f"softmax_variant: unknown variant {variant!r}; valid: {', '.join(VARIANTS)}")
    why = _module().softmax_refusal(rows, cols, elem_size, int(code), cc_major, aligned, int(chunk),
                                    **{k: int(v) for k, v in tma.items()})
    return why or None


def _refuse(x: torch.Tensor, code: int, chunk: int, **tma: int) -> None:
    """Raise ValueError (``softmax_<variant>: <why>``) where a forced variant cannot take ``x``:
    not an input of the extension (``_check_input``), or as ``refusal`` says, so that the
    extension's own refusals (RuntimeError through ``_value``) are not reached. RuntimeError
    where the extension cannot be used."""
    name = {v: k for k, v in VARIANTS.items()}[code]
    _ready(x, f"softmax_{name}")
    if x.numel() == 0:
        return  # empty input is fine: nothing is launched
    cols = _cols(x)
    props = torch.cuda.get_device_properties(x.device)
    why = refusal(x.numel() // cols, cols, x.element_size(), code, cc_major=props.major,
                  aligned=x.contiguous().data_ptr() % 16 == 0, chunk=chunk, **tma)
    if why is not None:
        raise ValueError(f"softmax_{name}: {why}")


def softmax_tma(x: torch.Tensor, chunk_kb: int = 0, threads: int = 0, pieces: int = 0,
                bulk_store: bool = False) -> torch.Tensor:
    """``softmax_variant(x, "tma")`` with explicit knobs (0: the default): the tuning entry point,
    ``tma:<chunk_kb>:<threads>:<pieces>[:bulk]`` in ``fusebench tune cuda``. sm_90+.

    A row is split into ``ceil(cols * itemsize / (chunk_kb KB))`` CTAs (at most 16: a thread-block
    cluster), balanced in whole 16-byte vectors; each CTA stages its share in shared memory with
    ``pieces`` Hopper bulk copies (``cp.async.bulk``, one mbarrier each) all in flight at once,
    reduces (max, sum of exp) from shared memory as the pieces land, combines the cluster's
    partials through distributed shared memory, and writes y = exp(x - max) / sum from shared
    memory with 16-byte stores (``bulk_store``: written back into shared memory and stored with
    bulk copies). One read and one write of x. chunk_kb: one of ``TMA_CHUNK_KB`` (default 64 in
    every dtype); threads: one of ``TMA_THREADS`` (default 256); pieces: one of ``TMA_PIECES``
    (default 1; the defaults are ``kTmaDefault*`` in ``fusebench_cuda.h``). Raises ValueError
    below sm_90, for unaligned rows, cols not a multiple of 16 / itemsize, another knob, or a row
    needing more than 16 CTAs.
    """
    _refuse(x, VARIANTS["tma"], 0, chunk_kb=chunk_kb, threads=threads, pieces=pieces,
            bulk_store=int(bulk_store))
    return _value(_module().softmax_tma(x, int(chunk_kb), int(threads), int(pieces), int(bulk_store)))


def softmax_cluster(x: torch.Tensor, chunk: int = 0) -> torch.Tensor:
    """``softmax_variant(x, "cluster")`` with ``chunk`` elements of a row per CTA (the tuning
    entry point; ``fusebench tune cuda`` names it ``cluster:<chunk>``).

    A row is split over a thread-block cluster of ``ceil(cols / chunk)`` CTAs (at most 16) of 256
    threads. Each thread copies its ``chunk / 256`` values into shared memory with asynchronous
    copies (all in flight at once), reads them back once into registers (as float32), and the CTAs
    exchange their (max, sum) partials through distributed shared memory: one read, one write.
    chunk: one of ``CLUSTER_CHUNKS`` or 0 (``cluster_default_chunk``); it takes
    ``chunk * itemsize`` bytes of shared memory per CTA.
    Raises ValueError below sm_90, for cols not a multiple of 16 / itemsize, another
    chunk, or a row needing more than 16 CTAs (x is made contiguous, so its rows are aligned).
    """
    _refuse(x, VARIANTS["cluster"], int(chunk))
    return _value(_module().softmax_cluster(x.contiguous(), int(chunk)))


def softmax_split(x: torch.Tensor, chunk: int = 0, pdl: bool = True) -> torch.Tensor:
    """``softmax_variant(x, "split_row")`` with ``chunk`` elements per block (a multiple of 1024;
    0: the default) and kernel 2 a programmatic dependent launch (sm_90+) when ``pdl``: the
    tuning entry point, ``split:<chunk>[:nopdl]`` in ``fusebench tune cuda``.

    Raises ValueError for a chunk that is not a multiple of 1024 or more than 65535 rows.
    """
    _refuse(x, VARIANTS["split_row"], 0)
    if chunk < 0 or chunk % 1024:
        raise ValueError(f"softmax_split: chunk must be 0 or a multiple of 1024, got {chunk}")
    return _value(_module().softmax_tuned(x, VARIANTS["split_row"], int(chunk), int(pdl)))


def softmax_warp(x: torch.Tensor, vecs: int) -> torch.Tensor:
    """``softmax_variant(x, "warp_per_row")``'s 16-byte path with ``vecs`` (1, 2, 4 or 8) vectors
    in flight per thread (rows packed per sub-warp group accordingly): the tuning entry point,
    ``warp:<vecs>`` in ``fusebench tune cuda``.

    Raises ValueError for another ``vecs``, cols > 1024, or rows that are not 16-byte aligned
    with cols a multiple of 16 / itemsize.
    """
    module = _ready(x, "softmax_warp")
    cols = _cols(x)
    vec = 16 // x.element_size()
    aligned = x.contiguous().data_ptr() % 16 == 0
    if vecs not in (1, 2, 4, 8) or cols > WARP_PER_ROW_MAX_COLS or cols % vec or not aligned:
        raise ValueError(
            f"softmax_warp: needs vecs in (1, 2, 4, 8), cols <= {WARP_PER_ROW_MAX_COLS}, a multiple of "
            f"{vec}, aligned rows; got vecs {vecs}, cols {cols}"
        )
    return _value(module.softmax_tuned(x, VARIANTS["warp_per_row"], int(vecs), 1))


def cluster_default_chunk(cols: int, elem_size: int) -> int:
    """Elements of a row per CTA that ``softmax_cluster(x, 0)`` and the automatic cluster pick use
    for rows of ``cols`` elements of ``elem_size`` (2 or 4) bytes (needs the extension, not a GPU):
    float32 the smallest of 4096, 8192, 16384, 32768 that 8 CTAs (a portable cluster) hold, else
    that 16 hold; 16-bit types 16384 (or 32768 beyond 16 x 16384); 0 when 16 CTAs of 32768 cannot
    hold the row
    (``softmax_cluster_chunk`` in kernels/softmax/softmax_cluster.cu, which gives the measurements).
    Raises RuntimeError when the extension cannot be built or loaded here."""
    return _module().softmax_cluster_chunk(int(cols), int(elem_size))


def pick_variant(rows: int, cols: int, elem_size: int, sm_count: int) -> int:
    """Variant code ``softmax`` uses for a (rows, cols) problem (needs the extension):
    cluster for cols > 16384 that 16 CTAs of ``cluster_default_chunk`` hold when rows x those CTAs
    fill at least half the SMs; else tma for 16-bit cols >= 16384 (float32 >= 32769) that 16 CTAs
    of 64 KB hold, under the same condition; else the classic pick: cols <= 1024: warp_per_row;
    rows < sm_count and cols * elem_size >= 64 KiB: split_row; cols <= 32768: block_per_row;
    16-bit and rows <= 65535: split_row; rows >= 2 * sm_count and sm_count * cols * elem_size <=
    36 MiB: online_l2; else online. Where cluster or tma cannot run at run time (below sm_90,
    unaligned rows, cols not a multiple of 16 / itemsize), ``softmax`` takes the classic pick."""
    return _module().softmax_pick_variant(rows, cols, elem_size, sm_count)


if __name__ == "__main__":  # python -m fusebench.kernels.cuda_ext: build ahead of time (no GPU needed)
    import sys

    try:
        print(f"cuda_ext: built into {build()}")
    except RuntimeError as exc:
        print(f"cuda_ext: error: {exc}", file=sys.stderr)
        sys.exit(1)
