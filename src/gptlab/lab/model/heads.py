"""View 3, the heads of a model: a run's attention patterns in every layer and, for one
layer, each head's output, their concatenation, W_O and the attention sublayer's output,
all from one forward pass through gptlab.interp.heads's instruments."""

from __future__ import annotations

from typing import Any

import torch

from gptlab.errors import UsageError
from gptlab.interp.hooks import eval_mode, forward_hooks, recording_attention
from gptlab.lab.model import schemas
from gptlab.lab.model.tokens import below, encode_prompt, model_on_tokens, token_ids
from gptlab.lab.runs import Runs


@torch.no_grad()
def _capture(model, idx: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Attention weights of every layer (n_layer, nh, T, T) and, for `layer`, each head's
    output (nh, T, hs) before concatenation, and the attention sublayer's output (T, C),
    all from one forward pass through gptlab.interp.heads's instruments. The caller holds the
    runs' model lock."""
    seen: dict[str, torch.Tensor] = {}

    def keep_heads(_module, _inputs, y: torch.Tensor) -> None:
        seen["heads"] = y.detach().clone()  # (B, nh, T, hs)

    def keep_output(_module, _inputs, output: torch.Tensor) -> None:
        seen["out"] = output.detach().clone()  # (B, T, C)

    attn = model.blocks[layer].attn
    with (eval_mode(model), recording_attention(model) as mods,
          forward_hooks((attn, keep_output), (attn.heads, keep_heads))):
        model(idx)
        weights = torch.stack([m.weights[0] for m in mods])  # (L, nh, T, T)
    return weights, seen["heads"][0], {"out": seen["out"][0]}


def heads_view(runs: Runs, body: schemas.HeadsRequest) -> dict[str, Any]:
    run = runs.load(body.run)
    cfg = run.model.config
    layer = below("layer", body.layer, cfg.n_layer)
    if body.ids is not None:
        idx = token_ids(run, body.ids)
    elif body.prompt is None:
        raise UsageError("prompt is required (or ids, a list of token ids)")
    else:
        idx = encode_prompt(run, body.prompt)
    with runs.model_lock:
        weights, heads, extra = _capture(run.model, idx, layer)
    T = idx.shape[1]
    concat = heads.transpose(0, 1).reshape(T, cfg.n_head * cfg.head_dim)  # (T, nh*hs)
    proj = run.model.blocks[layer].attn.proj
    return {
        **model_on_tokens(run, idx), "head_dim": cfg.head_dim, "n_embd": cfg.n_embd,
        "layer": layer,
        "attention": weights.tolist(),  # (n_layer, n_head, T, T)
        "heads": heads.tolist(),  # (n_head, T, hs): weights @ V per head
        "concat": concat.tolist(),  # (T, n_head*hs)
        "w_o": proj.weight.detach().T.tolist(),  # (n_head*hs, C): out = concat @ W_O + b
        "b_o": proj.bias.detach().tolist() if proj.bias is not None else None,
        "out": extra["out"].tolist(),  # (T, C)
    }
