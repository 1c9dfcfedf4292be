"""The child of ``fusebench bisect``: measures the named cases with the code of the commit it runs in.

``fusebench.gate.bisect_probe`` runs this file's text as ``python -c <text> <request>`` in the
probed commit's worktree, so that ``fusebench`` and its ops (``fusebench.ops``; ``kernels`` before the
op package) are imported from that commit
(checked: a child that would measure other code says so and stops). It is an entry point like
asv's ``benchmarks/suite.py``, hence beside the commands (the harness never imports the ops).
It imports nothing of fusebench at module level and uses only what the sweep has long had:
``new_record``, ``build_and_gate``, ``prepare``, ``time_round`` (``fusebench.measure.sweep``).

Protocol, one JSON object per line: the request (argv) is ``{"root": worktree, "cases": [...],
"config": the commit's case file}`` (``bisect_probe.request``); the child answers ``{"ready":
{case: {launches, kernel_id, kernel_by_timing, hot_calls, graph_calls, kernels}}, "machine":
name}`` or ``{"error": one line}`` on its stdout, then each ``round`` line on stdin with
``{"round": {case: figures}}`` (or an error) until ``quit`` or the end of input. Whatever the
measured code prints goes to stderr, the probe's log.

``fusebench ab`` asks more (``ab_probe.request``): ``"select"`` instead of ``"cases"`` (``{"pairs":
[[op, backend], ...] or null, "dtypes": [...] or null, "shapes": [...] or null}``: the cases of the
commit's own grid on this device that match), and ``"keep_going"``: a case that is skipped or
fails to build is named in ``"not_built": {case: "skipped: why" | "failed: why"}`` beside the ones
ready, instead of ending the child. A round line may be ``{"round": [case, ...]}``: those cases only.
"""

import json
import os
import sys
import time

#: The figures of a round sent back (ms), beside the contamination (``bisect_probe.FIELDS``).
FIELDS = ("device_time_ms", "device_time_cold_ms", "device_time_graph_ms", "wall_time_ms", "repeats")


class CaseFailed(Exception):
    pass


def _line(exc: BaseException) -> str:
    """An exception as one line (``fusebench.errors.first_line``, which this commit may not have)."""
    text = str(exc).strip().splitlines()
    if isinstance(exc, CaseFailed):
        return text[0]
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def build(request: dict):
    """Import the worktree's code and build, gate and profile each case; returns the device, the
    sweep module and ``[(case, record, callable)]``. Raises CaseFailed or what the imports raise."""
    root = os.path.realpath(request["root"])
    began = time.perf_counter()
    import fusebench
    try:  # the op package; a commit older than it has the top-level kernels package
        from fusebench import ops as kernels
    except ImportError:
        import kernels

    for module in (fusebench, kernels):
        where = os.path.realpath(module.__file__)
        if not where.startswith(root + os.sep):
            raise CaseFailed(f"{module.__name__} was imported from {where}, not from the worktree {root}")
    from fusebench.measure import environment, sweep

    dev = environment.device()
    ops = kernels.configured(request["config"])
    imported = time.perf_counter()
    seconds = {}
    keep_going = bool(request.get("keep_going"))
    cases = request["cases"] if "cases" in request else selected(request["select"], ops, sweep, dev)
    built, not_built = [], {}
    for case in cases:
        op_name, backend, shape, dtype = case.split("/")
        if op_name not in ops:
            if keep_going:
                not_built[case] = f"skipped: no op {op_name!r} at this commit"
                continue
            raise CaseFailed(f"{case}: no op {op_name!r} at this commit")
        op = ops[op_name]
        case_began = time.perf_counter()
        dims = tuple(int(d) for d in shape.split("x"))
        rec = sweep.new_record(op, backend, dims, dtype)
        done = sweep.build_and_gate(op, backend, dims, dtype, dev)
        sweep.prepare(rec, done, dev)
        seconds[case] = time.perf_counter() - case_began
        if rec.status != "ok":
            if keep_going:
                not_built[case] = f"{rec.status}: {rec.reason}"
                continue
            raise CaseFailed(f"{case}: {rec.status}: {rec.reason}")
        built.append((case, rec, done.fn))
    slowest = max(seconds, key=seconds.get, default=None)
    print(f"child: imports and device {imported - began:.1f} s; {len(seconds)} case(s) built in "
          f"{time.perf_counter() - imported:.1f} s" + (f" (slowest {slowest} {seconds[slowest]:.1f} s)"
                                                       if slowest else ""), file=sys.stderr, flush=True)
    return dev, sweep, built, _machine(environment, dev), not_built


