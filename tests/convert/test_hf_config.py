"""Hugging Face configs (gptlab.convert.hf_config): what gptlab cannot run is named, and
both spellings of RoPE's settings are read."""

from __future__ import annotations

import pytest
import transformers  # the `gptlab[hf]` extra, part of the test extras

from gptlab.convert.hf_config import config_from_hf, rope_from_hf
from gptlab.errors import UsageError

VOCAB = 101


@pytest.mark.parametrize("scaling, message", [
    ({"rope_type": "longrope", "factor": 2.0, "short_factor": [1.0] * 4,
      "long_factor": [1.0] * 4, "original_max_position_embeddings": 16},
     "unsupported rope scaling 'longrope'"),
])
def test_unsupported_rope_scaling_is_named(scaling, message):
    config = transformers.LlamaConfig(hidden_size=32, num_attention_heads=4, num_hidden_layers=1,
                                      intermediate_size=40, vocab_size=VOCAB,
                                      max_position_embeddings=64, rope_scaling=scaling)
    with pytest.raises(UsageError, match=message):
        config_from_hf(config.to_dict())


@pytest.mark.parametrize("fields, message", [
    (dict(use_parallel_residual=True), "use_parallel_residual=true"),
    (dict(rotary_pct=0.25), "partial_rotary_factor 0.25"),
    (dict(hidden_act="relu"), "unsupported GPT-NeoX hidden_act 'relu'"),
])
def test_neox_that_gptlab_cannot_run_is_named(fields, message, neox_config):
    with pytest.raises(UsageError, match=message):
        config_from_hf(neox_config(**fields).to_dict())


def test_relu_opt_is_named():
    config = transformers.OPTConfig(hidden_size=32, num_attention_heads=4, num_hidden_layers=1,
                                    ffn_dim=40, vocab_size=VOCAB)
    with pytest.raises(UsageError, match="OPT activation_function 'relu'"):
        config_from_hf(config.to_dict())


def test_dynamic_ntk_takes_max_position_embeddings_as_the_training_length():
    hf = {"rope_theta": 10000.0, "max_position_embeddings": 64,
          "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    assert rope_from_hf(hf) == (10000.0, {"type": "dynamic", "factor": 2.0,
                                          "original_max_position_embeddings": 64})


def test_rope_from_hf_reads_transformers_4_spelling():
    old = {"rope_theta": 500000.0, "max_position_embeddings": 8192,
           "rope_scaling": {"type": "linear", "factor": 2.0}}
    assert rope_from_hf(old) == (500000.0, {"type": "linear", "factor": 2.0})
