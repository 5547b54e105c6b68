"""Positions: none, sinusoidal (Vaswani et al. 2017), learned absolute, and rotary (RoPE,
Su et al. 2021) with long-context scaling (linear interpolation, NTK-aware, YaRN, Llama 3).

Absolute encodings are added to the token embeddings; RoPE is handed to attention and
rotates queries and keys instead. RoPE here uses the "rotate-half" layout: dimension i is
paired with dimension i + head_dim/2 (as Hugging Face Llama does), and the pair is rotated
by the angle m * theta_i at position m.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gptlab.model.config import GPTConfig
from gptlab.model.rope_scaling import rope_inverse_frequencies


def sinusoidal_table(positions: Tensor, d_model: int) -> Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d)).

    positions: (T,) integers; returns (T, d_model) float32. Odd d_model drops the last cos.
    """
    i2 = torch.arange(0, d_model, 2, dtype=torch.float64, device=positions.device)
    angles = positions.to(torch.float64)[:, None] / (10000.0 ** (i2 / d_model))  # (T, d/2)
    table = torch.empty(len(positions), d_model, dtype=torch.float64, device=positions.device)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return table.to(torch.float32)


class SinusoidalPositions(nn.Module):
    """The 2017 paper's fixed encoding: no parameters, any length."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_embd = config.n_embd

    def forward(self, positions: Tensor) -> Tensor:
        return sinusoidal_table(positions, self.n_embd)


class LearnedPositions(nn.Embedding):
    """One trained vector per position, GPT-2 style; only block_size positions exist."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__(config.block_size, config.n_embd)


def build_absolute_positions(config: GPTConfig) -> nn.Module | None:
    """The module whose output is added to token embeddings, or None (RoPE and 'none')."""
    builders = {"learned": LearnedPositions, "sinusoidal": SinusoidalPositions}
    builder = builders.get(config.pos_encoding)
    return builder(config) if builder else None


# ----------------------------------------------------------------------------- RoPE


class RotaryEmbedding(nn.Module):
    """cos and sin of m * theta_i for the positions asked, in rotate-half layout."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        inv_freq, self.attention_factor = rope_inverse_frequencies(
            config.head_dim, config.rope_base, config.rope_scaling
        )
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """positions (T,) -> cos, sin, each (T, head_dim) float32."""
        angles = positions.to(torch.float32)[:, None] * self.inv_freq[None, :]  # (T, hs/2)
        angles = torch.cat((angles, angles), dim=-1)  # (T, hs): pair i with i + hs/2
        return angles.cos() * self.attention_factor, angles.sin() * self.attention_factor


def rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate each pair (x_i, x_{i+d/2}) of x (..., T, hs) by its angle."""
    return (x * cos.to(x.dtype)) + (rotate_half(x) * sin.to(x.dtype))


# ----------------------------------------------------------------- the chapter's figures


def sinusoidal_similarity(positions: int, d_model: int) -> dict[str, Tensor]:
    """The sinusoidal table (T, d_model) and its dot products PE[m] . PE[n] (T, T, float64):
    they depend on |m - n| only, and fall off with the distance."""
    table = sinusoidal_table(torch.arange(positions), d_model)
    return {"table": table, "similarity": table.double() @ table.double().T}


def rope_scores(head_dim: int, base: float, positions: int, seed: int) -> dict[str, Tensor]:
    """One random query and one random key (seeded) placed at every position and rotated by
    RoPE: scores[m, n] = RoPE(q, m) . RoPE(k, n), which depends on n - m only (the relative
    property, <R_m q, R_n k> = <q, R_(n-m) k>)."""
    rope = RotaryEmbedding(GPTConfig(vocab_size=1, block_size=positions, n_layer=1, n_head=1,
                                     n_embd=head_dim, pos_encoding="rope", rope_base=base))
    cos, sin = rope(torch.arange(positions))  # (P, hs) each
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, head_dim, generator=g)
    q_rot = apply_rope(q.expand(positions, head_dim), cos, sin)  # (P, hs)
    k_rot = apply_rope(k.expand(positions, head_dim), cos, sin)
    return {"q": q, "k": k, "q_rot": q_rot, "k_rot": k_rot, "scores": q_rot @ k_rot.T,
            "inv_freq": rope.inv_freq}