def selected(select: dict, ops: dict, sweep, dev) -> list:
    """The cases of the commit's own grid on ``dev`` (``sweep.grid_name``) that ``select`` names:
    an op and backend among ``pairs`` (``[op, "*"]``: every backend of the op; null: all), a dtype
    among ``dtypes`` and a shape label among ``shapes`` (null: all). In run order."""
    grid = sweep.grid_name(dev, False)
    pairs = select.get("pairs")
    pairs = None if pairs is None else {tuple(p) for p in pairs}
    dtypes, shapes = select.get("dtypes"), select.get("shapes")
    out = []
    for op in ops.values():
        for shape in op.grids.get(grid, ()):
            label = "x".join(str(d) for d in shape)
            if shapes and label not in shapes:
                continue
            for dtype in op.dtypes:
                if dtypes and dtype not in dtypes:
                    continue
                for backend in op.backends:
                    if pairs is None or (op.name, backend) in pairs or (op.name, "*") in pairs:
                        out.append(f"{op.name}/{backend}/{label}/{dtype}")
    return out


def _machine(environment, dev):
    """The asv machine name of the device (``environment.machine_name``), None when unknown."""
    try:
        return environment.machine_name(dev)
    except Exception:
        return None


def figures(fig: dict) -> dict:
    """What the parent needs of one round of one case: the times, the contamination, and how many
    other processes NVML saw on the GPU (the parent discounts its own other children)."""
    out = {k: fig.get(k) for k in FIELDS}
    out["contamination"] = list(fig.get("contamination", ()))
    samples = (fig.get("before") or {}, fig.get("after") or {})
    out["others"] = [len(s.get("other_processes", ())) for s in samples]
    return out


def main(argv: list[str]) -> int:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the measured code's prints go to the log, never into the protocol

    def send(obj: dict) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    try:
        dev, sweep, built, machine, not_built = build(json.loads(argv[0]))
        flush = None
        if dev.type == "cuda":
            from fusebench.measure import timing

            flush = timing.l2_flush_buffer(dev)
    except Exception as exc:  # one line to the parent: this commit is skipped
        send({"error": _line(exc)})
        return 1
    send({"ready": {case: {"launches": rec.launches, "kernel_id": rec.kernel_id,
                           "kernel_by_timing": bool(rec.kernel_by_timing),
                           # a commit's record before the batch sizes has neither: None
                           "hot_calls": getattr(rec, "hot_calls", None),
                           "graph_calls": getattr(rec, "graph_calls", None),
                           "kernels": ["".join(c for c in str(k) if c.isprintable())[:400]
                                       for k in (rec.kernels or ())][:64]}
                    for case, rec, _ in built},
          "machine": machine, "not_built": not_built})
    rounds = 0
    by_name = {case: (case, rec, fn) for case, rec, fn in built}
    for line in sys.stdin:
        line = line.strip()
        if line.startswith("{"):  # {"round": [case, ...]}: those cases only
            try:
                order = [by_name[c] for c in json.loads(line)["round"]]
            except (ValueError, KeyError, TypeError) as exc:
                send({"error": f"bad round request: {_line(exc)}"})
                return 1
        elif line == "round":
            order = built if rounds % 2 == 0 else built[::-1]
        else:
            break
        try:
            out = {case: figures(sweep.time_round(rec, fn, dev, flush)) for case, rec, fn in order}
        except Exception as exc:
            send({"error": f"timing: {_line(exc)}"})
            return 1
        rounds += 1
        send({"round": out})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
