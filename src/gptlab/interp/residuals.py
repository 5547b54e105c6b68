"""The residual stream of one forward pass, taken apart: what each block read, what each
attention layer, each head and each MLP wrote into it, and what reached the final norm.

Everything is caught by forward hooks on the model's own modules (the blocks, `attn`,
`attn.heads`, `mlp`, the embeddings and `ln_f`), so the numbers are those of the real
forward pass, not of a re-implementation. Only pre-norm models decompose this way: a
post-norm block normalizes the stream in place, and the sum of the parts is lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from gptlab.errors import UsageError
from gptlab.interp.hooks import check_tokens, eval_mode, forward_hooks
from gptlab.model.gpt import GPT
from gptlab.model.inputs import unwrap


@dataclass
class Residuals:
    """One forward pass of idx (B, T). Per layer l, every tensor (B, T, C) unless noted.

    resid_pre[l]: the stream block l reads; resid_mid[l]: after its attention;
    resid_post[l]: after its MLP. final: what the final norm reads (resid_post[-1]).
    attn_out[l] = sum over heads of head_results[l] + the projection bias.
    head_outputs[l] (B, nh, T, hs): each head's output before the output projection
    (the `attn.heads` hook point); head_results[l] (B, nh, T, C): the same projected
    through that head's slice of W_O, without the bias.
    embed: the token embeddings; pos_embed: the absolute positions added to them (None
    with RoPE or no positions). logits (B, T, vocab): the model's own output.
    """

    tokens: Tensor
    embed: Tensor
    pos_embed: Tensor | None
    resid_pre: list[Tensor]
    resid_mid: list[Tensor]
    resid_post: list[Tensor]
    attn_out: list[Tensor]
    mlp_out: list[Tensor]
    head_outputs: list[Tensor]
    head_results: list[Tensor]
    final: Tensor
    logits: Tensor


def check_pre_norm(model: nn.Module) -> GPT:
    gpt = unwrap(model)
    if gpt.config.norm_position != "pre":
        raise UsageError("the residual stream decomposes only in a pre-norm model; this one "
                         "is post-norm (each block normalizes the stream in place)")
    if not gpt.config.has_mlp:
        raise UsageError("the residual stream's decomposition reads each block's MLP; this "
                         "model is attention only (mlp none)")
    return gpt


def head_results(head_outputs: Tensor, proj: nn.Linear) -> Tensor:
    """(B, nh, T, hs) head outputs -> (B, nh, T, C): each head through its own columns of
    the output projection W_O (C, nh * hs), no bias. Summed over heads (plus the bias) they
    are the attention output."""
    _, nh, _, hs = head_outputs.shape
    w_o = proj.weight.view(proj.weight.shape[0], nh, hs)  # (C, nh, hs)
    return torch.einsum("bhts,chs->bhtc", head_outputs, w_o.to(head_outputs.dtype))


@torch.no_grad()
def capture_residuals(model: nn.Module, idx: Tensor) -> Residuals:
    """Run idx (T,) or (B, T) once in eval mode and keep every piece of the residual
    stream (see Residuals)."""
    gpt = check_pre_norm(model)
    idx = check_tokens(model, idx)
    n_layer = gpt.config.n_layer
    seen: dict[str, Any] = {key: [None] * n_layer for key in
                            ("pre", "mid", "post", "attn", "mlp", "heads")}

    def keep(key: str, layer: int | None = None, from_input: bool = False):
        def hook(_module: nn.Module, args: Any, out: Tensor) -> None:
            value = args[0] if from_input else out
            if layer is None:
                seen[key] = value
            else:
                seen[key][layer] = value
        return hook

    hooks = [(gpt.wte, keep("embed"))]
    if gpt.wpe is not None:
        hooks.append((gpt.wpe, keep("pos")))
    for layer, block in enumerate(gpt.blocks):
        hooks += [(block, keep("pre", layer, from_input=True)),
                  (block.norm_2, keep("mid", layer, from_input=True)),
                  (block, keep("post", layer)),
                  (block.attn, keep("attn", layer)),
                  (block.attn.heads, keep("heads", layer)),
                  (block.mlp, keep("mlp", layer))]
    hooks.append((gpt.ln_f, keep("final", from_input=True)))
    with eval_mode(model), forward_hooks(*hooks):
        logits, _ = model(idx)
    pos = seen.get("pos")
    return Residuals(
        tokens=idx,
        embed=seen["embed"],
        pos_embed=None if pos is None else pos.to(seen["embed"].dtype).expand_as(seen["embed"]),
        resid_pre=seen["pre"], resid_mid=seen["mid"], resid_post=seen["post"],
        attn_out=seen["attn"], mlp_out=seen["mlp"], head_outputs=seen["heads"],
        head_results=[head_results(z, block.attn.proj)
                      for z, block in zip(seen["heads"], gpt.blocks, strict=True)],
        final=seen["final"], logits=logits,
    )
