"""Long-context RoPE rules (gptlab.model.rope_scaling): NTK's raised base, and every rule's
inverse frequencies against Hugging Face's own code."""

import pytest
import torch

from gptlab.errors import ConfigError
from gptlab.model.config import ROPE_SCALINGS, rope_scaling_from_spec, with_rope_scaling
from gptlab.model.gpt import GPT
from gptlab.model.rope_scaling import rope_inverse_frequencies


def test_ntk_scaling_raises_the_base():
    inv_freq, _ = rope_inverse_frequencies(16, 10000.0, {"type": "ntk", "factor": 8.0})
    expected, _ = rope_inverse_frequencies(16, 10000.0 * 8.0 ** (16 / 14))
    torch.testing.assert_close(inv_freq, expected)
    assert inv_freq[0].item() == 1.0  # the fastest pair is unchanged
    assert inv_freq[-1].item() == pytest.approx(
        rope_inverse_frequencies(16, 10000.0)[0][-1].item() / 8.0, rel=1e-5)


HF_SCALINGS = [
    ("default", None),
    ("linear", {"type": "linear", "factor": 3.0}),
    ("yarn", {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}),
    ("yarn", {"type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096,
              "beta_fast": 16, "beta_slow": 2}),
    ("yarn", {"type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096,
              "mscale": 1.0, "mscale_all_dim": 0.707}),  # DeepSeek's temperature ratio
    ("llama3", {"type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192,
                "low_freq_factor": 1.0, "high_freq_factor": 4.0}),
]


@pytest.mark.oracle
@pytest.mark.parametrize("hf_type,scaling", HF_SCALINGS)
def test_rope_scaling_matches_hugging_face(hf_type, scaling):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = {"rope_type": hf_type, "rope_theta": 500000.0}
    if scaling:
        params.update({k: v for k, v in scaling.items() if k != "type"})
    hf_config = LlamaConfig(hidden_size=256, num_attention_heads=2, max_position_embeddings=32768,
                            rope_parameters=params)
    if hf_type == "default":
        head_dim = 128
        expected = 1.0 / 500000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim)
        expected_factor = 1.0
    else:
        expected, expected_factor = ROPE_INIT_FUNCTIONS[hf_type](hf_config, "cpu")
    ours, factor = rope_inverse_frequencies(128, 500000.0, scaling)
    torch.testing.assert_close(ours, expected, rtol=0, atol=0)
    assert factor == pytest.approx(expected_factor, rel=1e-12)


@pytest.mark.oracle
@pytest.mark.parametrize("factor", [2.0, 4.0, 8.0])
@pytest.mark.parametrize("seq_len", [None, 1, 4095, 4096, 4097, 8192, 10000, 32768])
def test_dynamic_ntk_matches_hugging_face_at_each_length(factor, seq_len):
    """transformers' dynamic rope recomputes inv_freq with the sequence's length; ours
    gives the same bits at every length, below, at and past the original."""
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    hf_config = LlamaConfig(hidden_size=256, num_attention_heads=2, max_position_embeddings=4096,
                            rope_parameters={"rope_type": "dynamic", "rope_theta": 500000.0,
                                             "factor": factor})
    expected, expected_factor = ROPE_INIT_FUNCTIONS["dynamic"](hf_config, "cpu", seq_len=seq_len)
    scaling = {"type": "dynamic", "factor": factor, "original_max_position_embeddings": 4096}
    ours, attention_factor = rope_inverse_frequencies(128, 500000.0, scaling, seq_len)
    torch.testing.assert_close(ours, expected, rtol=0, atol=0)
    assert attention_factor == expected_factor == 1.0
    if seq_len is not None and seq_len > 4096:  # the base grew: the slowest pair slowed down
        assert ours[-1] < rope_inverse_frequencies(128, 500000.0)[0][-1]


@pytest.mark.parametrize("kind", ROPE_SCALINGS)
def test_every_scaling_at_factor_one_is_no_scaling(kind, small_config, seeded_model):
    """At factor 1 every rule leaves RoPE as trained: the same frequencies, temperature 1,
    and the same logits at four times the training length. Dynamic NTK only up to the
    training length: transformers' formula, base * (factor * s / L - (factor - 1))^(d/(d-2)),
    is base * (s / L)^(d/(d-2)) at factor 1, which still grows past L."""
    scaling = rope_scaling_from_spec(f"{kind}:1", 16)
    plain_freq, _ = rope_inverse_frequencies(4, 10000.0)
    for seq_len in (None, 16, 64):
        inv_freq, attention_factor = rope_inverse_frequencies(4, 10000.0, scaling, seq_len)
        unchanged = torch.equal(inv_freq, plain_freq) and attention_factor == 1.0
        assert unchanged == (kind != "dynamic" or seq_len != 64)
    plain = seeded_model(small_config(pos_encoding="rope"))
    scaled = GPT(with_rope_scaling(plain.config, f"{kind}:1")).eval()
    scaled.load_state_dict(plain.state_dict())
    length = 16 if kind == "dynamic" else 64
    idx = torch.randint(0, 23, (2, length), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(scaled(idx)[0], plain(idx)[0], rtol=0, atol=0)
    assert plain.config.rope_scaling is None  # the trained config is untouched


def test_dynamic_ntk_in_the_model_recomputes_frequencies_past_the_original(small_config,
                                                                           seeded_model):
    plain = seeded_model(small_config(pos_encoding="rope"))
    dynamic = GPT(with_rope_scaling(plain.config, "dynamic:4")).eval()
    dynamic.load_state_dict(plain.state_dict())
    idx = torch.randint(0, 23, (1, 48), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        # up to the training length nothing changes; past it every position moves
        torch.testing.assert_close(dynamic(idx[:, :16])[0], plain(idx[:, :16])[0], rtol=0, atol=0)
        assert not torch.allclose(dynamic(idx)[0][:, :16], plain(idx)[0][:, :16])


@pytest.mark.parametrize("spec, message", [
    ("linear", "KIND:FACTOR"), ("cubic:2", "KIND:FACTOR"), ("linear:x", "factor must be"),
    ("yarn:0.5", "factor must be"), ("ntk:nan", "factor must be"), ("ntk:inf", "factor must be"),
])
def test_a_bad_rope_scaling_spec_is_named(spec, message):
    with pytest.raises(ConfigError, match=message):
        rope_scaling_from_spec(spec, 64)


def test_spec_carries_the_training_length_where_the_rule_needs_it():
    assert rope_scaling_from_spec("linear:4", 64) == {"type": "linear", "factor": 4.0}
    assert rope_scaling_from_spec("yarn:4", 64) == {
        "type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}


def test_scaling_is_refused_where_there_is_no_rope(small_config):
    with pytest.raises(ConfigError, match="pos_encoding is 'alibi'"):
        with_rope_scaling(small_config(pos_encoding="alibi"), "linear:2")
    scaled = with_rope_scaling(small_config(pos_encoding="rope"), "linear:2")
    with pytest.raises(ConfigError, match="already has rope_scaling 'linear'"):
        with_rope_scaling(scaled, "ntk:2")
