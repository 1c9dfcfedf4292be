"""``fusebench publish`` and ``bench`` end naming the command that serves the folder they wrote
(``make preview`` serves only html/), and ``fusebench preview`` serves it."""

import json
import shlex
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
    # run as printed, from another folder (--port 0: any free port; 8080 may be taken here)
    server = subprocess.Popen([*shlex.split(command), "--port", "0"], cwd=tmp_path, text=True,
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
