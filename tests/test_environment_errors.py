"""Issue 56, item 15: a fault of this host's environment (a full disk, a read-only folder, no
HOME, a fusebench installed from another checkout) is one line naming the path and what to do,
exit 2: never a traceback, never exit 1, which means a regression or a collect conflict."""

import errno
import os
import subprocess
import sys

import pytest
from test_pulled_commit import _source
from test_safe_pull import _run

from fusebench.paths import PROJECT_ROOT
from fusebench.storage import transaction


def _fail(errno_: int):
    def fail(self, target, *args, **kwargs):
        raise OSError(errno_, os.strerror(errno_), str(target))
    return fail


@pytest.mark.parametrize("code, said", [
    (errno.ENOSPC, "no space left on the device (ENOSPC); free some space"),
    (errno.EROFS, "a read-only filesystem (EROFS); run where the checkout is writable")])
def test_collect_on_a_full_or_read_only_disk_is_one_line_exit_2(tmp_path, capsys, monkeypatch, code, said):
    """collect's OSError was exit 1, the conflict code: ``collect: error: OSError: [Errno 28] ...``."""
    monkeypatch.setattr(transaction.Transaction, "add_copy", _fail(code))
    into = tmp_path / "into" / "results"
    status, err = _run(capsys, "collect", "--into", into, _source(tmp_path))
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith(f"collect: error: {into}/") and said in err[0], err
    assert not (into / transaction.STAGING).exists()


def test_plots_into_a_read_only_folder_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    from fusebench.report import plots

    def read_only(path, data):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr("fusebench.atomic.write_atomic", read_only)
    status, err = _run(capsys, "plots", "--machines", "h200", "--out", tmp_path / "plots")
    assert status == 2 and plots is not None
    assert err[-1].startswith(f"plots: error: {tmp_path / 'plots' / 'h200'}/") and "(EROFS)" in err[-1], err


def test_asv_publish_on_a_full_disk_is_one_line_not_asvs_traceback(monkeypatch, capsys):
    """publish printed asv's chained traceback (an OSError raised while handling another)."""
    import asv.main

    from fusebench.asv import asv_publish

    def full(*args):
        try:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/html/graphs/x.json")
        except OSError:
            raise RuntimeError("asv: writing the graphs failed")  # noqa: B904 (asv chains it so)

    monkeypatch.setattr(asv.main, "main", full)
    monkeypatch.setattr(sys, "argv", ["asv_publish"])
    assert asv_publish.main() == 2
    assert capsys.readouterr().err == ("publish: error: /html/graphs/x.json: no space left on the device "
                                       "(ENOSPC); free some space there and run again\n")


@pytest.mark.parametrize("home", [None, "/"])
def test_without_a_home_the_ab_cache_is_the_checkouts(home):
    """ab's worktrees went under ``/.cache`` when HOME was unset (a container's user)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_CACHE_HOME")}
    if home is not None:
        env["HOME"] = home
    code = "from fusebench.commands import ab, bisect; print(ab.DEFAULT_CACHE); print(bisect.DEFAULT_CACHE)"
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, capture_output=True,
                         text=True)
    assert out.stdout.splitlines() == [str(PROJECT_ROOT / ".asv" / "cache")] * 2, out.stderr


def test_a_fusebench_run_in_another_checkout_refuses_to_store_into_its_own(tmp_path, capsys, monkeypatch):
    """An editable install run from another checkout wrote into the checkout it was installed from."""
    (tmp_path / "fusebench").mkdir()
    (tmp_path / "fusebench" / "__init__.py").write_text("")
    (tmp_path / "asv.conf.json").write_text("{}")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    status, err = _run(capsys, "table")
    assert status == 2 and err == [
        f"table: error: this fusebench is {PROJECT_ROOT}'s and stores there, but the working folder is in "
        f"the checkout {tmp_path}: run that one's own: cd {tmp_path} && {sys.executable} -m fusebench table"]
