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

By position (`score_positions`): the same scoring, its losses kept apart by where the
scored token sits in its window (position j was predicted from j tokens). With
non-overlapping windows (stride = context) every position is scored about as often, and
the curve shows how the loss falls as a token gets more context (the "early token curse" of
Press et al. 2021); with sliding windows each token is scored near its window's end, with
the longest context it can have. The context may exceed block_size for every encoding but
learned positions (gptlab.model.positional.check_context), with a ContextWarning.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from gptlab import stopping
from gptlab.errors import Setting, SettingError, UsageError
from gptlab.model.positional import ContextWarning, check_context

# Tokens per forward pass when no batch size is given: GPT-2's 1024-token windows go 8 at a
# time, a 64-token character model's 128 (bench/eval_throughput.py measures what the
# larger batches buy a small model; the logits of a 50k vocabulary at 8,192 tokens take
# 1.6 GB in fp32).
DEFAULT_EVAL_TOKENS = 8192


@dataclass(frozen=True)
class Score:
    """Totals of one or more texts; the figures people quote are properties."""

    nll: float  # summed negative log-likelihood of the scored tokens, nats
    scored: int  # tokens scored
    tokens: int  # tokens in the text(s)
    chars: int  # characters in the text(s)
    bytes: int  # UTF-8 bytes in the text(s)
    positions: PositionScore | None = None  # the same scores by position in the window

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
        positions = None
        if self.positions is not None and other.positions is not None:
            positions = self.positions + other.positions
        return Score(self.nll + other.nll, self.scored + other.scored,
                     self.tokens + other.tokens, self.chars + other.chars,
                     self.bytes + other.bytes, positions)

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
        raise SettingError(Setting("stride"),
                           f" must be between 1 and the context ({context}), got {stride}")
    out, prev_end = [], 0
    for begin in range(0, n, stride):
        end = min(begin + context, n)
        new = end - prev_end  # tokens no earlier window scored
        out.append((begin, end, max(1, end - begin - new)))
        prev_end = end
        if end == n:
            break
    return out


@dataclass(frozen=True)
class PositionScore:
    """Summed NLL (nats) and tokens scored at each position 0..context-1 of the windows
    (position 0 is never scored: nothing predicts it)."""

    context: int
    stride: int
    nll: list[float]
    scored: list[int]

    @property
    def loss(self) -> float:
        """The mean over every scored token: score_ids's figure."""
        return sum(self.nll) / sum(self.scored)

    @property
    def mode(self) -> str:
        return "non-overlapping" if self.stride == self.context else "sliding"

    def buckets(self, n: int) -> list[dict[str, float | int | None]]:
        """The positions in n equal spans (the last takes the remainder): see spans."""
        if not (isinstance(n, int) and 1 <= n):
            raise SettingError(Setting("buckets"), f" must be a positive integer, got {n!r}")
        n = min(n, self.context)
        size = self.context // n
        return self.spans([b * size for b in range(n)])

    def spans(self, starts: list[int]) -> list[dict[str, float | int | None]]:
        """The positions cut where `starts` says (each span runs to the next start, the last
        to the end of the window): each span's first and last position, tokens scored and
        mean loss (None where none was scored). Their means weighted by tokens give
        `loss` back."""
        if not starts or starts[0] != 0 or sorted(set(starts)) != list(starts) \
                or starts[-1] >= self.context:
            raise UsageError(f"spans must start at 0 and rise within the {self.context} "
                             f"positions, got {starts}")
        out = []
        for lo, hi in zip(starts, [*starts[1:], self.context], strict=True):
            tokens, nll = sum(self.scored[lo:hi]), math.fsum(self.nll[lo:hi])
            out.append({"first": lo, "last": hi - 1, "tokens": tokens,
                        "loss": nll / tokens if tokens else None})
        return out

    def __add__(self, other: PositionScore) -> PositionScore:
        if (self.context, self.stride) != (other.context, other.stride):
            raise UsageError("only scores of the same context and stride add up")
        return PositionScore(self.context, self.stride,
                             [a + b for a, b in zip(self.nll, other.nll, strict=True)],
                             [a + b for a, b in zip(self.scored, other.scored, strict=True)])

    def to_dict(self, buckets: int) -> dict:
        return {"context": self.context, "stride": self.stride, "mode": self.mode,
                "loss": self.loss, "tokens_scored": sum(self.scored),
                "buckets": self.buckets(buckets)}


def _checked_context(model: torch.nn.Module, context: int | None) -> int:
    """The context to score with: the model's own (its block_size unless GPT.set_context
    raised it), or one asked for, past block_size with a ContextWarning."""
    if context is None:
        return getattr(model, "context", model.config.block_size)
    if isinstance(context, int) and context == 1:  # a window of one token predicts nothing
        raise SettingError(Setting("context"), " must be at least 2 to score: a window of one "
                           "token has nothing to predict from")
    warning = check_context(model.config, context)
    if warning:
        warnings.warn(warning, ContextWarning, stacklevel=3)
    return context


