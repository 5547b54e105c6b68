"""Reading a dictionary's features on a text, one feature at a time, as the papers show them:

- top-activating contexts: the positions where the feature is largest, each with its
  context (the text its window holds up to and including it: the model is causal, so that
  prefix alone gives the same activation) and the character it fires on;
- its logit effect: its decoder row (what it writes into the stream) through the final
  norm's gain and the unembedding, W_U (gain * d_i), in float64 (gptlab.interp.memory's
  `project`, the same convention as an FFN unit's value), the top promoted and suppressed
  tokens;
- the histogram of its non-zero activations.

A text longer than the model's context is read in windows of block_size overlapping by
half, each position taken from the window that gives it the longest left context
(gptlab.interp.memory's convention); the text's first position is never a candidate (it
has no context) nor its last (the pattern rule compares what follows).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from gptlab.errors import UsageError
from gptlab.inference.evaluate import windows
from gptlab.interp.hooks import eval_mode, forward_hooks
from gptlab.interp.memory import ffn_modules, pattern_score, project
from gptlab.interp.sae.autoencoder import SparseAutoencoder
from gptlab.interp.sae.sites import recording
from gptlab.model.inputs import unwrap

TOP_K = 25  # contexts per feature: Geva et al.'s top-25, as `experiment memory` reads
SINGLE_PATTERN = 0.5  # a top-25 "has a single pattern" when most of it shares an ending
BATCH_WINDOWS = 16  # windows read per forward pass


@dataclass
class TextCapture:
    """A text read at one site: x (N, d_in), y (N, d_out), neurons (N, ffn_hidden) (the
    FFN's coefficients of that layer, or None), starts (N,) the window each position is
    taken from, candidates (N,) bool."""

    tokens: Tensor
    x: Tensor
    y: Tensor
    neurons: Tensor | None
    starts: Tensor
    candidates: Tensor

    def prefix(self, position: int) -> Tensor:
        return self.tokens[int(self.starts[position]): position + 1]


@torch.no_grad()
def capture_text(model: nn.Module, ids: Sequence[int] | Tensor, site: str, layer: int,
                 neurons: bool = False) -> TextCapture:
    """Read a text's ids (N,) at the site (and the layer's FFN coefficients if neurons)."""
    gpt = unwrap(model)
    ids = torch.as_tensor(ids, dtype=torch.long)
    if ids.dim() != 1 or len(ids) == 0:
        raise UsageError("the text must be one sequence of at least one token")
    context, n = gpt.config.block_size, len(ids)
    xs: Tensor | None = None
    ys: Tensor | None = None
    hidden: Tensor | None = None
    starts = torch.full((n,), -1, dtype=torch.long)
    coefficients: dict[str, Tensor] = {}
    extra = []
    if neurons:
        proj = ffn_modules(model)[layer].proj
        extra = [(proj, lambda _m, args, _o: coefficients.__setitem__("h", args[0]))]
    spans = windows(n, context, max(1, context // 2))
    with eval_mode(model), recording(model, site, layer) as caught, forward_hooks(*extra):
        for group in _same_length(spans, BATCH_WINDOWS):
            idx = torch.stack([ids[begin:end] for begin, end, _ in group])
            model(idx.to(gpt.wte.weight.device))
            x, y = caught["x"].float().cpu(), caught["y"].float().cpu()
            h = coefficients["h"].float().cpu() if neurons else None
            if xs is None:
                xs, ys = torch.zeros(n, x.shape[-1]), torch.zeros(n, y.shape[-1])
                hidden = torch.zeros(n, h.shape[-1]) if h is not None else None
            for row, (begin, end, first) in enumerate(group):
                first = first if begin > 0 else 0  # the text's first position is read too
                xs[begin + first:end], ys[begin + first:end] = x[row, first:], y[row, first:]
                if hidden is not None:
                    hidden[begin + first:end] = h[row, first:]
                starts[begin + first:end] = begin
    candidates = torch.ones(n, dtype=torch.bool)
    candidates[0] = candidates[-1] = False
    return TextCapture(ids, xs, ys, hidden, starts, candidates)


def _same_length(spans: list[tuple[int, int, int]], size: int
                 ) -> list[list[tuple[int, int, int]]]:
    """The windows in groups of up to `size` consecutive ones of one length (a batch)."""
    groups: list[list[tuple[int, int, int]]] = []
    for span in spans:
        if groups and len(groups[-1]) < size and \
                groups[-1][0][1] - groups[-1][0][0] == span[1] - span[0]:
            groups[-1].append(span)
        else:
            groups.append([span])
    return groups


def top_positions(acts: Tensor, candidates: Tensor, k: int = TOP_K) -> tuple[Tensor, Tensor]:
    """(values (U, k), positions (U, k)): each unit's k largest activations over the
    candidate positions of acts (N, U), largest first."""
    masked = acts.masked_fill(~candidates[:, None], float("-inf"))
    values, positions = masked.topk(min(k, int(candidates.sum())), dim=0)
    return values.T, positions.T


def pattern_scores(acts: Tensor, capture: TextCapture, decode: Callable[[Sequence[int]], str],
                   k: int = TOP_K, chars: int = 3) -> Tensor:
    """(U,) each unit's pattern score (gptlab.interp.memory.pattern_score: the share of
    its top-k prefixes that share an ending) over its top-k positions; NaN for a unit
    that fires (> 0) at fewer than k candidate positions, which has no top-k."""
    values, positions = top_positions(acts, capture.candidates, k)
    scores = torch.full((acts.shape[1],), float("nan"), dtype=torch.float64)
    texts: dict[int, str] = {}
    for unit in range(acts.shape[1]):
        if not bool((values[unit] > 0).all()) or values.shape[1] < k:
            continue
        prefixes = []
        for p in positions[unit].tolist():
            if p not in texts:
                texts[p] = decode(capture.prefix(p).tolist())
            prefixes.append(texts[p])
        scores[unit] = pattern_score(prefixes, chars)
    return scores


def single_pattern_share(scores: Tensor, threshold: float = SINGLE_PATTERN) -> float | None:
    """The share of units with a top-k (a score) whose score is at least `threshold`."""
    have = scores[~scores.isnan()]
    return float((have >= threshold).double().mean()) if len(have) else None


def logit_effects(model: nn.Module, sae: SparseAutoencoder,
                  features: Sequence[int] | Tensor | None = None) -> Tensor:
    """(len(features), vocab) float64: each feature's decoder row through the final norm's
    gain and the unembedding (all features for None)."""
    rows = sae.W_dec.detach()
    if features is not None:
        rows = rows[torch.as_tensor(features, dtype=torch.long)]
    return project(model, rows)


def activation_histogram(values: Tensor, bins: int = 20) -> dict[str, list[float]]:
    """The non-zero activations' histogram: {"edges": bins + 1, "counts": bins}."""
    active = values[values > 0].double()
    if len(active) == 0:
        return {"edges": [], "counts": []}
    counts, edges = np.histogram(active.numpy(), bins=bins)
    return {"edges": edges.tolist(), "counts": counts.tolist()}


