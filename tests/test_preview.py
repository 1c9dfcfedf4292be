"""``fusebench publish`` and ``bench`` end naming the command that serves the folder they wrote
(``make preview`` serves only html/), and ``fusebench preview`` serves it."""

import json
import re
import shlex
import socket
import subprocess
import sys
import urllib.request

import pytest

from fusebench.commands import main
from fusebench.commands import publish as publish_command
from fusebench.commands.preview import DEFAULT_HTML, serves
from fusebench.paths import PROJECT_ROOT


def _publish(tmp_path, monkeypatch, capsys, *argv) -> list[str]:
    """``fusebench publish ARGV`` with asv's publish replaced by a site of one ``index.json``."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "benchmarks.json").write_text("{}")

    def fake_publish(results_dir, html_dir, ops, cdn, strict):
        if html_dir != DEFAULT_HTML:  # never the checkout's html/
            html_dir.mkdir(parents=True, exist_ok=True)
            (html_dir / "index.json").write_text(json.dumps({"project": "fusebench"}))
        return 0

    monkeypatch.setattr(publish_command.site, "publish", fake_publish)
    with pytest.raises(SystemExit) as end:
        main(["publish", "--results", str(results), *argv])
    err = capsys.readouterr().err.splitlines()
    assert end.value.code == 0, err
    return err


def test_publish_elsewhere_names_the_preview_of_that_folder_and_it_serves_it(tmp_path, monkeypatch, capsys):
    site = tmp_path / "site out"  # a space: the printed command quotes it
    err = _publish(tmp_path, monkeypatch, capsys, "--html", str(site))
    command = f"{shlex.quote(sys.executable)} -m fusebench preview --html '{site}'"
    assert err[-1] == f"publish: site in {site}/ ({command} serves it)"
    # run as printed, from where publish ran (--port 0: any free port; 8080 may be taken here)
    server = subprocess.Popen([*shlex.split(command), "--port", "0"], cwd=PROJECT_ROOT, text=True,
                              stderr=subprocess.PIPE)
    try:
        line = server.stderr.readline()
        assert line.startswith(f"preview: serving {site}/ on http://127.0.0.1:"), line
        url = line.split(" on ")[1].split(" ")[0]
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy for 127.0.0.1
        with opener.open(url + "index.json", timeout=30) as page:
            assert json.loads(page.read()) == {"project": "fusebench"}
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_publish_into_html_names_make_preview(tmp_path, monkeypatch, capsys):
    err = _publish(tmp_path, monkeypatch, capsys)
    assert err[-1] == f"publish: site in {DEFAULT_HTML}/ (make preview serves it)"
    assert serves(PROJECT_ROOT / "html") == "make preview"
    assert serves(tmp_path / ".." / tmp_path.name / "html") == (
        f"{shlex.quote(sys.executable)} -m fusebench preview --html {tmp_path}/../{tmp_path.name}/html")


def _site(folder):
    folder.mkdir(parents=True)
    (folder / "index.json").write_text(json.dumps({"project": "fusebench"}))
    return folder


def _serve_printed(command: str, cwd) -> str:
    """Run ``command`` as printed until it says it serves; the address it printed."""
    server = subprocess.Popen(shlex.split(command), cwd=cwd, text=True, stderr=subprocess.PIPE)
    try:
        line = server.stderr.readline()
        assert line.startswith("preview: serving "), line
        return line.split(" on ")[1].split(" ")[0]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_port_in_use_is_one_line_exit_2_with_a_command_that_serves(tmp_path, capsys):
    site = _site(tmp_path / "site")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit) as end:
            main(["preview", "--port", str(port), "--html", str(site)])
        command = f"{shlex.quote(sys.executable)} -m fusebench preview --html {site} --port 0"
        assert end.value.code == 2
        assert capsys.readouterr().err == (f"preview: error: port {port} of 127.0.0.1 is in use; give "
                                           f"another, or 0 for any free one: {command}\n")
        address = _serve_printed(command, PROJECT_ROOT)
    assert re.fullmatch(r"http://127\.0\.0\.1:[0-9]+/", address) and address != f"http://127.0.0.1:{port}/"
    assert serves(DEFAULT_HTML, 0) == "make preview PORT=0"


@pytest.mark.parametrize("port", ["99999", "-1", "80.5"])
def test_a_port_outside_its_range_is_refused_before_anything_binds(tmp_path, capsys, port):
    with pytest.raises(SystemExit) as end:
        main(["preview", f"--port={port}", "--html", str(_site(tmp_path / "site"))])
    assert end.value.code == 2 and capsys.readouterr().err == (
        f"preview: error: argument --port: give a whole number from 0 to 65535, not '{port}'\n")


def test_a_folder_without_a_site_names_the_publish_that_makes_it(tmp_path, capsys):
    with pytest.raises(SystemExit) as end:
        main(["preview", "--html", str(tmp_path / "none")])
    assert end.value.code == 2 and capsys.readouterr().err == (
        f"preview: error: {tmp_path}/none/ has no site; run {shlex.quote(sys.executable)} -m fusebench "
        f"publish --html {tmp_path}/none first\n")
