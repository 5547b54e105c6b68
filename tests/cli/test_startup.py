"""The CLI answers before torch loads, `import gptlab` stays light, and a Ctrl-C while a
command is still importing torch is one line and exit 130.

Each check runs in a fresh interpreter: this test process has imported torch long ago.
How fast `gptlab --help` is, against `import torch`, is measured in bench/cli_startup.py;
here only what is imported is asserted."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gptlab
from gptlab.cli.main import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[2]
# What no light path may load: torch, and the optional extras.
EXTRAS = ("transformers", "matplotlib", "fastapi", "uvicorn", "llama_cpp", "gguf",
          "huggingface_hub", "pydantic", "lm_eval")


def python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})


def loaded_after(code: str) -> dict:
    """Runs `code` in a fresh interpreter; the last line it prints must be JSON."""
    proc = python(code)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_help_of_gptlab_and_every_command_and_a_usage_error_leave_torch_unloaded():
    argvs = [["--help"], ["--version"], *[[name, "--help"] for name in COMMANDS],
             *TORCH_FREE.values(),
             ["params"], ["sample", "--temperature", "warm", "run"], ["no-such-command"]]
    seen = loaded_after(f"""
import contextlib, io, json, sys
from gptlab.cli.main import main
codes = []
for argv in {argvs!r}:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        codes.append(main(argv))
print(json.dumps({{"codes": codes, "loaded": [m for m in ("torch", *{EXTRAS!r})
                                               if m in sys.modules]}}))
""")
    assert seen["codes"] == [0, 0] + [0] * len(COMMANDS) + [0] * len(TORCH_FREE) + [2, 2, 2]
    assert seen["loaded"] == []


def test_every_command_is_registered_and_bench_is_not(capsys):
    """Benchmarks run from the checkout (`python -m bench`), not from the installed CLI."""
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(commands.choices) == COMMANDS and "bench" not in COMMANDS
    assert main(["bench"]) == 2
    assert "invalid choice: 'bench'" in capsys.readouterr().err


def test_version_is_the_package_version():
    """(pyproject.toml reads it from gptlab.version: tests/test_version.py)"""
    proc = subprocess.run([sys.executable, "-m", "gptlab", "--version"], capture_output=True,
                          text=True, timeout=120, env={**os.environ,
                                                       "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0 and proc.stdout == f"gptlab {gptlab.__version__}\n"


@pytest.mark.parametrize("statement", ["import gptlab", "from gptlab import load"])
def test_import_gptlab_loads_no_optional_extra(statement):
    loaded = loaded_after(f"""
import json, sys
{statement}
print(json.dumps([m for m in ("torch", *{EXTRAS!r}) if m in sys.modules]))
""")
    assert loaded == []  # load() imports torch when it is called, nothing more


def test_the_public_names_load_on_first_use():
    names = loaded_after("""
import json, sys
import gptlab
before = "gptlab.model.gpt" in sys.modules
from gptlab import GPT, GPTConfig, TrainConfig, load, train
import gptlab.training
print(json.dumps({"before": before, "train": train.__module__, "is_function": callable(train),
                  "package": gptlab.training.__name__, "same": gptlab.train is train,
                  "GPT": GPT.__name__, "load": load.__module__, "TrainConfig":
                  TrainConfig.__name__, "GPTConfig": GPTConfig.__module__,
                  "dir": all(n in dir(gptlab) for n in gptlab.__all__)}))
