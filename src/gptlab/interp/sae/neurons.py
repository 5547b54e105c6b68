"""The FFN's own basis, measured like a dictionary: how many neurons a token needs for
the reconstruction of the FFN's output to keep a given share of its variance.

The FFN's output is y = W_out m + b_out, m (H,) the neurons' coefficients (what
`mlp.proj` reads). Keeping a token's k neurons whose terms m_i W_out[:, i] are longest
(|m_i| ||W_out[:, i]||) gives y_k; its explained variance is computed as a dictionary's
(gptlab.interp.sae.metrics: 1 - E||y - y_k||^2 / the variance of y). With all H neurons
y_k = y exactly, so the number needed for a dictionary's explained variance is that
dictionary's L0 in the neuron basis.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gptlab.interp.memory import ffn_modules


def keep_largest(coefficients: Tensor, norms: Tensor, k: int) -> Tensor:
    """(N, H) coefficients with all but each row's k longest terms zeroed."""
    keep = (coefficients.abs() * norms).topk(k, dim=-1).indices
    return torch.zeros_like(coefficients).scatter(-1, keep, coefficients.gather(-1, keep))


@torch.no_grad()
def explained_variance_at(model: nn.Module, layer: int, coefficients: Tensor, y: Tensor,
                          k: int) -> float:
    """The explained variance of y (N, C) by each token's k longest neuron terms, float64.
    coefficients (N, H): the layer's neuron coefficients at the same tokens."""
    proj = ffn_modules(model)[layer].proj
    weight = proj.weight.detach().double().cpu()  # (C, H)
    m, y = coefficients.double(), y.double()
    rebuilt = keep_largest(m, weight.norm(dim=0), k) @ weight.T
    if proj.bias is not None:
        rebuilt = rebuilt + proj.bias.detach().double().cpu()
    variance = (y - y.mean(0)).pow(2).sum(-1).mean()
    return float(1 - (y - rebuilt).pow(2).sum(-1).mean() / variance)


def neurons_needed(model: nn.Module, layer: int, coefficients: Tensor, y: Tensor,
                   target: float) -> tuple[int, float]:
    """(the smallest k whose explained variance reaches `target`, that variance), by
    bisection over k (the variance grows with k); H where none short of all does."""
    low, high = 1, coefficients.shape[-1]
    best = explained_variance_at(model, layer, coefficients, y, high)
    while low < high:
        middle = (low + high) // 2
        value = explained_variance_at(model, layer, coefficients, y, middle)
        if value >= target:
            high, best = middle, value
        else:
            low = middle + 1
    if high == coefficients.shape[-1]:
        best = explained_variance_at(model, layer, coefficients, y, high)
    return high, best
