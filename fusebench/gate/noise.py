"""Each case's between-run noise, learned from the committed run records of one machine.

The gate needs, per case and metric, how far two runs of unchanged code drift apart: the spread
between one run's rounds misses what moves a whole run (the machine it landed on, clocks,
the driver's state). That drift is read off the history:

* **A/A pair** of a case: two records of the machine whose commits differ in no file the case's
  backend is measured from (:func:`measured_paths`; a change of comments only is none:
  :func:`code`), measured in the same environment
  (:data:`ENVIRONMENT_KEYS`) with the same reference libraries loaded (:func:`loaded`), with the
  same method version of the metric
  (``metrictable.Metric.method``), neither from a dirty tree nor stored before records named
  their method versions (their rounds were timed another way: no graph mode in the round), the
  figure timed in the batch its method asks for (``Record.short_batch``), and, for a backend
  that picks its kernel by timing (Inductor), with the same kernel on both sides.
* **sample**: ``d = ln(median_a / median_b)`` of the clean rounds' figures of that pair.
* **class sigma**: of the samples of every case of the same metric and time band of its figure
  per launch (:data:`BANDS_MS`), the robust one, ``1.4826 × median |d|``: a few cases that drift
  a lot keep their own wide limits (below) without widening every quiet neighbour's.
* **case sigma**: the root mean square of the case's samples, shrunk toward its class sigma
  with the weight of :data:`PRIOR_PAIRS` pairs:
  ``sigma² = (Σ d² + PRIOR_PAIRS · sigma_class²) / (n + PRIOR_PAIRS)``.
* **limit** = ``exp(K · sigma)``: the slowdown beyond which a move is K sigmas of between-run
  drift. With no sample of its own and a class of fewer than :data:`MIN_CLASS` samples, a case
  has no history: its limit is the stated :data:`FALLBACK` of its band (none above 20 us per
  launch: the gate's rounds rule and FACTOR decide), and the gate says ``no history``.

The pair being judged is never its own history (``exclude``). ``docs/gate.md`` gives the
calibration on the committed records (:func:`calibration`, ``scripts/calibration.py``).
"""

from __future__ import annotations

import ast
import locale
import math
import re
import statistics
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from fnmatch import fnmatch
from itertools import combinations
from pathlib import Path

from fusebench import git, metrictable
from fusebench.errors import UsageError
from fusebench.record import Record, Sweep, clean_rounds

#: Files every backend of an op is measured from, and each backend's own (``{op}`` is the op's
#: name; a path ending in ``/`` is a folder, ``*`` any characters). Each names the three layouts the
#: history holds: ``kernels/<op>.py`` modules, the op packages in ``fusebench/ops/``, and the op
#: packages in ``kernels/<op>/``. A commit's measured code is whichever of them exists there, so
#: pairs of runs on one side of a move keep counting and a pair across it does not (its code
#: changed). A backend not named here is measured from all of them.
OP_PATHS = ("kernels/{op}.py", "fusebench/ops/{op}/__init__.py", "kernels/{op}/__init__.py")
ANY_OP_PATHS = ("kernels/", "fusebench/ops/")
REFERENCE_PATHS = ("kernels/reference_libs.py", "fusebench/ops/reference_libs.py")
BACKEND_PATHS: dict[str, tuple[str, ...]] = {
    "eager": (),
    "torch": (),
    "compile": (),
    "triton": ("kernels/triton_{op}.py", "fusebench/ops/{op}/triton.py", "kernels/{op}/triton.py"),
    # one extension holds every op's CUDA code: a change to any op's .cu is new code for all
    "cuda": ("kernels/cuda/", "kernels/cuda_ext.py", "kernels/cuda_check.py", "fusebench/ops/cuda/",
             "fusebench/ops/*/*.cu*", "fusebench/ops/cuda_ext.py", "fusebench/ops/cuda_check.py",
             "kernels/*/*.cu*"),
    "liger": REFERENCE_PATHS,
    "quack": REFERENCE_PATHS,
    "flaggems": REFERENCE_PATHS,
}
#: The reference backends: their libraries, loaded in the run's process or not, change the figures
#: of other backends with the same kernels (docs/gate.md); two runs are a pair only with the same.
REFERENCE_BACKENDS = tuple(b for b, p in BACKEND_PATHS.items() if p == REFERENCE_PATHS)
#: The folders every measured path lies in, up to its first ``{op}`` or ``*`` (only their files are
#: read to tell code from comments).
_MEASURED_ROOTS = tuple({(fixed := re.split(r"[{*]", p)[0])[:fixed.rfind("/") + 1]
                         for p in OP_PATHS + ANY_OP_PATHS + sum(BACKEND_PATHS.values(), ())})
