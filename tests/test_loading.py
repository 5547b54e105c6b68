"""`gptlab.load` (gptlab.loading): a run, its best/ and a Hugging Face directory each come
back as the model they hold with its tokenizer; what is not one is named in one line."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

import gptlab
from gptlab.convert import hf
from gptlab.errors import UsageError
from gptlab.files import model_dir


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_a_run_and_its_best_weights(trained_run):
    model, tokenizer = gptlab.load(trained_run)
    assert not model.training and model.wte.weight.device.type == "cpu"
    assert same_weights(model, model_dir.load_model(trained_run))
    assert tokenizer.decode(tokenizer.encode("the king")) == "the king"
    best, _ = gptlab.load(trained_run / "best")
    assert same_weights(best, model_dir.load_model(trained_run / "best"))


def test_a_hugging_face_directory_with_its_tokenizer(trained_run, tmp_path):
    ours, _ = gptlab.load(trained_run)
    hf.to_hf(ours, tmp_path / "hf")
    with pytest.raises(UsageError, match=f"has no {hf.HF_TOKENIZER}"):
        gptlab.load(tmp_path / "hf")  # the format of the `tokenizers` library only
    shutil.copy(trained_run / "tokenizer.json", tmp_path / "hf" / hf.HF_TOKENIZER)
    theirs, tokenizer = gptlab.load(tmp_path / "hf")
    idx = torch.tensor([tokenizer.encode("the king")])
    with torch.no_grad():
        assert torch.allclose(theirs(idx)[0], ours(idx)[0], atol=1e-5)


def test_paths_that_hold_no_model_are_named(tmp_path, trained_run):
    with pytest.raises(UsageError, match="model directory not found"):
        gptlab.load(tmp_path / "nowhere")
    wider = tmp_path / "wider-tokenizer"
    shutil.copytree(trained_run, wider)
    spec = json.loads((wider / "tokenizer.json").read_text())
    (wider / "tokenizer.json").write_text(json.dumps({**spec, "chars": spec["chars"] + ["~"]}))
    with pytest.raises(UsageError, match="the tokenizer has .* tokens but the model only"):
        gptlab.load(wider)


def test_load_rejects_an_unknown_format(tiny_run):
    with pytest.raises(UsageError, match="weights must be one of"):
        gptlab.load(tiny_run, weights="fp8")
