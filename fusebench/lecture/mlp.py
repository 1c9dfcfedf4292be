"""``make mlp``: time of MLP training steps over steps, layers and batch size (the lecture's scaling).

The model: ``layers`` blocks of ``Linear(dim, dim)`` + GELU (tanh), trained on a fixed seeded
batch ``(batch, dim)`` toward a fixed random target with mean-squared error and plain SGD
(``zero_grad``, forward, loss, backward, ``step``). A *run* is ``steps`` such steps; its time is
the host clock around the run followed by a synchronize (what a training loop's caller sees,
launch overhead included), median of several runs after warm-up.

Each axis is swept from a base configuration with the other three fixed. The work of a run is
about ``6 · steps · layers · batch · dim²`` flops (forward 2, backward 4 per weight and sample),
so the time should grow linearly in each of steps and layers; in batch size it grows linearly
once the GPU is busy, and is flat (launch-bound) below that. A least-squares line per axis
gives the time per added unit, the intercept (fixed cost) and R² (1 = perfectly linear).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, replace

import torch

from fusebench.measure import timing
from fusebench.registry import PRECISIONS

#: The swept axes, in report order.
AXES = ("steps", "layers", "batch")
#: Repeats of one configuration that disagree by more than this factor were disturbed (another
#: process on the host or the GPU): the base configuration, timed once per axis (a busy 2-core
#: host gave 0.83 ms and 124 ms for it in one report, with R² 0.995 on both axes), or one
#: point's runs (its IQR above ``DISAGREE - 1`` times its median). Marked, never hidden.
DISAGREE = 1.5


@dataclass(frozen=True)
class MLPConfig:
    """One configuration: model width ``dim``, ``layers`` blocks, ``batch`` samples, ``steps`` steps."""

    dim: int
    layers: int
    batch: int
    steps: int


#: Base configurations and axis values: a GPU run takes a few seconds (about 1 to 40 ms per
#: run on an H200 in float32); the CPU one a few seconds on two cores.
PLANS = {
    "cuda": (MLPConfig(dim=2048, layers=4, batch=1024, steps=4),
             {"steps": [1, 2, 4, 8, 16], "layers": [1, 2, 4, 8, 16], "batch": [256, 512, 1024, 2048, 4096]}),
    "cpu": (MLPConfig(dim=128, layers=2, batch=64, steps=2),
            {"steps": [1, 2, 4, 8], "layers": [1, 2, 4, 8], "batch": [32, 64, 128, 256]}),
}


def make_run(cfg: MLPConfig, device: torch.device, dtype: torch.dtype = torch.float32, seed: int = 0):
    """Build the model, data and optimizer of ``cfg``; return a zero-argument callable doing one run
    (``cfg.steps`` training steps) and returning the last loss (a 0-d tensor, not synchronized)."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    blocks = []
    for _ in range(cfg.layers):
        blocks += [torch.nn.Linear(cfg.dim, cfg.dim), torch.nn.GELU(approximate="tanh")]
    model = torch.nn.Sequential(*blocks).to(device=device, dtype=dtype)
    x = torch.randn(cfg.batch, cfg.dim, generator=g).to(device=device, dtype=dtype)
    target = torch.randn(cfg.batch, cfg.dim, generator=g).to(device=device, dtype=dtype)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def run():
        for _ in range(cfg.steps):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(model(x), target)
            loss.backward()
            opt.step()
        return loss.detach()  # never .item() here: it would synchronize every run

    return run


def time_run(cfg: MLPConfig, device: torch.device, dtype: str = "float32", budget_s: float = 0.2,
             max_repeats: int = 20) -> timing.Timing:
    """Wall time of one run of ``cfg`` (host clock, synchronized), after warm-up; median of
    3..``max_repeats`` runs filling about ``budget_s`` seconds.

    Raises:
        SkipCase: ``dtype`` cannot run on ``device`` (tf32 on the CPU).
    """
    precision = PRECISIONS[dtype]
    x = torch.empty(0, device=device)  # only its device matters to bind
    fn = precision.bind(lambda _: make_run(cfg, device, precision.dtype), x)
    return timing.measure(fn, device, budget_s, clock="wall", warm_up_calls=2, bounds=(3, max_repeats))