#: Environment fields two runs must share to be a pair.
ENVIRONMENT_KEYS = ("gpu", "driver", "cuda_runtime", "torch", "triton", "python")
#: Time bands of a class (upper bounds, ms, of the metric's own figure per launch).
BANDS_MS = (0.002, 0.005, 0.02, 0.1)
#: The limit is K sigmas of between-run drift.
K = 4.0
#: A normal distribution's sigma per median absolute value (1 / 0.6745).
ROBUST = 1.4826
#: Weight of the class sigma, in pairs, in a case's sigma.
PRIOR_PAIRS = 2.0
#: Fewest samples a class needs to stand in for a case with none of its own.
MIN_CLASS = 8
#: Without any history (a new metric or machine): the A/A allowance of the band, the largest
#: moves two fresh H200 machines showed per launch (docs/gate.md): under 2 us, under 5 us,
#: under 20 us; FACTOR above.
FALLBACK = ((0.002, 1.20), (0.005, 1.15), (0.020, 1.10))


def loaded(sweep: Sweep) -> frozenset[str]:
    """The reference backends that ran in ``sweep``'s process (their libraries were loaded)."""
    return frozenset(r.backend for r in sweep.records
                     if r.backend in REFERENCE_BACKENDS and r.status == "ok")


def measured_paths(op: str, backend: str) -> tuple[str, ...]:
    """The paths (files, or folders ending in ``/``) whose change makes ``op``/``backend`` new code."""
    own = BACKEND_PATHS.get(backend, ANY_OP_PATHS)
    return tuple(p.format(op=op) for p in OP_PATHS + own)


def touches(changed: set[str], paths: tuple[str, ...]) -> bool:
    """True when a changed file is one of ``paths`` or lies under one of its folders."""
    return any(f.startswith(p) if p.endswith("/") else fnmatch(f, p) for f in changed for p in paths)


def band(per_launch_ms: float | None) -> int:
    """The index of the time band of :data:`BANDS_MS` (``len(BANDS_MS)`` above the last)."""
    if per_launch_ms is None or not math.isfinite(per_launch_ms):
        return len(BANDS_MS)
    return next((i for i, hi in enumerate(BANDS_MS) if per_launch_ms < hi), len(BANDS_MS))


def case_median(rec: Record, field: str) -> float | None:
    """Median over the clean rounds of ``field`` (None when not measured or contaminated)."""
    if rec.status != "ok" or not rec.rounds:
        return None
    rounds, contamination = clean_rounds(rec.rounds)
    values = [r[field] for r in rounds if r.get(field) is not None]
    if contamination or not values:
        return None
    return statistics.median(values)


Key = tuple[str, str, str, str]  # op, backend, shape, dtype


@dataclass(frozen=True)
class Sample:
    """One A/A pair's log ratio of one case-metric."""

    pair: frozenset[str]
    d: float


@dataclass(frozen=True)
class Limit:
    """A case-metric's history limit: ``limit`` (exp(K·sigma), None without history), from ``n``
    samples of its own and its class's sigma; ``source`` says which in a few words."""

    limit: float | None
    sigma: float | None
    n: int
    source: str


def code(text: str, path: str) -> str:
    """``text`` without what cannot change what runs: comments and docstrings of Python (its AST),
    comments and blank space of C, C++ and CUDA sources. Other files are returned as they are."""
    if path.endswith(".py"):
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return text
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                    and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
        return ast.dump(tree)
    if path.endswith((".cu", ".cuh", ".cpp", ".h", ".c", ".cc", ".hpp")):
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        text = re.sub(r"//[^\n]*", " ", text)
        return " ".join(text.split())
    return text


def _git(root: Path, *args: str) -> subprocess.CompletedProcess | None:
    try:
        return git.run(root, *args, timeout=60)
    except UsageError:
        return None


