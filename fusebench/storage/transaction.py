"""Storing files into a results folder and its records folder together or not at all, one
writer at a time (``make bench``, ``make collect``).

A :class:`Transaction` writes each new file beside its destination first, in a hidden staging
folder of the same folder tree (``results/.fusebench-staging/``, ``records/.fusebench-staging/``:
the same filesystem, so a rename moves it; asv reads only ``*.json`` and the staged files are
``*.part``), fsyncs them, and then writes its journal, the list of renames and deletions, as
:data:`JOURNAL` in the results folder's staging folder with one atomic rename: that is the commit point.
The renames follow; a process killed before the journal leaves the stored files as they were
(the staging folder is removed by the next writer), one killed after it leaves them as they will
be (the next writer finishes the renames, :func:`recover`). The journal names the staging folder
it was written in (its inode): a journal that ``git pull`` or a copy brought is refused, never
followed (issue 56), as is one git tracks.

Every folder a transaction writes into is a real folder (:func:`fusebench.paths.real_folder`): a
symlinked ``records/.fusebench-staging`` or ``results/<machine>`` is refused before anything is
written, not followed out of the checkout.

:func:`locked` takes an exclusive ``flock`` on the results folder itself (no lock file to leave
behind; released by the kernel when the process dies) and recovers first. A second writer is
refused at once with one line.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path

from fusebench.atomic import _mode, _umask, fsync_dir, write_atomic  # noqa: F401  (runrecord's writer)
from fusebench.errors import UsageError
from fusebench.paths import PROJECT_ROOT, link_above, real_folder

#: The hidden staging folder inside each folder tree a transaction writes into.
STAGING = ".fusebench-staging"
#: The journal, in the results folder's staging folder: written last, read by :func:`recover`.
JOURNAL = "journal.json"


class Transaction:
    """Files to store into ``results_dir`` (and files under ``roots`` beside it) all at once.

    Use inside :func:`locked`, as ``with Transaction(...) as txn:``; :meth:`commit` applies
    everything, leaving the block without it (an exception included) applies nothing (:meth:`abort`).
    """

    def __init__(self, results_dir: Path, roots: tuple[Path, ...] = ()):
        self.results_dir = results_dir
        self.roots = (results_dir, *roots)
        self.moves: list[tuple[str, str]] = []  # (staged file, destination), see _rel
        self.deletes: list[str] = []
        self._n = 0
        self._unsynced = False
        self.committed = False

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, *exc) -> None:
        self.abort()  # nothing once committed

    def _rel(self, path: Path) -> str:
        """``path`` relative to the results folder's parent: the journal stays valid when the
        checkout is mounted elsewhere (the image sees it as /workspace)."""
        return os.path.relpath(path, self.results_dir.parent)

    def _root(self, target: Path) -> Path:
        for root in self.roots:
            if target.is_relative_to(root):
                return root
        raise ValueError(f"{target} is outside {', '.join(map(str, self.roots))}")

    def _real(self, target: Path) -> Path:
        """The folder of ``target``'s root, after checking it and ``target``'s folders are real."""
        root = self._root(target)
        real_folder(target.parent, root)
        real_folder(root / STAGING, root)
        return root

    def _staged(self, target: Path) -> Path:
        folder = self._real(target) / STAGING
        folder.mkdir(parents=True, exist_ok=True)
        self._n += 1
        return folder / f"{os.getpid()}-{self._n}.part"

    def add_bytes(self, target: Path, data: bytes | str, times_ns: tuple[int, int] | None = None) -> None:
        """Store ``data`` as ``target`` (replacing it) at the commit; written to staging now, with
        ``times_ns`` (access, modification) as its file times when given."""
        if isinstance(data, str):
            data = data.encode()
        staged = self._staged(target)
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _mode())
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if times_ns is not None:
            os.utime(staged, ns=times_ns)
        self.moves.append((self._rel(staged), self._rel(target)))

    def add_copy(self, target: Path, source: Path, max_bytes: int | None = None,
                 digest: str | None = None) -> None:
        """Store a copy of ``source`` as ``target`` at the commit, streamed into staging now; the
        source is opened without following a symlink, and with ``digest`` (SHA-256 hex) must
        still have the bytes that were checked.

        Raises:
            UsageError: the source changed since it was checked, or cannot be read.
        """
        import hashlib

        staged = self._staged(target)
        h = hashlib.sha256()
        try:
            src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise UsageError(f"cannot read {source}: {exc.strerror}") from None
        try:
            st = os.fstat(src)
            fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _mode())
            with os.fdopen(fd, "wb") as out:
                total = 0
                while chunk := os.read(src, 1 << 20):
                    total += len(chunk)
                    if max_bytes is not None and total > max_bytes:
                        raise UsageError(f"{source}: grew past {max_bytes} bytes while copied")
                    h.update(chunk)
                    out.write(chunk)
        finally:
            os.close(src)
        if digest is not None and h.hexdigest() != digest:
            raise UsageError(f"{source}: changed while collecting (its bytes differ from those checked)")
        os.utime(staged, ns=(st.st_atime_ns, st.st_mtime_ns))  # the runs page orders records by it
        self._unsynced = True  # one sync at the commit, not one fsync per file
        self.moves.append((self._rel(staged), self._rel(target)))

    def delete(self, target: Path) -> None:
        """Remove ``target`` at the commit."""
        self._real(target)
        self.deletes.append(self._rel(target))

    def commit(self) -> None:
        """Apply every file at once: flush the staged files' folders, write the journal (the
        commit point), then rename and delete (:func:`roll_forward`)."""
        if self._unsynced:
            os.sync()
        for root in self.roots:
            if (root / STAGING).is_dir():
                fsync_dir(root / STAGING)
        journal = self.journal()
        write_atomic(self.results_dir / STAGING / JOURNAL, json.dumps(journal))
        self.committed = True
        roll_forward(self.results_dir, self.roots)

    def journal(self) -> dict:
        """The journal :meth:`commit` writes: the renames, the deletions, and the inode of the
        staging folder it is written in (made now if missing), which :func:`read_journal` wants
        to find again."""
        folder = self.results_dir / STAGING
        real_folder(folder, self.results_dir)
        folder.mkdir(parents=True, exist_ok=True)
        return {"moves": self.moves, "deletes": self.deletes, "folder": os.lstat(folder).st_ino}

    def abort(self) -> None:
        """Store nothing: remove the staging folders (once committed, nothing: the next writer
        finishes the journal)."""
        if self.committed:
            return
        for root in self.roots:
            shutil.rmtree(root / STAGING, ignore_errors=True)


#: The largest journal read back (a collect of 3,000 results and records lists about 6,000
#: moves of under 200 bytes each).
MAX_JOURNAL = 16 << 20
#: A stored file's name: what a journal may move onto or delete (``<sha8>-<env>.json``,
#: ``<sha8>.json.xz``, ``<sha8>.json``, ``machine.json``, ``benchmarks.json``).
_STORED_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,250}\.json(\.xz)?")
#: A staged file's name (:meth:`Transaction._staged`).
_STAGED_NAME = re.compile(r"[0-9]{1,10}-[0-9]{1,10}\.part")


def _inside(base: Path, rel: object, roots: tuple[Path, ...], journal: Path, staged: bool) -> Path:
    """``rel``, a path of the journal relative to ``base``, as a path that stays in one of
    ``roots``: a staged file (``<root>/.fusebench-staging/<pid>-<n>.part``) or a stored file
    (``<root>/[<machine>/]<name>.json``, or ``.json.xz``), with no symlink on the way (a committed
    or pulled journal must never reach another file: issue 42).

    Raises:
        UsageError: anything else (one line naming the journal and the path).
    """
    from fusebench.storage.untrusted import MACHINE, _cut

    def bad(why: str) -> UsageError:
        return UsageError(f"{journal}: refused, not followed: {_cut(rel, 80)} {why} (a journal is this "
                          f"host's own state, never committed: remove {journal.parent}/ and run again)")

    if not isinstance(rel, str) or "\0" in rel or rel.startswith("/"):
        raise bad("is not a relative path")
    parts = rel.split("/")
    names = {root.name: root for root in roots}
    if parts[0] not in names or names[parts[0]].parent != base:
        raise bad("is outside " + ", ".join(f"{r}/" for r in roots))
    inner = parts[1:]
    if staged:
        ok = len(inner) == 2 and inner[0] == STAGING and _STAGED_NAME.fullmatch(inner[1]) is not None
    else:
        ok = (1 <= len(inner) <= 2 and _STORED_NAME.fullmatch(inner[-1]) is not None
              and all(MACHINE.fullmatch(p) is not None for p in inner[:-1]))
    if not ok:
        raise bad("is not a " + ("staged file" if staged else "stored file") + " of its folder")
    path = base.joinpath(*parts)
    link = link_above(path.parent, names[parts[0]])  # no symlinked folder under the root
    if link is not None:
        raise bad(f"passes through the symlink {link}")
    if path.is_symlink():
        raise bad("is a symlink")
    return path


def read_journal(results_dir: Path, roots: tuple[Path, ...]) -> dict | None:
    """The journal of ``results_dir``, checked as untrusted input (``docs/untrusted-input.md``):
    a regular file under :data:`MAX_JOURNAL` in a real staging folder, not tracked by git,
    ``{"moves": [[staged, target], ...], "deletes": [target, ...], "folder": <inode>}`` and
    nothing else, whose inode is its staging folder's (a journal written by this host's own
    :meth:`Transaction.commit` into this folder: one that git, a copy or an archive brought sits
    in a folder made after it was written), every path inside one of ``roots``
    (:func:`_inside`). None when there is none.

    Raises:
        UsageError: the journal is refused (one line naming it and why); nothing was done.
    """
    from fusebench.storage import untrusted

    folder = results_dir / STAGING
    path = folder / JOURNAL
    if not os.path.lexists(path) and not folder.is_symlink():
        return None
    if folder.is_symlink():
        raise UsageError(f"{folder}: refused, not followed: a symlink (a staging folder is this host's "
                         f"own, never committed: remove it and run again)")
    try:
        data = untrusted.parse(path, untrusted.read_bytes(path, MAX_JOURNAL))
    except untrusted.Refused as exc:
        raise UsageError(f"{exc.path}: refused, not followed: {exc.why} (remove {folder}/ and run "
                         "again)") from None
    from fusebench import git

    def refuse(why: str) -> UsageError:
        return UsageError(f"{path}: refused, not followed: {why}; a journal is this host's own state: "
                          f"remove {folder}/ (git rm -r --cached it if tracked) and run again")

    tracked = git.answer(results_dir.parent, "ls-files", "--", os.path.relpath(path, results_dir.parent))
    if tracked and tracked.strip():
        raise refuse("tracked by git (a commit brought it)")
    roots = (results_dir, *roots)
    if not (isinstance(data, dict) and set(data) == {"moves", "deletes", "folder"}
            and isinstance(data["moves"], list) and isinstance(data["deletes"], list)
            and all(isinstance(m, list) and len(m) == 2 for m in data["moves"])):
        raise refuse("not a journal of moves and deletes")
    if data["folder"] != os.lstat(folder).st_ino:
        raise refuse("not written in this staging folder (a pull, a copy or an archive brought it)")
    for root in roots:
        real_folder(root)
    base = results_dir.parent
    moves = [(_inside(base, s, roots, path, True), _inside(base, t, roots, path, False))
             for s, t in data["moves"]]
    deletes = [_inside(base, t, roots, path, False) for t in data["deletes"]]
    return {"moves": moves, "deletes": deletes, "path": path}


def roll_forward(results_dir: Path, roots: tuple[Path, ...]) -> int:
    """Finish the journal of ``results_dir`` if there is one (each rename done once; a staged file
    already moved is skipped), then remove the staging folders of ``roots``. Returns the files
    moved now.

    Raises:
        UsageError: the journal is refused (:func:`read_journal`): nothing is moved or removed.
    """
    journal = read_journal(results_dir, roots)
    moved = 0
    if journal is not None:
        for staged, target in journal["moves"]:
            if os.path.lexists(staged):
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(staged, target)
                moved += 1
        for target in journal["deletes"]:
            target.unlink(missing_ok=True)
        for folder in {t.parent for _, t in journal["moves"]} | {t.parent for t in journal["deletes"]}:
            fsync_dir(folder)
        journal["path"].unlink()
    for root in (results_dir, *roots):
        shutil.rmtree(root / STAGING, ignore_errors=True)
    return moved


def recover(results_dir: Path, roots: tuple[Path, ...] = ()) -> int:
    """What a killed writer left: a committed transaction finished, an uncommitted one removed.
    Call with the lock held (:func:`locked` does). Returns the files moved now."""
    return roll_forward(results_dir, roots)


def _try_lock(folder: Path, verb: str) -> tuple[int, bool]:
    """An open descriptor of ``folder`` (the caller closes it) and whether this process now holds
    its exclusive lock (False: another process does; never waits).

    Raises:
        UsageError: the folder cannot be opened (``cannot <verb> <folder>/: ...``).
    """
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"cannot {verb} {folder}/: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return fd, False
        os.close(fd)
        raise
    return fd, True


def _say_finished(who: str, moved: int, results_dir: Path) -> None:
    if moved:
        import sys

        print(f"{who}: finished storing {moved} file(s) an interrupted run had committed in "
              f"{results_dir}/", file=sys.stderr)


@contextmanager
def locked(results_dir: Path, who: str, roots: tuple[Path, ...] = ()):
    """Hold the exclusive lock of ``results_dir`` (created if missing) for the ``with`` block,
    after finishing or removing what a killed writer left (:func:`recover`).

    Raises:
        UsageError: another process holds it (one line: who should wait).
    """
    for folder in (results_dir, *roots):
        real_folder(folder)
    created = not results_dir.exists()
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot use {results_dir}/: {exc.strerror}") from None
    fd, held = _try_lock(results_dir, "use")
    try:
        if not held:
            raise UsageError(f"{results_dir}/ is in use by another fusebench run (make bench or "
                             f"make collect into it); {who} refused: run it again once that one "
                             "has finished")
        _say_finished(who, recover(results_dir, roots), results_dir)
        yield
    finally:
        os.close(fd)
        if created:  # a refused or empty run leaves no folder behind
            try:
                results_dir.rmdir()
            except OSError:
                pass


#: How long a reader waits for a writer that holds the lock to finish its renames (milliseconds
#: of work once the journal is written) before it refuses.
SETTLE_WAIT_S = 10.0


def settle(results_dir: Path, roots: tuple[Path, ...], who: str) -> int:
    """Before reading ``results_dir`` (and ``roots``, its records folder): finish what an
    interrupted store committed, so a reader never sees the result of one run beside the record
    of another. No journal: nothing to do (a killed writer's uncommitted staging leaves the
    stored files as they were). A journal and a free lock: finished now under the lock, said in
    one line. A journal and a held lock: a writer is renaming; waited for, up to
    :data:`SETTLE_WAIT_S`. Returns the files moved now.

    Raises:
        UsageError: the journal is refused (:func:`read_journal`), cannot be finished here (a
            folder this user cannot write), or a writer is still renaming after the wait.
    """
    import time

    journal = results_dir / STAGING / JOURNAL
    deadline = time.monotonic() + SETTLE_WAIT_S
    while os.path.lexists(journal) or (results_dir / STAGING).is_symlink():
        fd, held = _try_lock(results_dir, "read")
        try:
            if not held:
                if time.monotonic() > deadline:
                    raise UsageError(f"{results_dir}/ is being stored into by another fusebench run; {who} "
                                     "refused: run it again once that one has finished")
                time.sleep(0.05)
                continue
            try:
                moved = roll_forward(results_dir, roots)
            except OSError as exc:
                raise UsageError(f"{journal}: an interrupted store of {results_dir}/ cannot be finished "
                                 f"here ({exc.strerror or exc}); {who} refused: run fusebench store or "
                                 "make collect where the folder is writable") from None
        finally:
            os.close(fd)
        _say_finished(who, moved, results_dir)
        return moved
    return 0


def _exchange(a: Path, b: Path) -> bool:
    """Swap the paths ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False
    where the system or filesystem cannot."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    ok = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0
    return ok