def feature_record(model: nn.Module, sae: SparseAutoencoder, capture: TextCapture,
                   acts: Tensor, feature: int, decode: Callable[[Sequence[int]], str],
                   k: int = 10, tokens: int = 8, window: int = 40) -> dict:
    """One feature read on a text: density, top-k contexts (the position, where its
    context starts, and the last `window` tokens' ids and text up to the firing one,
    which is the last), its top promoted and suppressed tokens, the activation histogram.
    acts: (N, d_sae) the text's features."""
    column = acts[:, feature]
    values, positions = top_positions(column[:, None], capture.candidates, k)
    contexts = []
    for value, position in zip(values[0].tolist(), positions[0].tolist(), strict=True):
        if value <= 0:
            break
        ids = capture.prefix(position)[-window:].tolist()
        contexts.append({"position": position, "start": int(capture.starts[position]),
                         "activation": value, "ids": ids, "text": decode(ids),
                         "token": decode(ids[-1:])})
    effect = logit_effects(model, sae, [feature])[0]
    top = effect.topk(tokens)
    bottom = (-effect).topk(tokens)
    return {
        "feature": feature,
        "density": float((column > 0).double().mean()),
        "max_activation": float(column.max()),
        "contexts": contexts,
        "promoted": [{"id": int(i), "text": decode([int(i)]), "logit": float(v)}
                     for v, i in zip(top.values, top.indices, strict=True)],
        "suppressed": [{"id": int(i), "text": decode([int(i)]), "logit": float(-v)}
                       for v, i in zip(bottom.values, bottom.indices, strict=True)],
        "histogram": activation_histogram(column),
    }