def _texts(root: Path, specs: list[str]) -> dict[str, str | None] | None:
    """:func:`code` of each ``<commit>:<path>`` in ``specs``, read by one ``git cat-file --batch``
    and decoded as :func:`_git` decodes (the locale's encoding, universal newlines); None for a
    spec that names no file (or one that cannot be decoded). None when git cannot say."""
    try:
        out = git.run(root, "cat-file", "--batch", data=True, timeout=60,
                      input="".join(f"{s}\n" for s in specs).encode()).stdout
    except UsageError:
        return None
    texts: dict[str, str | None] = {}
    pos = 0
    for spec in specs:
        end = out.find(b"\n", pos)
        if end < 0:
            return None
        header = out[pos:end].split()
        pos = end + 1
        if len(header) != 3 or not header[2].isdigit():  # "<spec> missing" / "ambiguous"
            texts[spec] = None
            continue
        size = int(header[2])
        data, pos = out[pos:pos + size], pos + size + 1
        if len(data) != size:
            return None
        try:
            text = data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")
        except UnicodeDecodeError:
            text = None
        texts[spec] = code(text, spec.split(":", 1)[1]) if header[1] == b"blob" and text is not None else None
    return texts


def _git_changed(root: Path, a: str, b: str, texts: dict[str, str | None] | None = None) -> set[str] | None:
    """Files that differ between commits ``a`` and ``b`` in what runs (:func:`code`: a change of
    comments only is no change); None when git cannot say. ``texts``: the code of each
    ``<commit>:<path>`` read so far (:func:`_texts`), shared by the calls of one history."""
    out = _git(root, "diff", "--name-only", a, b)
    if out is None or out.returncode != 0:
        return None
    texts = {} if texts is None else texts
    paths = out.stdout.split()
    # no measured path outside the measured roots: no need to look
    changed = {p for p in paths if not p.startswith(_MEASURED_ROOTS)}
    looked = [p for p in paths if p not in changed]
    wanted = [s for s in dict.fromkeys(f"{c}:{p}" for p in looked for c in (a, b)) if s not in texts]
    if wanted:
        texts.update(_texts(root, wanted) or {})
    for path in looked:
        old, new = texts.get(f"{a}:{path}"), texts.get(f"{b}:{path}")
        if old is None or new is None or old != new:
            changed.add(path)
    return changed


@dataclass(frozen=True)
class _Case:
    """What a pair compares of one case of a record: each gated metric's median over the clean
    rounds (None: not measured, contaminated or timed in a short batch) and the kernel it ran."""

    medians: dict[str, float | None]
    launches: int | None
    kernel_by_timing: bool
    kernel_id: object


@dataclass(frozen=True)
class _Run:
    """A record as the history reads it (:func:`_summary`): a few hundred bytes a case instead of
    every round's figures and readings."""

    commit: str
    environment: tuple
    loaded: frozenset[str]
    methods: dict
    cases: dict[Key, _Case]


def _summary(sweep: Sweep) -> _Run:
    """The :class:`_Run` of ``sweep``."""
    gated = [m.field for m in metrictable.GATED]
    cases = {}
    for r in sweep.records:  # a key twice (refused where records are read): the last, as Sweep.by_key
        cases[r.key] = _Case({f: None if r.short_batch(f) else case_median(r, f) for f in gated},
                             r.launches, bool(r.kernel_by_timing), r.kernel_id)
    return _Run(sweep.environment["git_commit"], tuple(sweep.environment.get(k) for k in ENVIRONMENT_KEYS),
                loaded(sweep), dict(sweep.methods), cases)


