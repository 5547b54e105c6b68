"""Scaled dot-product attention, softmax(QK^T / sqrt(d_k)) V, along two paths with one meaning:

- `attention_steps`: one head, every stage returned by name, for teaching and the lab;
- `CausalSelfAttention`: multi-head / grouped-query / multi-query attention through the fused
  `scaled_dot_product_attention`, with a KV cache for incremental decoding.

`attention_weights` is the explicit softmax both share when the weights themselves are wanted.

What a layer needs besides x (rope tables, the mask, ALiBi's bias, the cache) comes in one frozen
`AttentionInputs`, built once per forward by `GPT.forward` and handed to every block as is.
Each head's output passes through `CausalSelfAttention.heads`, an `nn.Identity` that is there
as a named hook point: an ordinary torch forward hook on it sees (B, nh, T, hs) before the
heads are concatenated, and may return a replacement (gptlab.interp.heads ablates heads this way).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gptlab.model.config import GPTConfig
from gptlab.model.kv_cache import KVCache
from gptlab.model.layers import unit_rms
from gptlab.model.positional import apply_rope
from gptlab.model.qk_norm import normed_rope


def causal_mask(t_query: int, t_key: int, device: torch.device | str | None = None) -> Tensor:
    """(t_query, t_key) bool, True where query i may attend key j. Queries are the last
    t_query of the t_key positions, so with a cache query i sits at t_key - t_query + i."""
    offset = t_key - t_query
    q_pos = torch.arange(t_query, device=device)[:, None] + offset
    return torch.arange(t_key, device=device)[None, :] <= q_pos


def attention_weights(q: Tensor, k: Tensor, allowed: Tensor | None = None,
                      scale: float | None = None) -> Tensor:
    """softmax(q k^T * scale) with disallowed positions set to -inf first; scale None is
    1/sqrt(d_k).

    q (..., Tq, d_k), k (..., Tk, d_k), allowed broadcastable to (..., Tq, Tk) or None:
    bool (True where a query may attend), or float, added to the scores (a bias with -inf
    where it may not, as AttentionInputs.bias and scaled_dot_product_attention take it).
    """
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale
    if allowed is not None and allowed.dtype == torch.bool:
        scores = scores.masked_fill(~allowed, float("-inf"))
    elif allowed is not None:
        scores = scores + allowed.to(scores.dtype)
    return torch.softmax(scores, dim=-1)


def attention_steps(
    x: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor, causal: bool = True
) -> dict[str, Tensor]:
    """One head, step by step. x (T, d_model); each w (d_model, d_k).

    Returns the named stages: q, k, v (T, d_k); scores = qk^T / sqrt(d_k) (T, T); masked
    (scores with the upper triangle -inf when causal, else scores unchanged); weights (the
    row-wise softmax, T x T); out = weights @ v (T, d_k).
    """
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scores = q @ k.T / math.sqrt(q.shape[-1])
    masked = scores
    if causal:
        masked = scores.masked_fill(~causal_mask(len(x), len(x), x.device), float("-inf"))
    weights = torch.softmax(masked, dim=-1)
    return {"q": q, "k": k, "v": v, "scores": scores, "masked": masked,
            "weights": weights, "out": weights @ v}


@dataclass(frozen=True)
class AttentionInputs:
    """Everything attention needs besides x, the same for every layer of one forward pass."""

    # (cos, sin), each (T, hs), or (B, T, hs) where rows sit at different positions; None:
    # no rotation
    rope: tuple[Tensor, Tensor] | None = None
    # bool, broadcastable to (B, nh, T, T_keys), True where a query may attend a key; or None
    # for the fused kernel to build the mask itself, as is_causal says.
    allowed: Tensor | None = None
    # With allowed None: the plain causal mask (False for one new token that may see every
    # cached one).
    is_causal: bool = True
    cache: KVCache | None = None
    # float, broadcastable to (B, nh, T, T_keys), added to the scores (ALiBi's), with the
    # mask folded in as -inf; when set, it stands for allowed and is_causal.
    bias: Tensor | None = None
    # value_residual: the first layer leaves its values here, (B, n_kv, T, hs), for the
    # later layers of the same forward pass to mix in.
    first_values: dict[str, Tensor] | None = None


CAUSAL = AttentionInputs()  # plain causal attention: no positions, no mask, no cache


class CausalSelfAttention(nn.Module):
    """Multi-head attention with n_kv_head key/value heads shared by groups of query heads.

    One fused projection makes q, k and v (its rows in that order: n_head*hs, then
    n_kv_head*hs twice), which maps onto GPT-2's c_attn and Llama's q/k/v_proj. The
    options are pieces chosen once, here: `position_qk` (RoPE and/or QK-norm on q and k,
    or nothing), `value_mix` (value residual), and what `_attend` adds to the scores
    (ALiBi's bias comes in with the inputs).
    """

    def __init__(self, config: GPTConfig, layer: int = 0) -> None:
        super().__init__()
        self.layer = layer  # this module's slot in a KV cache
        self.n_head, self.n_kv_head = config.n_head, config.n_kv_head
        self.head_dim = config.head_dim
        # The heads this module computes: all of them, or under tensor parallel the share
        # of one rank (gptlab.distributed.parallelize sets it as it cuts the weights).
        self.local_heads = (config.n_head, config.n_kv_head)
        q_dim = config.n_head * config.head_dim
        self.qkv = nn.Linear(config.n_embd, q_dim + 2 * config.kv_dim, bias=config.bias)
        self.proj = nn.Linear(q_dim, config.n_embd, bias=config.bias)
        self.dropout = config.dropout
        # 1/sqrt(d_k) keeps q.k's variance at 1 for unit-variance q and k (the paper's
        # argument); attn_scale False leaves the scores unscaled.
        self.scale = 1 / math.sqrt(config.head_dim) if config.attn_scale else 1.0
        self.position_qk = POSITION_QK[(config.pos_encoding == "rope", config.qk_norm)]
        # lambda of v = lambda * v + (1 - lambda) * v_first, in every layer but the first
        self.value_mix = (nn.Parameter(torch.full((1,), 0.5))
                          if config.value_residual and layer > 0 else None)
        self.resid_dropout = nn.Dropout(config.dropout)
        # The hook point for per-head outputs (B, nh, T, hs): no computation, only a name
        # that torch forward hooks can be registered on.
        self.heads = nn.Identity()
        # Off by default so it costs nothing: record_weights takes the explicit softmax path
        # (the fused kernel returns no weights) and keeps the (B, nh, Tq, Tk) softmax weights
        # of the last call in `weights`.
        self.record_weights = False
        self.weights: Tensor | None = None
        # Under autocast, compute softmax(QK^T)V in float32 (set_float32_attention; the
        # trainer sets it as --attention-dtype says): on a CPU, the fused kernel's bf16
        # backward at short contexts and small heads costs 3-5x its float32 one.
        self.float32_attention = False

    def forward(self, x: Tensor, inputs: AttentionInputs = CAUSAL) -> Tensor:
        """x (B, T, C) -> (B, T, C); inputs: see AttentionInputs."""
        B, T, _ = x.shape
        (nh, nkv), hs = self.local_heads, self.head_dim
        float32 = self.float32_attention and torch.is_autocast_enabled(x.device.type)
        qk, v = self.qkv(x).split([(nh + nkv) * hs, nkv * hs], dim=-1)  # project
        # positions (and QK-norm) on q and k together: on a CPU each small op has its cost
        qk = self.position_qk(qk.view(B, T, nh + nkv, hs), inputs.rope, float32)
        q, k = qk.transpose(1, 2).split([nh, nkv], dim=1)  # (B, nh, T, hs), (B, nkv, T, hs)
        v = v.view(B, T, nkv, hs).transpose(1, 2)  # (B, nkv, T, hs)
        if inputs.first_values is not None:
            v = self._mix_values(v, inputs.first_values)
        if inputs.cache is not None:
            k, v = inputs.cache.update(self.layer, k, v)  # (B, nkv, T_keys, hs)
        if nh > nkv:  # grouped-query: each kv head serves nh / nkv query heads
            k, v = k.repeat_interleave(nh // nkv, dim=1), v.repeat_interleave(nh // nkv, dim=1)
        y = self.heads(self._attend(q, k, v, inputs, float32))  # (B, nh, T, hs)
        y = y.transpose(1, 2).reshape(B, T, nh * hs)  # concatenate the heads
        return self.resid_dropout(self.proj(y))  # W_O

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, inputs: AttentionInputs,
                float32: bool) -> Tensor:
        """softmax(q k^T * scale + mask) v, (B, nh, T, hs): the fused kernel, or with
        record_weights the explicit softmax, whose weights it keeps."""
        mask, is_causal = inputs.allowed, inputs.allowed is None and inputs.is_causal
        if inputs.bias is not None:
            mask, is_causal = inputs.bias.to(q.dtype), False
        if not self.record_weights:
            return self._fused(q, k, v, mask, is_causal, float32)
        if mask is None and is_causal:
            mask = causal_mask(q.shape[2], k.shape[2], q.device)
        self.weights = attention_weights(q, k, mask, self.scale)
        return self.weights @ v

    def _fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None,
               is_causal: bool, float32: bool) -> Tensor:
        """torch's fused scaled_dot_product_attention; with float32, in float32 with autocast
        off (the projection after it casts back)."""
        dropout = self.dropout if self.training else 0.0
        if float32:
            with torch.autocast(q.device.type, enabled=False):
                mask = mask if mask is None or mask.dtype == torch.bool else mask.float()
                return F.scaled_dot_product_attention(
                    q.float(), k.float(), v.float(), attn_mask=mask, is_causal=is_causal,
                    dropout_p=dropout, scale=self.scale)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal,
                                              dropout_p=dropout, scale=self.scale)

    def _mix_values(self, v: Tensor, first: dict[str, Tensor]) -> Tensor:
        """Value residual learning: the first layer keeps its values for the others, which
        take lambda * v + (1 - lambda) * v_first (the same positions, before the cache)."""
        if self.value_mix is None:
            first["v"] = v
            return v
        return self.value_mix * v + (1 - self.value_mix) * first["v"]


# What happens to q and k (B, T, heads, hs) before the scores, by (RoPE?, QK-norm?). QK-norm
# is per head with no gain (q and k on the sphere of radius sqrt(hs)), in float32 where
# attention is (it would cast them anyway); the rope tables (T, hs) act as (T, 1, hs), or
# (B, T, hs), where each row has positions of its own (a server's slots), as (B, T, 1, hs).
def _as_they_are(qk: Tensor, rope: tuple[Tensor, Tensor] | None, float32: bool) -> Tensor:
    return qk


def _rotated(qk: Tensor, rope: tuple[Tensor, Tensor], float32: bool) -> Tensor:
    return apply_rope(qk, rope[0].unsqueeze(-2), rope[1].unsqueeze(-2))


def _normed(qk: Tensor, rope: tuple[Tensor, Tensor] | None, float32: bool) -> Tensor:
    return unit_rms(qk.to(torch.float32 if float32 else qk.dtype))


def _normed_rotated(qk: Tensor, rope: tuple[Tensor, Tensor], float32: bool) -> Tensor:
    dtype = torch.float32 if float32 else qk.dtype
    return normed_rope(qk, rope[0].unsqueeze(-2), rope[1].unsqueeze(-2), dtype)


POSITION_QK = {(False, False): _as_they_are, (True, False): _rotated,
               (False, True): _normed, (True, True): _normed_rotated}


def set_float32_attention(model: nn.Module, on: bool) -> None:
    """Every attention layer in `model` computes softmax(QK^T)V in float32 under autocast
    (on) or in autocast's dtype (off, the default). A setting of the model object for the
    run at hand, not of its architecture: nothing saved changes."""
    for module in model.modules():
        if isinstance(module, CausalSelfAttention):
            module.float32_attention = on
