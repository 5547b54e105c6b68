"""`gptlab train`'s refusals, each in one line and before anything is written: an unknown
optimizer, what fine-tuning (--init-from) cannot combine with, and layouts and resumes a
sharded run cannot take. (The command with training: tests/training/test_run.py and
test_rundir.py.)"""

from __future__ import annotations

import json

import pytest

from gptlab.cli.main import main
from gptlab.data.prepared import prepare
from gptlab.data.tokenizer import CharTokenizer
from gptlab.model.config import GPTConfig
from gptlab.training.config import TrainConfig
from gptlab.training.run import train


def test_cli_bad_optimizer_is_one_line(data_dir, tmp_path, capsys):
    code = main(["train", "--preset", "tiny-gpt2", "--data", str(data_dir),
                 "--out", str(tmp_path / "run"), "--optimizer", "sgd", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "optimizer must be one of adamw, muon" in err
    assert "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_init_from_bad_combinations_are_one_line(trained_run, tmp_path, capsys):
    base_run, play = trained_run, trained_run.parent / "data"
    other = tmp_path / "other-data"
    text = "a completely different alphabet: 0123456789\n" * 200
    prepare(text, other, CharTokenizer.from_text(text))
    for argv, message in [
        (["--init-from", str(base_run), "--data", str(other)],
         "prepared with another tokenizer"),
        (["--init-from", str(base_run), "--data", str(play), "--n-layer", "2"],
         "--init-from keeps the starting model's architecture; drop --n-layer"),
        (["--init-from", str(base_run), "--preset", "tiny-gpt2", "--data",
          str(play)], "drop --preset"),
        (["--init-from", str(tmp_path / "nowhere"), "--data", str(play)],
         "no such run or model directory"),
    ]:
        code = main(["train", *argv, "--out", str(tmp_path / "run"), "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and message in err, (argv, err)
        assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def sharded(data_dir, tmp_path_factory, one_thread_module):
    """A run trained 2 steps with --parallel fsdp in this one process (a global batch of 8)
    in run/, and its model (4 heads, 2 key/value heads) in model.json."""
    root = tmp_path_factory.mktemp("sharded")
    config = GPTConfig(vocab_size=1, block_size=16, n_layer=1, n_head=4, n_kv_head=2,
                       n_embd=32, bias=False)
    (root / "model.json").write_text(json.dumps(config.to_dict()))
    settings = TrainConfig(parallel="fsdp", batch_size=8, max_iters=2, warmup_iters=0,
                           eval_interval=2, eval_iters=1, device="cpu", whole_val=False)
    train(config, settings, data_dir, root / "run", progress=False)
    return root


def test_sharded_layouts_and_resumes_are_refused_in_one_line(sharded, data_dir, tmp_path,
                                                              capsys):
    code = main(["train", "--config", str(sharded / "model.json"), "--data", str(data_dir),
                 "--out", str(tmp_path / "run"), "--parallel", "tp", "--tp", "3"])
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1 and "--tp 3" in err, err
    assert not (tmp_path / "run" / "train.json").exists()
    # a sharded run cannot go back to a whole-model (ddp) checkpoint, nor the reverse
    code = main(["train", "--data", str(data_dir), "--out",
                 str(sharded / "run"), "--resume", "--parallel", "ddp"])
    err = capsys.readouterr().err
    assert code != 0 and "resume it with --parallel fsdp, tp or fsdp+tp" in err, err
    # and a resume keeps the global batch
    code = main(["train", "--data", str(data_dir), "--out",
                 str(sharded / "run"), "--resume", "--batch-size", "3"])
    err = capsys.readouterr().err
    assert code != 0 and "global batch of 8" in err, err
