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


class NeuronBasis:
    """One layer's FFN output at N positions, rebuilt from its k longest neuron terms for
    any k. coefficients (N, H) the neurons' coefficients, y (N, C) the FFN's output, at
    the same positions; the terms are ranked once, so each k costs one product."""

    def __init__(self, model: nn.Module, layer: int, coefficients: Tensor, y: Tensor) -> None:
        proj = ffn_modules(model)[layer].proj
        self.weight = proj.weight.detach().double().cpu()  # (C, H)
        self.bias = None if proj.bias is None else proj.bias.detach().double().cpu()
        self.m, self.y = coefficients.double(), y.double()
        lengths = self.m.abs() * self.weight.norm(dim=0)
        self.rank = lengths.argsort(dim=-1, descending=True).argsort(dim=-1)  # 0: longest
        self.variance = float((self.y - self.y.mean(0)).pow(2).sum(-1).mean())

    @property
    def width(self) -> int:
        return self.m.shape[-1]

    def rebuilt(self, k: int) -> Tensor:
        """(N, C): each position's k longest terms summed, plus the bias."""
        out = torch.where(self.rank < k, self.m, 0.0) @ self.weight.T
        return out if self.bias is None else out + self.bias

    def explained_variance(self, k: int) -> float:
        """The share of y's variance its k longest terms keep, float64."""
        return 1 - float((self.y - self.rebuilt(k)).pow(2).sum(-1).mean()) / self.variance

    def needed(self, target: float) -> tuple[int, float]:
        """(the smallest k whose explained variance reaches `target`, that variance), by
        bisection over k (the variance grows with k); the width where none short of all
        does."""
        low, high = 1, self.width
        while low < high:
            middle = (low + high) // 2
            if self.explained_variance(middle) >= target:
                high = middle
            else:
                low = middle + 1
        return high, self.explained_variance(high)
