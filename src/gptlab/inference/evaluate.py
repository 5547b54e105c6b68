"""Loss, perplexity and bits of a model on any text, every token scored exactly once.

A text longer than the model's context is scored in windows of `context` tokens that slide
by `stride`, the method of Hugging Face's guide "Perplexity of fixed-length models": each
window scores only the tokens the previous windows did not, so every token is predicted
once, from the longest left context its window gives it (at least context - stride tokens,
except near the start). The text's first token has nothing to be predicted from and is
never scored. At stride = context the windows do not overlap and, as in that guide, the
first token of every window is left unscored too.

Bits per character and per byte divide the total bits by the text's characters and UTF-8
bytes, scaled by the share of tokens scored, so they compare across tokenizers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from gptlab.errors import UsageError


@dataclass(frozen=True)
class Score:
    """Totals of one or more texts; the figures people quote are properties."""

    nll: float  # summed negative log-likelihood of the scored tokens, nats
    scored: int  # tokens scored
    tokens: int  # tokens in the text(s)
    chars: int  # characters in the text(s)
    bytes: int  # UTF-8 bytes in the text(s)

    @property
    def loss(self) -> float:
        """Mean loss, nats per token."""
        return self.nll / self.scored

    @property
    def perplexity(self) -> float:
        return math.exp(self.loss)

    @property
    def bits_per_token(self) -> float:
        return self.loss / math.log(2)

    @property
    def bits_per_char(self) -> float:
        return self.bits_per_token * self.tokens / self.chars

    @property
    def bits_per_byte(self) -> float:
        return self.bits_per_token * self.tokens / self.bytes

    def __add__(self, other: Score) -> Score:
        return Score(self.nll + other.nll, self.scored + other.scored,
                     self.tokens + other.tokens, self.chars + other.chars,
                     self.bytes + other.bytes)

    def to_dict(self) -> dict[str, float | int]:
        return {"tokens_scored": self.scored, "loss": self.loss, "perplexity": self.perplexity,
                "bits_per_token": self.bits_per_token, "bits_per_byte": self.bits_per_byte,
                "bits_per_char": self.bits_per_char, "tokens": self.tokens,
                "chars": self.chars, "bytes": self.bytes}


def windows(n: int, context: int, stride: int) -> list[tuple[int, int, int]]:
    """(begin, end, first scored position within the window) of every window over n
    tokens. A window scores its positions from `first` to its end, each position j
    predicting token begin + j from the logits at j - 1."""
    if not 1 <= stride <= context:
        raise UsageError(f"stride must be between 1 and the context ({context}), got {stride}")
    out, prev_end = [], 0
    for begin in range(0, n, stride):
        end = min(begin + context, n)
        new = end - prev_end  # tokens no earlier window scored
        out.append((begin, end, max(1, end - begin - new)))
        prev_end = end
        if end == n:
            break
    return out


@torch.no_grad()
def score_ids(model: torch.nn.Module, ids: torch.Tensor, context: int | None = None,
              stride: int | None = None, batch_size: int = 8) -> tuple[float, int]:
    """(summed NLL in nats, tokens scored) of a 1-D tensor of token ids under `model`,
    whose `model(idx)` returns (logits, _). context defaults to the model's block_size,
    stride to half the context."""
    block = model.config.block_size
    context = block if context is None else context
    if not 2 <= context <= block:  # a window of one token has nothing to predict from
        raise UsageError(f"context must be between 2 and the model's block_size ({block}), "
                         f"got {context}")
    stride = max(1, context // 2) if stride is None else stride
    if batch_size < 1:
        raise UsageError(f"batch_size must be >= 1, got {batch_size}")
    if ids.dim() != 1 or len(ids) < 2:
        raise UsageError("a text needs at least two tokens to score one")
    device = next(model.parameters()).device
    ids = ids.to(device=device, dtype=torch.long)
    was_training = model.training
    model.eval()
    total, scored = torch.zeros((), dtype=torch.float64, device=device), 0
    spans = windows(len(ids), context, stride)
    # Windows of one length go through the model together.
    for length in sorted({end - begin for begin, end, _ in spans}):
        same = [w for w in spans if w[1] - w[0] == length]
        for i in range(0, len(same), batch_size):
            batch = same[i:i + batch_size]
            x = torch.stack([ids[b:e] for b, e, _ in batch])  # (B, T)
            logits, _ = model(x)
            nll = F.cross_entropy(logits[:, :-1].float().flatten(0, 1), x[:, 1:].flatten(),
                                  reduction="none").view(len(batch), length - 1)
            for row, (_, _, first) in enumerate(batch):
                total += nll[row, first - 1:].double().sum()
                scored += length - first
    model.train(was_training)
    return total.item(), scored


def score_text(model: torch.nn.Module, tokenizer, text: str, context: int | None = None,
               stride: int | None = None, batch_size: int = 8) -> Score:
    """Score of one text (a document: no context crosses into another text)."""
    if not text:
        raise UsageError("the text is empty: nothing to score")
    ids = torch.tensor(tokenizer.encode(text), dtype=torch.long)
    nll, scored = score_ids(model, ids, context, stride, batch_size)
    return Score(nll, scored, len(ids), len(text), len(text.encode("utf-8")))
