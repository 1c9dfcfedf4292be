"""Issues 42 (item 9) and 56 (item 14): a publish killed with SIGKILL leaves no process behind,
``asv publish``, its pool workers and the plot workers included, and no scratch folder in the
checkout's root."""

import os
import signal
import subprocess
import sys
import time

import pytest
from committed import committed_folder
from test_safe_pull import _alive, _children

from fusebench.paths import PROJECT_ROOT

_PARENT = """
import signal, sys, time
from pathlib import Path

def interrupt(*args):
    raise KeyboardInterrupt  # fusebench.cli.run_main's handler, inherited by what it forks

signal.signal(signal.SIGTERM, interrupt)
kind, tmp = sys.argv[1], Path(sys.argv[2])
if kind == "asv":  # asv publish's stand-in: in its group, a pool of two workers busy for minutes
    from fusebench.asv import store
    fake = tmp / "python"
    fake.write_text("#!/bin/sh\\nexec %s -c '%s'\\n")
    fake.chmod(0o755)
    store.publish(tmp, tmp / "html", python=str(fake))
else:
    from fusebench.report import plots
    from fusebench.ops import OPS
    plots.draw_group = lambda *a: time.sleep(120)
    plots.write_plots(Path(sys.argv[3]), tmp / "plots", [OPS["gelu"], OPS["softmax"]], ["h200"], workers=2)
""" % (sys.executable, "import multiprocessing, time; from fusebench.asv import asv_publish; "
       "asv_publish.arm(); pool = multiprocessing.Pool(2); pool.map_async(time.sleep, [120, 120]); "
       "time.sleep(120)")


def _tree(pid: int) -> list[int]:
    kids = [k for k in _children(pid) if _alive(k)]
    return kids + [g for k in kids for g in _tree(k)]


@pytest.mark.parametrize("kind, count", [("asv", 3), ("plots", 2)])
def test_a_killed_publish_leaves_no_worker_behind(tmp_path, kind, count):
    """Item 14: a SIGKILLed publish left a pool worker alive (ppid 1, blocked on a pipe): asv's
    workers had no signal for their parent's death, and a plot worker's SIGTERM ran the handler it
    inherited, which turned it into an exit that waited on a pipe its siblings held open."""
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, kind, str(tmp_path),
                               str(committed_folder("results"))], env=env)
    try:
        deadline = time.monotonic() + 120
        while len(tree := _tree(parent.pid)) < count:
            assert parent.poll() is None and time.monotonic() < deadline, "the workers never started"
            time.sleep(0.2)
        time.sleep(1)  # armed, and busy
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 10
    while any(_alive(k) for k in tree) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [k for k in tree if _alive(k)]
    for k in left:  # a failed test leaves nothing behind either
        os.kill(k, signal.SIGKILL)
    assert left == []


def test_publish_builds_its_site_outside_the_checkouts_root(tmp_path, monkeypatch):
    """Item 14: the site's staging folder and the plots' side folder were made in the checkout's
    root (``fusebench-staging-*/``, ``fusebench-side-*/``), left there by a killed publish."""
    from fusebench.storage import transaction

    monkeypatch.setattr(transaction, "PROJECT_ROOT", tmp_path)
    stage = transaction.staging_folder(tmp_path / "html")
    assert stage.parent == tmp_path / ".asv" and stage.name.startswith("fusebench-staging-")
    (tmp_path / "served").mkdir()
    assert transaction.staging_folder(tmp_path / "served" / "html").parent == tmp_path / "served"
