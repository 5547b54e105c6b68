"""`gptlab lab`: its own argument checks, before any server starts; the real command serving
a runs folder on localhost; a port it cannot have, in one line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from gptlab.cli.main import main
from gptlab.web.threaded import free_port


@pytest.fixture
def no_server(monkeypatch):
    """serve() records its arguments instead of listening."""
    from gptlab.lab import server

    calls = []
    monkeypatch.setattr(server, "serve", lambda *args, **kwargs: calls.append((args, kwargs)))
    return calls


@pytest.mark.parametrize("argv, message", [
    (["--port", "0"], "--port: must be between 1 and 65535, got 0"),
    (["--port", str(2**70)], "--port: must be between 1 and 65535"),
    (["--runs", "{file}"], "--runs {file} is not a folder"),
    (["--token", ""], "--token: must not be empty"),
    (["--token", "two words"], "--token: may hold only letters, digits"),
    (["--allow-host", "http://evil.example"], "--allow-host: must be a host name or an IP"),
    (["--allow-host", "*"], "--allow-host: must be a host name or an IP"),
])
def test_bad_options_are_one_line(tmp_path, capsys, no_server, argv, message):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    argv = [a.replace("{file}", str(a_file)) for a in argv]
    assert main(["lab", *argv]) == 2
    err = capsys.readouterr().err
    assert message.replace("{file}", str(a_file)) in err and err.count("\n") == 1
    assert no_server == []


def test_a_missing_runs_folder_is_fine_and_said(tmp_path, no_server, capsys):
    assert main(["lab", "--runs", str(tmp_path / "none-yet"), "--port", "8123"]) == 0
    assert no_server == [((str(tmp_path / "none-yet"),), {"host": "127.0.0.1", "port": 8123,
                                                           "token": None, "allow_hosts": ()})]
    assert capsys.readouterr().err == (
        f"gptlab lab: --runs {tmp_path / 'none-yet'} does not exist yet: the lab creates it "
        f"when a model is trained from the page (view 9, or an experiment's --quick form)\n")
    assert main(["lab", "--runs", str(tmp_path), "--port", "8123"]) == 0
    assert capsys.readouterr().err == ""  # there: nothing to say


def test_token_and_names_reach_the_server(tmp_path, no_server):
    assert main(["lab", "--runs", str(tmp_path), "--host", "0.0.0.0", "--token", "my-secret.1",
                 "--allow-host", "MyBox.local", "--allow-host", "[::1]"]) == 0
    assert no_server[0][1] == {"host": "0.0.0.0", "port": 8000, "token": "my-secret.1",
                               "allow_hosts": ("mybox.local", "::1")}


def first_answer(port: int, path: str, seconds: float = 30) -> httpx.Response:
    """The answer to GET path from a lab starting on 127.0.0.1:port, once it listens."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=5)
        except httpx.ConnectError:
            assert time.monotonic() < deadline, f"nothing listened on port {port}"
            time.sleep(0.1)


@pytest.mark.slow  # seconds (a process, a timed-out body, 30 runs): make test, not make check
def test_gptlab_lab_serves_on_localhost_and_prints_the_url(tmp_path, copy_tiny_run):
    runs_root = tmp_path / "runs"
    copy_tiny_run(runs_root / "tiny")
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gptlab", "lab", "--port", str(port), "--runs", str(runs_root)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/" in line, line
        r = first_answer(port, "/api/runs")
        assert r.json()["runs"] == ["shakespeare", "tiny"]  # the shipped model first
        proc.send_signal(signal.SIGINT)  # a Ctrl-C: one line and 130, as every command
        assert proc.wait(timeout=20) == 130
        assert proc.stderr.read().strip() == "interrupted"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.slow  # seconds (a process, a timed-out body, 30 runs): make test, not make check
def test_gptlab_lab_beyond_loopback_prints_its_token_and_needs_it(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gptlab", "lab", "--host", "0.0.0.0", "--port", str(port),
         "--runs", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        line = proc.stdout.readline()
        assert line.strip(), f"gptlab lab ended first: {proc.stderr.read()}"  # (CI, once)
        url = line.split()[2]
        assert url.startswith(f"http://127.0.0.1:{port}/?token="), line
        token = url.split("=", 1)[1]
        assert len(token) >= 32 and "reachable from other machines" in proc.stdout.readline()
        refused = first_answer(port, "/api/runs")
        assert refused.status_code == 403 and "needs its token" in refused.json()["error"]
        served = httpx.get(f"http://127.0.0.1:{port}/api/runs",
                           headers={"Authorization": f"token {token}"}, timeout=5)
        assert served.status_code == 200 and "shakespeare" in served.json()["runs"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.slow  # seconds (a process, a timed-out body, 30 runs): make test, not make check
def test_gptlab_lab_bad_port_is_one_line_exit_2():
    r = subprocess.run([sys.executable, "-m", "gptlab", "lab", "--port", "70000"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert "--port: must be between 1 and 65535" in r.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "gptlab", "lab", "--port", str(busy)],
                           capture_output=True, text=True)
    assert r.returncode == 2 and "cannot listen on 127.0.0.1" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
