"""All GPUs of a host at once (``make bench GPUS=all`` or ``GPUS=0,1``): one worker process per GPU.

Each worker is a process started with the standard library's ``multiprocessing`` (``spawn``: a
fresh interpreter, no CUDA state inherited) with ``CUDA_VISIBLE_DEVICES`` naming its one GPU, set
in its environment before the interpreter starts, so torch in it sees that GPU only, as
``cuda:0``; the worker checks it sees exactly one. Two workers never get the same GPU
(:func:`parse_gpus` refuses a GPU named twice). The parent process never initializes CUDA.

A run has the phases of ``fusebench.measure.sweep`` (its module doc), spread over the GPUs:

0. **deal**: the parent deals the cases to the GPUs by their cost (:func:`deal`: the costliest
   first, each to the GPU with the least so far), a case's cost being its build and its rounds:
   measured in the newest record of the same GPU model and grid where there is one
   (:func:`costs_from_record`), else estimated from its backend and size (:func:`estimated_cost`).
   A shared queue balanced only the builds (whichever GPU was free took the next case): two H200s
   timed 491 and 253 cases, 59+54+57 s and 42+37+40 s of rounds, and the run waited for the first.
1. **build**: each worker builds, gates and profiles its own cases in grid order
   (``sweep.measure``), keeping the callables. The CUDA extension is built once in the parent
   before the workers start (``prebuild``), not per worker. A worker that has built its share
   waits at a barrier for the others, so no GPU is timed while another worker compiles on the
   host's CPUs.
2. **rounds**: each worker times its own cases in ``ROUNDS`` interleaved rounds (the round-order
   rule of ``sweep.round_order`` over its cases), measuring its own copy ceiling each round and its
   own NVML readings. A case is timed by one GPU in all its rounds: its noise is one GPU's.

The parent merges the workers' sweeps by GPU model: the GPUs of one model make one asv machine
(``h200``: one result file and one record per commit), every record naming the GPU that timed it
(``gpu_index``, ``gpu_serial``), and the environment listing each GPU (``gpus``: index, serial,
UUID, copy ceilings, phase times). Different models are different machines.

A worker that dies or fails (its GPU unusable, a crash) is reported in one line; the cases dealt
to it that it had not measured are failed records with that reason (stored under its machine
when another GPU of the model measured the rest); the other workers' cases are stored as usual.

Messages from a worker go through its own pipe (``multiprocessing.Pipe``, written synchronously:
a case is known to be taken before it is built); the parent waits on the pipes and the processes'
sentinels (``multiprocessing.connection.wait``), so a worker killed mid-case is noticed.
"""

from __future__ import annotations

import heapq
import importlib
import multiprocessing as mp
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Callable, Mapping, Sequence

import torch

from fusebench.errors import UsageError, first_line
from fusebench.measure import energy, environment, stopping, sweep, timing
from fusebench.names import items
from fusebench.record import SUFFIX, Record, Sweep
from fusebench.registry import Op

#: The environment keys that describe one GPU, moved from a worker's environment into its entry of
#: the merged environment's ``gpus`` list.
PER_GPU_KEYS = ("gpu_index", "gpu_serial", "gpu_uuid", "clocks", "clocks_after", "sweep_seconds",
                "worker")


@dataclass(frozen=True)
class Slot:
    """One worker's GPU. ``position``: its place in the run's list (0-based); ``visible``: the
    value of ``CUDA_VISIBLE_DEVICES`` the worker gets (an index or UUID as this host names it)."""

    position: int
    visible: str


