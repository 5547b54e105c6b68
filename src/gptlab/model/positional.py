"""Positions: none, sinusoidal (Vaswani et al. 2017), learned absolute, rotary (RoPE, Su et
al. 2021) with long-context scaling (linear interpolation, NTK-aware, dynamic NTK, YaRN,
Llama 3), and ALiBi (Press et al. 2021).

Absolute encodings are added to the token embeddings; RoPE and ALiBi are handed to
attention instead: RoPE rotates queries and keys, ALiBi adds a bias to the scores. RoPE here
uses the "rotate-half" layout: dimension i is paired with dimension i + head_dim/2 (as
Hugging Face Llama does), and the pair is rotated by the angle m * theta_i at position m.

Past the training length: every encoding but the learned one has something to give at any
position (`check_context`); whether the model makes sense of it is what `gptlab experiment
context` measures.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from gptlab.errors import Setting, SettingError
from gptlab.fields import is_int
from gptlab.model.config import GPTConfig
from gptlab.model.rope_scaling import rope_inverse_frequencies


class ContextWarning(UserWarning):
    """A model runs at positions it never saw in training (context > block_size)."""


def check_context(config: GPTConfig, context: object) -> str | None:
    """None if a model of `config` may run `context` positions as trained; the one-line
    warning to give when it runs past block_size; a UsageError for learned positions,
    which have nothing to give there."""
    if not (is_int(context) and context >= 1):
        raise SettingError(Setting("context"), f" must be a positive integer, got {context!r}")
    block = config.block_size
    if context <= block:
        return None
    if config.pos_encoding == "learned":
        raise SettingError(
            f"context {context} needs position {block}, but learned positions are a table "
            "with one trained row per position: ", Setting("block_size"), f" = {block} rows, "
            f"for positions 0..{block - 1}, and there is no row for position {block}")
    return (f"context {context} is longer than the {block} positions the model was trained "
            f"on (block_size): it never saw positions {block}..{context - 1}")


def sinusoidal_table(positions: Tensor, d_model: int) -> Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d)).

    positions: (T,) integers, or (B, T); returns (T, d_model), or (B, T, d_model), float32.
    Odd d_model drops the last cos.
    """
    i2 = torch.arange(0, d_model, 2, dtype=torch.float64, device=positions.device)
    angles = positions.to(torch.float64)[..., None] / (10000.0 ** (i2 / d_model))  # (T, d/2)
    table = torch.empty(*positions.shape, d_model, dtype=torch.float64,
                        device=positions.device)
    table[..., 0::2] = torch.sin(angles)
    table[..., 1::2] = torch.cos(angles[..., : d_model // 2])
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
    """cos and sin of m * theta_i for the positions asked, in rotate-half layout.

    Dynamic NTK's frequencies depend on the sequence's length: they are computed again for
    each length past the training length, as a function of that length alone (transformers'
    module also keeps the longest length it has seen until a shorter-than-trained one comes;
    within one sequence, as decoding grows it, the two agree)."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.head_dim, self.base, self.scaling = (config.head_dim, config.rope_base,
                                                  config.rope_scaling)
        self.dynamic = bool(self.scaling) and self.scaling["type"] == "dynamic"
        inv_freq, self.attention_factor = rope_inverse_frequencies(
            config.head_dim, config.rope_base, config.rope_scaling
        )
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def frequencies(self, length: int) -> Tensor:
        """inv_freq (hs/2,) for a sequence of `length` positions."""
        if not self.dynamic or length <= self.scaling["original_max_position_embeddings"]:
            return self.inv_freq
        inv_freq, _ = rope_inverse_frequencies(self.head_dim, self.base, self.scaling, length)
        return inv_freq.to(self.inv_freq.device)

    def forward(self, positions: Tensor, length: int | None = None) -> tuple[Tensor, Tensor]:
        """positions (T,) -> cos, sin, each (T, head_dim) float32; (B, T) -> (B, T,
        head_dim). length: the sequence's length so far (default: the last position + 1),
        which dynamic NTK reads (one length for every row)."""
        if self.dynamic and length is None:
            length = int(positions.max()) + 1
        inv_freq = self.frequencies(length) if self.dynamic else self.inv_freq
        angles = positions.to(torch.float32)[..., None] * inv_freq  # (T, hs/2)
        angles = torch.cat((angles, angles), dim=-1)  # (T, hs): pair i with i + hs/2
        return angles.cos() * self.attention_factor, angles.sin() * self.attention_factor


def rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate each pair (x_i, x_{i+d/2}) of x (..., T, hs) by its angle: x cos +
    rotate_half(x) sin, computed as x cos + roll(x, d/2) (-sin, sin), the same numbers with
    the sign moved onto the (T, hs) table: one pass over x fewer, forward and backward
    (on a CPU each pass over q and k costs). cos and sin broadcast against x."""
    return x * cos.to(x.dtype) + x.roll(x.shape[-1] // 2, dims=-1) * signed_sin(sin).to(x.dtype)


def signed_sin(sin: Tensor) -> Tensor:
    """RoPE's sin table with its first half negated, (-sin, sin): rotate_half's sign moved
    onto the table, so that rotate_half(x) sin = roll(x, d/2) signed_sin(sin)."""
    half = sin.shape[-1] // 2
    return torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)


# ----------------------------------------------------------------------------- ALiBi


def alibi_slopes(n_head: int) -> Tensor:
    """Press et al.'s head slopes m_h, (n_head,) float32: for n heads a power of two, the
    geometric sequence 2^(-8/n), 2^(-16/n), ..., 2^(-8); otherwise the slopes of the
    closest smaller power of two p, then every other slope of 2p's, as the paper's code
    does."""
    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    def slopes(n: int) -> list[float]:
        if math.log2(n).is_integer():
            return power_of_two(n)
        closest = 2 ** math.floor(math.log2(n))
        return power_of_two(closest) + slopes(2 * closest)[0::2][: n - closest]

    return torch.tensor(slopes(n_head), dtype=torch.float64).to(torch.float32)


class AlibiBias(nn.Module):
    """ALiBi: no position is added anywhere; each head's scores get -m_h * (i - j) for query
    position i and key position j (a penalty linear in the distance), so the scores depend
    on relative positions only and any length has its bias. No parameters."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(config.n_head), persistent=False)

    def forward(self, t_query: int, t_key: int) -> Tensor:
        """(n_head, t_query, t_key) float32: the bias for queries at the last t_query of
        t_key positions (0 on the diagonal, more negative further back; positive above it,
        where the causal mask rules anyway)."""
        device = self.slopes.device
        q_pos = torch.arange(t_key - t_query, t_key, device=device, dtype=torch.float32)
        k_pos = torch.arange(t_key, device=device, dtype=torch.float32)
        distance = k_pos[None, :] - q_pos[:, None]  # (Tq, Tk): j - i
        return self.slopes[:, None, None] * distance[None]


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
