"""`gptlab lab`'s own argument checks, before any server starts."""

from __future__ import annotations

import pytest

from gptlab.cli.main import main


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
])
def test_bad_options_are_one_line(tmp_path, capsys, no_server, argv, message):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    argv = [a.replace("{file}", str(a_file)) for a in argv]
    assert main(["lab", *argv]) == 2
    err = capsys.readouterr().err
    assert message.replace("{file}", str(a_file)) in err and err.count("\n") == 1
    assert no_server == []


def test_a_missing_runs_folder_is_fine(tmp_path, no_server):
    assert main(["lab", "--runs", str(tmp_path / "none-yet"), "--port", "8123"]) == 0
    assert no_server == [((str(tmp_path / "none-yet"),), {"host": "127.0.0.1", "port": 8123})]
