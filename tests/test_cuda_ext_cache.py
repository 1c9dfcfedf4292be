"""The CUDA extension's build cache (``fusebench.kernels.cuda_ext``): the key, the folder layout and
the background build. On the CPU: the key is computed from real files and real toolchain texts, a
"finished build" is a real extension module compiled here with the host's C compiler, and the
background build is handed a compile function of the test's own. The real nvcc build is for a GPU
host (docs/cuda-extension.md says what is verified where)."""

import json
import os
import shutil
import subprocess
import sysconfig
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from fusebench.kernels import cuda_ext

from fusebench import backends

TOOLS = cuda_ext.Toolchain(nvcc="Cuda compilation tools, release 13.0, V13.0.88",
                           host_compiler="c++ (Debian 12.2.0-14) 12.2.0", torch="2.13.0",
                           torch_cuda="13.0", python_abi="cpython-312-x86_64-linux-gnu")


def _tree(root: Path) -> Path:
    """A kernels folder of the real layout: shared binding and headers, two ops, Python beside."""
    files = {
        "cuda/binding.cpp": "#include \"fusebench_cuda.h\"\n",
        "cuda/fusebench_cuda.h": "#pragma once\nint gelu();\n",
        "cuda/common.cuh": "#pragma once\n",
        "gelu/gelu.cu": "#include \"common.cuh\"\nint gelu() { return 1; }\n",
        "gelu/triton.py": "# a Triton kernel: not read by the extension's build\n",
        "gelu/__init__.py": "",
        "softmax/softmax.cu": "int softmax() { return 2; }\n",
        "softmax/softmax_util.cuh": "#pragma once\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _key(root: Path, cflags=cuda_ext.CFLAGS, cuda_cflags=cuda_ext.CUDA_CFLAGS, tools=TOOLS) -> str:
    return cuda_ext.cache_key(cuda_ext.key_inputs(cuda_ext.source_files(root), root, cflags, cuda_cflags,
                                                  tools))


def test_the_files_come_from_the_folders(tmp_path):
    root = _tree(tmp_path / "kernels")
    names = [p.relative_to(root).as_posix() for p in cuda_ext.source_files(root)]
    assert names == ["cuda/binding.cpp", "cuda/common.cuh", "cuda/fusebench_cuda.h", "gelu/gelu.cu",
                     "softmax/softmax.cu", "softmax/softmax_util.cuh"]
    assert [p.relative_to(root).as_posix() for p in cuda_ext.compiled_sources(root)] == [
        "cuda/binding.cpp", "gelu/gelu.cu", "softmax/softmax.cu"]
    # a new op's .cu file is compiled and keyed without being listed anywhere
    (root / "rmsnorm").mkdir()
    (root / "rmsnorm" / "rmsnorm.cu").write_text("int rmsnorm();\n")
    assert root / "rmsnorm" / "rmsnorm.cu" in cuda_ext.compiled_sources(root)
    assert root / "rmsnorm" / "rmsnorm.cu" in cuda_ext.source_files(root)


def test_the_checkouts_files_are_its_sources_and_headers():
    names = {p.relative_to(cuda_ext._OPS).as_posix() for p in cuda_ext.source_files()}
    assert {"cuda/binding.cpp", "cuda/common.cuh", "cuda/sm90.cuh", "cuda/fusebench_cuda.h",
            "gelu/gelu.cu", "softmax/softmax_tma.cu"} <= names
    assert not any(n.endswith(".py") for n in names)
    assert set(cuda_ext.SOURCES) <= set(cuda_ext.source_files())


@pytest.mark.parametrize("edit", ["cuda/common.cuh", "cuda/binding.cpp", "cuda/fusebench_cuda.h",
                                  "gelu/gelu.cu", "softmax/softmax_util.cuh"])
def test_the_key_changes_with_every_file_the_build_reads(tmp_path, edit):
    root = _tree(tmp_path / "kernels")
    before = _key(root)
    path = root / edit
    path.write_text(path.read_text() + "// one more line\n")
    assert _key(root) != before


def test_the_key_changes_with_a_new_source_or_header(tmp_path):
    root = _tree(tmp_path / "kernels")
    before = _key(root)
    (root / "cuda" / "sm100.cuh").write_text("#pragma once\n")
    with_header = _key(root)
    (root / "softmax" / "softmax_new.cu").write_text("int f();\n")
    assert len({before, with_header, _key(root)}) == 3


def test_the_key_stays_when_nothing_the_build_reads_changes(tmp_path):
    root = _tree(tmp_path / "kernels")
    before = _key(root)
    (root / "gelu" / "triton.py").write_text("# edited\n")  # Python beside the sources
    (root / "cuda" / ".binding.cpp.swp").write_text("editor")  # a hidden file
    (root / "gelu" / "notes.md").write_text("notes")
    os.utime(root / "gelu" / "gelu.cu", (1, 1))  # a file's time alone (a mounted checkout)
    assert _key(root) == before
    # another checkout of the same sources, elsewhere: the same key
    other = tmp_path / "elsewhere" / "kernels"
    shutil.copytree(root, other)
    assert _key(other) == before


def test_the_key_changes_with_each_flag_and_toolchain_text(tmp_path):
    root = _tree(tmp_path / "kernels")
    keys = {_key(root)}
    keys.add(_key(root, cflags=[*cuda_ext.CFLAGS, "-DNDEBUG"]))
    keys.add(_key(root, cuda_cflags=[f for f in cuda_ext.CUDA_CFLAGS if f != "-O3"]))
    keys.add(_key(root, cuda_cflags=[*cuda_ext.CUDA_CFLAGS, "-gencode", "arch=compute_100,code=sm_100"]))
    keys.add(_key(root, tools=replace(TOOLS, nvcc="Cuda compilation tools, release 13.0, V13.0.99")))
    keys.add(_key(root, tools=replace(TOOLS, host_compiler="c++ (Debian 13.1.0) 13.1.0")))
    keys.add(_key(root, tools=replace(TOOLS, torch="2.13.1")))
    keys.add(_key(root, tools=replace(TOOLS, torch_cuda="12.8")))
    keys.add(_key(root, tools=replace(TOOLS, python_abi="cpython-313-x86_64-linux-gnu")))
    assert len(keys) == 9
    assert _key(root, tools=replace(TOOLS)) in keys  # an equal toolchain: the first key


def test_this_checkouts_key_is_stable_and_names_its_folder(monkeypatch, tmp_path):
    first, second = cuda_ext.current_inputs(), cuda_ext.current_inputs()
    assert first == second
    key = cuda_ext.cache_key(first)
    assert len(key) == cuda_ext.KEY_LENGTH and int(key, 16) >= 0
    assert first["toolchain"]["torch"] == torch.__version__
    assert first["toolchain"]["torch_cuda"] == str(torch.version.cuda)
    assert first["toolchain"]["python_abi"] == sysconfig.get_config_var("SOABI")
    monkeypatch.setenv("FUSEBENCH_EXT_DIR", str(tmp_path / "ext"))
    assert cuda_ext.build_directory() == tmp_path / "ext" / key
    assert cuda_ext.build_directory("abc") == tmp_path / "ext" / "abc"
    monkeypatch.delenv("FUSEBENCH_EXT_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cuda_ext.extension_root() == tmp_path / "home" / ".cache" / "fusebench" / "cuda_ext"
    assert cuda_ext.build_directory() == tmp_path / "home" / ".cache" / "fusebench" / "cuda_ext" / key


def test_a_missing_compiler_gives_empty_text():
    assert cuda_ext._version_text(None) == ""
    assert cuda_ext._version_text("/no/such/nvcc") == ""


def _extension(folder: Path, value: int) -> Path:
    """A real Python extension module named like the CUDA one, compiled with the host's C compiler:
    ``fusebench_cuda.ANSWER == value``."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    include = sysconfig.get_paths()["include"]
    if cc is None or not Path(include, "Python.h").is_file():
        pytest.skip("no C compiler or no Python headers here")
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "ext.c"
    src.write_text(f"""#include <Python.h>
static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{cuda_ext.NAME}", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit_{cuda_ext.NAME}(void) {{
    PyObject *m = PyModule_Create(&def);
    if (m) PyModule_AddIntConstant(m, "ANSWER", {value});
    return m;
}}
""")
    library = folder / f"{cuda_ext.NAME}.so"
    subprocess.run([cc, "-shared", "-fPIC", f"-I{include}", str(src), "-o", str(library)], check=True)
    src.unlink()
    return library


def test_a_build_is_made_once_per_key_then_only_imported(monkeypatch, tmp_path):
    monkeypatch.setenv("FUSEBENCH_EXT_DIR", str(tmp_path / "ext"))
    made = _extension(tmp_path / "made", 7)
    calls = []

    def load(**kwargs):  # torch.utils.cpp_extension.load's part: the library in its folder, imported
        calls.append(kwargs)
        folder = Path(kwargs["build_directory"])
        shutil.copy(made, folder / made.name)
        return cuda_ext._import(folder / made.name)

    inputs = {"files": {"cuda/binding.cpp": "0" * 64}, "toolchain": {"nvcc": "13.0"}}
    folder = tmp_path / "ext" / cuda_ext.cache_key(inputs)
    module = cuda_ext._compile(inputs=inputs, load=load)
    assert module.ANSWER == 7 and len(calls) == 1
    assert calls[0]["name"] == cuda_ext.NAME and calls[0]["build_directory"] == str(folder)
    assert calls[0]["sources"] == [str(s) for s in cuda_ext.compiled_sources()]
    assert sorted(p.name for p in folder.iterdir()) == [cuda_ext.BUILT, f"{cuda_ext.NAME}.so"]
    assert json.loads((folder / cuda_ext.BUILT).read_text()) == inputs
    # the same key again (a second run, another process): imported, nothing compiled
    assert cuda_ext._compile(inputs=inputs, load=load).ANSWER == 7 and len(calls) == 1
    # another revision's sources: its own folder beside, the first one untouched
    other = dict(inputs, files={"cuda/binding.cpp": "1" * 64})
    cuda_ext._compile(inputs=other, load=load)
    assert len(calls) == 2
    assert sorted(p.name for p in (tmp_path / "ext").iterdir()) == sorted(
        [folder.name, cuda_ext.cache_key(other)])


def test_a_folder_without_its_built_file_is_built_again(monkeypatch, tmp_path):
    """A build interrupted before it was imported (no built.json) is not trusted."""
    monkeypatch.setenv("FUSEBENCH_EXT_DIR", str(tmp_path / "ext"))
    inputs = {"files": {}, "toolchain": {}}
    folder = tmp_path / "ext" / cuda_ext.cache_key(inputs)
    _extension(folder, 1)
    calls = []

    def load(**kwargs):
        calls.append(kwargs)
        raise RuntimeError("Error building extension 'fusebench_cuda'\nsoftmax.cu(12): error: oops")

    with pytest.raises(RuntimeError):
        cuda_ext._compile(inputs=inputs, load=load)
    assert len(calls) == 1 and not (folder / cuda_ext.BUILT).exists()


def test_the_background_build_is_waited_for_once():
    release, began = threading.Event(), threading.Event()
    calls = []

    def compile():
        calls.append(threading.current_thread().name)
        began.set()
        assert release.wait(10)
        return "module"

    build = cuda_ext.Build(compile, check=lambda: None)
    assert not build.started
    t = time.perf_counter()
    assert build.start() is True
    assert time.perf_counter() - t < 1.0  # start returns while the compile runs
    assert began.wait(10) and build.started
    assert build.start() is False  # never a second build
    got = []
    waiter = threading.Thread(target=lambda: got.append(build.result()))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and not got  # the case that needs it waits...
    release.set()
    waiter.join(10)
    assert got == [("module", None)]  # ...and gets the module the background built
    assert build.result() == ("module", None)
    assert calls == ["fusebench-cuda-ext"]


def test_without_start_the_first_caller_builds():
    calls = []
    build = cuda_ext.Build(lambda: calls.append(1) or "module", check=lambda: None)
    assert build.result() == ("module", None) == build.result()
    assert calls == [1] and build.start() is False


def test_a_failed_build_is_one_line():
    def compile():
        raise RuntimeError("Error building extension 'fusebench_cuda': [1/5] nvcc ...\n"
                           "gelu.cu(3): error: identifier \"x\" is undefined\nninja: build stopped")

    build = cuda_ext.Build(compile, check=lambda: None)
    build.start()
    assert build.result() == (None, 'build failed: gelu.cu(3): error: identifier "x" is undefined')


def test_a_missing_toolchain_compiles_nothing():
    calls = []
    build = cuda_ext.Build(lambda: calls.append(1), check=lambda: "nvcc not found")
    build.start()
    assert build.result() == (None, "nvcc not found") and calls == []


def test_this_cpu_torch_cannot_build_and_says_why():
    if torch.version.cuda is not None:
        pytest.skip("a CUDA build of torch")
    assert cuda_ext.missing_toolchain() == "torch built without CUDA"


def test_a_run_starts_the_shared_builds_on_a_gpu_only():
    started = []

    def start_cuda():
        started.append("cuda")
        return lambda: "waited"

    starts = {"cuda": start_cuda}
    # a torch.device names a GPU without touching it
    waits = backends.start_builds(["torch", "cuda", "triton", "cuda"], torch.device("cuda"), starts)
    assert started == ["cuda"] and [w() for w in waits] == ["waited"]
    assert backends.start_builds(["torch", "triton"], torch.device("cuda"), starts) == []
    assert backends.start_builds(["cuda"], torch.device("cpu"), starts) == []
    assert started == ["cuda"]
    assert set(backends.SHARED_BUILDS) == {"cuda"}
