"""One block of the whole-model view step by step: view 1's calculator on a run's own
model, for one token, layer and head, and the block's FFN as key-value memories.

Attention: the model's forward pass is hooked (gptlab.interp.hooks) for what attention
reads (the normed stream, every token) and what it writes; the stages are then recomputed
from those inputs and the layer's own weights in float64, as view 1 computes them: q for
this token, k and v of every token, q·k, q·k/√d_k, the causal mask (−∞ after this token),
the softmax row, the weighted sum of values, every head's output concatenated, and W_O,
then the residual add; and the chosen head's whole T × T matrices (raw, scaled, masked,
softmax), whose row t the row stages are. The mask switch's other side (what the tokens
would read bidirectionally) comes with it, at every stage after the mask: the softmax, each
head's output, the concatenation, W_O's output and the add are recomputed without it.
The recomputation is checked against the library's own capture (the recorded softmax
weights, the per-head outputs at attn.heads and attention's output) in the tests.

FFN: the units with the largest coefficient for this token (the input of `proj`, caught by
a hook, as gptlab.interp.memory reads it), each with its pre-activation and its value's
top tokens through the unembedding (gptlab.interp.memory.value_logits), and the
activation's curve over the range of this token's pre-activations.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from gptlab.errors import UsageError
from gptlab.interp.hooks import check_tokens, eval_mode, forward_hooks
from gptlab.interp.memory import value_logits
from gptlab.lab.model import schemas
from gptlab.lab.model.tokens import as_list, encode_at
from gptlab.lab.runs import Runs
from gptlab.model.inputs import unwrap
from gptlab.model.positional import apply_rope

CURVE_POINTS = 81
# Options whose attention the calculator does not redo (it would need their own arithmetic)
UNDRAWN = ("qk_norm", "value_residual")



def _check(gpt, layer: int, head: int) -> None:
    cfg = gpt.config
    if not 0 <= layer < cfg.n_layer:
        raise UsageError(f"layer must be between 0 and {cfg.n_layer - 1}, got {layer}")
    if not 0 <= head < cfg.n_head:
        raise UsageError(f"head must be between 0 and {cfg.n_head - 1}, got {head}")
    for option in UNDRAWN:
        if getattr(cfg, option, False):
            raise UsageError(f"the step-by-step attention draws the chapter's attention; this "
                             f"model has {option}, which it does not redo")
    if cfg.pos_encoding == "alibi":
        raise UsageError("the step-by-step attention draws the chapter's attention; this model "
                         "has ALiBi, which it does not redo")


@torch.no_grad()
def layer_steps(model: torch.nn.Module, idx: Tensor, position: int, layer: int, head: int,
                units: int = 8, top: int = 5) -> dict[str, Any]:
    """Attention's stages for token `position` of idx (1, T) at (layer, head), in float64,
    and the layer's FFN units for that token (see the module docstring)."""
    gpt = unwrap(model)
    _check(gpt, layer, head)
    idx = check_tokens(model, idx)
    T, cfg = idx.shape[1], gpt.config
    if not 0 <= position < T:
        raise UsageError(f"position must be between 0 and {T - 1}, got {position}")
    block = gpt.blocks[layer]
    attn, mlp = block.attn, block.mlp
    seen: dict[str, Tensor] = {}

    def keep(name: str, from_input: bool = False):
        def hook(_module, args, out):
            seen[name] = (args[0] if from_input else out)[0].detach().clone()
        return hook

    hooks = [(attn, keep("x", from_input=True)), (block, keep("stream", from_input=True))]
    if cfg.has_mlp:
        hooks += [(mlp.proj, keep("coef", from_input=True)),
                  (mlp.gate if hasattr(mlp, "gate") else mlp.fc, keep("pre"))]
    with eval_mode(model), forward_hooks(*hooks):
        model(idx)
    steps = attention_stages(gpt, layer, head, seen["x"], position, seen["stream"][position])
    steps["ffn"] = ffn_units(model, layer, seen, position, units, top) if cfg.has_mlp else None
    return steps