""")
    assert names == {"before": False, "train": "gptlab.training.run", "is_function": True,
                     "package": "gptlab.training", "same": True, "GPT": "GPT",
                     "load": "gptlab.loading", "TrainConfig": "TrainConfig",
                     "GPTConfig": "gptlab.model.config", "dir": True}
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        gptlab.nope  # noqa: B018


# Every command with arguments that pass its parser and its checks before the heavy
# imports, so that run() reaches `import torch` or numpy (prepare needs no torch).
REACHES_TORCH = {
    "demo": ["demo", "--data", "{tmp}/d", "--out", "{tmp}/r"],
    "params": ["params", "llama2-70b", "--check"],
    "prepare": ["prepare", "shakespeare", "--out", "{tmp}/p"],
    "train": ["train", "--preset", "tiny-gpt2", "--data", "{tmp}/d", "--out", "{tmp}/t"],
    "eval": ["eval", "{tmp}/m", "--text", "ab"],
    "sample": ["sample", "{tmp}/m"],
    "convert": ["convert", "--from-hf", "{tmp}/m", "--out", "{tmp}/c"],
    "heads": ["heads", "{tmp}/m", "--out", "{tmp}/h"],
    "lens": ["lens", "{tmp}/m", "--text", "ab"],
    "attribute": ["attribute", "{tmp}/m", "--text", "ab", "--target", "a"],
    "patch": ["patch", "{tmp}/m", "--clean", "ab", "--corrupt", "ac"],
    "experiment": ["experiment", "context", "--quick", "--out", "{tmp}/e"],
    "runs": ["runs", "{tmp}", "--plot", "m", "--out", "{tmp}/p.png"],
    "lab": ["lab", "--runs", "{tmp}"],
    "serve": ["serve", "{tmp}/m", "--port", "59317"],
    "harness": ["harness", "--model_args", "pretrained={tmp}/m", "--tasks", "gptlab_next_line"],
}
# Commands that never load torch: `gptlab probe` only reads and clears the cache file.
TORCH_FREE = {"probe": ["probe"]}


def test_the_table_covers_every_command():
    assert sorted([*REACHES_TORCH, *TORCH_FREE]) == sorted(COMMANDS)


def test_ctrl_c_during_a_commands_torch_import_is_one_line_and_exit_130(tmp_path):
    """Ctrl-C lands while `import torch` (or numpy) runs inside each command's run(): a hook
    raises KeyboardInterrupt from that import, as Python does when SIGINT arrives
    mid-import."""
    argvs = {name: [a.replace("{tmp}", str(tmp_path)) for a in argv]
             for name, argv in REACHES_TORCH.items()}
    (tmp_path / "m").mkdir()  # a model directory's files, for `runs --plot` to draw
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (tmp_path / "m" / name).write_text("{}")
    seen = loaded_after(f"""
import builtins, contextlib, io, json, sys
real_import = builtins.__import__

def ctrl_c_in_torch(name, *args, **kwargs):
    if name.split(".")[0] in ("torch", "numpy"):
        raise KeyboardInterrupt
    return real_import(name, *args, **kwargs)

builtins.__import__ = ctrl_c_in_torch
from gptlab.cli.main import main
out = {{}}
for name, argv in {argvs!r}.items():
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        out[name] = [main(argv), err.getvalue()]
builtins.__import__ = real_import
print(json.dumps(out))
""")
    assert seen == {name: [130, "interrupted\n"] for name in REACHES_TORCH}


def test_a_real_sigint_while_torch_loads_prints_interrupted_and_exits_130():
    """SIGINT sent as soon as the command has started, which is while `gptlab params
    --check` imports torch (a second or more). Retried if the signal came too late, on a
    machine that imports torch unusually fast."""
    # SIGINT's handler put back first: a shell starts a background job (`make test &`) with
    # SIGINT ignored, and Python keeps an ignored SIGINT ignored.
    code = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "from gptlab.cli.main import main; print('go', flush=True); "
            "sys.exit(main(['params', 'llama2-70b', '--check']))")
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
        assert proc.stdout.readline() == "go\n"
        time.sleep(0.05)  # inside main() now: the command is importing torch
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        if proc.returncode == 0:  # finished before the signal: try again
            continue
        assert (proc.returncode, err) == (130, "interrupted\n"), err
        return
    pytest.fail("the command finished before SIGINT three times")
