"""The transformer block: attention and a feed-forward network, each wrapped in a residual,
with the norm before each (pre-norm, GPT-2 onward) or after each add (post-norm, the 2017
paper's). `BLOCKS` picks the class by `config.norm_position`.
"""

from __future__ import annotations

from torch import Tensor, nn

from gptlab.model.attention import CAUSAL, AttentionInputs, CausalSelfAttention
from gptlab.model.config import GPTConfig
from gptlab.model.layers import build_mlp, build_norm


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
