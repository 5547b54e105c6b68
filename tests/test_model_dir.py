"""Model directories (gptlab.model_dir): round trips, the bare model saved from a
wrapper, and every missing or broken file named. A run's checkpoint: tests/training/
test_rundir.py."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

from gptlab import model_dir
from gptlab.errors import UsageError
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT


def tiny(**kw) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(**{**dict(vocab_size=17, block_size=8, n_layer=1, n_head=2,
                                   n_embd=8), **kw}))


@pytest.mark.parametrize("tie", [True, False])
def test_model_round_trip(tmp_path, tie):
    model = tiny(tie_embeddings=tie)
    model_dir.save_model(model, tmp_path, metadata={"step": "5"})
    loaded = model_dir.load_model(tmp_path)
    assert loaded.config == model.config and not loaded.training
    a, b = model.state_dict(), loaded.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    if tie:
        assert loaded.lm_head.weight is loaded.wte.weight
    with safe_open(str(tmp_path / "model.safetensors"), framework="numpy") as f:
        assert f.metadata() == {"format": "pt", "step": "5"}  # written as given
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_unwrap_saves_the_bare_model(tmp_path):
    model = tiny()
    wrapped = torch.nn.Module()
    wrapped.module = model  # what DistributedDataParallel looks like
    model_dir.save_model(wrapped, tmp_path)
    with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as f:
        assert not any(k.startswith("module.") for k in f.keys())
        assert "lm_head.weight" not in f.keys()  # tied: stored once, as wte


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(UsageError, match="model directory not found"):
        model_dir.load_model(tmp_path / "nope")
    with pytest.raises(UsageError, match="has no config.json"):
        model_dir.load_model(tmp_path)
    model_dir.save_model(tiny(), tmp_path)
    weights = tmp_path / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:-10])
    with pytest.raises(UsageError, match="not a readable safetensors file"):
        model_dir.load_model(tmp_path)
    weights.write_bytes(data)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "n_layer": 2}))
    with pytest.raises(UsageError, match="does not match its config: missing blocks.1"):
        model_dir.load_model(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(UsageError, match="is not valid JSON"):
        model_dir.load_model(tmp_path)
    with pytest.raises(UsageError, match="has no tokenizer.json"):
        model_dir.load_tokenizer_of(tmp_path)
