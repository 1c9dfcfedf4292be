"""The profiling plan and its ranges: names, order, colours, markers, and the window's run order."""

import contextlib

import pytest
import torch

from fusebench.errors import UsageError
from fusebench.nsys import capture, nvtx_ranges
from fusebench.nsys.nvtx_ranges import RangeName, backend_color, parse_range, range_name
from fusebench.nsys.plan import CALLS, Case, plan, select
from fusebench.ops import get_op
from fusebench.registry import BACKENDS

VALID_BACKENDS = ", ".join(BACKENDS)

GELU_DEFAULT = [
    f"gelu/{b}/{s}/{d}"
    for s in ("16777216", "16384x16384") for d in ("float32", "bfloat16")
    for b in get_op("gelu").backends  # the case file's, in its order
]


def test_default_gelu_plan_names_every_range_in_run_order():
    cases = select(get_op("gelu"), device_type="cuda")
    assert [c.range for c in cases] == GELU_DEFAULT
    assert {c.calls for c in cases} == {CALLS} == {20}


def test_default_softmax_plan_takes_the_nsys_grid():
    cases = select(get_op("softmax"), device_type="cuda")
    assert len(cases) == 3 * 2 * 8  # shapes x dtypes x backends (the three reference backends too)
    assert [c.range for c in cases[:9]] == [
        "softmax/eager/4096x4096/float32", "softmax/torch/4096x4096/float32",
        "softmax/compile/4096x4096/float32", "softmax/triton/4096x4096/float32",
        "softmax/cuda/4096x4096/float32", "softmax/liger/4096x4096/float32",
        "softmax/quack/4096x4096/float32", "softmax/flaggems/4096x4096/float32",
        "softmax/eager/4096x4096/bfloat16"]
    assert cases[-1].range == "softmax/flaggems/1x1048576/bfloat16"


def test_cpu_plan_takes_the_quick_grid():
    assert [c.shape for c in select(get_op("gelu"), "eager", device_type="cpu")] == \
        [(1 << 14,), (1 << 14,), (1 << 22,), (1 << 22,)]


def test_selection_narrows_and_keeps_the_users_order():
    cases = select(get_op("softmax"), "torch,eager", "1X1048576,4096x4096", "bfloat16", calls=3)
    assert [c.range for c in cases] == [
        "softmax/torch/1x1048576/bfloat16", "softmax/eager/1x1048576/bfloat16",
        "softmax/torch/4096x4096/bfloat16", "softmax/eager/4096x4096/bfloat16"]
    assert cases[0].calls == 3


@pytest.mark.parametrize("kwargs, message", [
    ({"backends": "cudnn"}, f"unknown backend 'cudnn'; valid backends: {VALID_BACKENDS}"),
    ({"dtypes": "fp8"}, "unknown dtype 'fp8'; valid dtypes: float32, bfloat16, float16"),
    ({"shapes": "7x7"}, "unknown shape '7x7'; valid shapes: 1024, 16384, 262144, 1048576, 4194304, "
                        "16777216, 67108864, 16384x16384"),
    ({"shapes": "big"}, "unknown shape 'big'; valid shapes: 1024,"),
    ({"calls": 0}, "calls per range must be at least 1, not 0"),
])
def test_bad_selection_is_one_line_naming_the_valid_values(kwargs, message):
    with pytest.raises(UsageError) as err:
        select(get_op("gelu"), **kwargs)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_plan_is_pure_and_ordered_shape_dtype_backend():
    op = get_op("gelu")
    cases = plan(op, ["b1", "b2"], [(4,), (8,)], ["float32"], calls=5)
    assert cases == [Case("gelu", "b1", (4,), "float32", 5), Case("gelu", "b2", (4,), "float32", 5),
                     Case("gelu", "b1", (8,), "float32", 5), Case("gelu", "b2", (8,), "float32", 5)]


@pytest.mark.parametrize("text", [
    "fusebench:gelu/eager/16384x16384/float32",  # named domain (nsys 2024.3+)
    ":gelu/eager/16384x16384/float32",  # default-domain spelling
    "gelu/eager/16384x16384/float32",  # bare name
    ' "fusebench:gelu/eager/16384x16384/float32" ',
])
def test_range_spellings_of_every_nsys_version_parse_alike(text):
    assert parse_range(text) == RangeName("gelu", "eager", "16384x16384", "float32")
    assert str(parse_range(text)) == range_name("gelu", "eager", "16384x16384", "float32")


@pytest.mark.parametrize("text", ["other:gelu/eager/1024/float32", ":forward", "gelu/eager/1024", ""])
def test_ranges_of_other_domains_or_shapes_are_not_ours(text):
    assert parse_range(text) is None


def test_each_backend_has_its_own_colour():
    colours = [backend_color(b) for b in ("eager", "torch", "compile", "triton", "cuda")]
    assert len(set(colours)) == 5
    assert colours[0] == 0xFF1F77B4
    assert all(c >> 24 == 0xFF for c in colours)  # opaque ARGB
    with pytest.raises(ValueError):
        backend_color("cudnn")


