"""The reference backends (liger, quack, flaggems): registered where their library has the op, lazy,
skipped with the cause where they cannot run, a library's refusal a skip in its own words; their
optional lock; and the % of the copy ceiling table that puts every backend side by side."""

import subprocess
import sys
import types

import pytest
import torch
from fusebench.kernels import reference_libs

from fusebench.errors import SkipCase
from fusebench.measure import correctness
from fusebench.ops import get_op
from fusebench.paths import PROJECT_ROOT
from fusebench.record import Record, Sweep
from fusebench.registry import BACKENDS
from fusebench.report import summary
from fusebench.site import site, site_pages
from scripts import lock  # noqa: E402

REFERENCE = ("liger", "quack", "flaggems")


def test_the_reference_backends_follow_fusebenchs_own_in_report_order():
    # the axis is the case file's (tests/test_extending.py adds one): eager, fusebench's own, the references
    assert BACKENDS[:5] == ("eager", "torch", "compile", "triton", "cuda")
    assert [b for b in BACKENDS if b in REFERENCE] == list(REFERENCE)
    assert tuple(reference_libs.LIBRARIES) == REFERENCE
    assert [b for b in get_op("softmax").backends if b in REFERENCE] == list(REFERENCE)
    # GELU (tanh): only FlagGems has it (Liger: GEGLU only; QuACK: a GEMM epilogue only)
    assert [b for b in get_op("gelu").backends if b in REFERENCE] == ["flaggems"]
    assert not set(REFERENCE) & set(get_op("matmul").backends)


@pytest.mark.slow
def test_import_ops_imports_no_reference_library():
    code = ("import sys, fusebench.ops; print(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('liger_kernel', 'quack', 'flag_gems', 'cutlass')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("op, backend", [("softmax", "liger"), ("softmax", "quack"),
                                         ("softmax", "flaggems"), ("gelu", "flaggems")])
def test_on_the_cpu_each_reference_backend_is_skipped_needing_a_gpu(op, backend):
    x = torch.randn(4, 8)
    with pytest.raises(SkipCase) as exc:
        get_op(op).backends[backend].factory(x)
    package = reference_libs.LIBRARIES[backend].package
    assert str(exc.value) == f"{package} needs a CUDA GPU"


ON_GPU = types.SimpleNamespace(is_cuda=True)  # load() only asks where the input is


def test_a_library_not_installed_is_a_skip_naming_the_package_its_pin_and_the_group(monkeypatch):
    monkeypatch.setattr(reference_libs.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SkipCase) as exc:
        reference_libs.load("quack", ON_GPU, "quack")
    assert str(exc.value) == ("quack-kernels 0.6.5 is not installed; install the reference group: make "
                              "venv REFERENCE=1, or pip install --no-deps --require-hashes -r "
                              "requirements-reference.lock")