@dataclass(frozen=True)
class LinearFit:
    """Least-squares line ``time_ms = intercept_ms + slope_ms * x``, with R² (1 = exactly linear)
    and the half-width of the intercept's 95 % interval (NaN with two points: no residual to
    tell it from)."""

    slope_ms: float
    intercept_ms: float
    r2: float
    intercept_ci_ms: float = math.nan


def linear_fit(xs: list[float], ys: list[float]) -> LinearFit:
    """Ordinary least squares of ``ys`` on ``xs``.

    Raises:
        ValueError: fewer than two points, or all ``xs`` equal.
    """
    if len(xs) < 2 or len(set(xs)) < 2:
        raise ValueError("a line needs at least two distinct x values")
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    slope = sxy / sxx
    intercept = my - slope * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys))
    n = len(xs)
    ci = math.nan
    if n > 2:
        from scipy import stats

        se = math.sqrt(ss_res / (n - 2) * (1.0 / n + mx * mx / sxx))
        ci = float(stats.t.ppf(0.975, n - 2)) * se
    return LinearFit(slope, intercept, 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0, ci)


@dataclass
class AxisResult:
    """One swept axis: the values, the median time of a run at each (ms), their IQR and the fit."""

    axis: str
    values: list[int]
    time_ms: list[float]
    iqr_ms: list[float]
    fit: LinearFit


def sweep_axis(base: MLPConfig, axis: str, values: list[int], device: torch.device,
               dtype: str = "float32", **kw) -> AxisResult:
    """Time ``base`` with ``axis`` set to each of ``values`` (the others fixed).

    Raises:
        ValueError: ``axis`` is not one of :data:`AXES`.
    """
    if axis not in AXES:
        raise ValueError(f"unknown axis {axis!r}; valid axes: {', '.join(AXES)}")
    times = [time_run(replace(base, **{axis: v}), device, dtype, **kw) for v in values]
    ms = [t.median_ms for t in times]
    return AxisResult(axis, list(values), ms, [t.iqr_ms for t in times], linear_fit(values, ms))


def run_all(device: torch.device, dtype: str = "float32", base: MLPConfig | None = None,
            axes: dict[str, list[int]] | None = None, **kw) -> tuple[MLPConfig, list[AxisResult]]:
    """Sweep every axis of the device's plan (or of ``base`` and ``axes``)."""
    plan_base, plan_axes = PLANS["cuda" if device.type == "cuda" else "cpu"]
    base, axes = base or plan_base, axes or plan_axes
    return base, [sweep_axis(base, a, axes[a], device, dtype, **kw) for a in AXES if a in axes]


def impossible(r: AxisResult) -> list[str]:
    """What in ``r`` cannot be physically true: a larger value (more work) timed below the first
    value, a negative time per unit or a fixed cost below zero by more than its 95 % interval (a
    line through points of a nearly proportional cost may cross zero a little below it). Such
    figures come from disturbed runs (another process on the host or the GPU), never from the model."""
    out = [f"{r.axis} {v} took {t:.3f} ms, less than {r.values[0]}'s {r.time_ms[0]:.3f} ms"
           for v, t in zip(r.values[1:], r.time_ms[1:]) if v > r.values[0] and t < r.time_ms[0]]
    if r.fit.slope_ms < 0:
        out.append(f"a negative time per unit ({r.fit.slope_ms:.4g} ms)")
    ci = r.fit.intercept_ci_ms
    if r.fit.intercept_ms < 0 and not (math.isfinite(ci) and r.fit.intercept_ms >= -ci):
        out.append(f"a negative fixed cost ({r.fit.intercept_ms:.4g} ms"
                   + (f", beyond its 95 % interval of ±{ci:.4g} ms)" if math.isfinite(ci) else ")"))
    return out


