"""What a folder holds (gptlab.files.kinds): a Hugging Face model directory is told from a
gptlab one by its config.json alone."""

import json

import pytest

from gptlab.files.kinds import is_hf_dir
from gptlab.files.model_dir import save_model
from gptlab.model.gpt import GPT


def test_a_hugging_face_directory_is_told_from_a_gptlab_one(tmp_path, tiny_model,
                                                            random_hf_model):
    random_hf_model("gpt2-tied-3heads").save_pretrained(tmp_path / "hf")
    save_model(GPT(tiny_model()), tmp_path / "ours")
    assert is_hf_dir(tmp_path / "hf") and is_hf_dir(str(tmp_path / "hf"))
    assert not is_hf_dir(tmp_path / "ours")


@pytest.mark.parametrize("config", [
    None,  # no config.json at all
    "{not json",
    "[1, 2]",
    json.dumps({"n_layer": 2}),  # no model_type
    json.dumps({"model_type": "gpt2", "pos_encoding": "learned"}),  # one of gptlab's fields
])
def test_anything_else_is_not_a_hugging_face_directory(tmp_path, config):
    if config is not None:
        (tmp_path / "config.json").write_text(config)
    assert not is_hf_dir(tmp_path)
    assert not is_hf_dir(tmp_path / "missing")
