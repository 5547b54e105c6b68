"""What the model is handed besides its weights: token ids checked once, the attention
mask a chunk of them needs (causal, after a cache, around padding; folded into ALiBi's bias
where there is one), and the GPT inside
whatever wraps it (DistributedDataParallel, torch.compile). Kept out of `gpt.py` so that
the model's forward reads as the chapter's diagram.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gptlab.errors import UsageError
from gptlab.model.attention import causal_mask


def unwrap(model: nn.Module) -> nn.Module:
    """The GPT inside a DistributedDataParallel and/or torch.compile wrapper."""
    while True:
        if hasattr(model, "module"):  # DistributedDataParallel
            model = model.module
        elif hasattr(model, "_orig_mod"):  # torch.compile
            model = model._orig_mod
        else:
            return model


def check_token_ids(idx: Tensor) -> None:
    """idx must be a (B, T) tensor of integer token ids: a clear error, not one from deep
    inside an embedding or an attention reshape."""
    if not isinstance(idx, Tensor):
        raise UsageError(f"idx must be a (B, T) tensor of token ids, got {type(idx).__name__}")
    if idx.dim() != 2:
        raise UsageError(f"idx must be a (B, T) tensor of token ids, got shape "
                         f"{tuple(idx.shape)} (a 1-D prompt needs idx[None])")
    if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
        raise UsageError(f"idx must hold integer token ids, got dtype {idx.dtype}")


def attention_mask_for(
        T: int, start: int, attention_mask: Tensor | None, device: torch.device
    ) -> tuple[Tensor | None, bool]:
        """(allowed, is_causal) for attention; None lets the fused kernel build the mask."""
        if attention_mask is None:
            if start == 0:
                return None, True  # plain causal attention over this chunk
            if T == 1:
                return None, False  # one new token sees every cached one
            return causal_mask(T, start + T, device), False
        keys = attention_mask.to(torch.bool)[:, None, None, :]  # (B, 1, 1, T_keys)
        allowed = causal_mask(T, start + T, device) & keys
        # A padding query would see no key at all and softmax to NaN; let it see itself.
        diagonal = torch.arange(start + T, device=device)[None, :] == (
            torch.arange(T, device=device)[:, None] + start
        )
        return allowed | diagonal, False


def bias_with_mask(bias: Tensor, allowed: Tensor | None, is_causal: bool, T: int, start: int
                   ) -> Tensor:
    """A score bias (nh, T, T_keys) with the mask attention_mask_for gave folded in as -inf,
    the one float mask the fused kernel takes: (nh or B x nh, T, T_keys)."""
    if allowed is None and is_causal:
        allowed = causal_mask(T, start + T, bias.device)
    if allowed is None:
        return bias
    return bias.masked_fill(~allowed, float("-inf"))
