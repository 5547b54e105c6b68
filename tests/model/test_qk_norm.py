"""QK-norm + RoPE as one autograd function (gptlab.model.qk_norm) against the two steps it
fuses (unit_rms, then apply_rope), in float64 and from bf16."""

import pytest
import torch

from gptlab import GPTConfig
from gptlab.model.layers import unit_rms
from gptlab.model.positional import RotaryEmbedding, apply_rope
from gptlab.model.qk_norm import normed_rope


def tables(T: int = 6, hs: int = 8, factor: float = 1.0, dtype=torch.float64):
    """RoPE's (cos, sin) as attention takes them, (T, 1, hs); factor scales both, as YaRN's
    attention factor does (then the rotation is not orthogonal: the order norm-then-rotate
    matters)."""
    angles = torch.arange(T, dtype=dtype)[:, None] * torch.rand(hs // 2, dtype=dtype)
    angles = torch.cat((angles, angles), dim=-1)
    return (angles.cos() * factor)[:, None], (angles.sin() * factor)[:, None]


@pytest.mark.parametrize("factor", [1.0, 1.3])
def test_normed_rope_equals_unit_rms_then_apply_rope_with_its_gradient(factor):
    x = torch.randn(2, 6, 3, 8, dtype=torch.float64, requires_grad=True)
    cos, sin = tables(factor=factor)
    torch.testing.assert_close(normed_rope(x, cos, sin), apply_rope(unit_rms(x), cos, sin),
                               rtol=1e-12, atol=1e-12)
    dy = torch.randn_like(x)
    (grad,) = torch.autograd.grad(normed_rope(x, cos, sin), x, dy)
    (expected,) = torch.autograd.grad(apply_rope(unit_rms(x), cos, sin), x, dy)
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(lambda t: normed_rope(t, cos, sin), (x,))


def test_normed_rope_of_bfloat16_computes_in_float32_and_returns_the_asked_dtype():
    x = torch.randn(4, 6, 2, 8, dtype=torch.bfloat16, requires_grad=True)
    cos, sin = tables(dtype=torch.float32)
    x32 = x.detach().float().requires_grad_()
    exact = apply_rope(unit_rms(x32), cos, sin)
    y = normed_rope(x, cos, sin, torch.float32)  # attention in float32 under autocast
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, exact, rtol=1e-6, atol=1e-6)
    assert normed_rope(x, cos, sin).dtype == torch.bfloat16  # by default x's dtype
    dy = torch.randn(x.shape)
    (grad,) = torch.autograd.grad(y, x, dy)
    (grad32,) = torch.autograd.grad(exact, x32, dy)
    assert grad.dtype == torch.bfloat16  # the gradient comes back in x's dtype
    torch.testing.assert_close(grad.float(), grad32, rtol=1e-2, atol=1e-2)  # bf16 rounding


def test_normed_rope_takes_the_rotary_modules_tables_and_refuses_learned_ones():
    cos, sin = RotaryEmbedding(GPTConfig(n_embd=16, n_head=2, block_size=8))(torch.arange(5))
    x = torch.randn(1, 5, 2, 8)
    torch.testing.assert_close(normed_rope(x, cos[:, None], sin[:, None]),
                               apply_rope(unit_rms(x), cos[:, None], sin[:, None]))
    with pytest.raises(ValueError, match="constants"):
        normed_rope(x, cos.requires_grad_(), sin)