def test_a_library_that_cannot_be_imported_is_a_skip_with_the_import_error(monkeypatch):
    monkeypatch.setattr(reference_libs.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(reference_libs.importlib.metadata, "version", lambda name: "0.6.5")

    def broken(name):
        raise ModuleNotFoundError("No module named 'cutlass'")

    monkeypatch.setattr(reference_libs.importlib, "import_module", broken)
    with pytest.raises(SkipCase, match=r"^quack-kernels 0\.6\.5 cannot be imported \(ModuleNotFoundError: "
                                       r"No module named 'cutlass'\); install the reference group"):
        reference_libs.load("quack", ON_GPU, "quack")


def _fake_liger(monkeypatch, apply):
    """Liger's softmax module replaced by one whose ``LigerSoftmaxFunction.apply`` is ``apply``."""
    fake = types.SimpleNamespace(LigerSoftmaxFunction=types.SimpleNamespace(apply=apply))
    monkeypatch.setattr(reference_libs, "load", lambda backend, x, module: fake)
    monkeypatch.setattr(reference_libs.Library, "installed_version", lambda self: None)


def test_a_library_refusing_a_shape_is_a_skip_with_the_librarys_own_line(monkeypatch):
    def refuse(x):  # Liger 0.8.5's calculate_settings, word for word
        raise RuntimeError("Cannot launch Triton kernel since n = 262144 exceeds the recommended "
                           "Triton blocksize = 65536.\nsecond line")

    _fake_liger(monkeypatch, refuse)
    with pytest.raises(SkipCase) as exc:
        get_op("softmax").backends["liger"].factory(torch.randn(2, 8, dtype=torch.bfloat16))
    assert str(exc.value) == ("liger-kernel 0.8.5 refuses 2x8 bfloat16: RuntimeError: Cannot launch Triton "
                              "kernel since n = 262144 exceeds the recommended Triton blocksize = 65536.")


def test_a_reference_backend_goes_through_the_same_gate(monkeypatch):
    op, x = get_op("softmax"), torch.randn(16, 64)
    _fake_liger(monkeypatch, lambda t: torch.softmax(t, -1))
    assert correctness.check(op, op.backends["liger"].factory(x), x).passed
    _fake_liger(monkeypatch, lambda t: torch.softmax(t, -1) * 1.01)  # rows no longer sum to 1
    result = correctness.check(op, op.backends["liger"].factory(x), x)
    assert not result.passed and result.reason


# --- the lock of the optional group -----------------------------------------------------------------

REF_LOCK = PROJECT_ROOT / "requirements-reference.lock"


def test_the_reference_lock_pins_what_its_in_file_and_the_adapters_name():
    blocks = {b.name: b for b in lock.parse(REF_LOCK.read_text())}
    pins = {lock.normalize(p.split("==")[0]): p.split("==")[1]
            for p in lock.exact_pins(lock.REFERENCE_IN)}
    assert {n: b.version for n, b in blocks.items()} == pins
    for lib in reference_libs.LIBRARIES.values():
        assert blocks[lib.package].version == lib.version
    assert REF_LOCK.read_text().startswith(lock.REFERENCE_HEADER)
    # installed with --no-deps over requirements.lock: no second torch or triton, nothing pinned twice
    main = {b.name for b in lock.parse((PROJECT_ROOT / "requirements.lock").read_text())}
    assert not set(blocks) & main
    # one wheel per supported Python where the wheel is CPython-specific, each hashed and named
    cu13 = blocks["nvidia-cutlass-dsl-libs-cu13"]
    named = [c.split()[1] for c in cu13.comments if ".whl" in c]
    assert named == [f"nvidia_cutlass_dsl_libs_cu13-4.8.1-cp{v}-cp{v}-manylinux_2_28_x86_64.whl"
                     for v in ("311", "312", "313")]
    assert len(cu13.hashes) == 3 and all(h in c for h, c in zip(cu13.hashes, cu13.comments[1:]))


def test_an_unpinned_reference_requirement_is_refused(tmp_path):
    (tmp_path / "r.in").write_text("# c\nliger-kernel==0.8.5  # ok\nquack-kernels>=0.6\n")
    with pytest.raises(lock.UsageError, match="'quack-kernels>=0.6' is not pinned exactly"):
        lock.exact_pins(tmp_path / "r.in")


# --- the table: % of the copy ceiling, every backend side by side -----------------------------------

def test_the_table_from_a_stored_run_record():
    sweep = Sweep.load(PROJECT_ROOT / "records" / "h200" / "1fd9c63c.json.xz")
    table = summary.ceiling_table(sweep, "softmax")
    assert table.header == ["softmax shape, dtype", "eager", "torch", "compile", "triton", "cuda"]
    assert table.title == ("softmax: % of the copy ceiling (4230 GB/s), hot device time, higher is better; "
                           "NVIDIA H200, commit 1fd9c63cf3e5")
    lines = table.markdown()
    # that run's figures (docs/results/README.md; 4096x65536 float32: 48, 71, 81 %), dtype first, then shape
    assert lines[2] == "| 65536x128 float32 | 14 | 82 | 66 | 82 | **84** |"
    assert "| 4096x65536 float32 | 20 | 48 | 65 | 71 | **81** |" in lines
    # triton's 96 was contaminated in that run: marked, never bold (issue 29), and above cuda's 92,
    # so which backend is best there is not known: no bold in that row
    assert lines[11] == "| 65536x128 bfloat16 | 9 | 48 | 70 | 96! | 92 |"
    assert len(lines) == 2 + 9 * 3 + 2 and not table.notes
    assert lines[-1] == table.legend and table.legend.startswith("Marks: ")
    assert summary.ceiling_table(sweep, "matmul") is None  # compute-bound: its % is of the matrix peak


@pytest.mark.parametrize("row, bold", [
    # a new user's CPU rows (docs/results/README.md states the rule)
    ([(11, True), (80, True), (89, False)], 89),  # the unmarked maximum above the noisy ones
    ([(4, False), (9, True), (7, False)], None),  # a noisy 9~ above the unmarked 7: not certain
    ([(12, False), (13, True)], None),  # the same in a row of two
    ([(8, False), (117, True), (106, True)], None),  # cache-resident figures above: not the best
    ([(9.6, False), (96.4, False), (95.6, False), (80, True)], 96),  # ties as shown are all bold
    ([(97, False)], None), ([(97.2, False), (96.6, True)], None),  # nothing to tell apart
    ([(56, True), (198, True)], None), ([], None),  # no unmarked figure
])
def test_the_rows_best_is_the_highest_unmarked_figure_with_none_marked_above_it(row, bold):
    assert summary.row_best(row) == bold


def test_a_tables_bold_follows_the_row_best_rule():
    records = [Record("softmax", b, "65536x128", "float32", pct_of_ceiling=p, noise=n)
               for b, p, n in (("eager", 11.2, 0.4), ("torch", 80.3, 0.3), ("compile", 89.1, 0.01))]
    records += [Record("softmax", b, "16384", "bfloat16", pct_of_ceiling=p, noise=n)
                for b, p, n in (("eager", 4.0, 0.01), ("torch", 9.1, 0.3), ("compile", 7.0, 0.02))]
    sweep = Sweep({"device": "cpu", "git_commit": "abc"}, 23.0, "cpu", records)
    lines = summary.ceiling_table(sweep, "softmax").markdown()
    assert lines[2:4] == ["| 65536x128 float32 | 11~ | 80~ | **89** |", "| 16384 bfloat16 | 4 | 9~ | 7 |"]


def _rec(backend, status="ok", pct=None, reason=""):
    return Record("softmax", backend, "256x262144", "float32", status=status, reason=reason,
                  pct_of_ceiling=pct)


def test_the_table_shows_skips_and_failures_with_numbered_reasons_and_no_column_for_absent_backends():
    refuse = "liger-kernel 0.8.5 refuses 256x262144 float32: RuntimeError: Cannot launch Triton kernel"
    records = [_rec("torch", pct=48.2), _rec("cuda", pct=66.4), _rec("liger", "skipped", reason=refuse),
               _rec("quack", pct=84.0), _rec("flaggems", "failed", reason="max relative error 3e-2"),
               _rec("eager", "skipped", reason="softmax has no eager backend")]
    sweep = Sweep({"device": "cuda", "gpu": "NVIDIA H200", "git_commit": "abc"}, 4246.0, "default", records)
    table = summary.ceiling_table(sweep, "softmax")
    assert table.header == ["softmax shape, dtype", "torch", "cuda", "liger", "quack", "flaggems"]
    assert table.markdown() == [
        "| softmax shape, dtype | torch | cuda | liger | quack | flaggems |", "|---|---|---|---|---|---|",
        "| 256x262144 float32 | 48 | 66 | — (1) | **84** | error (2) |", "",
        f"(1) {refuse}", "(2) max relative error 3e-2"]
    page = site_pages.table_html(table)
    assert f'<td style="text-align:right" title="{refuse}">— (1)</td>' in page
    assert "<td style=\"text-align:right\"><b>84</b></td>" in page and f"<li>{refuse}</li>" in page


def test_the_runs_page_shows_the_table_of_each_record(tmp_path):
    folder = tmp_path / "records" / "h200"
    folder.mkdir(parents=True)
    name = "1fd9c63c.json.xz"
    (folder / name).write_bytes((PROJECT_ROOT / "records" / "h200" / name).read_bytes())
    page = site.write_runs_page(tmp_path / "html", tmp_path / "records").read_text()
    assert "<th>softmax shape, dtype</th>" in page and "<th>gelu shape, dtype</th>" in page
    assert "<tr><td>4096x65536 float32</td>" in page


# --- on the GPU ---------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("op, backend", [("softmax", "liger"), ("softmax", "quack"),
                                         ("softmax", "flaggems"), ("gelu", "flaggems")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_each_reference_backend_passes_the_gate_where_installed(op, backend, dtype):
    o = get_op(op)
    x = torch.randn(512, 4096, device="cuda", dtype=dtype)
    try:
        fn = o.backends[backend].factory(x)
    except SkipCase as exc:
        if "is not installed" in str(exc) or "cannot be imported" in str(exc):
            pytest.skip(str(exc))
        raise
    result = correctness.check(o, fn, x)
    assert result.passed, result.reason
