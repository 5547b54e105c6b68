"""Look inside: attention capture, head scores, head ablation, the induction probe.

Everything here works through two instruments on `CausalSelfAttention`, inside context
managers that leave the model as it was: the `record_weights` switch (the explicit softmax
path, which keeps each layer's weights), and the `heads` hook point, on which ablation and
mean recording register ordinary torch forward hooks, removed by their handles on exit. A
model outside these calls runs the fused kernel untouched and pays nothing.

Head scores follow TransformerLens's head detector (`detect_head`, error measure "mul"): for
one head's attention pattern A (query x key) and a 0/1 detection pattern D of where that kind
of head should look, score = sum(A * D) / sum(A), over the whole T x T pattern. Two
differences, both deliberate: there is no BOS token prepended (we score the tokens given),
and a batch is scored per sequence and averaged, with the exclusions applied to every
sequence (TransformerLens drops them for a list of strings).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gptlab.errors import Setting, SettingError, UsageError
from gptlab.interp.head_kinds import ABLATION_MODES
from gptlab.interp.hooks import (
    ForwardHook,
    attention_modules,
    capture_attention,
    check_heads,
    check_tokens,
    device_of,
    eval_mode,
    forward_hooks,
)
from gptlab.model.inputs import unwrap

# ----------------------------------------------------------------------------- plumbing


# ----------------------------------------------------------------------------- capture


# ----------------------------------------------------------------------------- scores

def detection_patterns(tokens: Tensor) -> dict[str, Tensor]:
    """The 0/1 patterns (..., T, T) of where each kind of head is expected to look.

    previous_token: D[i, i-1] = 1. duplicate_token: D[i, j] = 1 where token j == token i and
    j < i. induction: the duplicate pattern shifted one key to the right (attend to the
    token after the earlier copy), column 0 zero, kept lower-triangular.
    """
    T = tokens.shape[-1]
    lower = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril(-1)  # j < i
    previous = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril(-1).triu(-1)
    same = tokens[..., :, None] == tokens[..., None, :]  # (..., T, T)
    duplicate = same & lower
    induction = torch.zeros_like(duplicate)
    induction[..., :, 1:] = duplicate[..., :, :-1]
    induction &= torch.ones_like(lower).tril()  # j <= i
    return {
        "previous_token": previous.expand_as(duplicate),
        "duplicate_token": duplicate,
        "induction": induction,
    }


def scores_from_patterns(
    patterns: Tensor,
    tokens: Tensor,
    exclude_bos: bool = False,
    exclude_current_token: bool = False,
) -> dict[str, Tensor]:
    """sum(A * D) / sum(A) for each attention pattern A in patterns (..., T, T).

    tokens (T,), or (..., T) whose leading dims broadcast against patterns' leading dims.
    exclude_bos zeroes A's column 0 and exclude_current_token its diagonal before the score
    (TransformerLens's options). Returns {name: (...)} for the three head_kinds.SCORE_NAMES;
    a pattern left with no attention at all (a 1-token input with exclude_current_token)
    scores NaN.
    """
    T = patterns.shape[-1]
    if patterns.dim() < 2 or patterns.shape[-2] != T:
        raise UsageError(f"attention patterns must be (..., T, T), got {tuple(patterns.shape)}")
    if tokens.shape[-1] != T:
        raise UsageError(f"{tokens.shape[-1]:,} tokens for attention patterns over {T:,} positions")
    A = patterns.clone()
    if exclude_bos:
        A[..., :, 0] = 0
    if exclude_current_token:
        A.diagonal(dim1=-2, dim2=-1).zero_()
    total = A.sum(dim=(-2, -1))
    return {
        name: (A * D.to(A.dtype)).sum(dim=(-2, -1)) / total
        for name, D in detection_patterns(tokens).items()
    }


def head_scores(
    model: nn.Module,
    idx: Tensor,
    exclude_bos: bool = False,
    exclude_current_token: bool = False,
) -> dict[str, Tensor]:
    """{'previous_token', 'duplicate_token', 'induction'}: each (n_layer, n_head), averaged
    over the sequences of idx (T,) or (B, T)."""
    idx = check_tokens(model, idx, min_len=2)
    weights = capture_attention(model, idx)  # (n_layer, B, nh, T, T)
    scores = scores_from_patterns(weights, idx[:, None, :], exclude_bos, exclude_current_token)
    return {name: s.mean(dim=1) for name, s in scores.items()}  # mean over the batch


def chance_scores(tokens: Tensor) -> dict[str, float]:
    """The scores of a head that attends uniformly to every position it may see (A[i, j] =
    1/(i+1)): the chance level to compare real heads with. tokens (T,) or (B, T)."""
    tokens = torch.as_tensor(tokens)
    if tokens.dim() == 1:
        tokens = tokens[None]
    T = tokens.shape[-1]
    rows = torch.arange(1, T + 1, dtype=torch.float64)[:, None]
    uniform = torch.ones(T, T, dtype=torch.float64).tril() / rows  # (T, T)
    scores = scores_from_patterns(uniform.expand(len(tokens), T, T), tokens)
    return {name: float(s.mean()) for name, s in scores.items()}


# ----------------------------------------------------------------------------- ablation

@contextlib.contextmanager
def ablate_heads(
    model: nn.Module,
    heads: Sequence[tuple[int, int]],
    mode: str = "zero",
    reference_idx: Tensor | None = None,
) -> Iterator[None]:
    """Ablate (layer, head) pairs in every forward pass inside the block.

    mode "zero": the head's output (before the output projection) is set to zero.
    mode "mean": it is set to its mean over the batch and positions of reference_idx
    (required), computed once on entry with the model as it is then.
    """
    if mode not in ABLATION_MODES:
        raise UsageError(f"unknown ablation mode {mode!r}; expected one of: zero, mean")
    heads = check_heads(model, heads)
    means = None
    if mode == "mean":
        if reference_idx is None:
            raise UsageError("mean ablation needs reference_idx, the input to average over")
        means = mean_head_outputs(model, reference_idx)
    with _ablated(model, heads, means):
        yield


def _ablated(
    model: nn.Module, heads: list[tuple[int, int]], means: list[Tensor] | None
) -> contextlib.AbstractContextManager[None]:
    """Hooks on `attn.heads` that zero the chosen heads (means None) or set them to
    means[layer] (nh, hs)."""
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)
    n_head = unwrap(model).config.n_head

    def make_hook(layer: int) -> ForwardHook:
        chosen = torch.zeros(n_head, dtype=torch.bool, device=device_of(model))
        chosen[by_layer[layer]] = True
        chosen = chosen[None, :, None, None]  # (1, nh, 1, 1)
        if means is None:
            return lambda _module, _args, y: y.masked_fill(chosen, 0.0)
        mean = means[layer][None, :, None, :]  # (1, nh, 1, hs)
        return lambda _module, _args, y: torch.where(chosen, mean.to(y.dtype), y)

    modules = attention_modules(model)
    return forward_hooks(*((modules[layer].heads, make_hook(layer)) for layer in by_layer))


@torch.no_grad()
def mean_head_outputs(model: nn.Module, idx: Tensor) -> list[Tensor]:
    """Per layer, each head's output (nh, hs) averaged over batch and positions of idx."""
    idx = check_tokens(model, idx)
    modules = attention_modules(model)
    means: list[Tensor | None] = [None] * len(modules)

    def recorder(layer: int) -> ForwardHook:
        def hook(_module: nn.Module, _args: Any, y: Tensor) -> None:
            means[layer] = y.mean(dim=(0, 2))  # (nh, hs)
        return hook

    with eval_mode(model), forward_hooks(*((m.heads, recorder(i)) for i, m in enumerate(modules))):
        model(idx)
    return means


def next_token_targets(idx: Tensor) -> Tensor:
    """Targets for idx (B, T): the next token at each position, -1 (ignored) at the last."""
    targets = torch.full_like(idx, -1)
    targets[:, :-1] = idx[:, 1:]
    return targets


@torch.no_grad()
def ablation_deltas(
    model: nn.Module, idx: Tensor, targets: Tensor | None = None, mode: str = "zero"
) -> Tensor:
    """(n_layer, n_head): the loss with that one head ablated minus the clean loss.

    targets (B, T) like idx, -1 for positions left out; None means next-token prediction
    on idx itself. Mean ablation averages each head over idx. Runs in eval mode.
    """
    idx = check_tokens(model, idx, min_len=2 if targets is None else 1)
    if targets is None:
        targets = next_token_targets(idx)
    elif tuple(targets.shape) != tuple(idx.shape):
        raise UsageError(f"targets {tuple(targets.shape)} must match idx {tuple(idx.shape)}")
    config = unwrap(model).config
    deltas = torch.zeros(config.n_layer, config.n_head)
    if mode not in ABLATION_MODES:
        raise UsageError(f"unknown ablation mode {mode!r}; expected one of: zero, mean")
    means = mean_head_outputs(model, idx) if mode == "mean" else None  # once, not per head
    with eval_mode(model):
        _, clean = model(idx, targets)
        for layer in range(config.n_layer):
            for head in range(config.n_head):
                with _ablated(model, [(layer, head)], means):
                    _, loss = model(idx, targets)
                deltas[layer, head] = float(loss - clean)
    return deltas


# ----------------------------------------------------------------------------- induction

def repeated_random_tokens(
    vocab_size: int, seq_len: int, batch: int = 4, generator: torch.Generator | None = None
) -> Tensor:
    """(batch, 2 * seq_len): seq_len uniform random ids, then the same ids again."""
    if seq_len < 2:
        raise SettingError(Setting("seq_len"), f" must be at least 2, got {seq_len}")
    if batch < 1:
        raise UsageError(f"batch must be at least 1, got {batch}")
    first = torch.randint(vocab_size, (batch, seq_len), generator=generator)
    return torch.cat([first, first], dim=1)


@torch.no_grad()
def per_token_loss(model: nn.Module, idx: Tensor) -> Tensor:
    """(B, T-1): cross-entropy of predicting idx[:, t+1] from idx[:, :t+1], in nats."""
    idx = check_tokens(model, idx, min_len=2)
    with eval_mode(model):
        logits, _ = model(idx)
    logits = logits[:, :-1].float()
    return F.cross_entropy(logits.transpose(1, 2), idx[:, 1:], reduction="none")


def induction_probe(
    model: nn.Module, seq_len: int, batch: int = 4, generator: torch.Generator | None = None
) -> dict:
    """Feed random tokens repeated twice (2 * seq_len positions) and see what the model
    does with the repeat.

    Returns "induction" (n_layer, n_head) scores on that input; "per_token_loss" (2*seq_len
    - 1,) averaged over the batch (entry t predicts token t+1); "loss_first_half", the mean
    over predictions of tokens 1..seq_len-1 (random: ~ln(vocab) at best), and
    "loss_second_half", over their copies seq_len+1..2*seq_len-1 (an induction head makes
    these nearly free). The repeat's first token is in neither: nothing predicts it.
    Also "scores", every head score on that input (head_scores), and "tokens"
    (batch, 2*seq_len), the input.
    """
    config = unwrap(model).config
    if 2 * seq_len > config.block_size:
        raise SettingError(Setting("seq_len"), f" {seq_len} repeated twice is longer than the "
                           f"model's context of {config.block_size}; use at most "
                           f"{config.block_size // 2}")
    tokens = repeated_random_tokens(config.vocab_size, seq_len, batch, generator)
    tokens = tokens.to(device_of(model))
    losses = per_token_loss(model, tokens).mean(dim=0).cpu()  # (2*seq_len - 1,)
    scores = {name: grid.cpu() for name, grid in head_scores(model, tokens).items()}
    return {
        "induction": scores["induction"],
        "scores": scores,
        "loss_first_half": float(losses[: seq_len - 1].mean()),
        "loss_second_half": float(losses[seq_len:].mean()),
        "per_token_loss": losses,
        "tokens": tokens.cpu(),
    }


# ----------------------------------------------------------------------------- helpers

