"""Presets and the GPTConfig they become: every preset builds and has exactly the published
parameter count; configs validate themselves, naming the offending field, and round-trip."""

from __future__ import annotations

import json

import pytest
import torch

from gptlab import GPT, GPTConfig
from gptlab.errors import ConfigError, UsageError
from gptlab.model.params import count_parameters, meta_parameter_count
from gptlab.model.presets import PRESETS

# Exact parameter counts of the Hugging Face configs (each model card's config.json).
REFERENCE_COUNTS = {
    "gpt2": 124_439_808,
    "gpt2-medium": 354_823_168,
    "gpt2-large": 774_030_080,
    "gpt2-xl": 1_557_611_200,
    "llama2-7b": 6_738_415_616,
    "llama2-13b": 13_015_864_320,
    "llama2-70b": 68_976_648_192,
}
# Small enough to build for real on a CPU in a test.
SMALL_PRESETS = ["tiny-gpt2", "tiny-llama", "shakespeare-char-cpu", "shakespeare-char"]


def test_every_reference_model_is_a_preset():
    assert set(REFERENCE_COUNTS) <= set(PRESETS)
    assert set(SMALL_PRESETS) <= set(PRESETS)


@pytest.mark.parametrize("name", list(PRESETS))
def test_preset_builds_on_meta_and_counts_match(name):
    config = GPTConfig.from_preset(name)
    with torch.device("meta"):
        model = GPT(config)
    assert all(p.is_meta for p in model.parameters())
    counted = count_parameters(config)
    assert counted == model.num_parameters() == meta_parameter_count(config)
    if name in REFERENCE_COUNTS:
        assert counted == REFERENCE_COUNTS[name]


@pytest.mark.parametrize("name", SMALL_PRESETS)
def test_small_preset_builds_on_cpu_and_runs(name):
    torch.manual_seed(0)
    config = GPTConfig.from_preset(name)
    model = GPT(config)
    assert model.num_parameters() == count_parameters(config)
    idx = torch.randint(0, config.vocab_size, (2, min(8, config.block_size)))
    logits, loss = model(idx, idx)
    assert logits.shape == (2, idx.shape[1], config.vocab_size)
    assert torch.isfinite(loss)


def test_presets_are_what_their_sources_say():
    gpt2 = GPTConfig.from_preset("gpt2")
    assert (gpt2.n_layer, gpt2.n_embd, gpt2.n_head, gpt2.ffn_hidden) == (12, 768, 12, 3072)
    assert gpt2.tie_embeddings and gpt2.bias and gpt2.pos_encoding == "learned"
    llama = GPTConfig.from_preset("llama2-70b")
    assert (llama.n_head, llama.n_kv_head, llama.ffn_hidden) == (64, 8, 28672)
    assert not llama.tie_embeddings and not llama.bias and llama.mlp == "swiglu"


def test_from_preset_overrides():
    config = GPTConfig.from_preset("tiny-gpt2", vocab_size=65, dropout=0.1)
    assert config.vocab_size == 65 and config.dropout == 0.1
    with pytest.raises(ConfigError, match="unknown config field"):
        GPTConfig.from_preset("tiny-gpt2", n_layers=3)


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(UsageError) as info:
        GPTConfig.from_preset("gpt-5")
    message = str(info.value)
    assert "gpt-5" in message
    for name in PRESETS:
        assert name in message


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("fields,names", [
    (dict(n_embd=100, n_head=12), ["n_embd", "n_head"]),
    (dict(n_head=12, n_kv_head=5), ["n_head", "n_kv_head"]),
    (dict(n_embd=36, n_head=12, pos_encoding="rope"), ["rope", "head"]),  # head size 3
    (dict(pos_encoding="alibi"), ["pos_encoding", "alibi"]),
    (dict(norm="batchnorm"), ["norm", "batchnorm"]),
    (dict(norm_position="middle"), ["norm_position"]),
    (dict(mlp="relu"), ["mlp", "relu"]),
    (dict(vocab_size=0), ["vocab_size"]),
    (dict(block_size=-1), ["block_size"]),
    (dict(n_layer=0), ["n_layer"]),
    (dict(n_head=0), ["n_head"]),
    (dict(n_embd=-768), ["n_embd"]),
    (dict(n_kv_head=0), ["n_kv_head"]),
    (dict(ffn_hidden=0), ["ffn_hidden"]),
    (dict(n_layer=2.0), ["n_layer"]),
    (dict(n_layer=True), ["n_layer"]),
    (dict(dropout=1.0), ["dropout"]),
    (dict(dropout=-0.1), ["dropout"]),
    (dict(norm_eps=0), ["norm_eps"]),
    (dict(bias="yes"), ["bias"]),
    (dict(rope_scaling={"type": "linear", "factor": 2.0}), ["rope_scaling"]),
])
def test_invalid_config_names_the_field(fields, names):
    with pytest.raises(ConfigError) as info:
        GPTConfig(**fields)
    for name in names:
        assert name in str(info.value)
    assert isinstance(info.value, UsageError)  # so the CLI exits 2 with one line


def test_valid_edges_are_accepted():
    assert GPTConfig(dropout=0.0).dropout == 0.0
    assert GPTConfig(dropout=0.999).dropout == 0.999
    mqa = GPTConfig(n_head=12, n_kv_head=1)
    assert mqa.n_rep == 12 and mqa.kv_dim == 64
    assert GPTConfig(n_embd=36, n_head=12, pos_encoding="learned").head_dim == 3


@pytest.mark.parametrize("name", list(PRESETS))
def test_to_dict_from_dict_round_trips_exactly(name):
    config = GPTConfig.from_preset(name)
    d = config.to_dict()
    again = GPTConfig.from_dict(json.loads(json.dumps(d)))
    assert again == config
    assert again.to_dict() == d
    assert "head_dim" not in d  # derived, not serialized
    assert d["n_kv_head"] == config.n_kv_head and d["ffn_hidden"] == config.ffn_hidden


def test_round_trip_with_rope_scaling_and_a_config_file(tmp_path):
    config = GPTConfig.from_preset(
        "tiny-llama",
        rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32},
    )
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config.to_dict()))
    loaded = GPTConfig.from_json(path)
    assert loaded == config and loaded.rope_scaling == config.rope_scaling
    assert loaded.to_dict()["rope_scaling"] is not config.rope_scaling  # a copy, not shared


def test_from_dict_rejects_unknown_fields_and_non_objects():
    with pytest.raises(ConfigError, match="n_layers"):
        GPTConfig.from_dict({"n_layers": 2})
    with pytest.raises(ConfigError, match="JSON object"):
        GPTConfig.from_dict([1, 2])
