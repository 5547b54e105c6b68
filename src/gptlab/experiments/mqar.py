"""Multi-query associative recall (MQAR; Arora et al. 2023, "Zoology"), generated and seeded.

A row of n tokens is `pairs` key-value pairs (distinct keys, values drawn with
replacement), then queries to the end: a key of the row (with replacement) followed by its
value. Keys are tokens 0..keys-1, values keys..keys+values-1. Only the value after a
queried key is predicted (targets -1 elsewhere, which GPT.forward and lstm_loss leave out):
those answers can only be read back from the pairs, so accuracy on them is recall.
Zoology grows the pairs with the length (its 64 / 128 / 256 tokens hold 4 / 8 / 16 pairs):
`pairs_for(n)` does the same.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gptlab.errors import UsageError

PAIRS_PER_TOKEN = 1 / 16  # Zoology's 4 pairs in 64 tokens, 8 in 128, 16 in 256


def pairs_for(length: int) -> int:
    return max(1, int(length * PAIRS_PER_TOKEN))


def mqar_batch(batch: int, length: int, pairs: int, keys: int, values: int,
               generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """(x, y), each (batch, length): rows as the module docstring says; y[:, i] is the
    token after x[:, i] where that is a queried value, -1 elsewhere."""
    if pairs > keys:
        raise UsageError(f"pairs ({pairs}) must be at most keys ({keys}): keys are distinct")
    if length < 2 * pairs + 2:
        raise UsageError(f"length {length} holds no query after {pairs} pairs")
    queries = (length + 2 - 2 * pairs) // 2  # enough to fill length + 1 tokens
    key = torch.rand(batch, keys, generator=generator).argsort(dim=1)[:, :pairs]
    value = keys + torch.randint(values, (batch, pairs), generator=generator)
    asked = torch.randint(pairs, (batch, queries), generator=generator)
    rows = torch.cat([torch.stack([key, value], dim=2).flatten(1),
                      torch.stack([key.gather(1, asked), value.gather(1, asked)],
                                  dim=2).flatten(1)], dim=1)[:, : length + 1]
    x, y = rows[:, :-1].clone(), rows[:, 1:].clone()
    answer = torch.zeros_like(y, dtype=torch.bool)
    answer[:, 2 * pairs::2] = True  # a query's key sits at 2*pairs + 2j; its value next
    y[~answer] = -1
    return x, y


def accuracy(logits: Tensor, y: Tensor) -> float:
    """The share of answers (y >= 0) whose argmax is right."""
    answered = y >= 0
    return float((logits.argmax(-1)[answered] == y[answered]).float().mean())
