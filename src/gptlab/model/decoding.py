"""Choosing the next token: temperature, top-k, top-p (nucleus), greedy; and the cached
decoding loop that `GPT.generate` and `gptlab sample` share.

The three knobs travel together as one frozen `SamplingSettings`, checked once when it is
made, so nothing downstream checks them again per token.

Past the context: once the KV cache holds `context` positions (the model's block_size, or
what GPT.set_context or the `context` argument asks, which may be longer for every encoding
but learned positions), the oldest half of the text is dropped and the newest context // 2
tokens are encoded again in one pass, so decoding goes on with a cache that is half full.
Each new token then sees at least half a context of history, and the re-encoding costs one
prefill per context // 2 tokens.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from gptlab.errors import Setting, SettingError, UsageError
from gptlab.fields import is_int, is_number
from gptlab.model.inputs import check_token_ids
from gptlab.model.kv_cache import new_kv_cache
from gptlab.model.positional import ContextWarning, check_context


@dataclass(frozen=True)
class SamplingSettings:
    """How the next token is chosen. A bad value is a UsageError when the settings are made.

    top_k keeps the k likeliest tokens (ties at the k-th value kept too); top_p keeps the
    smallest set of likeliest tokens whose probabilities sum to at least top_p.
    """

    temperature: float = 1.0  # below 1 sharper, above 1 flatter; 0 means greedy
    top_k: int | None = None  # None: no cut
    top_p: float | None = None  # None: no cut

    def __post_init__(self) -> None:
        temperature, top_k, top_p = self.temperature, self.top_k, self.top_p
        if not (is_number(temperature) and temperature >= 0):
            raise SettingError(Setting("temperature"),
                               f" must be a finite number >= 0, got {temperature!r}")
        if top_k is not None and not (is_int(top_k) and top_k >= 1):
            raise SettingError(Setting("top_k"), f" must be an integer >= 1, got {top_k!r}")
        if top_p is not None and not (is_number(top_p) and 0 < top_p <= 1):
            raise SettingError(Setting("top_p"), f" must be in (0, 1], got {top_p!r}")

    @property
    def greedy(self) -> bool:
        """Always the likeliest token: temperature 0 or top_k 1."""
        return self.temperature == 0 or self.top_k == 1


def filter_logits(logits: Tensor, settings: SamplingSettings) -> Tensor:
    """logits (B, V) -> temperature-scaled logits with every token that settings exclude at
    -inf. Temperature 0 keeps only the argmax."""
    temperature, top_k, top_p = settings.temperature, settings.top_k, settings.top_p
    if temperature == 0:
        top_k, temperature = 1, 1.0
    # Shifted so the largest is 0 (softmax is unchanged), and the temperature kept above
    # float32's smallest normal: a tiny temperature then sends the others to -inf instead
    # of every logit to +-inf (or 0 / 0), which softmax would turn into NaN.
    logits = logits.float()
    logits = logits - logits.amax(dim=-1, keepdim=True)
    logits = logits / max(temperature, torch.finfo(logits.dtype).tiny)
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        mass_before = probs.cumsum(dim=-1) - probs  # probability of strictly likelier tokens
        drop_sorted = mass_before >= top_p  # the set was complete before this token
        # The likeliest token always stays: a top_p below float32's smallest subnormal
        # compares as 0, which would otherwise drop every token (and softmax gives NaN).
        drop_sorted[..., 0] = False
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def sample_next(
    logits: Tensor, settings: SamplingSettings, generator: torch.Generator | None = None
) -> Tensor:
    """logits (B, V) -> next token ids (B, 1)."""
    filtered = filter_logits(logits, settings)
    if settings.greedy:
        return filtered.argmax(dim=-1, keepdim=True)
    probs = torch.softmax(filtered, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator)


@torch.inference_mode()
def generate_tokens(
    model: torch.nn.Module,
    idx: Tensor,
    max_new_tokens: int,
    settings: SamplingSettings = SamplingSettings(),
    generator: torch.Generator | None = None,
    context: int | None = None,
) -> Iterator[Tensor]:
    """Yield max_new_tokens next tokens, each (B, 1), as soon as each is chosen.

    idx (B, T) is the prompt; a prompt longer than the context is cropped from the left,
    with a warning. context: the longest text the model sees at once (default the model's
    `context`, its block_size unless set_context raised it); past block_size it warns
    (ContextWarning), and learned positions refuse. Decoding uses a preallocated KV cache
    (see the module docstring).
    """
    if not isinstance(settings, SamplingSettings):
        raise UsageError(f"settings must be a SamplingSettings, got {type(settings).__name__}")
    if not (is_int(max_new_tokens) and max_new_tokens >= 0):
        raise SettingError(Setting("max_new_tokens"),
                           f" must be an integer >= 0, got {max_new_tokens!r}")
    check_token_ids(idx)
    if idx.shape[1] == 0:
        raise UsageError("the prompt is empty: give at least one token")
    low, high, vocab_size = int(idx.min()), int(idx.max()), model.config.vocab_size
    if low < 0 or high >= vocab_size:
        raise UsageError(f"idx holds token ids {low}..{high}, outside the vocabulary "
                         f"0..{vocab_size - 1}")
    if context is None:
        context = getattr(model, "context", model.config.block_size)
    else:
        warning = check_context(model.config, context)
        if warning:
            warnings.warn(warning, ContextWarning, stacklevel=2)
    if idx.shape[1] > context:
        warnings.warn(
            f"prompt of {idx.shape[1]:,} tokens cropped to the last {context:,} "
            f"(the model's context)", stacklevel=2)
        idx = idx[:, -context:]
    was_training = model.training
    model.eval()
    try:
        B, T = idx.shape
        # No bigger than this text needs: a converted long-context model would otherwise
        # allocate its whole context's keys and values for a short sample.
        cache = new_kv_cache(model, B, min(context, T + max_new_tokens))
        held = idx.new_empty(B, cache.max_len)  # the tokens whose keys/values are cached
        held[:, :T] = idx
        logits, _ = model(idx, cache=cache)
        for i in range(max_new_tokens):
            token = sample_next(logits[:, -1], settings, generator)
            yield token
            if i == max_new_tokens - 1:
                return
            if cache.length == cache.max_len:  # the context is full: slide by half
                keep = max(1, context // 2)
                window = torch.cat([held[:, cache.length - keep + 1:], token], dim=1)
                cache.reset()
                held[:, :keep] = window
                logits, _ = model(window, cache=cache)
            else:
                held[:, cache.length] = token[:, 0]
                logits, _ = model(token, cache=cache)
    finally:
        model.train(was_training)
