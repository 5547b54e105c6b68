"""The losses a model must beat to have learned its task, read off the task's own data: the
bar of the preconditions of the claims that read a trained model's mechanism
(gptlab.experiments.claims.Precondition).

- **uniform**: ln(vocab), the loss of a uniform guess (an untrained model's, about);
- **bigram**: the loss of the best table of the next token given the current one, on the
  training split itself (its conditional entropy, in nats/token). A transformer gets this
  from the current token's embedding alone, no attention and no position: a model whose
  loss is not below it has not learned to read its context, which every claim about its
  heads, its positions or its memories is about.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def uniform_loss(vocab_size: int) -> float:
    """ln(vocab_size): a uniform guess's loss, nats/token."""
    return math.log(vocab_size)


def bigram_loss(ids: Any) -> float:
    """The conditional entropy of the next token given the current one over `ids` (a 1-D
    array of token ids, at least 2), nats/token: the loss of the bigram table fitted to
    them, measured on them."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or len(ids) < 2:
        raise ValueError("bigram_loss needs a 1-D sequence of at least 2 token ids")
    width = int(ids.max()) + 1
    _, pairs = np.unique(ids[:-1] * width + ids[1:], return_counts=True)
    _, firsts = np.unique(ids[:-1], return_counts=True)
    # H(next | current) = H(current, next) - H(current), both over the same n - 1 pairs
    n = len(ids) - 1
    return float(_entropy(pairs, n) - _entropy(firsts, n))


def _entropy(counts: np.ndarray, n: int) -> float:
    p = counts / n
    return float(-(p * np.log(p)).sum())


def text_baselines(train: Any, vocab_size: int) -> dict[str, float]:
    """{"uniform", "bigram"} of a training split (token ids) and its vocabulary."""
    return {"uniform": uniform_loss(vocab_size), "bigram": bigram_loss(train)}
