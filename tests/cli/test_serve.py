"""`gptlab serve`: its argument checks, before any model loads; the real command serving the
shipped model to the openai client, as on a fresh clone; a Ctrl-C and a busy port as every
command answers them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from gptlab.cli.main import main
from gptlab.web.threaded import free_port


@pytest.fixture
def no_server(monkeypatch):
    """serve() records what it would serve instead of listening."""
    from gptlab.serve import app

    calls = []
    monkeypatch.setattr(app, "serve", lambda served, **kwargs: calls.append((served, kwargs)))
    return calls


@pytest.mark.parametrize("argv, message", [
    (["shakespeare", "--port", "0"], "--port: must be between 1 and 65535, got 0"),
    (["shakespeare", "--max-batch", "0"], "--max-batch: must be between 1 and 4096"),
    (["shakespeare", "--token", ""], "--token: must not be empty"),
    (["shakespeare", "--allow-host", "http://x"], "--allow-host: must be a host name"),
    (["shakespear"], "no such run or model directory: shakespear; did you mean shakespeare"),
    (["shakespeare", "--context", "256"], "learned positions are a table"),
])
def test_bad_options_are_one_line(capsys, no_server, argv, message):
    assert main(["serve", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert no_server == []


def test_options_reach_the_server(no_server, one_thread, monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert main(["serve", "shakespeare", "--name", "bard", "--port", "8123", "--max-batch",
                 "4", "--max-tokens", "50", "--max-waiting", "9", "--token", "tok-en"]) == 0
    [(served, kwargs)] = no_server
    assert (served.name, served.scheduler.slots, served.max_tokens, served.max_waiting,
            served.context) == ("bard", 4, 50, 9, 128)
    assert kwargs == {"host": "127.0.0.1", "port": 8123, "token": "tok-en", "allow_hosts": ()}
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"  # idle workers sleep (BENCHMARKS.md)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert main(["serve", "shakespeare", "--port", "8123"]) == 0
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"  # the user's own stays


@pytest.mark.slow  # seconds: a process loading a model
def test_gptlab_serve_shakespeare_answers_the_openai_client():
    openai = pytest.importorskip("openai")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gptlab", "serve", "shakespeare", "--port",
                             str(port), "--threads", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        line = proc.stdout.readline()
        assert f"shakespeare at http://127.0.0.1:{port}/v1" in line, proc.stderr.read()
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused")
        answer = client.completions.create(model="shakespeare", prompt="ROMEO:",
                                           max_tokens=20, temperature=0)
        assert len(answer.choices[0].text) == 20 and answer.usage.total_tokens == 26
        proc.send_signal(signal.SIGINT)  # a Ctrl-C: one line and 130, as every command
        assert proc.wait(timeout=20) == 130
        assert proc.stderr.read().strip() == "interrupted"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.slow  # seconds: a process loading a model
def test_a_busy_port_is_one_line_exit_2():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "gptlab", "serve", "shakespeare", "--port",
                            str(busy)], capture_output=True, text=True)
    assert r.returncode == 2 and "cannot listen on 127.0.0.1" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