class FakeDomain:
    """Stands in for an nvtx domain with a tool attached: records what the markers do."""

    def __init__(self):
        self.log = []

    def get_event_attributes(self, message=None, color=None):
        self.log.append(("attributes", message, color))
        return (message, color)

    def push_range(self, attributes):
        self.log.append(("push", attributes[0]))

    def pop_range(self):
        self.log.append(("pop",))


def test_markers_build_attributes_once_then_only_push_and_pop(monkeypatch):
    import nvtx

    domain = FakeDomain()
    seen = []
    monkeypatch.setattr(nvtx, "get_domain", lambda name: seen.append(name) or domain)
    markers = nvtx_ranges.Markers([("a/b/1/float32", 1), ("a/c/1/float32", 2)])
    for _ in range(3):
        markers.push("a/c/1/float32")
        markers.pop()
    assert seen == ["fusebench"]
    assert domain.log[:2] == [("attributes", "a/b/1/float32", 1), ("attributes", "a/c/1/float32", 2)]
    assert domain.log[2:] == [("push", "a/c/1/float32"), ("pop",)] * 3


def test_markers_without_a_profiler_are_no_ops():
    markers = nvtx_ranges.Markers([("gelu/eager/1024/float32", backend_color("eager"))])
    markers.push("gelu/eager/1024/float32")
    markers.pop()


@pytest.mark.slow
def test_window_runs_each_ready_case_calls_times_inside_its_range_in_plan_order():
    log = []
    cases = [Case("gelu", b, (4,), "float32", 3) for b in ("eager", "torch", "triton")]
    prepared = [capture.Prepared(c, fn=lambda b=c.backend: log.append(("call", b))) for c in cases]
    prepared[2].status, prepared[2].reason = "skipped", "no GPU"

    @contextlib.contextmanager
    def enter(case):
        log.append(("open", case.range))
        yield
        log.append(("close", case.range))

    capture.run_window(prepared, torch.device("cpu"), enter)
    eager, torch_ = "gelu/eager/4/float32", "gelu/torch/4/float32"
    assert log == [("open", eager), *[("call", "eager")] * 3, ("close", eager),
                   ("open", torch_), *[("call", "torch")] * 3, ("close", torch_)]


def test_a_case_raising_in_the_window_fails_with_its_reason_and_the_rest_runs():
    def boom():
        raise RuntimeError("illegal memory access\nmore")

    ran = []
    cases = [Case("gelu", b, (4,), "float32", 2) for b in ("eager", "torch")]
    prepared = [capture.Prepared(cases[0], fn=boom), capture.Prepared(cases[1], fn=lambda: ran.append(1))]
    capture.run_window(prepared, torch.device("cpu"), lambda case: contextlib.nullcontext())
    assert (prepared[0].status, prepared[0].reason) == (
        "failed", "in the capture window: RuntimeError: illegal memory access")
    assert prepared[1].status == "ok" and ran == [1, 1]


def test_blocking_kernel_covers_the_launches_of_all_calls_and_is_capped():
    p = capture.Prepared(Case("gelu", "eager", (4,), "float32", 20), launch_ms=0.05)
    assert capture.block_ms(p) == pytest.approx(20 * (2 * 0.05 + 0.02))
    p.launch_ms = 10.0
    assert capture.block_ms(p) == 50.0


def test_prepare_reports_skips_and_gate_failures_with_their_reason():
    op = get_op("gelu")
    dev = torch.device("cpu")
    skipped = capture.prepare(op, Case("gelu", "cuda", (1024,), "float32"), dev)
    assert skipped.status == "skipped" and skipped.reason == "needs a CUDA GPU" and skipped.fn is None
    ok = capture.prepare(op, Case("gelu", "eager", (1024,), "float32"), dev)
    assert ok.status == "ok" and ok.bytes_moved == 2 * 1024 * 4 and ok.max_rel_error < 1e-6
    assert ok.device_time is None  # host only: no device time on the CPU
    entry = ok.side_entry()
    assert entry["range"] == "gelu/eager/1024/float32" and entry["calls"] == CALLS


@pytest.mark.slow
def test_building_a_compile_case_leaves_the_earlier_ones_compiled():
    """Each compile case compiles its own copy of the eager function (backends.compiled, no Dynamo
    reset), so building a later case does not make an earlier one recompile inside the window."""
    op = get_op("gelu")
    dev = torch.device("cpu")
    cases = [Case("gelu", "compile", (s,), "float32", 2) for s in (1024, 2048)]
    prepared = [capture.prepare(op, c, dev) for c in cases]
    if prepared[0].status == "skipped":
        pytest.skip(prepared[0].reason)
    assert [p.status for p in prepared] == ["ok", "ok"]
    without = [capture.Prepared(p.case, fn=p.fn) for p in prepared]  # no rewarm
    capture.run_window(without, dev, lambda case: contextlib.nullcontext())
    assert [(p.status, p.reason) for p in without] == [("ok", ""), ("ok", "")]
