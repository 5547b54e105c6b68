"""Norms, feed-forward networks and blocks against their formulas in float64."""

import math

import pytest
import torch

from gptlab import GPTConfig
from gptlab.model.block import PostNormBlock, PreNormBlock
from gptlab.model.layers import GeluMLP, RMSNorm, SwiGLU, build_norm


def config(**overrides) -> GPTConfig:
    fields = dict(vocab_size=10, block_size=8, n_layer=1, n_head=2, n_embd=8, ffn_hidden=12)
    return GPTConfig(**{**fields, **overrides})


def randomize(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5 + (1.0 if p.ndim == 1 else 0.0))
    return module.double().eval()


def test_rmsnorm_is_x_over_root_mean_square_times_weight():
    norm = randomize(RMSNorm(8, eps=1e-6))
    x = torch.randn(3, 8, dtype=torch.float64)
    expected = x / torch.sqrt((x**2).mean(-1, keepdim=True) + 1e-6) * norm.weight
    torch.testing.assert_close(norm(x), expected)


def test_layernorm_without_bias_has_only_a_weight():
    norm = build_norm(config(bias=False))
    assert [name for name, _ in norm.named_parameters()] == ["weight"]
    x = torch.randn(4, 8)
    expected = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False,
                                                                     keepdim=True) + 1e-5)
    torch.testing.assert_close(norm(x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["gelu", "gelu_tanh"])
def test_gelu_mlp_formula(kind):
    mlp = randomize(GeluMLP(config(mlp=kind)))
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


def test_swiglu_formula_uses_three_matrices():
    mlp = randomize(SwiGLU(config(mlp="swiglu", bias=False)))
    assert sorted(n for n, _ in mlp.named_parameters()) == ["gate.weight", "proj.weight",
                                                            "up.weight"]
    x = torch.randn(5, 8, dtype=torch.float64)
    gate = x @ mlp.gate.weight.T
    expected = (gate * torch.sigmoid(gate) * (x @ mlp.up.weight.T)) @ mlp.proj.weight.T
    torch.testing.assert_close(mlp(x), expected)


def test_pre_and_post_norm_blocks_wire_residuals_as_their_papers_say():
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    pre = randomize(PreNormBlock(config(), layer=0))
    h = x + pre.attn(pre.norm_1(x))
    torch.testing.assert_close(pre(x), h + pre.mlp(pre.norm_2(h)))
    post = randomize(PostNormBlock(config(), layer=0))
    h = post.norm_1(x + post.attn(x))
    torch.testing.assert_close(post(x), post.norm_2(h + post.mlp(h)))
