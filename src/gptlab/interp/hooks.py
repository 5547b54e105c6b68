"""The instruments every interpretability tool here uses, inside context managers that
leave the model as it was: `recording_attention` (the explicit softmax path, which keeps
each layer's weights) and `forward_hooks` on the named hook points (`CausalSelfAttention.heads`
and the blocks), removed by their handles on exit. A model outside these calls runs the
fused kernel untouched and pays nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from gptlab.errors import UsageError
from gptlab.model.attention import CausalSelfAttention
from gptlab.model.inputs import unwrap


def attention_modules(model: nn.Module) -> list[CausalSelfAttention]:
    """The attention module of every block, in layer order."""
    gpt = unwrap(model)
    return [block.attn for block in gpt.blocks]


def check_tokens(model: nn.Module, idx: Tensor, min_len: int = 1) -> Tensor:
    """idx (T,) or (B, T) integer ids -> (B, T), or a UsageError saying what is wrong."""
    gpt = unwrap(model)
    config = gpt.config
    context = getattr(gpt, "context", config.block_size)  # GPT.set_context may raise it
    if not isinstance(idx, Tensor):
        idx = torch.as_tensor(idx)
    if idx.dtype.is_floating_point or idx.dtype == torch.bool or idx.is_complex():
        raise UsageError(f"token ids must be integers, got dtype {idx.dtype}")
    if idx.dim() == 1:
        idx = idx[None]
    if idx.dim() != 2:
        raise UsageError(f"token ids must have shape (T,) or (B, T), got {tuple(idx.shape)}")
    B, T = idx.shape
    if B == 0 or T == 0:
        raise UsageError("the input is empty: give at least one token")
    if T < min_len:
        raise UsageError(f"the input has {T:,} token(s); this needs at least {min_len:,}")
    if T > context:
        raise UsageError(
            f"the input has {T:,} tokens, longer than the model's context of {context:,}"
            + (" (block_size)" if context == config.block_size else "")
        )
    low, high = int(idx.min()), int(idx.max())
    if low < 0 or high >= config.vocab_size:
        bad = low if low < 0 else high
        raise UsageError(f"token id {bad} is outside the vocabulary (0..{config.vocab_size - 1})")
    return idx.to(device=device_of(model), dtype=torch.long)


def check_heads(model: nn.Module, heads: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Validate (layer, head) pairs against the model; a UsageError names the bad one."""
    config = unwrap(model).config
    checked = []
    for pair in heads:
        try:
            layer, head = (int(v) for v in pair)
        except (TypeError, ValueError):
            raise UsageError(f"a head is a (layer, head) pair of integers, got {pair!r}") from None
        if not 0 <= layer < config.n_layer:
            raise UsageError(f"layer {layer} is out of range: the model has layers "
                             f"0..{config.n_layer - 1}")
        if not 0 <= head < config.n_head:
            raise UsageError(f"head {head} is out of range: each layer has heads "
                             f"0..{config.n_head - 1}")
        checked.append((layer, head))
    return checked


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) for the duration; the previous mode comes back after."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


@contextlib.contextmanager
def recording_attention(model: nn.Module) -> Iterator[list[CausalSelfAttention]]:
    """Every layer keeps its softmax weights in `.weights` while inside; restored after,
    and the recorded weights are dropped so no activations outlive the call."""
    modules = attention_modules(model)
    saved = [(m.record_weights, m.weights) for m in modules]
    for m in modules:
        m.record_weights = True
    try:
        yield modules
    finally:
        for m, (record, weights) in zip(modules, saved, strict=True):
            m.record_weights, m.weights = record, weights


ForwardHook = Callable[[nn.Module, Any, Tensor], Tensor | None]  # torch's (module, args, out)


@contextlib.contextmanager
def forward_hooks(*hooks: tuple[nn.Module, ForwardHook]) -> Iterator[None]:
    """Register (module, hook) forward hooks for the duration, removed by their handles on
    exit. Hooks run in registration order, each seeing what the one before returned, so
    these nest after any already registered."""
    handles = []
    try:
        for module, hook in hooks:
            handles.append(module.register_forward_hook(hook))
        yield
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def capture_attention(model: nn.Module, idx: Tensor) -> Tensor:
    """Attention weights of every layer and head for idx (T,) or (B, T).

    Returns (n_layer, B, n_head, T, T), each row a softmax over the keys (zero above the
    diagonal). Runs in eval mode; the model's outputs are those of a plain forward.
    """
    idx = check_tokens(model, idx)
    with eval_mode(model), recording_attention(model) as modules:
        model(idx)
        return torch.stack([m.weights for m in modules])


def capture_with_logits(model: nn.Module, idx: Tensor) -> tuple[Tensor, Tensor]:
    """(weights (n_layer, B, nh, T, T), logits (B, T, vocab)) from one forward pass."""
    idx = check_tokens(model, idx)
    with torch.no_grad(), eval_mode(model), recording_attention(model) as modules:
        logits, _ = model(idx)
        return torch.stack([m.weights for m in modules]), logits


def device_of(model: nn.Module) -> torch.device:
    return unwrap(model).wte.weight.device
