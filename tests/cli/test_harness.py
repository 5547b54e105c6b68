"""`gptlab harness`: lm-eval's own command line with the `gptlab` model and gptlab's
tasks, the shipped model on the shipped tasks offline, and bad input in one line."""

from __future__ import annotations

import sys

import pytest

from gptlab.cli.harness import gptlab_pretrained, lm_eval_argv
from gptlab.errors import UsageError

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


@pytest.mark.parametrize(("args", "expected"), [
    (["--model_args", "pretrained=shakespeare", "--tasks", "t"],
     ["run", "--model", "gptlab", "--model_args", "pretrained=shakespeare", "--tasks", "t",
      "--device", "auto", "--include_path", "TASKS"]),
    (["run", "--model=hf", "--device", "cpu", "--include_path", "mine"],
     ["run", "--model=hf", "--device", "cpu", "--include_path", "mine"]),
    (["ls", "tasks"], ["ls", "tasks", "--include_path", "TASKS"]),
])
def test_lm_evals_arguments_get_gptlabs_defaults_unless_given(args, expected):
    assert lm_eval_argv(args, "TASKS") == ["lm-eval", *expected]


def test_a_batch_size_in_model_args_is_the_one_lm_evals_header_shows():
    """The model takes model_args' batch_size=16, and lm-eval's table header showed its own
    --batch_size, 1."""
    args = ["--model_args", "pretrained=shakespeare,batch_size=16", "--tasks", "t"]
    assert lm_eval_argv(args, "TASKS")[-6:] == ["--batch_size", "16", "--device", "auto",
                                                "--include_path", "TASKS"]
    assert "--batch_size" not in lm_eval_argv(["--model", "hf", "--model_args",
                                               "pretrained=gpt2,batch_size=16"], "TASKS")
    assert lm_eval_argv([*args, "--batch_size=16"], "TASKS").count("--batch_size=16") == 1
    with pytest.raises(UsageError, match="--batch_size 8 and --model_args batch_size=16 "
                                         "disagree: the model runs 16"):
        lm_eval_argv([*args, "--batch_size", "8"], "TASKS")


@pytest.mark.parametrize(("argv", "expected"), [
    (["--model", "gptlab", "--model_args", "device=cpu, pretrained=runs/a"], "runs/a"),
    (["--model=gptlab", "--model_args=pretrained=shakespeare"], "shakespeare"),
    (["--model", "hf", "--model_args", "pretrained=gpt2"], None),
    (["--model", "gptlab", "--model_args", "device=cpu"], None),
])
def test_the_gptlab_model_is_found_in_lm_evals_arguments(argv, expected):
    assert gptlab_pretrained(argv) == expected


def test_nothing_to_run_and_a_model_that_is_not_there_are_one_line(gptlab, one_line, monkeypatch):
    assert "lm-eval's arguments" in one_line(gptlab("harness"))
    for name, value in OFFLINE.items():
        monkeypatch.setenv(name, value)
    err = one_line(gptlab("harness", "--model_args", "pretrained=no-such-run", "--tasks",
                          "gptlab_next_line"))
    assert "no such run or model directory: no-such-run" in err


def test_without_the_extra_it_says_what_to_install(gptlab, one_line, monkeypatch):
    for module in [m for m in sys.modules if m.split(".")[0] == "lm_eval"] or ["lm_eval"]:
        monkeypatch.setitem(sys.modules, module, None)  # importing it: an ImportError
    for module in [m for m in sys.modules if m.startswith("gptlab.harness")]:
        monkeypatch.delitem(sys.modules, module)
    err = one_line(gptlab("harness", "--model_args", "pretrained=shakespeare", "--tasks",
                          "gptlab_next_line"), code=1)
    assert "pip install 'gptlab[harness]'" in err


def test_help_is_gptlabs_and_names_lm_evals(gptlab):
    code, out, _ = gptlab("harness", "--help")
    assert code == 0 and "gptlab harness run --help" in out and "pretrained=" in out


@pytest.mark.slow
def test_the_shipped_model_runs_the_shipped_tasks_from_the_command_line(gptlab_process,
                                                                        tmp_path):
    done = gptlab_process("harness", "--model_args", "pretrained=shakespeare,batch_size=16",
                          "--tasks", "gptlab_next_line,gptlab_val_bpb", "--limit", "10",
                          "--output_path", tmp_path, timeout=300, **OFFLINE)
    assert done.returncode == 0, done.stderr
    assert "batch_size: 16" in done.stdout  # the header: what ran, not lm-eval's default 1
    assert "is defined, but" not in done.stderr  # no metric without its aggregation
    rows = [line.split("|") for line in done.stdout.splitlines() if line.startswith("|")]
    metrics = {cells[5].strip(): float(cells[7]) for cells in rows[2:]}
    assert 0 <= metrics["acc"] <= 1 and 1 < metrics["bits_per_byte"] < 4
    assert list(tmp_path.rglob("results_*.json"))
