"""GPT: token embeddings -> positions -> blocks -> final norm -> lm_head.

A block is attention and a feed-forward network, each wrapped in a residual, with the norm
before each (pre-norm, GPT-2 onward) or after each add (post-norm, the 2017 paper's);
`BLOCKS` picks the class by `config.norm_position`. With gptlab.model.attention and
gptlab.model.layers (norms, the feed-forward networks), this is one forward pass whole.

`GPT.forward` works out once what attention needs for this chunk (rope tables, ALiBi's bias,
the mask, the cache) as an `AttentionInputs` and hands the same object to every block. What
only decoding and padded batches need (the KV cache, the masks, checks on token ids) lives
beside it, in gptlab.model.kv_cache, inputs and decoding.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gptlab.errors import UsageError
from gptlab.model.attention import CAUSAL, AttentionInputs, CausalSelfAttention
from gptlab.model.config import GPTConfig
from gptlab.model.decoding import SamplingSettings, generate_tokens
from gptlab.model.inputs import attention_mask_for, bias_with_mask, check_token_ids
from gptlab.model.kv_cache import KVCache
from gptlab.model.layers import build_mlp, build_norm
from gptlab.model.positional import (
    AlibiBias,
    ContextWarning,
    RotaryEmbedding,
    build_absolute_positions,
    check_context,
)


class Block(nn.Module):
    """Attention and feed-forward, each wrapped in a residual connection and a norm.
    Subclasses decide where the norm sits; `inputs` goes to attention untouched."""

    def __init__(self, config: GPTConfig, layer: int) -> None:
        super().__init__()
        self.norm_1 = build_norm(config)
        self.attn = CausalSelfAttention(config, layer)
        # attention only (mlp "none"): no feed-forward network and no norm of its own
        self.norm_2 = build_norm(config) if config.has_mlp else None
        self.mlp = build_mlp(config) if config.has_mlp else None


class PreNormBlock(Block):
    """x + f(norm(x)): GPT-2, Llama. The residual stream is never normalized in place."""

    def forward(self, x: Tensor, inputs: AttentionInputs = CAUSAL) -> Tensor:
        x = x + self.attn(self.norm_1(x), inputs)
        return x if self.mlp is None else x + self.mlp(self.norm_2(x))


class PostNormBlock(Block):
    """norm(x + f(x)): the 2017 paper's arrangement."""

    def forward(self, x: Tensor, inputs: AttentionInputs = CAUSAL) -> Tensor:
        x = self.norm_1(x + self.attn(x, inputs))
        return x if self.mlp is None else self.norm_2(x + self.mlp(x))


BLOCKS: dict[str, type[Block]] = {"pre": PreNormBlock, "post": PostNormBlock}


