"""Does one side of an A/B read faster in every round for a reason that is not its code? (issue 43:
docs/ab/README.md, "The move, before against after")

Runs ``python -m fusebench ab`` with the arguments given after ``--``, and meanwhile, every
``--every`` seconds, which CPU (and NUMA node) each side's child process last ran on
(``/proc/<pid>/stat``, field 39; the side from the worktree in the child's request). Before the
run it keeps the host's topology (``lscpu``, ``numactl -H``, ``nvidia-smi topo -m``, the GPU's
NUMA node). After it, from the session's ``ab.json``, per round and per gated time (hot, cold,
graph): the median over the clean cases of head / base, all rounds and by the side timed first.
A shift of the stream figures (hot, cold) that the graph figures (no host work in them) do not
share, in every round, is a difference of the two processes' launch path, not of the kernels.

``--pin node`` runs the A/B (and so both children) on the CPUs of the GPU's NUMA node only,
``--pin 2-5,8`` on those CPUs (``os.sched_setaffinity``, inherited by the children and their
compilers; memory follows by first touch).

Run on a GPU host from the project root, e.g. the cases of issue 43's six improvements:

    PYTHONPATH=. python probes/ab_sides_probe.py --out /tmp/sides [--pin node] -- \\
        --base bb521f2 --head e193586 --all --ops matmul,rmsnorm,softmax \\
        --backends torch,compile,cuda --shapes 64x64,128x128,1024x1024,4096x1024,4096x4096,65536x128 \\
        --min-pairs 6 --max-pairs 6 --time-cap 200

On a host without a GPU it runs too (wall time is then the only figure). The ratios of a stored
session alone: ``python probes/ab_sides_probe.py --session <session>/ab.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TIMES = ("device_time_ms", "device_time_cold_ms", "device_time_graph_ms", "wall_time_ms")


def node_of_cpu(cpu: int) -> int | None:
    """The NUMA node of logical CPU ``cpu`` (sysfs), None when the host does not say."""
    for entry in Path(f"/sys/devices/system/cpu/cpu{cpu}").glob("node*"):
        if entry.name[4:].isdigit():
            return int(entry.name[4:])
    return None


def node_cpus(node: int) -> set[int]:
    """The logical CPUs of NUMA node ``node``."""
    return cpu_list(Path(f"/sys/devices/system/node/node{node}/cpulist").read_text())


def cpu_list(text: str) -> set[int]:
    """``"0-3,8"`` -> ``{0, 1, 2, 3, 8}`` (the kernel's list format).

    Raises:
        ValueError: not such a list.
    """
    text = text.strip()
    cpus: set[int] = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    if not cpus:
        raise ValueError(text)
    return cpus


def gpu_node() -> int | None:
    """The NUMA node of GPU 0's PCI device, None without a GPU or where the host does not say
    (sysfs reads -1 on a single-node host)."""
    try:
        bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if not bus:
        return None
    domain, _, rest = bus.lower().partition(":")
    path = Path(f"/sys/bus/pci/devices/{domain[-4:]}:{rest}/numa_node")
    try:
        node = int(path.read_text())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def topology(out: Path) -> None:
    """The host's CPUs, NUMA nodes and GPU affinity, as the tools print them."""
    parts = []
    for cmd in (["lscpu"], ["numactl", "-H"], ["nvidia-smi", "topo", "-m"]):
        if shutil.which(cmd[0]) is None:
            parts.append(f"$ {' '.join(cmd)}\n(not installed)\n")
            continue
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        parts.append(f"$ {' '.join(cmd)}\n{done.stdout}{done.stderr}")
    parts.append(f"GPU 0's NUMA node (sysfs): {gpu_node()}\n")
    (out / "topology.txt").write_text("\n".join(parts))


def children(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (the A/B's children are its own; their compiler
    workers, forked with the same command line, are not counted)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            rest = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(rest[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def side_of(pid: int, shas: dict[str, str]) -> str | None:
    """``base`` or ``head`` for an A/B child (its request names its tree; a tree without either
    commit's sha is the checkout, the head with changes; in an A/A of one commit, ``either``),
    None for any other process."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if len(argv) < 4 or argv[1] != b"-c":
        return None
    try:
        root = json.loads(argv[3])["root"]
    except (ValueError, KeyError, TypeError):
        return None
    if shas["base"] == shas["head"]:
        return "either"
    for side, sha in shas.items():
        if sha and sha in root:
            return side
    return "head"


def cpu_of(pid: int) -> int | None:
    """The CPU ``pid`` last ran on (``/proc/<pid>/stat`` field 39)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


def rev(ref: str) -> str:
    done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                          capture_output=True, text=True)
    return done.stdout.strip()


def round_ratios(session: dict) -> list[str]:
    """Per gated time: the median over clean cases of head / base in each round, and by the side
    timed first."""
    lines = []
    for field in TIMES:
        per_round: dict[int, list[float]] = {}
        by_first: dict[str, list[float]] = {}
        for case in session["cases"]:
            for i, (b, h) in enumerate(zip(case["base"], case["head"])):
                if not (b and h and b.get(field) and h.get(field)):
                    continue
                if b.get("contamination") or h.get("contamination"):
                    continue
                d = math.log(h[field] / b[field])
                per_round.setdefault(i, []).append(d)
                by_first.setdefault(case["first"][i], []).append(d)
        if not per_round:
            continue
        rounds = " ".join(f"r{i + 1} {math.exp(statistics.median(v)):.4f} (n {len(v)})"
                          for i, v in sorted(per_round.items()))
        firsts = " ".join(f"{side} first {math.exp(statistics.median(v)):.4f}"
                          for side, v in sorted(by_first.items()))
        lines.append(f"{field}: {rounds}; {firsts}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        usage="PYTHONPATH=. python probes/ab_sides_probe.py --out DIR [--pin node|CPUS] -- AB_ARGS")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--pin", help="node (the GPU's NUMA node) or a CPU list, e.g. 2-5,8")
    ap.add_argument("--every", type=float, default=1.0)
    ap.add_argument("--session", type=Path, help="only the per-round ratios of a stored session (ab.json)")
    args, ab_args = ap.parse_known_args()
    if args.session is not None:
        try:
            print("\n".join(round_ratios(json.loads(args.session.read_text()))))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            print(f"ab_sides_probe: {args.session}: not a readable session ({type(exc).__name__})",
                  file=sys.stderr)
            return 2
        return 0
    if args.out is None:
        ap.error("give --out DIR (or --session FILE)")
    if ab_args[:1] == ["--"]:
        ab_args = ab_args[1:]
    sides = argparse.ArgumentParser(add_help=False)
    sides.add_argument("--base")
    sides.add_argument("--head")
    revs, _ = sides.parse_known_args(ab_args)
    if not revs.base:
        print("ab_sides_probe: give the A/B's arguments after --, with --base", file=sys.stderr)
        return 2
    if args.pin == "node":
        node = gpu_node()
        if node is None:
            print("ab_sides_probe: the GPU's NUMA node is not known here: nothing to pin to", file=sys.stderr)
            return 2
        cpus = node_cpus(node)
    elif args.pin:
        try:
            cpus = cpu_list(args.pin)
        except ValueError:
            print(f"ab_sides_probe: --pin {args.pin}: give node or a CPU list such as 2-5,8", file=sys.stderr)
            return 2
    if args.pin:
        try:
            os.sched_setaffinity(0, cpus)
        except OSError as exc:
            print(f"ab_sides_probe: cannot pin to CPUs {sorted(cpus)}: {exc.strerror}", file=sys.stderr)
            return 2
        print(f"ab_sides_probe: pinned to CPUs {sorted(os.sched_getaffinity(0))}")
    args.out.mkdir(parents=True, exist_ok=True)
    topology(args.out)
    shas = {"base": rev(revs.base), "head": rev(revs.head) if revs.head else ""}
    scratch = args.out / "ab"
    with open(args.out / "ab.txt", "w") as text, open(args.out / "ab.log", "w") as log:
        ab = subprocess.Popen([sys.executable, "-m", "fusebench", "ab", *ab_args, "--scratch", str(scratch)],
                              stdout=text, stderr=log)
        seen: dict[int, dict] = {}
        with open(args.out / "placement.jsonl", "w") as samples:
            while ab.poll() is None:
                now = time.time()
                for pid in children(ab.pid):
                    side = seen[pid]["side"] if pid in seen else side_of(pid, shas)
                    cpu = cpu_of(pid)
                    if side is None or cpu is None:
                        continue
                    cpus = seen.setdefault(pid, {"side": side, "cpus": {}})["cpus"]
                    cpus[cpu] = cpus.get(cpu, 0) + 1
                    samples.write(json.dumps({"t": round(now, 2), "pid": pid, "side": side, "cpu": cpu,
                                              "node": node_of_cpu(cpu)}) + "\n")
                time.sleep(args.every)
    report = [f"ab exit status {ab.returncode}; GPU 0's NUMA node {gpu_node()}"]
    for pid, info in seen.items():
        nodes = sorted({node_of_cpu(c) for c in info["cpus"]}, key=str)
        cpus = dict(sorted(info["cpus"].items()))
        report.append(f"{info['side']} child {pid}: CPUs {cpus} (nodes {nodes})")
    sessions = sorted(scratch.glob("*/ab.json"))
    if sessions:
        report += round_ratios(json.loads(sessions[-1].read_text()))
    (args.out / "report.txt").write_text("\n".join(report) + "\n")
    print("\n".join(report))
    return ab.returncode


if __name__ == "__main__":
    sys.exit(main())
