"""Activation patching (Meng et al. 2022; Wang et al. 2022): run the model on one input
with some of its activations taken from a run on another, and watch a metric move.

Denoising, TransformerLens's convention and the sweeps' here: run the corrupted input and
patch in clean activations; a site that brings the metric back to its clean value carries
what the corruption destroyed. Noising is the same call the other way round. The sites
are the residual stream a block reads, one head's output (before W_O, the `attn.heads`
hook point, as TransformerLens's `hook_z`), a whole attention layer's output and an MLP's
output, at one position or all.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from gptlab.errors import UsageError
from gptlab.interp.hooks import check_tokens, eval_mode
from gptlab.interp.residuals import Residuals, check_pre_norm
from gptlab.model.gpt import GPT

SITE_KINDS = ("resid", "head", "attn", "mlp")
Metric = Callable[[Tensor], Tensor]  # logits (B, T, vocab) -> a scalar


@dataclass(frozen=True)
class Site:
    """What to patch: kind "resid" (the stream block `layer` reads), "head" (head `head`'s
    output in block `layer`), "attn" (block `layer`'s attention output, every head and the
    projection) or "mlp" (block `layer`'s MLP output); position None means every
    position."""

    kind: str
    layer: int
    head: int | None = None
    position: int | None = None


def check_site(gpt: GPT, site: Site, T: int) -> Site:
    config = gpt.config
    if site.kind not in SITE_KINDS:
        raise UsageError(f"unknown site kind {site.kind!r}; expected one of: "
                         f"{', '.join(SITE_KINDS)}")
    if not 0 <= site.layer < config.n_layer:
        raise UsageError(f"layer {site.layer} is out of range: the model has layers "
                         f"0..{config.n_layer - 1}")
    if site.kind == "head" and (site.head is None or not 0 <= site.head < config.n_head):
        raise UsageError(f"head {site.head} is out of range: each layer has heads "
                         f"0..{config.n_head - 1}")
    if site.position is not None and not 0 <= site.position < T:
        raise UsageError(f"position {site.position} is out of range for {T:,} tokens")
    if site.kind == "mlp" and not config.has_mlp:
        raise UsageError("this model is attention only (mlp none): it has no MLP to patch")
    return site


def _replace(site: Site, source: Tensor) -> Callable[[Tensor], Tensor]:
    """A function that puts source's values at the site's position(s) (and head) into an
    activation of the same shape."""
    head = slice(None) if site.head is None else site.head
    at = slice(None) if site.position is None else site.position

    def put(value: Tensor) -> Tensor:
        value = value.clone()
        if site.kind == "head":  # (B, nh, T, hs)
            value[:, head, at] = source[:, head, at]
        else:  # (B, T, C)
            value[:, at] = source[:, at]
        return value
    return put


@contextlib.contextmanager
def patching(model: nn.Module, source: Residuals, sites: Sequence[Site]) -> Iterator[None]:
    """Every forward pass inside the block takes the sites' activations from `source` (a
    capture_residuals of an input of the same shape)."""
    gpt = check_pre_norm(model)
    T = source.tokens.shape[1]
    handles = []
    try:
        for site in sites:
            check_site(gpt, site, T)
            block = gpt.blocks[site.layer]
            if site.kind == "resid":
                put = _replace(site, source.resid_pre[site.layer])
                handles.append(block.register_forward_pre_hook(
                    lambda _m, args, put=put: (put(args[0]), *args[1:])))
                continue
            module, taken = {"head": (block.attn.heads, source.head_outputs),
                             "attn": (block.attn, source.attn_out),
                             "mlp": (block.mlp, source.mlp_out)}[site.kind]
            put = _replace(site, taken[site.layer])
            handles.append(module.register_forward_hook(lambda _m, _a, out, put=put: put(out)))
        yield
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def patched_logits(model: nn.Module, idx: Tensor, source: Residuals,
                   sites: Sequence[Site]) -> Tensor:
    """(B, T, vocab): the logits of idx with the sites patched in from source."""
    idx = check_same_shape(model, idx, source)
    with eval_mode(model), patching(model, source, sites):
        logits, _ = model(idx)
    return logits


def check_same_shape(model: nn.Module, idx: Tensor, source: Residuals) -> Tensor:
    idx = check_tokens(model, idx)
    if idx.shape != source.tokens.shape:
        raise UsageError(f"the two inputs must have the same shape so positions line up: "
                         f"{tuple(idx.shape)} tokens against {tuple(source.tokens.shape)}")
    return idx


@torch.no_grad()
def sweep(model: nn.Module, idx: Tensor, source: Residuals, kind: str,
          metric: Metric) -> Tensor:
    """metric after patching one site at a time into idx's run from source's: kind "resid",
    "attn" or "mlp" gives (n_layer, T), one position at a time; "head" gives (n_layer, n_head),
    each head at every position (TransformerLens's get_act_patch_resid_pre, _mlp_out and
    _attn_head_out_all_pos)."""
    gpt = check_pre_norm(model)
    idx = check_same_shape(model, idx, source)
    if kind not in SITE_KINDS:
        raise UsageError(f"unknown sweep {kind!r}; expected one of: {', '.join(SITE_KINDS)}")
    config, T = gpt.config, idx.shape[1]
    columns = config.n_head if kind == "head" else T
    grid = torch.zeros(config.n_layer, columns)
    for layer in range(config.n_layer):
        for column in range(columns):
            site = (Site(kind, layer, head=column) if kind == "head"
                    else Site(kind, layer, position=column))
            grid[layer, column] = float(metric(patched_logits(model, idx, source, [site])))
    return grid


def logit_difference(target: int, versus: int | None = None, position: int = -1) -> Metric:
    """The metric: the logit of target (minus versus's) at position, averaged over the
    batch."""
    def metric(logits: Tensor) -> Tensor:
        value = logits[:, position, target]
        if versus is not None:
            value = value - logits[:, position, versus]
        return value.mean()
    return metric


def target_probability(target: int, position: int = -1) -> Metric:
    """The metric: the probability of target at position, averaged over the batch."""
    def metric(logits: Tensor) -> Tensor:
        return torch.softmax(logits[:, position].float(), dim=-1)[:, target].mean()
    return metric
