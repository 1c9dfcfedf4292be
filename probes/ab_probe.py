"""How much slower a throwaway A/B patch makes one backend, case by case, before a full A/B run
(docs/ab/README.md).

The patch as it is, and one variant per ``old=new`` argument (the patch's text with that one
substitution), each applied to a fresh worktree of HEAD and timed there in its own process: the
op's default grid of that one backend, built, gated and timed in three rounds
(``sweep.time_round``: hot, cold and graph device time), the median per case. HEAD itself is
timed first and last, so that the variants' ratios stand beside HEAD against itself. Run on a
GPU host from the project root:

    PYTHONPATH=. python probes/ab_probe.py docs/ab/<name>.patch gelu triton ['old=new' ...]
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

LABELS = {"device_time_ms": "hot", "device_time_cold_ms": "cold", "device_time_graph_ms": "graph"}
FIELDS = tuple(LABELS)


def time_here(op_name: str, backend: str, rounds: int = 3) -> dict:
    """``{case: {field: median of rounds}}`` of ``op_name``'s default grid of ``backend``."""
    from fusebench import ops as registry
    from fusebench.measure import environment, metrics, sweep, timing

    dev = environment.device()
    todo = sweep.cases([registry.get_op(op_name)], "default", backend_names=[backend])
    built = list(sweep.ready(todo, dev))
    flush = timing.l2_flush_buffer(dev)
    metrics.measure_copy_ceiling(dev)
    for r in range(rounds):
        for i in sweep.round_order(len(built), r):
            sweep.time_round(*built[i], dev, flush)
    return {f"{rec.shape} {rec.dtype}": {f: statistics.median(x[f] for x in rec.rounds)
                                         for f in FIELDS if all(x.get(f) for x in rec.rounds)}
            for rec, _ in built}


def timed_variant(patch: str | None, op_name: str, backend: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tree = os.path.join(tmp, "tree")
        subprocess.run(["git", "worktree", "add", "-q", "--detach", tree, "HEAD"], check=True)
        try:
            if patch is not None:
                subprocess.run(["git", "-C", tree, "apply", "-"], input=patch.encode(), check=True)
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--time", op_name, backend],
                                 cwd=tree, env=dict(os.environ, PYTHONPATH=tree), check=True,
                                 stdout=subprocess.PIPE, text=True).stdout
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", tree], check=True)
    return json.loads(out.strip().splitlines()[-1])


def ratios(after: dict, before: dict) -> dict[str, list[tuple[float, str]]]:
    out: dict[str, list[tuple[float, str]]] = {f: [] for f in FIELDS}
    for case, figs in after.items():
        for f, v in figs.items():
            if (b := before.get(case, {}).get(f)):
                out[f].append((v / b, case))
    return out


def report(label: str, rs: dict) -> None:
    for f, v in rs.items():
        if not v:
            continue
        xs = sorted(x for x, _ in v)
        print(f"{label} {f}: min {xs[0]:.3f} median {statistics.median(xs):.3f} max {xs[-1]:.3f}; "
              f"under 1.06: {sum(x < 1.06 for x in xs)} of {len(xs)} "
              + " ".join(f"[{c} {x:.3f}]" for x, c in sorted(v)[:4]), flush=True)


USAGE = "usage: PYTHONPATH=. python probes/ab_probe.py PATCH OP BACKEND ['old=new' ...]"


def main() -> None:
    if sys.argv[1:2] == ["--time"] and len(sys.argv) == 4:
        print(json.dumps(time_here(sys.argv[2], sys.argv[3])))
        return
    if len(sys.argv) < 4 or any("=" not in s for s in sys.argv[4:]):
        sys.exit(USAGE)
    patch_path, op_name, backend, *subs = sys.argv[1:]
    from fusebench import ops as registry
    from fusebench.errors import UsageError

    try:
        op = registry.get_op(op_name)
    except UsageError as exc:
        sys.exit(f"ab_probe: {exc}")
    if backend not in op.backends:
        sys.exit(f"ab_probe: {op_name} has no backend {backend!r}; it has {', '.join(op.backends)}")
    import torch

    if not torch.cuda.is_available():
        sys.exit("ab_probe: needs a CUDA GPU; this host has none")
    try:
        text = open(patch_path).read()
    except OSError as exc:
        sys.exit(f"ab_probe: cannot read {patch_path}: {exc.strerror}")
    variants = [("as committed", text)]
    for s in subs:
        old, new = s.split("=", 1)
        if old not in text:
            sys.exit(f"ab_probe: {old!r} is not in {patch_path}")
        variants.append((s, text.replace(old, new)))
    runs = [("HEAD", None), *variants, ("HEAD again", None)]
    timed = []
    for label, patch in runs:
        try:
            timed.append(timed_variant(patch, op_name, backend))
        except subprocess.CalledProcessError as exc:  # the patch does not apply, the timing failed
            step = " ".join(map(str, exc.cmd[:3]))
            sys.exit(f"ab_probe: {label}: {step} ... failed (exit {exc.returncode})")
    base, *figs_only, again = timed
    figs = list(zip((label for label, _ in variants), figs_only))
    report("HEAD again / HEAD", ratios(again, base))
    for label, f in figs:
        report(f"{label} / HEAD", ratios(f, base))
        for case in sorted(f):
            moved = [f"{LABELS[k]} {v / base[case][k]:.3f}" for k, v in f[case].items()
                     if base.get(case, {}).get(k)]
            print(f"   {case}: " + ", ".join(moved), flush=True)


if __name__ == "__main__":
    main()
