"""The calculator's arithmetic: pure functions of plain numbers, shared by its views and
the quiz.

Nothing here knows of requests, JSON or runs. The views (gptlab.lab.calculator.attention,
scaling, positions) unpack a request into these arguments and turn the results into an
answer; gptlab.lab.calculator.quiz makes its questions from the same functions, so a quiz's
answer is what the matching view shows. Each function calls gptlab's own code
(gptlab.model.attention, gptlab.model.positional) for the step it teaches.
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import torch

from gptlab.model.attention import attention_steps, attention_weights
from gptlab.model.positional import (
    rope_scores,  # noqa: F401 (view 4's and the quiz's)
    sinusoidal_similarity,
)

N_QUERIES = 256  # queries per d_k in the scaling statistics
HIST_BINS = 40

# ----------------------------------------------------------------------------- 1. calculator


def seeded_inputs(tokens: list[str], d: int, seed: int) -> dict[str, torch.Tensor]:
    """Embeddings and W_Q, W_K, W_V rounded to 2 decimals, so a learner can redo the sums.

    A token's embedding depends on the seed and the token's text only: "the" twice gives
    two equal rows, and editing one token leaves the others' rows alone.
    """
    def randn(shape: tuple[int, ...], key: int, scale: float = 1.0) -> torch.Tensor:
        g = torch.Generator().manual_seed(key)
        sample = torch.randn(shape, generator=g, dtype=torch.float64) * scale
        return torch.round(sample * 100) / 100

    x = torch.stack([randn((d,), zlib.crc32(f"{seed}:{tok}".encode())) for tok in tokens])
    w = randn((3, d, d), seed, scale=1 / math.sqrt(d))  # keeps q.k on the scale of x.x
    return {"x": x, "w_q": w[0], "w_k": w[1], "w_v": w[2]}


def attention(inputs: dict[str, torch.Tensor], causal: bool) -> dict[str, torch.Tensor]:
    """gptlab.model.attention.attention_steps on inputs as seeded_inputs gives them."""
    return attention_steps(inputs["x"], inputs["w_q"], inputs["w_k"], inputs["w_v"],
                           causal=causal)


# ----------------------------------------------------------------------------- 2. sqrt(d_k)


def softmax_stats(weights: torch.Tensor) -> dict[str, float]:
    """weights (Q, K): mean largest weight and mean entropy (nats) over the rows."""
    entropy = -(weights * torch.log(weights.clamp_min(1e-300))).sum(-1)
    return {"max_weight": weights.max(-1).values.mean().item(), "entropy": entropy.mean().item()}


def histogram(values: torch.Tensor, lo: float, hi: float, bins: int) -> list[int]:
    return torch.histc(values.clamp(lo, hi), bins=bins, min=lo, max=hi).long().tolist()


def scaling_stats(d_k: int, n_keys: int, seed: int) -> dict[str, Any]:
    """q, k with N(0, 1) entries: q.k has variance d_k, so unscaled scores grow like
    sqrt(d_k) and the softmax saturates; dividing by sqrt(d_k) keeps the variance 1.

    Statistics at d_k and over a sweep of d_k = 1, 2, 4, ..., as plain numbers."""
    dims = [2**i for i in range(0, 13) if 2**i <= max(d_k, 1024)]
    # One draw at the largest size; each d_k uses the first d_k coordinates of it.
    g = torch.Generator().manual_seed(seed)
    q_all = torch.randn(N_QUERIES, max(dims[-1], d_k), generator=g, dtype=torch.float64)
    k_all = torch.randn(n_keys, max(dims[-1], d_k), generator=g, dtype=torch.float64)

    def sample(dim: int) -> dict[str, Any]:
        q, k = q_all[:, :dim], k_all[:, :dim]
        raw = q @ k.T  # (Q, K)
        return {"raw": raw, "unscaled_w": torch.softmax(raw, dim=-1),
                "scaled_w": attention_weights(q, k)}  # the library's softmax(qk^T/sqrt(d_k))

    s = sample(d_k)
    raw, scaled = s["raw"], s["raw"] / math.sqrt(d_k)
    span = max(4.0, 4 * math.sqrt(d_k))
    sweep = []
    for dim in dims:
        t = sample(dim)
        sweep.append({"d_k": dim, "unscaled": softmax_stats(t["unscaled_w"]),
                      "scaled": softmax_stats(t["scaled_w"]),
                      "std_raw": t["raw"].std().item()})
    return {
        "d_k": d_k, "n_keys": n_keys, "n_queries": N_QUERIES, "seed": seed,
        "std_raw": raw.std().item(), "std_scaled": scaled.std().item(),
        "expected_std_raw": math.sqrt(d_k),
        "hist_range": [-span, span], "bins": HIST_BINS,
        "hist_raw": histogram(raw.flatten(), -span, span, HIST_BINS),
        "hist_scaled": histogram(scaled.flatten(), -span, span, HIST_BINS),
        "unscaled": softmax_stats(s["unscaled_w"]), "scaled": softmax_stats(s["scaled_w"]),
        "max_entropy": math.log(n_keys),
        "example_row_unscaled": s["unscaled_w"][0].tolist(),
        "example_row_scaled": s["scaled_w"][0].tolist(),
        "sweep": sweep,
    }


# ----------------------------------------------------------------------------- 4. positions
# The chapter's own functions (gptlab.model.positional), which gptlab.plots.positions draws:
# view 4 shows the same numbers as the library's figures.
sinusoidal = sinusoidal_similarity