class History:
    """The A/A samples of every case-metric in a set of run records.

    Args:
        sweeps: the records (``Sweep``), each of one commit (``environment.git_commit``).
        changed: ``changed(commit_a, commit_b)`` -> the files that differ, or None when unknown
            (the pair is then not used).
    """

    def __init__(self, sweeps, changed):
        self.samples: dict[tuple[str, Key], list[Sample]] = defaultdict(list)
        self.bands: dict[tuple[str, Key], int] = {}
        self.pairs = 0
        self._classes: dict | None = None
        self._sigmas: dict[tuple[str, int, frozenset[str]], tuple[float, int]] = {}
        # each record summarised as it comes (an iterator is read one record at a time): only
        # what a pair compares is kept, never the records themselves
        runs = [_summary(s) for s in sweeps if s.methods
                and s.environment.get("git_commit") and not s.environment.get("git_dirty")]
        for a, b in combinations(runs, 2):
            if a.commit == b.commit or a.environment != b.environment or a.loaded != b.loaded:
                continue
            files = changed(a.commit, b.commit)
            if files is None:
                continue
            self.pairs += 1
            pair = frozenset((a.commit, b.commit))
            fresh: dict[tuple[str, str], bool] = {}
            for key, ca in a.cases.items():
                cb = b.cases.get(key)
                if cb is None:
                    continue
                group = (key[0], key[1])
                if group not in fresh:
                    fresh[group] = not touches(files, measured_paths(*group))
                if not fresh[group]:
                    continue
                if (ca.kernel_by_timing or cb.kernel_by_timing) and ca.kernel_id != cb.kernel_id:
                    continue
                for field, x in ca.medians.items():
                    y = cb.medians.get(field)
                    if a.methods.get(field, 1) != b.methods.get(field, 1) or x is None or y is None:
                        continue
                    if x and y and x > 0 and y > 0:
                        self.samples[(field, key)].append(Sample(pair, math.log(x / y)))
                        self.bands.setdefault((field, key), band(x / (ca.launches or 1)))

    def _class_samples(self) -> dict:
        """Per (field, band): every sample's (pair, |d|) (built once)."""
        if self._classes is None:
            classes: dict = defaultdict(list)
            for (f, key), ss in self.samples.items():
                classes[(f, self.bands[(f, key)])].extend((s.pair, abs(s.d)) for s in ss)
            self._classes = classes
        return self._classes

    def _class_sigma(self, field: str, band_index: int, exclude: frozenset[str]) -> tuple[float, int]:
        """The class's robust sigma (1.4826 × median |d|) without the pair ``exclude``, and its
        number of samples (each once per history: every case of the class asks the same)."""
        k = (field, band_index, exclude)
        if k not in self._sigmas:
            sizes = [a for p, a in self._class_samples().get((field, band_index), ()) if p != exclude]
            self._sigmas[k] = (ROBUST * statistics.median(sizes) if sizes else math.nan), len(sizes)
        return self._sigmas[k]

    def limit(self, field: str, key: Key, per_launch_ms: float | None = None,
              exclude: tuple[str, str] | None = None) -> Limit:
        """The history limit of ``key``'s metric ``field`` (see the module doc), leaving out the
        pair ``exclude`` (the two commits being judged)."""
        ex = frozenset(exclude or ())
        own = [s.d for s in self.samples.get((field, key), ()) if s.pair != ex]
        b = self.bands.get((field, key), band(per_launch_ms))
        cls, n_cls = self._class_sigma(field, b, ex)
        if own and n_cls >= MIN_CLASS:
            sigma = math.sqrt((sum(d * d for d in own) + PRIOR_PAIRS * cls * cls) / (len(own) + PRIOR_PAIRS))
            source = f"{len(own)} A/A pair{'s' if len(own) != 1 else ''} and its class"
        elif own:
            sigma = math.sqrt(sum(d * d for d in own) / len(own))
            source = f"{len(own)} A/A pair{'s' if len(own) != 1 else ''}"
        elif n_cls >= MIN_CLASS:
            sigma, source = cls, f"its class ({n_cls} samples)"
        else:
            return Limit(fallback(per_launch_ms), None, 0, "no history")
        return Limit(math.exp(K * sigma), sigma, len(own), source)


def fallback(per_launch_ms: float | None) -> float | None:
    """The limit of a case-metric with no history (:data:`FALLBACK`; None above its bands)."""
    if per_launch_ms is None or not math.isfinite(per_launch_ms):
        return None
    return next((allowed for below, allowed in FALLBACK if per_launch_ms < below), None)


#: The A/A history of a machine is learned from its newest records only (by commit time): the
#: pairs grow as the square of the records (3,000 stored records are 4.5 million pairs), and the
#: drift of runs long past (other drivers, other code around the kernels) says less of today's.
HISTORY_RUNS = 40