@dataclass(frozen=True)
class Job:
    """What every worker measures (picklable: sent to the spawned processes).

    Attributes:
        registry: ``"module:NAME"`` of the function that reads the case file into the ops
            (``"fusebench.ops:configured"``: path or None -> name -> :class:`Op`), imported in each worker.
        ops, backends, dtypes: the selection (names).
        grid: the grid's name (``default``, ``quick``; ``cpu`` for a CPU emulation).
        rounds: rounds per case (>= 1).
        device: ``"cuda"``, or ``"cpu"`` to run the same workers on the CPU (tests).
        identify: ``identify(dev) -> {"gpu_index", "gpu_serial", ...}`` (default
            ``environment.gpu_identity``; a test gives fake ones, with ``"gpu"`` a model name).
        costs: seconds per case, in the order of :meth:`cases` (:func:`costs_from_record`);
            None: :func:`estimated_cost` of each.
        case_file: the case file the workers read, passed to ``registry`` (None: its default).
        rule: the stopping rule of each mode in each round (``fusebench.measure.stopping``).
        energy_scope: which cases get an energy top-up window (``fusebench.measure.energy.SCOPES``).
    """

    registry: str
    ops: tuple[str, ...]
    backends: tuple[str, ...]
    dtypes: tuple[str, ...]
    grid: str
    rounds: int = sweep.DEFAULT_ROUNDS
    device: str = "cuda"
    identify: Callable[[torch.device], dict] | None = None
    costs: tuple[float, ...] | None = None
    case_file: str | None = None
    rule: stopping.StopRule = stopping.DEFAULT
    energy_scope: str = energy.DEFAULT_SCOPE

    def cases(self) -> list[tuple[Op, str, tuple, str]]:
        """The run's cases in grid order (the same list in the parent and in every worker)."""
        module, _, name = self.registry.partition(":")
        ops: Mapping[str, Op] = getattr(importlib.import_module(module), name)(self.case_file)
        return sweep.cases([ops[n] for n in self.ops], self.grid, self.backends, self.dtypes)


#: Seconds a round spends on a case beyond its kernels' time (warm-up, planning, L2 flushes,
#: synchronizations, NVML samples): 0.01 to 0.17 s a case in the committed H200 records.
ROUND_OVERHEAD_S = 0.1
#: Build seconds of a case by backend where no record says: Inductor's compile, Triton's JIT
#: (0.1 to 0.5 s a case in the H200 records' compile_s), the others next to nothing.
BUILD_S = {"compile": 1.0, "triton": 0.3}
#: The bandwidth an estimate assumes (B/s): only the ratio between cases matters for a deal.
NOMINAL_BANDWIDTH = 2e12


def estimated_cost(case: tuple, rounds: int) -> float:
    """Seconds ``case`` (``(op, backend, shape, dtype)``) is expected to take in a run of
    ``rounds`` rounds, before anything of it was measured: its backend's build, then per round
    the hot and cold timings (each fills the sweep's budget, or takes at least
    ``timing.MIN_REPEATS`` calls of a kernel streaming its bytes at :data:`NOMINAL_BANDWIDTH`)
    and the overhead."""
    rec = sweep.new_record(*case)
    call_s = rec.bytes_moved / NOMINAL_BANDWIDTH
    return BUILD_S.get(rec.backend, 0.05) + rounds * (
        2 * max(sweep.ROUND_BUDGET_S, timing.MIN_REPEATS * call_s) + ROUND_OVERHEAD_S)


def costs_from_record(cases: Sequence[tuple], record: Sweep | None, rounds: int) -> tuple[float, ...]:
    """Seconds per case of ``cases``: from ``record`` (an earlier run of the same grid on the same
    GPU model) where it timed the case, its compile time and its kernels' time per round (hot and
    cold repeats, wall calls) plus :data:`ROUND_OVERHEAD_S`; else :func:`estimated_cost`."""
    known = {r.key: r for r in (record.records if record else ()) if r.status == "ok" and r.rounds}
    costs = []
    for case in cases:
        rec = known.get(sweep.new_record(*case).key)
        if rec is None:
            costs.append(estimated_cost(case, rounds))
            continue
        one = rec.rounds[0]
        reps = one.get("repeats") or 0
        kernels_ms = (reps * ((one.get("device_time_ms") or 0) * (rec.hot_calls or 1)
                              + (one.get("device_time_cold_ms") or 0))
                      + min(reps, 100) * (one.get("wall_time_ms") or 0))
        costs.append((rec.compile_s or BUILD_S.get(rec.backend, 0.05))
                     + rounds * (kernels_ms / 1000 + ROUND_OVERHEAD_S))
    return tuple(costs)