@torch.no_grad()
def score_positions(model: torch.nn.Module, ids: torch.Tensor, context: int | None = None,
                    stride: int | None = None, batch_size: int | None = None) -> PositionScore:
    """The loss of a 1-D tensor of token ids under `model` (whose `model(idx)` returns
    (logits, _)), by position in the window; context defaults to the model's, stride to
    half the context, batch_size (windows per forward) to DEFAULT_EVAL_TOKENS' worth."""
    context = _checked_context(model, context)
    stride = max(1, context // 2) if stride is None else stride
    if batch_size is None:
        batch_size = max(1, DEFAULT_EVAL_TOKENS // context)
    if batch_size < 1:
        raise SettingError(Setting("batch_size"), f" must be >= 1, got {batch_size}")
    if ids.dim() != 1 or len(ids) < 2:
        raise UsageError("a text needs at least two tokens to score one")
    device = next(model.parameters()).device
    nll_at = torch.zeros(context, dtype=torch.float64, device=device)
    scored_at = torch.zeros(context, dtype=torch.long, device=device)
    spans = windows(len(ids), context, stride)
    for batch, nll in window_nlls(model, ids, spans, batch_size):
        # Position j (first..length-1) was predicted by the logits at j - 1. Windows
        # scored from the same first position (all but a text's first window, at a
        # sliding stride) are summed together.
        length = nll.size(1) + 1
        firsts = torch.tensor([first for _, _, first in batch], device=device)
        for first in firsts.unique().tolist():
            rows = firsts == first
            nll_at[first:length] += nll[rows, first - 1:].double().sum(0)
            scored_at[first:length] += rows.sum()
    return PositionScore(context, stride, nll_at.tolist(), scored_at.tolist())


@torch.no_grad()
def window_nlls(model: torch.nn.Module, ids: torch.Tensor, spans: list[tuple[int, int, int]],
                batch_size: int, stop: Callable[[], None] = stopping.check
                ) -> Iterator[tuple[list[tuple[int, int, int]], torch.Tensor]]:
    """(windows, their per-position NLL (B, length - 1): entry j - 1 is position j's) for
    `spans` (from windows()) over ids, in batches of at most batch_size windows of one
    length, the model in eval mode meanwhile; stop() is called before every batch (by
    default a signal the trainer deferred ends a long scoring there)."""
    device = next(model.parameters()).device
    ids = ids.to(device=device, dtype=torch.long)
    was_training = model.training
    model.eval()
    try:
        # Windows of one length go through the model together.
        for length in sorted({end - begin for begin, end, _ in spans}):
            same = [w for w in spans if w[1] - w[0] == length]
            for i in range(0, len(same), batch_size):
                stop()
                batch = same[i:i + batch_size]
                x = torch.stack([ids[b:e] for b, e, _ in batch])  # (B, T)
                logits, _ = model(x)
                nll = F.cross_entropy(logits[:, :-1].float().flatten(0, 1),
                                      x[:, 1:].flatten(), reduction="none")
                yield batch, nll.view(len(batch), length - 1)
    finally:
        model.train(was_training)


def score_ids(model: torch.nn.Module, ids: torch.Tensor, context: int | None = None,
              stride: int | None = None, batch_size: int | None = None) -> tuple[float, int]:
    """(summed NLL in nats, tokens scored) of a 1-D tensor of token ids under `model`,
    whose `model(idx)` returns (logits, _). context defaults to the model's (block_size
    unless GPT.set_context raised it), stride to half the context."""
    positions = score_positions(model, ids, context, stride, batch_size)
    return math.fsum(positions.nll), sum(positions.scored)


def score_text(model: torch.nn.Module, tokenizer, text: str, context: int | None = None,
               stride: int | None = None, batch_size: int | None = None) -> Score:
    """Score of one text (a document: no context crosses into another text)."""
    if not text:
        raise UsageError("the text is empty: nothing to score")
    ids = torch.tensor(tokenizer.encode(text), dtype=torch.long)
    return score_of(model, ids, text, context, stride, batch_size)


def score_of(model: torch.nn.Module, ids: torch.Tensor, text: str, context: int | None = None,
             stride: int | None = None, batch_size: int | None = None) -> Score:
    """Score of token ids whose text is `text` (for its characters and bytes), with its
    by-position detail."""
    positions = score_positions(model, ids, context, stride, batch_size)
    return Score(math.fsum(positions.nll), sum(positions.scored), len(ids), len(text),
                 len(text.encode("utf-8")), positions)
