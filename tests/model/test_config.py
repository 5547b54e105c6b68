"""GPTConfig (gptlab.model.config): a config validates itself, naming the offending field,
accepts the valid edges, and round-trips through JSON exactly."""

from __future__ import annotations

import json

import pytest

from gptlab import GPTConfig
from gptlab.errors import ConfigError, UsageError
from gptlab.model.presets import PRESETS


@pytest.mark.parametrize("fields,names", [
    (dict(n_embd=100, n_head=12), ["n_embd", "n_head"]),
    (dict(n_head=12, n_kv_head=5), ["n_head", "n_kv_head"]),
    (dict(n_embd=36, n_head=12, pos_encoding="rope"), ["rope", "head"]),  # head size 3
    (dict(pos_encoding="xpos"), ["pos_encoding", "xpos"]),
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