class GPT(nn.Module):
    """A decoder-only transformer as `config` describes it.

    tokens (B, T) -> token embeddings (W_E, `wte`) + absolute positions (`wpe`, learned or
    sinusoidal; none with RoPE, which rotates queries and keys inside attention instead,
    nor with ALiBi, which biases the scores)
    -> n_layer blocks, each `x + attn(norm(x))` then `x + mlp(norm(x))` (pre-norm) or
    `norm(x + attn(x))` then `norm(x + mlp(x))` (post-norm) -> a final norm (pre-norm
    only) -> logits over the vocabulary (`lm_head`, W_U, tied to W_E when
    tie_embeddings). Attention is causal: position t attends to positions <= t.

    forward(idx, targets=None) returns (logits (B, T, vocab_size), mean cross-entropy or
    None); generate continues a prompt with a KV cache (gptlab.model.decoding), in windows of
    `context` tokens (block_size unless set_context raised it). Weights are
    initialised as GPT-2's (normal(0, 0.02), residual projections scaled by
    1/sqrt(2 * n_layer)); gptlab.load and gptlab.model_dir load saved ones.
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise UsageError(f"config must be a GPTConfig, got {type(config).__name__}")
        config.validate()  # a field may have been changed since the config was made
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = build_absolute_positions(config)  # None for RoPE, ALiBi and 'none'
        self.rope = RotaryEmbedding(config) if config.pos_encoding == "rope" else None
        self.alibi = AlibiBias(config) if config.pos_encoding == "alibi" else None
        # The longest text decoding and evaluation run at by default: a setting of this
        # model object, not of its architecture (set_context).
        self.context = config.block_size
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            BLOCKS[config.norm_position](config, layer) for layer in range(config.n_layer)
        )
        # A post-norm block already ends in a norm; pre-norm leaves the stream raw.
        self.ln_f = build_norm(config) if config.norm_position == "pre" else None
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.wte.weight  # one matrix, read in and written out
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2 init: N(0, 0.02) weights and embeddings, zero biases, unit norms; the two
        projections that write into the residual stream get 0.02 / sqrt(2 * n_layer), so the
        stream's variance does not grow with depth (Radford et al. 2019)."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for block in self.blocks:
            for proj in (block.attn.proj, *([block.mlp.proj] if block.mlp else [])):
                if self.config.zero_init_proj:
                    nn.init.zeros_(proj.weight)
                else:
                    nn.init.normal_(proj.weight, mean=0.0, std=residual_std)

    def set_context(self, context: int) -> None:
        """Run at `context` positions from now on (generate, gptlab eval, the lab): past
        block_size with a ContextWarning, for every encoding but learned positions, which
        refuse (gptlab.model.positional.check_context)."""
        warning = check_context(self.config, context)
        if warning:
            warnings.warn(warning, ContextWarning, stacklevel=2)
        self.context = context

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # a tied matrix counts once

    def forward(
        self,
        idx: Tensor,
        targets: Tensor | None = None,
        *,
        cache: KVCache | None = None,
        attention_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """idx (B, T) token ids -> (logits (B, T, vocab_size), loss or None).

        targets (B, T): next-token ids; -1 marks positions left out of the loss.
        cache: continue after the positions already in it (and store these); its
        positions(T) says where these tokens sit, the same for every row (KVCache) or
        per row (gptlab.serve.slots.SlotCache, with attention_mask).
        attention_mask (B, T_keys) bool/0-1: False marks padding keys, T_keys counting the
        cached positions too.
        """
        check_token_ids(idx)
        B, T = idx.shape
        start = cache.length if cache is not None else 0
        if self.config.pos_encoding == "learned" and start + T > self.config.block_size:
            check_context(self.config, start + T)  # learned positions: the chapter's refusal
        # (T,); (B, T) from a cache whose rows hold texts of different lengths
        positions = (cache.positions(T) if cache is not None
                     else torch.arange(T, device=idx.device))
        x = self.wte(idx)  # (B, T, C)
        if self.wpe is not None:
            x = x + self.wpe(positions).to(x.dtype)
        x = self.drop(x)
        rope = self.rope(positions, start + T) if self.rope is not None else None
        allowed, is_causal = attention_mask_for(T, start, attention_mask, idx.device)
        bias = None
        if self.alibi is not None:
            bias = bias_with_mask(self.alibi(T, start + T), allowed, is_causal, T, start)
            allowed, is_causal = None, False
        first_values = {} if self.config.value_residual else None
        inputs = AttentionInputs(rope, allowed, is_causal, cache, bias, first_values)
        for block in self.blocks:
            x = block(x, inputs)
        if cache is not None:
            cache.advance(T)
        if self.ln_f is not None:
            x = self.ln_f(x)
        logits = self.lm_head(x)  # (B, T, vocab_size)
        if targets is None:
            return logits, None
        # In float32 at least (half-precision logits upcast; a float64 model keeps float64).
        wide = logits.to(torch.promote_types(logits.dtype, torch.float32))
        loss = F.cross_entropy(
            wide.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1
        )
        return logits, loss

    @torch.no_grad()
    def generate(
        self,
        idx: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Continue idx (B, T) by max_new_tokens sampled tokens; returns (B, T + new).
        Greedy with top_k=1 or temperature=0. Uses the KV cache (gptlab.model.decoding)."""
        settings = SamplingSettings(temperature, top_k, top_p)
        new = list(generate_tokens(self, idx, max_new_tokens, settings, generator=generator))
        return torch.cat([idx, *new], dim=1) if new else idx