def noisy(r: AxisResult, i: int) -> bool:
    """Point ``i`` of ``r``: its runs' IQR is more than ``DISAGREE - 1`` times their median."""
    return r.time_ms[i] > 0 and r.iqr_ms[i] > (DISAGREE - 1.0) * r.time_ms[i]


def disagreements(base: MLPConfig, results: list[AxisResult]) -> list[str]:
    """Where repeats of one configuration disagree widely (:data:`DISAGREE`): the base
    configuration's time in each axis that times it, when the largest is more than DISAGREE times
    the smallest, and each noisy point (:func:`noisy`). Empty: they agree."""
    at_base = {r.axis: r.time_ms[r.values.index(getattr(base, r.axis))] for r in results
               if getattr(base, r.axis) in r.values}
    out = []
    if len(at_base) > 1 and min(at_base.values()) > 0 \
            and max(at_base.values()) > DISAGREE * min(at_base.values()):
        out.append("the base configuration took " + ", ".join(f"{t:.3f} ms in the {a} sweep"
                                                              for a, t in at_base.items()))
    out += [f"{r.axis} {v}: runs spread {q:.3f} ms (IQR) around {t:.3f} ms" for r in results
            for i, (v, t, q) in enumerate(zip(r.values, r.time_ms, r.iqr_ms)) if noisy(r, i)]
    return out


def render(base: MLPConfig, results: list[AxisResult], dtype: str, header: str) -> str:
    """Markdown: per axis, the time of a run at each value, the ratio to the first value against
    the ratio of the values (equal when growth is proportional), and the linear fit."""
    out = [f"# MLP training steps: time over steps, layers and batch size ({dtype})", "", header, "",
           f"Base: dim {base.dim}, {base.layers} layers (Linear + GELU), batch {base.batch}, "
           f"{base.steps} steps of SGD on MSE; one axis varied at a time. Time of one run "
           f"(all its steps), host clock with synchronization, median.", ""]
    for r in results:
        out += [f"## {r.axis}", "", f"| {r.axis} | ms per run | time ratio | {r.axis} ratio |",
                "|---:|---:|---:|---:|"]
        for i, (v, t) in enumerate(zip(r.values, r.time_ms)):
            mark = (" !" if v > r.values[0] and t < r.time_ms[0] else "") + (" noisy" if noisy(r, i) else "")
            out.append(f"| {v} | {t:.3f} | {t / r.time_ms[0]:.2f}{mark} | {v / r.values[0]:.2f} |")
        unit = {"steps": "step", "layers": "layer", "batch": "sample"}[r.axis]
        ci = f" ± {r.fit.intercept_ci_ms:.2g} (95 %)" if math.isfinite(r.fit.intercept_ci_ms) else ""
        out += ["", f"Linear fit: {r.fit.slope_ms:.4g} ms per {unit}, "
                    f"intercept {r.fit.intercept_ms:.4g}{ci} ms, R² = {r.fit.r2:.4f}.", ""]
        if wrong := impossible(r):
            out += [f"**! Not physically possible**: {'; '.join(wrong)}. More work cannot take less time: "
                    "these runs were disturbed (another process on the host or the GPU); run `make mlp` "
                    "again on an idle machine before reading this axis.", ""]
    if wide := disagreements(base, results):
        out += [f"**! Contaminated**: repeats of one configuration disagree ({'; '.join(wide)}): the "
                "runs were disturbed (another process on the host or the GPU), whatever R² says; run "
                "`make mlp` again on an idle machine before reading these figures.", ""]
    return "\n".join(out)


def as_data(base: MLPConfig, results: list[AxisResult], dtype: str) -> dict:
    """The JSON-serializable figures (stored with the report)."""
    return {"params": {"base": asdict(base), "dtype": dtype,
                       "axes": {r.axis: r.values for r in results}},
            "results": [asdict(r) for r in results], "contaminated": disagreements(base, results)}
