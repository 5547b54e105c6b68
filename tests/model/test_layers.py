"""Norms and feed-forward networks (gptlab.model.layers) against their formulas in float64."""

import math

import pytest
import torch

from gptlab import GPTConfig
from gptlab.model.layers import GeluMLP, RMSNorm, SwiGLU, build_norm


def test_rmsnorm_is_x_over_root_mean_square_times_weight(randomize):
    norm = randomize(RMSNorm(8, eps=1e-6))
    x = torch.randn(3, 8, dtype=torch.float64)
    expected = x / torch.sqrt((x**2).mean(-1, keepdim=True) + 1e-6) * norm.weight
    torch.testing.assert_close(norm(x), expected)


def test_layernorm_without_bias_has_only_a_weight(layer_config):
    norm = build_norm(layer_config(bias=False))
    assert [name for name, _ in norm.named_parameters()] == ["weight"]
    x = torch.randn(4, 8)
    expected = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False,
                                                                     keepdim=True) + 1e-5)
    torch.testing.assert_close(norm(x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["gelu", "gelu_tanh"])
def test_gelu_mlp_formula(kind, layer_config, randomize):
    mlp = randomize(GeluMLP(layer_config(mlp=kind)))
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    h = x @ mlp.fc.weight.T + mlp.fc.bias
    if kind == "gelu":
        act = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))
    else:  # GPT-2's "gelu_new"
        act = 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
    torch.testing.assert_close(mlp(x), act @ mlp.proj.weight.T + mlp.proj.bias)
    assert mlp.fc.weight.shape == (12, 8)


def test_default_ffn_width_is_four_times_n_embd():
    assert GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=2, n_embd=8).ffn_hidden == 32


def test_swiglu_formula_uses_three_matrices(layer_config, randomize):
    mlp = randomize(SwiGLU(layer_config(mlp="swiglu", bias=False)))
    assert sorted(n for n, _ in mlp.named_parameters()) == ["gate.weight", "proj.weight",
                                                            "up.weight"]
    x = torch.randn(5, 8, dtype=torch.float64)
    gate = x @ mlp.gate.weight.T
    expected = (gate * torch.sigmoid(gate) * (x @ mlp.up.weight.T)) @ mlp.proj.weight.T
    torch.testing.assert_close(mlp(x), expected)
