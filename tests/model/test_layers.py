"""Norms and feed-forward networks (gptlab.model.layers) against their formulas in float64."""

import math

import pytest
import torch

from gptlab import GPTConfig
from gptlab.model.layers import MLP, RMSNorm, SwiGLU, build_norm, unit_rms


def test_rmsnorm_is_x_over_root_mean_square_times_weight(randomize):
    norm = randomize(RMSNorm(8, eps=1e-6))
    x = torch.randn(3, 8, dtype=torch.float64)
    expected = x / torch.sqrt((x**2).mean(-1, keepdim=True) + 1e-6) * norm.weight
    torch.testing.assert_close(norm(x), expected)
    # a float64 model computes in float64 (half precision is upcast to float32, never down)
    wide = norm.double()
    assert wide(x).dtype == torch.float64
    torch.testing.assert_close(wide(x), expected.double(), rtol=1e-12, atol=1e-12)


def test_unit_rms_and_its_written_out_gradient_equal_torchs_rms_norm():
    x = torch.randn(3, 5, 2, 16, dtype=torch.float64, requires_grad=True)
    eps = torch.finfo(torch.float32).eps  # unit_rms's, in every dtype
    torch.testing.assert_close(unit_rms(x), torch.nn.functional.rms_norm(x, (16,), eps=eps))
    assert torch.autograd.gradcheck(unit_rms, (x,))


def test_unit_rms_of_bfloat16_is_computed_in_float32_and_returned_in_bfloat16():
    x = torch.randn(4, 32, dtype=torch.bfloat16, requires_grad=True)
    y = unit_rms(x)
    assert y.dtype == torch.bfloat16
    exact = unit_rms(x.detach().float())
    torch.testing.assert_close(y.float(), exact.to(torch.bfloat16).float(), rtol=0, atol=0)
    dy = torch.randn(4, 32)
    (grad,) = torch.autograd.grad(y, x, dy.to(torch.bfloat16))
    assert grad.dtype == torch.bfloat16
    x32 = x.detach().float().requires_grad_()
    (grad32,) = torch.autograd.grad(unit_rms(x32), x32, dy.to(torch.bfloat16).float())
    torch.testing.assert_close(grad.float(), grad32.to(torch.bfloat16).float(), rtol=0, atol=0)


def test_layernorm_without_bias_has_only_a_weight(layer_config):
    norm = build_norm(layer_config(bias=False))
    assert [name for name, _ in norm.named_parameters()] == ["weight"]
    x = torch.randn(4, 8)
    expected = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False,
                                                                     keepdim=True) + 1e-5)
    torch.testing.assert_close(norm(x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["gelu", "gelu_tanh"])
def test_mlp_formula(kind, layer_config, randomize):
    mlp = randomize(MLP(layer_config(mlp=kind)))
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