def staging_folder(target: Path) -> Path:
    """A new empty folder to build ``target`` in, on the same filesystem
    (``fusebench-staging-<pid>-*``): beside it, in the checkout's ``.asv/`` when ``target`` is a
    folder of the checkout's top (never a scratch folder in the checkout's root), or inside it
    when ``target`` is a mount point (the image mounts ``html/``). Stale ones of dead processes
    are removed first."""
    from fusebench import tmpdirs

    where = target if os.path.ismount(target) else target.parent
    if where == PROJECT_ROOT:
        where = real_folder(PROJECT_ROOT / ".asv")
    where.mkdir(parents=True, exist_ok=True)
    tmpdirs.remove_stale(where)
    import tempfile

    path = Path(tempfile.mkdtemp(prefix=f"fusebench-staging-{os.getpid()}-", dir=where))
    os.chmod(path, 0o777 & ~_umask())  # it becomes html/: a web server's user must read it, not 0700
    return path


def swap_in(new: Path, target: Path) -> None:
    """Make the folder ``new`` (from :func:`staging_folder`) be ``target``, and remove the old one.

    Beside ``target``: one atomic exchange where Linux allows it (a reader sees the old folder or
    the new one), else two renames. Inside a mount point: each entry replaced in turn, then the
    entries the new folder lacks removed.
    """
    if new.parent == target:  # target is a mount point: entry by entry
        import tempfile

        old = Path(tempfile.mkdtemp(prefix=f"fusebench-old-{os.getpid()}-", dir=target))
        for entry in sorted(target.iterdir()):  # what the new site no longer has
            if entry.name not in (new.name, old.name) and not os.path.lexists(new / entry.name):
                os.rename(entry, old / entry.name)
        for entry in sorted(new.iterdir()):
            there = target / entry.name
            if os.path.lexists(there):
                os.rename(there, old / entry.name)
            os.rename(entry, there)
        new.rmdir()
        shutil.rmtree(old, ignore_errors=True)
        return
    if os.path.lexists(target) and _exchange(new, target):
        shutil.rmtree(new, ignore_errors=True)  # now the old folder
        return
    if os.path.lexists(target):
        old = new.with_name(new.name.replace("staging", "old", 1))
        os.rename(target, old)
        os.rename(new, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(new, target)
