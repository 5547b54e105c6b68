"""Direct logit attribution: split a logit (or the difference of two) into what each part
of the residual stream writes toward it (Elhage et al. 2021, "A Mathematical Framework").

The final norm is not linear, so its scale is frozen at the value it had in this run (the
norm of the whole stream at that position); then the norm is linear, and the logit is the
sum, over the parts of the stream, of part -> (centre, for LayerNorm) -> / scale -> * norm
weight -> . W_U[:, token], plus the norm's bias . W_U[:, token]. This is what
TransformerLens's `apply_ln_to_stack` (cached scale) and `logit_attrs` compute.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from gptlab.errors import UsageError
from gptlab.interp.residuals import Residuals, capture_residuals, check_pre_norm


@dataclass
class Attribution:
    """labels[i] names values[i] (B,): "embed", "pos_embed" (absolute positions only),
    "L{l}H{h}" for every head (its output through W_O, no bias), "L{l} mlp", and with
    biases "attn biases" (every layer's output-projection bias) and "final norm bias".
    total (B,): the model's own logit (difference); the values sum to it."""

    labels: list[str]
    values: Tensor
    total: Tensor
    position: int


def check_target_ids(model: nn.Module, tokens: int | Tensor, what: str = "target") -> Tensor:
    """One token id, or one per sequence (B,), as a long tensor; a UsageError if any lies
    outside the vocabulary."""
    vocab = check_pre_norm(model).config.vocab_size
    if isinstance(tokens, bool) or not isinstance(tokens, (int, Tensor)) or (
            isinstance(tokens, Tensor) and (tokens.dim() > 1 or tokens.is_floating_point())):
        raise UsageError(f"{what} must be a token id or a (B,) tensor of them, got {tokens!r}")
    ids = torch.as_tensor(tokens).long().reshape(-1)
    bad = [int(t) for t in ids if not 0 <= int(t) < vocab]
    if bad or len(ids) == 0:
        raise UsageError(f"{what} token {bad[0] if bad else tokens!r} is outside the "
                         f"vocabulary (0..{vocab - 1})")
    return ids


def stream_parts(model: nn.Module, parts: Residuals, at: slice = slice(None)
                 ) -> tuple[list[str], Tensor]:
    """(labels, (n_parts, B, T', C)): the pieces that sum to `parts.final`, at the
    positions `at` selects (T' of them)."""
    gpt = check_pre_norm(model)
    labels, pieces = ["embed"], [parts.embed[:, at]]
    if parts.pos_embed is not None:
        labels.append("pos_embed")
        pieces.append(parts.pos_embed[:, at])
    for layer, results in enumerate(parts.head_results):
        results = results[:, :, at]
        labels += [f"L{layer}H{h}" for h in range(results.shape[1])] + [f"L{layer} mlp"]
        pieces += [*results.unbind(1), parts.mlp_out[layer][:, at]]
    biases = [block.attn.proj.bias for block in gpt.blocks]
    if biases[0] is not None:  # W_O's bias, every position alike
        labels.append("attn biases")
        pieces.append(torch.stack(biases).sum(dim=0).expand_as(pieces[0]))
    return labels, torch.stack(pieces)


def frozen_norm(model: nn.Module, stack: Tensor, final: Tensor) -> Tensor:
    """Apply the final norm to each part of stack (n, ..., C) with the scale (and centring)
    it had on `final` (..., C), weight included, bias left out: linear, so the parts
    still sum to ln_f(final) - bias."""
    norm = check_pre_norm(model).ln_f
    if isinstance(norm, nn.LayerNorm):
        stack = stack - stack.mean(dim=-1, keepdim=True)
        scale = (final.var(dim=-1, unbiased=False, keepdim=True) + norm.eps).sqrt()
    else:  # RMSNorm
        scale = (final.float().pow(2).mean(dim=-1, keepdim=True) + norm.eps).sqrt()
    weight = norm.weight if norm.weight is not None else 1.0
    return stack / scale.to(stack.dtype) * weight


@torch.no_grad()
def logit_attribution(
    model: nn.Module,
    idx: Tensor,
    target: int | Tensor,
    versus: int | Tensor | None = None,
    position: int = -1,
) -> Attribution:
    """Each part's direct contribution to the logit of `target` (minus that of `versus`)
    at `position` of idx (T,) or (B, T). target and versus: one token id, or one per
    sequence (B,)."""
    gpt = check_pre_norm(model)
    targets = check_target_ids(model, target)
    others = None if versus is None else check_target_ids(model, versus, "versus")
    parts = capture_residuals(model, idx)
    B, T = parts.tokens.shape
    if isinstance(position, bool) or not isinstance(position, int) or not -T <= position < T:
        raise UsageError(f"position {position!r} is out of range for {T:,} tokens")
    for ids, what in ((targets, "target"), (others, "versus")):
        if ids is not None and len(ids) not in (1, B):
            raise UsageError(f"{len(ids)} {what} tokens for {B} sequences")
    position %= T
    rows = torch.arange(B)
    targets, device = targets.expand(B), parts.logits.device
    direction = gpt.lm_head.weight[targets.to(device)]  # (B, C)
    total = parts.logits[rows, position, targets]
    if others is not None:
        others = others.expand(B)
        direction = direction - gpt.lm_head.weight[others.to(device)]
        total = total - parts.logits[rows, position, others]
    at = slice(position, position + 1)
    labels, stack = stream_parts(model, parts, at)
    normed = frozen_norm(model, stack, parts.final[:, at])[:, :, 0]  # (n, B, C)
    values = (normed * direction).sum(dim=-1)  # (n, B)
    bias = getattr(gpt.ln_f, "bias", None)
    if bias is not None:
        labels.append("final norm bias")
        values = torch.cat([values, (direction @ bias)[None]])
    return Attribution(labels, values, total, position)
