"""Norms and feed-forward networks (the block that wraps them is in gptlab.model.gpt)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gptlab.model.config import GPTConfig


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight (Zhang & Sennrich 2019): no centring, no bias.

    Normalizes in float32 and casts back before the weight, as Llama does, so bf16
    activations lose no precision in the statistic."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        x32 = x.to(torch.promote_types(x.dtype, torch.float32))  # float64 stays float64
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)


# float32's machine epsilon: torch's rms_norm default for float32, used for every dtype here
UNIT_RMS_EPS = torch.finfo(torch.float32).eps


class _UnitRMS(torch.autograd.Function):
    """y = x / sqrt(mean(x^2) + eps) over the last dimension, in float32 at least, with its
    gradient written out: dx = (dy - y * mean(dy * y)) / sqrt(mean(x^2) + eps). torch's
    rms_norm differentiates each of its ops instead; on a CPU that backward cost the
    speedrun's QK-norm about 0.8 ms more per layer."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        x32 = x.to(torch.promote_types(x.dtype, torch.float32))  # float64 stays float64
        inv_rms = torch.rsqrt(x32.square().mean(-1, keepdim=True) + UNIT_RMS_EPS)
        y = x32 * inv_rms
        ctx.save_for_backward(y, inv_rms)
        ctx.input_dtype = x.dtype
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, dy: Tensor) -> Tensor:
        y, inv_rms = ctx.saved_tensors
        dy = dy.to(y.dtype)
        return ((dy - y * (dy * y).mean(-1, keepdim=True)) * inv_rms).to(ctx.input_dtype)


def unit_rms(x: Tensor) -> Tensor:
    """x scaled to root-mean-square 1 over its last dimension (RMSNorm without a gain, eps
    float32's machine epsilon), in x's dtype, computed in float32 at least."""
    return _UnitRMS.apply(x)


def build_norm(config: GPTConfig) -> nn.Module:
    if config.norm == "rmsnorm":
        return RMSNorm(config.n_embd, eps=config.norm_eps)
    return nn.LayerNorm(config.n_embd, eps=config.norm_eps, bias=config.bias)


ACTIVATIONS = {
    "gelu": lambda x: F.gelu(x),  # the exact erf form
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's approximation
}


class MLP(nn.Module):
    """Linear -> activation -> Linear, width ffn_hidden (4d by default): GELU (exact or
    GPT-2's tanh approximation), as config.mlp says."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(config.n_embd, config.ffn_hidden, bias=config.bias)
        self.activation = ACTIVATIONS[config.mlp]
        self.proj = nn.Linear(config.ffn_hidden, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.proj(self.activation(self.fc(x))))


class SwiGLU(nn.Module):
    """proj(silu(gate(x)) * up(x)) (Shazeer 2020): three matrices, as in Llama."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.gate = nn.Linear(config.n_embd, config.ffn_hidden, bias=config.bias)
        self.up = nn.Linear(config.n_embd, config.ffn_hidden, bias=config.bias)
        self.proj = nn.Linear(config.ffn_hidden, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.proj(F.silu(self.gate(x)) * self.up(x)))


def build_mlp(config: GPTConfig) -> nn.Module:
    return SwiGLU(config) if config.mlp == "swiglu" else MLP(config)