def attention_stages(gpt, layer: int, head: int, x: Tensor, t: int,
                     stream: Tensor) -> dict[str, Any]:
    """x (T, C): what the layer's attention read; stream (C,): the block's input at t, the
    residual stream the output is added to. Every stage for query t, head `head`, with the
    mask and without it."""
    cfg, attn = gpt.config, gpt.blocks[layer].attn
    T, hs, nh, nkv = x.shape[0], cfg.head_dim, cfg.n_head, cfg.n_kv_head
    group = nh // nkv
    w = attn.qkv.weight.double()
    qkv = x.double() @ w.T
    if attn.qkv.bias is not None:
        qkv = qkv + attn.qkv.bias.double()
    q_dim, kv_dim = nh * hs, nkv * hs
    q = qkv[:, :q_dim].view(T, nh, hs).transpose(0, 1)  # (nh, T, hs)
    k = qkv[:, q_dim:q_dim + kv_dim].view(T, nkv, hs).transpose(0, 1)
    v = qkv[:, q_dim + kv_dim:].view(T, nkv, hs).transpose(0, 1)
    if gpt.rope is not None:
        cos, sin = gpt.rope(torch.arange(T, device=x.device), T)
        q, k = apply_rope(q, cos.double(), sin.double()), apply_rope(k, cos.double(), sin.double())
    k, v = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)
    raw = q @ k.transpose(1, 2)  # (nh, T, T): q_i . k_j for every head, query and key
    scaled = raw * attn.scale
    causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    masked = scaled.masked_fill(~causal, -math.inf)
    weights, both = torch.softmax(masked, -1), torch.softmax(scaled, -1)
    w_o = attn.proj.weight.double()  # (C, nh * hs)
    blocks = w_o.view(-1, nh, hs)  # (C, nh, hs): head h's block of W_O
    b_o = None if attn.proj.bias is None else attn.proj.bias.double()
    stream = stream.double()

    def after(softmax_rows: Tensor) -> dict[str, Any]:
        """What follows the softmax for query t: each head's output, their concatenation,
        W_O's output, each head's share of it, and the stream after the add."""
        heads_out = (softmax_rows[:, t, None, :] @ v)[:, 0]  # (nh, hs)
        concat = heads_out.reshape(-1)
        out = w_o @ concat if b_o is None else w_o @ concat + b_o
        written = torch.einsum("chd,hd->hc", blocks, heads_out)  # (nh, C): each head's share
        return {"head_out": as_list(heads_out[h]), "concat": as_list(concat),
                "written_norms": as_list(written.norm(dim=1)), "out": as_list(out),
                "added": as_list(stream + out)}

    h = head
    # JSON has no -inf: a masked cell is null
    masked_h = [[float(s) if ok else None for s, ok in zip(row, keep, strict=True)]
                for row, keep in zip(scaled[h].tolist(), causal.tolist(), strict=True)]
    causal_side, bidirectional = after(weights), after(both)
    return {
        "layer": layer, "head": h, "n_head": nh, "head_dim": hs, "scale": attn.scale,
        "sqrt_d_k": math.sqrt(hs), "x": as_list(x[t]),
        "q": as_list(q[h, t]), "keys": as_list(k[h]), "values": as_list(v[h]),
        "raw": as_list(raw[h, t]), "scaled": as_list(scaled[h, t]), "masked": masked_h[t],
        "weights": as_list(weights[h, t]), "weights_bidirectional": as_list(both[h, t]),
        "matrices": {"raw": as_list(raw[h]), "scaled": as_list(scaled[h]), "masked": masked_h,
                     "weights": as_list(weights[h]),
                     "weights_bidirectional": as_list(both[h])},
        "w_o_norms": as_list(blocks.norm(dim=(0, 2))), "w_o_block": as_list(blocks[:, h, :]),
        "b_o": None if b_o is None else as_list(b_o), "stream": as_list(stream),
        **causal_side, **{f"{key}_bidirectional": value for key, value in bidirectional.items()},
    }


def activation_curve(mlp, lo: float, hi: float) -> dict[str, list[float]]:
    """The activation a unit's pre-activation goes through, at CURVE_POINTS points: the
    FFN's own (GELU, exact or tanh, ReLU²) of fc(x); SwiGLU: silu of the gate (the up side
    multiplies it)."""
    xs = torch.linspace(lo, hi, CURVE_POINTS, dtype=torch.float64)
    ys = F.silu(xs) if hasattr(mlp, "gate") else mlp.activation(xs)
    return {"x": as_list(xs), "y": as_list(ys)}


def ffn_units(model, layer: int, seen: dict[str, Tensor], t: int, units: int,
              top: int) -> dict[str, Any]:
    """The units with the largest coefficients at t (the input of proj), their values'
    top tokens, and the activation's curve with every pre-activation to mark on it."""
    cfg = unwrap(model).config
    coef, pre = seen["coef"][t].double(), seen["pre"][t].double()
    k = min(units, coef.numel())
    best = coef.topk(k).indices
    logits = value_logits(model, layer, best)  # (k, vocab)
    top_logits, top_ids = logits.topk(min(top, logits.shape[1]), dim=-1)
    span = max(3.0, float(pre.abs().max()) * 1.05)
    return {
        "kind": cfg.mlp, "units": coef.numel(), "pre": as_list(pre), "coef": as_list(coef),
        "top": [{"unit": int(u), "coef": float(coef[u]), "pre": float(pre[u]),
                 "tokens": [{"id": int(i), "logit": float(v)}
                            for i, v in zip(top_ids[r], top_logits[r], strict=True)]}
                for r, u in enumerate(best.tolist())],
        "curve": activation_curve(unwrap(model).blocks[layer].mlp, -span, span),
    }


def layer_steps_view(runs: Runs, body: schemas.LayerStepsRequest) -> dict[str, Any]:
    run = runs.load(body.run)
    idx, position = encode_at(run, body.text, body.position, schemas.MAX_WALK_TOKENS)
    with runs.model_lock:
        d = layer_steps(run.model, idx, position, body.layer, body.head, body.units, body.top)
    decode = run.tokenizer.decode
    if d["ffn"] is not None:
        for unit in d["ffn"]["top"]:
            for tok in unit["tokens"]:
                tok["token"] = decode([tok["id"]])
    return {"run": body.run, "tokens": [decode([i]) for i in idx[0].tolist()],
            "position": position, **d}
