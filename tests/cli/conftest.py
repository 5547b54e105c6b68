"""Shared by the CLI's tests: running `gptlab` in this process or as a program, and the
small saved models the commands read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gptlab.cli.main import main

SRC = Path(__file__).resolve().parents[2] / "src"
ALPHABET = "abcdefghijklmnopqrstuvwxyz .,\n"


@pytest.fixture
def gptlab(capsys):
    """gptlab(*argv) -> (exit code, stdout, stderr) of `gptlab argv` run in this process
    (gptlab.cli.main.main); an argparse exit counts as its code."""
    def run(*argv):
        capsys.readouterr()
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(scope="session")
def gptlab_process():
    """gptlab_process(*argv, **env) -> CompletedProcess: `python -m gptlab argv` as a
    program, this checkout's src/ first on its path (each start costs a torch import)."""
    def run(*argv, timeout: float = 120, **env) -> subprocess.CompletedProcess:
        path = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
        return subprocess.run([sys.executable, "-m", "gptlab", *map(str, argv)],
                              capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONPATH": path, **env})

    return run


@pytest.fixture(scope="session")
def one_line():
    """one_line(result, code=2) -> stderr, after checking `result` (gptlab's exit code,
    stdout, stderr) failed with that code in exactly one line of stderr."""
    def check(result, code: int = 2) -> str:
        got, _, err = result
        assert got == code and err.count("\n") == 1 and "Traceback" not in err, (got, err)
        return err

    return check


@pytest.fixture
def char_model(tmp_path, save_char_model):
    """A fresh 2-layer model of width 16 and context 32 with random weights and a character
    tokenizer of ALPHABET, saved in tmp_path/run: (directory, model, tokenizer). For the
    tests that write into it."""
    return save_char_model(tmp_path / "run", ALPHABET, block_size=32, n_layer=2, n_head=2,
                           n_embd=16)


@pytest.fixture(scope="session")
def widened_char_model(tmp_path_factory, save_char_model):
    """char_model with widened weights (confident predictions, so that tables are not all
    ties), saved once for the session: (directory, model, tokenizer). Read-only."""
    return save_char_model(tmp_path_factory.mktemp("cli") / "run", ALPHABET, widen_seed=0,
                           block_size=32, n_layer=2, n_head=2, n_embd=16)


@pytest.fixture
def refused_on_widened_model(widened_char_model, tmp_path, gptlab):
    """refused_on_widened_model(command, *args, message=...): `gptlab command MODEL *args
    --out DIR` on widened_char_model exits 2 with message, in one line, and DIR holds
    nothing."""
    def check(command: str, *args, message: str) -> None:
        directory, *_ = widened_char_model
        code, _, err = gptlab(command, directory, *args, "--out", tmp_path / "o")
        assert code == 2 and message in err and err.count("\n") == 1, err
        assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())

    return check


@pytest.fixture(scope="session")
def signalled():
    """signalled(code, ready, sig, wait=120) -> (exit code, stdout, stderr, seconds from the
    signal to the exit): `python -c code` (this checkout's src/ on its path, SIGINT's
    handler put back: a shell's background job starts with SIGINT ignored), sent `sig`
    once ready() is true; a test fails if it never is."""
    import signal
    import time

    def run(code: str, ready, sig: int, wait: float = 120):
        env = {**os.environ, "OMP_NUM_THREADS": "1",
               "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            deadline = time.monotonic() + wait
            while not ready() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if proc.poll() is not None or not ready():
                out, err = proc.communicate()
                pytest.fail(f"never ready (exit {proc.returncode}): {err[-2000:]}")
            proc.send_signal(sig)
            sent = time.monotonic()
            out, err = proc.communicate(timeout=wait)
            return proc.returncode, out, err, time.monotonic() - sent
        finally:
            proc.kill()

    return run


@pytest.fixture(scope="session")
def slowly_scoring():
    """slowly_scoring(mark, *argv) -> the code of a program that runs `gptlab argv` with
    every scoring (gptlab.inference.evaluate.score_positions) one window per forward, each
    half a second, touching the file `mark` as a scoring begins: a long scoring to stop."""
    def code(mark, *argv) -> str:
        return f"""
import sys, time
from pathlib import Path
from gptlab.cli.main import main
from gptlab.inference import evaluate

real = evaluate.score_positions

def slowly(model, ids, context=None, stride=None, batch_size=None):
    forward = model.forward
    def slow_forward(*args, **kwargs):
        time.sleep(0.5)
        return forward(*args, **kwargs)
    model.forward = slow_forward
    Path({str(mark)!r}).touch()
    return real(model, ids, context, stride, 1)

evaluate.score_positions = slowly
sys.exit(main({[str(a) for a in argv]!r}))
"""

    return code
