"""Presets (gptlab.model.presets): every preset builds and has exactly the published
parameter count, is what its source says, and is found (or refused) by name."""

from __future__ import annotations

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