def newest_record(folder: Path, gpu_name: str | None, grid: str,
                  read: Callable[[Path], Sweep] = Sweep.load) -> Sweep | None:
    """The newest run record under ``folder`` (a records folder: ``<machine>/<sha8>.json.xz``, or
    a plain ``<sha8>.json``) of GPU model ``gpu_name`` and ``grid``, by file time; None when there
    is none. Each is read by ``read`` (``make bench``: ``runrecord.read``, checked as a file from
    another host: stored records come by ``git pull``); a file that cannot be read is passed over
    (costs are an estimate: the run never depends on them)."""
    paths = [*folder.glob("*/*.json"), *folder.glob(f"*/*{SUFFIX}")]
    for path in sorted(paths, key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            sweep = read(path)
            if sweep.grid != grid or sweep.environment.get("gpu") != gpu_name:
                continue
            return sweep
        except (OSError, ValueError, TypeError, KeyError, AttributeError, UsageError):
            continue
    return None


def gpu_model(visible: str) -> str | None:
    """The model name NVML gives the GPU ``visible`` names (an index or a UUID, as in
    ``CUDA_VISIBLE_DEVICES``), without a CUDA context; None when NVML cannot say."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = (pynvml.nvmlDeviceGetHandleByUUID(visible) if not visible.isdigit()
                  else pynvml.nvmlDeviceGetHandleByIndex(int(visible)))
        name = pynvml.nvmlDeviceGetName(handle)
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - no NVML: the costs are estimated
        return None


def deal(costs: Sequence[float], n: int) -> list[list[int]]:
    """The positions ``0..len(costs)-1`` dealt to ``n`` workers so that their total costs are
    close: the costliest first, each to the worker with the least so far (longest processing
    time first; within 4/3 of the best deal). Each worker's positions in grid order."""
    loads = [(0.0, w) for w in range(n)]
    shares: list[list[int]] = [[] for _ in range(n)]
    for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        load, w = heapq.heappop(loads)
        shares[w].append(i)
        heapq.heappush(loads, (load + costs[i], w))
    return [sorted(s) for s in shares]


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` entries: that variable's
    entries when it is set (a Slurm or Kubernetes allocation), else ``"0"`` .. ``"n-1"`` for the n
    GPUs NVML counts (torch's count, which creates no CUDA context, without NVML)."""
    if (given := os.environ.get("CUDA_VISIBLE_DEVICES")) is not None:
        return [g.strip() for g in given.split(",") if g.strip()]
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
    except Exception:  # noqa: BLE001 - no NVML: ask torch
        count = torch.cuda.device_count()
    return [str(i) for i in range(count)]


def parse_gpus(text: str, visible: list[str]) -> list[Slot]:
    """The GPUs of ``GPUS=``: ``all`` (every visible GPU) or comma-separated indices into
    ``visible`` (:func:`visible_gpus`), e.g. ``0,1``.

    Raises:
        UsageError: no GPU visible; not ``all`` nor indices; an index out of range; an index given
            twice (two workers would share a GPU).
    """
    if not visible:
        raise UsageError(f"GPUS={text}: no GPU visible here (NVML and torch count none)")
    if text.strip() == "all":
        return [Slot(i, v) for i, v in enumerate(visible)]
    try:  # an empty item (0,,1) too: never read as fewer GPUs than were named
        chosen = [int(t) for t in items("GPU", text)]
    except (ValueError, UsageError):
        raise UsageError(f"GPUS={text}: give all or comma-separated GPU indices, e.g. 0,1") from None
    if bad := [i for i in chosen if not 0 <= i < len(visible)]:
        raise UsageError(f"GPUS={text}: no GPU {bad[0]} here; the GPUs are 0..{len(visible) - 1}")
    if len(set(chosen)) != len(chosen):
        twice = next(i for i in chosen if chosen.count(i) > 1)
        raise UsageError(f"GPUS={text}: GPU {twice} named twice (one worker per GPU)")
    return [Slot(n, visible[i]) for n, i in enumerate(chosen)]


def machine_for(gpu_name: str | None) -> str:
    """The asv machine of a GPU model (``environment.slug``; ``FUSEBENCH_MACHINE`` overrides;
    ``environment.machine_name`` of the CPU without a GPU)."""
    if name := os.environ.get("FUSEBENCH_MACHINE"):
        return name
    if not gpu_name:
        return environment.machine_name(torch.device("cpu"))
    return environment.slug(gpu_name)


class _Prefixed:
    """A text stream writing each line to ``stream`` with ``prefix`` in front (a worker's output)."""

    def __init__(self, stream, prefix: str) -> None:
        self.stream, self.prefix, self.pending = stream, prefix, ""

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            self.stream.write(f"{self.prefix}{line}\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def work(job: Job, slot: Slot, todo_q, conn, barrier) -> None:
    """A worker's body (run in a spawned process): check the GPU pinning, measure the cases
    dealt to it, pulled from its own ``todo_q`` (``sweep.measure``), send the sweep.

    Sends ``(kind, payload)`` on ``conn``: ``("ready", (machine, gpu name))``, ``("took", grid
    position)`` before building a case, ``("built", n)`` after the build phase, ``("done",
    Sweep)``; ``("error", one line)`` instead of the rest when anything fails.
    """
    out = _Prefixed(sys.__stderr__, f"[gpu {slot.visible}] ")
    try:
        dev = torch.device("cpu")
        seen = os.environ.get("CUDA_VISIBLE_DEVICES")
        if seen != slot.visible:
            raise RuntimeError(f"pinned to GPU {slot.visible} but CUDA_VISIBLE_DEVICES={seen}")
        if job.device == "cuda":
            if not torch.cuda.is_available() or torch.cuda.device_count() != 1:
                raise RuntimeError(f"GPU {slot.visible} is not usable: torch sees "
                                   f"{torch.cuda.device_count()} CUDA devices, not 1")
            dev = environment.device()
        identity = (job.identify or environment.gpu_identity)(dev)
        gpu_name = identity.get("gpu") or (torch.cuda.get_device_name(dev) if dev.type == "cuda" else None)
        machine = machine_for(gpu_name)
        conn.send(("ready", (machine, gpu_name)))
        todo = job.cases()

        def pulled():
            while (i := todo_q.get()) is not None:
                conn.send(("took", i))
                yield i, todo[i]

        def between_phases(built: int) -> None:
            conn.send(("built", built))
            try:
                barrier.wait()
            except threading.BrokenBarrierError:  # a worker failed: the parent broke the barrier
                pass

        result = sweep.measure(pulled(), len(todo), job.grid, dev, rounds=job.rounds, rule=job.rule,
                               peak=any(op.flops for op, *_ in todo), identity=identity,
                               before_rounds=between_phases, energy_scope=job.energy_scope, out=out)
        result.environment["worker"] = {"position": slot.position, "visible": slot.visible,
                                        "machine": machine}
        conn.send(("done", result))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as one line
        conn.send(("error", first_line(exc)))
    finally:
        conn.close()


@dataclass
class _State:
    """What the parent knows of one worker."""

    slot: Slot
    process: object
    conn: object
    machine: str | None = None
    gpu_name: str | None = None
    taken: list[int] = field(default_factory=list)
    built: bool = False
    result: Sweep | None = None
    error: str | None = None
    dealt: list[int] = field(default_factory=list)

    @property
    def over(self) -> bool:
        return self.result is not None or self.error is not None


@dataclass
class Outcome:
    """A multi-GPU run: ``machines``: one merged sweep per asv machine (GPU model); ``failures``:
    one line per worker that failed; ``unstored``: lines for lost cases of a model no GPU
    measured (nothing of it can be stored)."""

    machines: dict[str, Sweep]
    failures: list[str]
    unstored: list[str] = field(default_factory=list)


def _receive(state: _State) -> None:
    """Read every message waiting on one worker's pipe."""
    try:
        while state.conn.poll():
            kind, payload = state.conn.recv()
            if kind == "ready":
                state.machine, state.gpu_name = payload
            elif kind == "took":
                state.taken.append(payload)
            elif kind == "built":
                state.built = True
            elif kind == "done":
                state.result = payload
            elif kind == "error":
                state.error = payload
    except (EOFError, OSError):  # the worker's end closed: what it sent has been read
        if not state.over and not state.process.is_alive():
            state.error = f"died (exit code {state.process.exitcode})"


def start(job: Job, slots: list[Slot], ctx=None) -> tuple[list[_State], list, object]:
    """Spawn one worker per slot, each with its own ``CUDA_VISIBLE_DEVICES``. Returns the
    workers' states (each with the grid positions dealt to it, :func:`deal` of ``job.costs``),
    their case queues (each filled: its positions, then a stop) and the barrier between the
    phases."""
    ctx = ctx or mp.get_context("spawn")
    cases = job.cases()
    costs = job.costs or tuple(estimated_cost(case, job.rounds) for case in cases)
    if len(costs) != len(cases):
        raise ValueError(f"{len(costs)} costs for {len(cases)} cases")
    shares = deal(costs, len(slots))
    barrier = ctx.Barrier(len(slots))
    queues, states = [], []
    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        for slot, share in zip(slots, shares):
            todo_q = ctx.Queue()
            for i in share:
                todo_q.put(i)
            todo_q.put(None)
            queues.append(todo_q)
            receive, send = ctx.Pipe(duplex=False)
            # Inherited by the child when it starts, so set before its CUDA could read it (a CPU
            # emulation gets it too: its workers know their fake GPU from it).
            os.environ["CUDA_VISIBLE_DEVICES"] = slot.visible
            proc = ctx.Process(target=work, args=(job, slot, todo_q, send, barrier),
                               name=f"fusebench-gpu{slot.visible}", daemon=True)
            proc.start()
            send.close()
            states.append(_State(slot, proc, receive, dealt=share))
    finally:
        if saved is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved
    return states, queues, barrier


def run(job: Job, slots: list[Slot], *, prebuild: Callable[[], None] | None = None,
        out=sys.stderr) -> Outcome:
    """Measure ``job`` on the GPUs ``slots``, one worker each (module doc); print phase times.

    ``prebuild``: run in this process before the workers start (the CUDA extension's build).

    Returns the merged sweeps per machine and the failures; a worker's failure never raises.
    Raises:
        UsageError: ``FUSEBENCH_MACHINE`` names one machine for GPUs of several models.
    """
    phases: dict[str, float] = {}
    t0 = time.perf_counter()
    if prebuild is not None:
        prebuild()
        phases["prebuild"] = time.perf_counter() - t0
    t = time.perf_counter()
    states, queues, barrier = start(job, slots)
    print(f"workers: {len(states)} worker(s) started, one per GPU, cases dealt by cost: "
          + ", ".join(f"{s.slot.visible} ({len(s.dealt)})" for s in states), file=out, flush=True)
    built_at = None
    try:
        while not all(s.over for s in states):
            live = [s for s in states if not s.over]
            wait([s.conn for s in live] + [s.process.sentinel for s in live], timeout=5.0)
            for s in live:
                _receive(s)
                if not s.over and not s.process.is_alive():
                    _receive(s)  # a last message written just before it exited
                    if not s.over:
                        s.error = f"died (exit code {s.process.exitcode})"
                if s.error:
                    # The others must not wait for it between the phases. Always: whether they
                    # already wait there or not (a worker done building before this one died
                    # waited forever when the barrier was aborted only while some had not
                    # built); a barrier already passed is not waited on again.
                    barrier.abort()
            if built_at is None and all(x.built or x.over for x in states):
                built_at = time.perf_counter()
                phases["build, gate, profile (all GPUs)"] = built_at - t
    finally:
        for s in states:
            s.process.join(timeout=10)
            if s.process.is_alive():
                s.process.terminate()
        for todo_q in queues:
            todo_q.cancel_join_thread()  # cases and stops left by failed workers need not be read
            todo_q.close()
    phases["rounds (all GPUs)"] = time.perf_counter() - (built_at or t)
    outcome = merge(job, states, phases)
    for line in outcome.failures + outcome.unstored:
        print(f"workers: {line}", file=out, flush=True)
    return outcome


def _lost_record(case, reason: str) -> Record:
    rec = sweep.new_record(*case)
    rec.status, rec.reason = "failed", reason
    return rec


def merge(job: Job, states: list[_State], phases: dict[str, float]) -> Outcome:
    """The workers' sweeps merged per machine (module doc), with the cases of failed workers as
    failed records naming the GPU and the reason.

    Raises:
        UsageError: ``FUSEBENCH_MACHINE`` puts GPUs of several models into one machine.
    """
    todo = job.cases()
    measured = {pos for s in states if s.result for pos in _positions(s.result, todo)}
    failures, lost_by_machine, unstored = [], {}, []
    for s in states:
        if s.error is None:
            continue
        lost = [i for i in (s.dealt or s.taken) if i not in measured]
        failures.append(f"the worker of GPU {s.slot.visible} failed: {s.error}; "
                        f"{len(lost)} case(s) dealt to it were not measured")
        reason = f"its worker on GPU {s.slot.visible} failed: {s.error}"
        lost_by_machine.setdefault(s.machine, []).extend(_lost_record(todo[i], reason) for i in lost)
    held = {i for s in states for i in (s.dealt or s.taken)}
    if never := [i for i in range(len(todo)) if i not in held and i not in measured]:
        unstored.append(f"{len(never)} case(s) were dealt to no worker")
    parts: dict[str, list[Sweep]] = {}
    names: dict[str, set] = {}
    for s in states:
        if s.result is not None:
            parts.setdefault(s.machine, []).append(s.result)
            names.setdefault(s.machine, set()).add(s.gpu_name)
    for machine, models in names.items():
        if len(models) > 1:
            raise UsageError(f"machine {machine} would hold GPUs of {len(models)} models "
                             f"({', '.join(sorted(map(str, models)))}): unset FUSEBENCH_MACHINE")
    for machine, lost in lost_by_machine.items():
        if machine not in parts and lost:
            unstored.append(f"{len(lost)} case(s) of machine {machine or '(unknown GPU)'} not stored: "
                            "no GPU of that model measured anything")
    order = {sweep.new_record(*c).key: i for i, c in enumerate(todo)}
    machines = {m: merged(job, sws, lost_by_machine.get(m, []), order, phases) for m, sws in parts.items()}
    return Outcome(machines, failures, unstored)


def _positions(result: Sweep, todo) -> set[int]:
    keys = {r.key for r in result.records}
    return {i for i, c in enumerate(todo) if sweep.new_record(*c).key in keys}


def merged(job: Job, parts: list[Sweep], lost: list[Record], order: dict,
           phases: dict[str, float]) -> Sweep:
    """One machine's sweep from its GPUs' sweeps ``parts``: records of every GPU (and ``lost``) in
    grid order; the shared environment with ``gpus``, one entry per GPU (its keys of
    :data:`PER_GPU_KEYS`, copy ceilings, matrix peak, phases, case count); the median copy ceiling
    and peak over GPUs; every GPU's ceilings; ``phases`` the run's wall times per phase."""
    env = {k: v for k, v in parts[0].environment.items() if k not in PER_GPU_KEYS}
    env["gpus"] = [dict({k: p.environment.get(k) for k in PER_GPU_KEYS}, cases=len(p.records),
                        ceilings_gbps=p.ceilings_gbps, peak_tflops=p.peak_tflops, phases=p.phases)
                   for p in parts]
    env["sweep_seconds"] = round(sum(phases.values()), 1)
    records = sorted([r for p in parts for r in p.records] + lost, key=lambda r: order[r.key])
    ceilings = [c for p in parts for c in p.ceilings_gbps]
    peaks = [p.peak_tflops for p in parts if p.peak_tflops]
    warnings = [f"GPU {(p.environment.get('worker') or {}).get('visible')}: {w}"
                for p in parts for w in p.warnings]
    return Sweep(env, statistics.median(ceilings) if ceilings else 0.0, job.grid, records,
                 peak_tflops=statistics.median(peaks) if peaks else None, rounds=job.rounds,
                 ceilings_gbps=ceilings, phases={k: round(v, 1) for k, v in phases.items()},
                 warnings=warnings, timing=job.rule.as_dict(), energy_scope=job.energy_scope)


def gpu_lines(result: Sweep) -> list[str]:
    """One line per GPU of a merged sweep: index, serial, cases, copy ceiling, its phase times."""
    lines = []
    for g in result.environment.get("gpus", ()):
        worker = g.get("worker") or {}
        ceil = f"{statistics.median(g['ceilings_gbps']):.0f} GB/s" if g.get("ceilings_gbps") else "n/a"
        lines.append(f"GPU {worker.get('visible')} (index {g.get('gpu_index')}, "
                     f"serial {g.get('gpu_serial')}): "
                     f"{g.get('cases')} cases, copy ceiling {ceil}; "
                     + ", ".join(f"{k} {v:.0f} s" for k, v in (g.get("phases") or {}).items()))
    return lines
