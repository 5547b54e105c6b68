"""`make pretrained` (tools/pretrained.py) end to end on a small data directory: the run
trained with the shipped model's preset and recipe, its weights shipped in float16 with the
config and tokenizer, the manifest's checksums verifying, its losses equal to `gptlab eval`'s
on what ships, and the commands recorded as they ran."""

import json

import pytest
import torch
from tools.pretrained import PRESET, main

from gptlab import pretrained
from gptlab.cli.main import main as gptlab
from gptlab.loading import load

pytestmark = pytest.mark.slow  # a training and three evaluations of the shipped shape


def test_retrains_ships_and_states_its_loss(tmp_path, data_dir, monkeypatch, capsys, one_thread):
    out = tmp_path / "pretrained" / "shakespeare"
    assert main(["--data", str(data_dir), "--out", str(out), "--max-iters", "2",
                 "--run", str(tmp_path / "run")]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["placeholder"] and manifest["steps"] == 2 and manifest["preset"] == PRESET
    assert manifest["make"] == "make pretrained PRETRAINED_ARGS='--max-iters 2'"
    assert manifest["commands"][0] == (f"gptlab train --preset {PRESET} --data {data_dir} "
                                       f"--out {tmp_path / 'run'} --seed 1337 --no-progress "
                                       "--max-iters 2")
    monkeypatch.setattr(pretrained, "HERE", out.parent)
    assert pretrained.verified("shakespeare") == out
    model, _ = load("shakespeare")  # the shipped name now reads this folder
    assert model.num_parameters() == manifest["parameters"]
    trained, _ = load(tmp_path / "run")
    for name, p in model.state_dict().items():  # float16, widened back
        assert torch.equal(p, trained.state_dict()[name].half().float()), name
    capsys.readouterr()
    assert gptlab(["eval", "shakespeare", "--data", str(data_dir), "--json"]) == 0
    score = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert score["loss"] == pytest.approx(manifest["val_loss"], abs=6e-5)
    assert score["tokens_scored"] == manifest["val_tokens_scored"]


def test_a_training_that_stopped_early_ships_nothing(tmp_path, data_dir, monkeypatch, capsys,
                                                     one_thread):
    """`gptlab train` stops cleanly, exit 0, on SIGTERM or Ctrl-C: the tool must not ship
    those weights as the recipe's (it did once, when its process was stopped)."""
    import tools.pretrained as tool

    monkeypatch.setattr("gptlab.training.rundir.checkpoint_step", lambda run: 1)
    out = tmp_path / "out"
    assert tool.main(["--data", str(data_dir), "--out", str(out), "--max-iters", "2"]) == 1
    assert "the training stopped at step 1 of 2: nothing shipped" in capsys.readouterr().err
    assert not out.exists()
