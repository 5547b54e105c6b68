"""The KV cache: every layer's keys and values, kept so decoding one more token costs one
token's work instead of the whole prefix's."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gptlab.model.config import GPTConfig


class KVCache:
    """Preallocated keys and values for every layer, filled as decoding proceeds.

    Static buffers mean no reallocation per token, so per-token cost stays flat until
    `max_len` is reached. Layers write their new entries with `update`; the model calls
    `advance` once all layers have seen the step.
    """

    def __init__(
        self, config: GPTConfig, batch_size: int, max_len: int,
        device: torch.device | str | None = None, dtype: torch.dtype = torch.float32,
    ) -> None:
        shape = (batch_size, config.n_kv_head, max_len, config.head_dim)
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layer)]
        self.values = [torch.zeros_like(k) for k in self.keys]
        self.max_len = max_len
        self.length = 0  # positions filled so far

    def update(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store k, v (B, n_kv, T, hs) after the cached ones; return all of them."""
        end = self.length + k.shape[2]
        if end > self.max_len:
            raise ValueError(f"KV cache holds {self.max_len} positions; {end} requested")
        self.keys[layer][:, :, self.length : end] = k
        self.values[layer][:, :, self.length : end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def positions(self, n: int) -> Tensor:
        """(n,) the positions of the next n tokens: every row's text is as long."""
        return torch.arange(self.length, self.length + n, device=self.keys[0].device)

    def advance(self, n: int) -> None:
        self.length += n

    def reset(self) -> None:
        self.length = 0


def new_kv_cache(model: nn.Module, batch_size: int, max_len: int | None = None,
                 dtype: torch.dtype | None = None) -> KVCache:
    """An empty cache for `model` (a GPT), on its device and in its weights' dtype; max_len
    defaults to the model's context (its block_size unless GPT.set_context raised it)."""
    weight = model.wte.weight
    return KVCache(model.config, batch_size, max_len or model.context,
                   device=weight.device, dtype=dtype or weight.dtype)
