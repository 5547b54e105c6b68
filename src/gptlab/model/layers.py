"""Norms, feed-forward networks and the transformer block."""

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
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)


def build_norm(config: GPTConfig) -> nn.Module:
    if config.norm == "rmsnorm":
        return RMSNorm(config.n_embd, eps=config.norm_eps)
    return nn.LayerNorm(config.n_embd, eps=config.norm_eps, bias=config.bias)


class GeluMLP(nn.Module):
    """Linear -> GELU -> Linear, width ffn_hidden (4d by default). 'gelu_tanh' is GPT-2's
    tanh approximation of GELU; 'gelu' is the exact erf form."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(config.n_embd, config.ffn_hidden, bias=config.bias)
        self.approximate = "tanh" if config.mlp == "gelu_tanh" else "none"
        self.proj = nn.Linear(config.ffn_hidden, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.proj(F.gelu(self.fc(x), approximate=self.approximate)))


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
    return SwiGLU(config) if config.mlp == "swiglu" else GeluMLP(config)


