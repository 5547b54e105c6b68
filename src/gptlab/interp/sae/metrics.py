"""A dictionary measured as the papers report it, under SAELens' names, on held-out text
cut into windows of the model's context (none overlapping; each window's every next-token
prediction scored):

  l0                     mean number of features active (> 0) per token
  explained_variance     1 - E||y - y_hat||^2 / (E||y||^2 - ||E y||^2): the share of the
                         site's variance (summed over dimensions) the reconstruction keeps
  mse                    E||y - y_hat||^2 (summed over dimensions)
  ce_loss_without_sae    the model's loss (nats per token), untouched
  ce_loss_with_sae       with the site replaced by the reconstruction
  ce_loss_with_ablation  with the site replaced by zeros
  ce_loss_score          (ablation - with_sae) / (ablation - without_sae): the share of
                         the loss the site is worth that the dictionary keeps ("CE loss
                         recovered"); 1 is perfect, 0 no better than zeros
  dead_features          features that never fire on the text
  dense_features         features that fire on more than DENSE of its tokens

and each feature's density (the share of tokens it fires on) with a histogram of their
log10, as Bricken et al. draw it. Sums run in float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gptlab.errors import UsageError
from gptlab.interp.hooks import eval_mode
from gptlab.interp.sae.autoencoder import SparseAutoencoder
from gptlab.interp.sae.sites import recording, spliced
from gptlab.model.inputs import unwrap

DENSE = 0.1  # "dense": fires on more than one token in ten
HISTOGRAM_EDGES = tuple(range(-8, 1))  # log10 density bins: 1e-8 .. 1
EVAL_WINDOWS = 16  # windows per forward pass


def text_windows(ids: np.ndarray | Tensor, context: int) -> Tensor:
    """(n, context) long: the text's ids cut into whole windows, the rest dropped."""
    ids = torch.as_tensor(np.asarray(ids, dtype=np.int64))
    n = len(ids) // context
    if n == 0:
        raise UsageError(f"the text has {len(ids):,} tokens, fewer than one window of "
                         f"{context:,}")
    return ids[: n * context].view(n, context)


@dataclass
class Sums:
    """What the measures are computed from, summed over batches (float64)."""

    d_sae: int
    tokens: int = 0
    scored: int = 0
    nll: dict[str, float] = field(default_factory=lambda: dict.fromkeys(
        ("without_sae", "with_sae", "with_ablation"), 0.0))
    squared_error: float = 0.0
    squared_norm: float = 0.0
    total: Tensor | None = None  # (d_out,) sum of y
    active: float = 0.0
    fired: Tensor = field(init=False)

    def __post_init__(self) -> None:
        self.fired = torch.zeros(self.d_sae, dtype=torch.float64)

    def add(self, y: Tensor, rebuilt: Tensor, features: Tensor) -> None:
        y, rebuilt = y.double(), rebuilt.double()
        self.tokens += y.shape[0]
        self.squared_error += float((y - rebuilt).pow(2).sum())
        self.squared_norm += float(y.pow(2).sum())
        self.total = y.sum(0) if self.total is None else self.total + y.sum(0)
        active = features > 0
        self.active += float(active.sum())
        self.fired += active.sum(0).double()


def _nll(logits: Tensor, idx: Tensor) -> float:
    """Summed next-token NLL over every position of every window but the last."""
    return float(F.cross_entropy(logits[:, :-1].double().reshape(-1, logits.size(-1)),
                                 idx[:, 1:].reshape(-1), reduction="sum"))


@torch.no_grad()
def measure_sums(model: nn.Module, sae: SparseAutoencoder, ids: np.ndarray | Tensor,
                 context: int | None = None) -> Sums:
    """Run the three forwards (clean, spliced, ablated) over the text's windows."""
    config = sae.config
    windows = text_windows(ids, context or unwrap(model).config.block_size)
    sums = Sums(config.d_sae)
    with eval_mode(model), eval_mode(sae):
        for chunk in windows.split(EVAL_WINDOWS):
            with recording(model, config.site, config.layer) as caught:
                logits, _ = model(chunk)
            x = caught["x"].reshape(-1, config.d_in).float()
            y = caught["y"].reshape(-1, config.d_out).float()
            features = sae.encode(x)
            sums.add(y, sae.decode(features), features)
            sums.nll["without_sae"] += _nll(logits, chunk)
            with spliced(model, config.site, config.layer, sae):
                sums.nll["with_sae"] += _nll(model(chunk)[0], chunk)
            with spliced(model, config.site, config.layer, None):
                sums.nll["with_ablation"] += _nll(model(chunk)[0], chunk)
            sums.scored += chunk.shape[0] * (chunk.shape[1] - 1)
    return sums


def summarize(sums: Sums) -> dict[str, Any]:
    """The measures (module doc) from the sums."""
    n = sums.tokens
    mean = sums.total / n
    variance = sums.squared_norm / n - float(mean.pow(2).sum())
    mse = sums.squared_error / n
    ce = {f"ce_loss_{k}": v / sums.scored for k, v in sums.nll.items()}
    worth = ce["ce_loss_with_ablation"] - ce["ce_loss_without_sae"]
    density = sums.fired / n
    return {
        "tokens": n, "l0": sums.active / n,
        "explained_variance": 1 - mse / variance if variance > 0 else float("nan"),
        "mse": mse, **ce,
        "ce_loss_score": ((ce["ce_loss_with_ablation"] - ce["ce_loss_with_sae"]) / worth
                          if worth != 0 else float("nan")),
        "dead_features": int((density == 0).sum()),
        "dense_features": int((density > DENSE).sum()),
        "alive_features": int((density > 0).sum()),
        "feature_density": density.tolist(),
        "density_histogram": density_histogram(density),
    }


def density_histogram(density: Tensor) -> dict[str, Any]:
    """Counts of log10(density) in HISTOGRAM_EDGES' bins, the dead (density 0) apart."""
    alive = density[density > 0].log10().clamp(min=HISTOGRAM_EDGES[0])
    counts = np.histogram(alive.numpy(), bins=HISTOGRAM_EDGES)[0]
    return {"log10_edges": list(HISTOGRAM_EDGES), "counts": counts.tolist(),
            "dead": int((density == 0).sum())}


def evaluate(model: nn.Module, sae: SparseAutoencoder, ids: np.ndarray | Tensor,
             context: int | None = None) -> dict[str, Any]:
    """Every measure of the module doc on held-out ids (N,)."""
    return summarize(measure_sums(model, sae, ids, context))


def finite(value: float) -> float | None:
    """A measure for JSON: None where it is not a finite number."""
    return value if math.isfinite(value) else None
