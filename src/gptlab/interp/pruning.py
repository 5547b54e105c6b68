"""Head importance and pruning (Michel, Levy & Neubig 2019, "Are Sixteen Heads Really Better
than One?").

Every head's output (before the output projection) is multiplied by a gate xi_h: all ones is
the model unchanged, a zero removes the head exactly as zero ablation does
(gptlab.interp.heads.ablate_heads). A head's importance is the loss's sensitivity to its gate,
I_h = sum over batches |dL/d xi_h| at xi = 1 (the paper's expected absolute gradient, up to
the number of batches; their `run_bertology.py` sums |grad| batch by batch likewise), then
normalised per layer by the layer's L2 norm, as the paper does (after Molchanov et al.
2017). Pruning removes heads in increasing order of importance.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch
from torch import Tensor, nn

from gptlab.errors import UsageError
from gptlab.interp.heads import next_token_targets
from gptlab.interp.hooks import (
    ForwardHook,
    attention_modules,
    check_tokens,
    device_of,
    eval_mode,
    forward_hooks,
)
from gptlab.model.inputs import unwrap


@contextlib.contextmanager
def head_mask(model: nn.Module, mask: Tensor) -> Iterator[None]:
    """Multiply every head's output by mask[layer, head] (n_layer, n_head) in each forward
    pass inside the block. The mask may require grad: its gradient is the head's importance
    signal. All ones leaves the outputs exactly as they are."""
    config = unwrap(model).config
    if tuple(mask.shape) != (config.n_layer, config.n_head):
        raise UsageError(f"the head mask must be (n_layer, n_head) = ({config.n_layer}, "
                         f"{config.n_head}), got {tuple(mask.shape)}")

    def make_hook(layer: int) -> ForwardHook:
        def hook(_module: nn.Module, _args: object, y: Tensor) -> Tensor:
            gate = mask[layer][None, :, None, None]  # (1, nh, 1, 1), indexed in the graph
            return y * gate.to(device=y.device, dtype=y.dtype)
        return hook

    modules = attention_modules(model)
    with forward_hooks(*((m.heads, make_hook(i)) for i, m in enumerate(modules))):
        yield


def masked_loss(model: nn.Module, idx: Tensor, mask: Tensor | None = None) -> float:
    """The mean next-token loss on idx (B, T) (the last position of each row unscored) with
    the heads gated by mask (None: the model as it is). Eval mode, no grad."""
    idx = check_tokens(model, idx, min_len=2)
    with torch.no_grad(), eval_mode(model), _maybe_masked(model, mask):
        _, loss = model(idx, next_token_targets(idx))
    return float(loss)


def head_gradients(model: nn.Module, batches: Iterable[Tensor]) -> Tensor:
    """(n_batches, n_layer, n_head): dL/d xi_h at xi = 1 for each batch (B, T) of token
    ids, L its mean next-token loss. Eval mode; the model's own gradients are untouched."""
    config = unwrap(model).config
    dtype = next(unwrap(model).parameters()).dtype
    grads = []
    with eval_mode(model):
        for idx in batches:
            idx = check_tokens(model, idx, min_len=2)
            mask = torch.ones(config.n_layer, config.n_head, dtype=dtype,
                              device=device_of(model), requires_grad=True)
            with head_mask(model, mask):
                _, loss = model(idx, next_token_targets(idx))
            (grad,) = torch.autograd.grad(loss, mask)
            grads.append(grad.detach().cpu())
    if not grads:
        raise UsageError("head importance needs at least one batch")
    return torch.stack(grads)


def head_importance(model: nn.Module, batches: Iterable[Tensor],
                    normalize: bool = True) -> Tensor:
    """(n_layer, n_head): sum over batches of |dL/d xi_h| (Michel et al.'s I_h, with a
    batch of one example each for theirs: E_x |dL(x)/d xi_h|), each layer divided by its L2
    norm when normalize (the paper's choice)."""
    importance = head_gradients(model, batches).abs().sum(dim=0)
    return normalize_by_layer(importance) if normalize else importance


def normalize_by_layer(importance: Tensor) -> Tensor:
    """Each layer's row (n_layer, n_head) divided by its L2 norm (a row of zeros stays)."""
    norms = importance.norm(dim=1, keepdim=True)
    return importance / torch.where(norms > 0, norms, torch.ones_like(norms))


def pruning_order(importance: Tensor) -> list[tuple[int, int]]:
    """Every (layer, head), least important first (ties by layer, then head)."""
    n_layer, n_head = importance.shape
    heads = [(layer, head) for layer in range(n_layer) for head in range(n_head)]
    return sorted(heads, key=lambda lh: (float(importance[lh]), lh))


def mask_without(shape: tuple[int, int], heads: Iterable[tuple[int, int]]) -> Tensor:
    """All ones of shape (n_layer, n_head) but zeros at the heads given."""
    mask = torch.ones(shape)
    for layer, head in heads:
        mask[layer, head] = 0.0
    return mask


def pruned_counts(n_heads: int, fractions: Iterable[float]) -> list[int]:
    """How many of n_heads each fraction removes (rounded to the nearest head)."""
    counts = []
    for f in fractions:
        if not 0.0 <= f <= 1.0:
            raise UsageError(f"a pruned fraction must be in [0, 1], got {f}")
        counts.append(int(round(f * n_heads)))
    return counts


def _maybe_masked(model: nn.Module, mask: Tensor | None) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext() if mask is None else head_mask(model, mask)