def newest(paths: list[Path], repo: Path, count: int | None = None) -> list[Path]:
    """The ``count`` (:data:`HISTORY_RUNS`) newest of ``paths`` (records, ``<sha8>.json.xz``) by the
    committer time of their commit in ``repo`` (records of commits git does not know after those,
    newest file first), returned sorted by name (the order :class:`History` pairs them in)."""
    from fusebench.storage.runrecord import sha8

    count = HISTORY_RUNS if count is None else count
    if len(paths) <= count:
        return sorted(paths)
    when = git.commit_times(repo, prefix=8)

    def key(path: Path):
        t = when.get(sha8(path))
        return (t is None, -(t or 0), -path.stat().st_mtime, path.name)

    return sorted(sorted(paths, key=key)[:count])


def read_records(paths, unreadable: list[str] | None = None):
    """Each readable run record of ``paths``, checked (``runrecord.read``), read one at a time as
    the caller goes on. A file that cannot be read or is refused (truncated, a symlink) is left out
    of the history and, one line each, appended to ``unreadable``: a pair dropped moves the limits,
    so its caller must say so (issue 42)."""
    from fusebench.errors import UsageError
    from fusebench.storage import runrecord

    for path in paths:
        try:
            yield runrecord.read(path)
        except UsageError as exc:
            if unreadable is not None:
                unreadable.append(str(exc))


def load_records(folder: Path, unreadable: list[str] | None = None) -> list[Sweep]:
    """Every readable run record in ``folder`` (one machine's), by name (:func:`read_records`)."""
    from fusebench.storage import runrecord

    return list(read_records(runrecord.record_files(Path(folder)), unreadable))


def _measured_trees(repo: Path, commit: str) -> tuple | None:
    """The git objects of the measured roots (:data:`_MEASURED_ROOTS`) at ``commit`` (a root it
    lacks: None in its place); None when git does not know the commit."""
    specs = [f"{commit}^{{commit}}"] + [f"{commit}:{r.rstrip('/')}" for r in sorted(_MEASURED_ROOTS)]
    try:
        out = git.run(repo, "cat-file", "--batch-check", timeout=60, input="".join(f"{s}\n" for s in specs))
    except UsageError:
        return None
    lines = out.stdout.splitlines()
    if out.returncode != 0 or len(lines) != len(specs) or lines[0].endswith("missing"):
        return None
    return tuple(None if ln.endswith("missing") else ln.split()[0] for ln in lines[1:])


def from_records(folder: Path, repo: Path, unreadable: list[str] | None = None) -> History:
    """The history of the :data:`HISTORY_RUNS` newest records in ``folder`` (:func:`newest`), read
    one at a time, with the changed files from git in ``repo``; the records that could not be read
    are appended to ``unreadable`` (:func:`read_records`). Two commits whose measured roots are the
    same git trees differ in no measured file (no diff is run for them)."""
    cache: dict[frozenset[str], set[str] | None] = {}
    texts: dict[str, str | None] = {}
    trees: dict[str, tuple | None] = {}

    def tree(commit: str) -> tuple | None:
        if commit not in trees:
            trees[commit] = _measured_trees(repo, commit)
        return trees[commit]

    def changed(a: str, b: str) -> set[str] | None:
        k = frozenset((a, b))
        if k not in cache:
            same = tree(a) is not None and tree(a) == tree(b)
            cache[k] = set() if same else _git_changed(repo, a, b, texts)
        return cache[k]

    from fusebench.storage import runrecord

    paths = newest(runrecord.record_files(Path(folder)), repo)
    return History(read_records(paths, unreadable), changed)


def calibration(history: History) -> dict[str, dict[str, float]]:
    """Leave-one-pair-out check of the rule on the history itself: for every sample, the limit
    from the other pairs, and whether the sample's move ``exp(|d|)`` exceeds it.

    Returns, per metric field: ``samples``, ``beyond`` (moves beyond their limit), ``at_5``
    (share of samples held to a limit <= 1.05), ``median_limit``.
    """
    out = {}
    for m in metrictable.GATED:
        limits, beyond, n = [], 0, 0
        for (field, key), ss in history.samples.items():
            if field != m.field:
                continue
            for s in ss:
                lim = history.limit(field, key, exclude=tuple(s.pair)).limit
                if lim is None:
                    continue
                n += 1
                limits.append(lim)
                beyond += math.exp(abs(s.d)) > lim
        if n:
            out[m.field] = {"samples": n, "beyond": beyond,
                            "at_5": sum(x <= 1.05 for x in limits) / n,
                            "median_limit": statistics.median(limits)}
    return out
