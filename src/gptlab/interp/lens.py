"""The logit lens (nostalgebraist 2020): read the residual stream after each block as if it
were the last, through the model's own final norm and unembedding, to see when the
prediction forms.

Row l of the lens is the stream after l blocks: row 0 the embeddings, row n_layer the
stream the final norm reads, whose lens is the model's own logits, bit for bit. Each row
gets the final norm with its own statistics (TransformerLens's `accumulated_resid(...,
apply_ln=True)` then the unembedding).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gptlab.interp.residuals import capture_residuals, check_pre_norm


def stream_by_depth(model: nn.Module, idx: Tensor) -> tuple[Tensor, Tensor]:
    """(n_layer + 1, B, T, C): the stream after 0, 1, ..., n_layer blocks, and the model's
    logits (B, T, vocab) from the same pass."""
    parts = capture_residuals(model, idx)
    return torch.stack([*parts.resid_pre, parts.final]), parts.logits


@torch.no_grad()
def unembed(model: nn.Module, stream: Tensor) -> Tensor:
    """(..., C) residual stream -> (..., vocab) logits: final norm, then W_U."""
    gpt = check_pre_norm(model)
    return gpt.lm_head(gpt.ln_f(stream))


def logit_lens(model: nn.Module, idx: Tensor) -> Tensor:
    """(n_layer + 1, B, T, vocab): the logits each depth of the stream would give for idx
    (T,) or (B, T). The last row equals the model's logits exactly."""
    stream, _ = stream_by_depth(model, idx)
    return unembed(model, stream)


def top_tokens(lens: Tensor, k: int = 5) -> tuple[Tensor, Tensor]:
    """(probabilities, token ids), each (..., k): the k likeliest tokens of every row and
    position of a lens (..., vocab), likeliest first."""
    probs = torch.softmax(lens.float(), dim=-1)
    return probs.topk(min(k, probs.shape[-1]), dim=-1)


def next_token_probs(lens: Tensor, idx: Tensor) -> Tensor:
    """(rows, B, T - 1): at every depth, the probability the lens gives the token that
    actually comes next. lens (rows, B, T, vocab) of idx (B, T)."""
    probs = torch.softmax(lens[:, :, :-1].float(), dim=-1)
    following = idx[:, 1:].to(probs.device)  # (B, T - 1)
    index = following[None, :, :, None].expand(probs.shape[0], -1, -1, 1)
    return probs.gather(-1, index)[..., 0]


def depth_names(n_layer: int) -> list[str]:
    """Row l of the lens: the embeddings, then the stream after each block."""
    return ["embed"] + [f"block {layer}" for layer in range(n_layer)]
