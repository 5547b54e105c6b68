"""Positions: the sinusoidal formula at chosen points, RoPE's relative-position property,
and every long-context scaling rule against Hugging Face's own code."""

import math

import pytest
import torch

from gptlab import GPTConfig
from gptlab.model.positional import RotaryEmbedding, apply_rope, sinusoidal_table
from gptlab.model.rope_scaling import rope_inverse_frequencies


@pytest.mark.parametrize("pos,i", [(0, 0), (1, 0), (7, 3), (50, 10), (1000, 63)])
def test_sinusoidal_values_equal_the_2017_formula(pos, i):
    d = 128
    table = sinusoidal_table(torch.arange(1001), d)
    angle = pos / 10000 ** (2 * i / d)
    assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoidal_position_zero_alternates_zero_and_one():
    row = sinusoidal_table(torch.tensor([0]), 8)[0]
    assert row.tolist() == [0.0, 1.0] * 4


def rope(head_dim=16, base=10000.0, scaling=None) -> RotaryEmbedding:
    fields = dict(vocab_size=10, block_size=64, n_layer=1, n_head=1, n_embd=head_dim,
                  pos_encoding="rope", rope_base=base, rope_scaling=scaling)
    return RotaryEmbedding(GPTConfig(**fields))


def rotate(rotary, x, position):
    cos, sin = rotary(torch.tensor([position]))
    return apply_rope(x[None], cos, sin)[0]


@pytest.mark.parametrize("m,n", [(0, 5), (3, 8), (17, 22), (40, 3), (100, 100)])
def test_rope_score_depends_only_on_relative_position(m, n):
    # <R_m q, R_n k> = <q, R_{n-m} k>
    rotary = rope()
    g = torch.Generator().manual_seed(m * 31 + n)
    q, k = torch.randn(16, generator=g, dtype=torch.float64), torch.randn(16, generator=g,
                                                                          dtype=torch.float64)
    left = rotate(rotary, q.float(), m).double() @ rotate(rotary, k.float(), n).double()
    right = q @ rotate(rotary, k.float(), n - m).double()
    assert left.item() == pytest.approx(right.item(), abs=1e-4)


def test_rope_rotates_pairs_i_and_i_plus_half_by_m_theta():
    rotary, m, i = rope(head_dim=8), 3, 1
    x = torch.zeros(8)
    x[i] = 1.0  # the unit vector of the pair's first coordinate
    theta = 10000 ** (-2 * i / 8)
    out = rotate(rotary, x, m)
    assert out[i].item() == pytest.approx(math.cos(m * theta), abs=1e-6)
    assert out[i + 4].item() == pytest.approx(math.sin(m * theta), abs=1e-6)
    assert torch.linalg.norm(out).item() == pytest.approx(1.0, abs=1e-6)  # a rotation


def test_linear_scaling_is_position_interpolation():
    plain, scaled = rope(), rope(scaling={"type": "linear", "factor": 4.0})
    cos_scaled, _ = scaled(torch.tensor([8]))
    cos_plain, _ = plain(torch.tensor([2]))  # position 8 / 4
    torch.testing.assert_close(cos_scaled, cos_plain)


def test_ntk_scaling_raises_the_base():
    inv_freq, _ = rope_inverse_frequencies(16, 10000.0, {"type": "ntk", "factor": 8.0})
    expected, _ = rope_inverse_frequencies(16, 10000.0 * 8.0 ** (16 / 14))
    torch.testing.assert_close(inv_freq, expected)
    assert inv_freq[0].item() == 1.0  # the fastest pair is unchanged
    assert inv_freq[-1].item() == pytest.approx(
        rope_inverse_frequencies(16, 10000.0)[0][-1].item() / 8.0, rel=1e-5)


HF_CASES = [
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


@pytest.mark.parametrize("hf_type,scaling", HF_CASES)
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
