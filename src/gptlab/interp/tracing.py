"""Causal tracing (Meng et al. 2022, "Locating and Editing Factual Associations in GPT",
ROME): where in the network does a model recall a fact about a subject?

Three runs of one prompt whose next token is the fact's attribute:

- clean: the prompt as it is; p_clean, the probability of the attribute's token;
- corrupted: Gaussian noise added to the subject's token embeddings (ROME: 3 times the
  standard deviation of the embeddings; several noise samples, one batch row each), so the
  model no longer knows who the prompt is about; p_corrupted;
- corrupted with one site restored: one layer's residual stream, attention output or MLP
  output at one position taken from the clean run (gptlab.interp.patching, denoising);
  p_restored.

The total effect of the subject is p_clean - p_corrupted; a site's indirect effect is
p_restored - p_corrupted, the recall that site alone brings back. ROME averages them over
facts (AIE) and reads them by position kind: before the subject, the subject's tokens, its
last token, the tokens after it, the last token.

A restored "resid" site is the stream block `layer` reads (patching's convention: layer 0 is
the embeddings); ROME plots each block's output, one layer later. ROME restores a window of
ten MLP or attention layers around each layer in GPT-2 XL (48 layers); `window` does the
same, 1 (one layer) by default.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from gptlab.errors import UsageError
from gptlab.interp.hooks import check_tokens, eval_mode, forward_hooks
from gptlab.interp.patching import Site, patched_logits, target_probability
from gptlab.interp.residuals import capture_residuals, check_pre_norm

TRACE_KINDS = ("resid", "mlp", "attn")
# ROME corrupts with noise of 3 times the standard deviation of the subject embeddings:
# enough that the model no longer recognises the subject, no more.
NOISE_SCALE = 3.0
# ROME's position kinds, its last-subject and last tokens kept apart from the rest.
POSITION_KINDS = ("before subject", "subject", "last subject", "after subject", "last")


@dataclass(frozen=True)
class Trace:
    """One prompt traced: p_clean, p_corrupted (means over the noise samples) and, per
    kind of site, restored (n_layer, T): p with that layer's site at that position restored
    (a window of layers where window > 1)."""

    clean: float
    corrupted: float
    restored: dict[str, Tensor]

    @property
    def total_effect(self) -> float:
        return self.clean - self.corrupted

    def indirect(self, kind: str) -> Tensor:
        """(n_layer, T): each site's indirect effect, p_restored - p_corrupted."""
        return self.restored[kind] - self.corrupted


def embedding_std(model: nn.Module, ids: Tensor) -> float:
    """The standard deviation of the token embeddings of ids (ROME measures it over the
    subjects' tokens)."""
    gpt = check_pre_norm(model)
    with torch.no_grad():
        return float(gpt.wte(ids.to(gpt.wte.weight.device)).float().std())


def subject_noise(model: nn.Module, samples: int, span: int, std: float,
                  generator: torch.Generator) -> Tensor:
    """(samples, span, n_embd) Gaussian noise of NOISE_SCALE x std: one row per noise
    sample, for a subject of span tokens."""
    gpt = check_pre_norm(model)
    if samples < 1 or span < 1:
        raise UsageError(f"noise needs at least one sample and one subject token, got "
                         f"samples={samples}, span={span}")
    noise = torch.randn(samples, span, gpt.config.n_embd, generator=generator)
    return NOISE_SCALE * std * noise


@contextlib.contextmanager
def noised_subject(model: nn.Module, subject: tuple[int, int], noise: Tensor) -> Iterator[None]:
    """Every forward pass inside adds noise (B, end - start, C) to the token embeddings at
    the subject's positions [start, end)."""
    gpt = check_pre_norm(model)
    start, end = subject

    def add(_module: nn.Module, _args: object, out: Tensor) -> Tensor:
        out = out.clone()
        out[:, start:end] += noise.to(out.dtype).to(out.device)
        return out

    with forward_hooks((gpt.wte, add)):
        yield


def check_subject(subject: tuple[int, int], T: int) -> tuple[int, int]:
    start, end = subject
    if not 0 <= start < end <= T:
        raise UsageError(f"the subject [{start}, {end}) must be a non-empty span of the "
                         f"prompt's {T} tokens")
    return start, end


@torch.no_grad()
def trace(model: nn.Module, idx: Tensor, subject: tuple[int, int], target: int,
          noise: Tensor, kinds: Sequence[str] = TRACE_KINDS, window: int = 1) -> Trace:
    """Trace one prompt idx (T,) whose next token should be `target`: the subject's tokens
    [start, end) corrupted with noise (samples, end - start, C) (subject_noise; zeros
    corrupt nothing), then every kind's site restored one layer (or `window` layers centred
    on it, as ROME) and one position at a time from the clean run."""
    gpt = check_pre_norm(model)
    idx = check_tokens(model, idx)
    if idx.shape[0] != 1:
        raise UsageError(f"trace one prompt at a time, got a batch of {idx.shape[0]}")
    T = idx.shape[1]
    start, end = check_subject(subject, T)
    if noise.dim() != 3 or noise.shape[1:] != (end - start, gpt.config.n_embd):
        raise UsageError(f"noise must be (samples, {end - start}, {gpt.config.n_embd}) for "
                         f"this subject, got {tuple(noise.shape)}")
    if window < 1:
        raise UsageError(f"window must be at least 1, got {window}")
    unknown = [k for k in kinds if k not in TRACE_KINDS]
    if unknown:
        raise UsageError(f"unknown trace kind {unknown[0]!r}; expected one of: "
                         f"{', '.join(TRACE_KINDS)}")
    batch = idx.expand(noise.shape[0], T)  # a row per noise sample
    metric = target_probability(target)
    clean = capture_residuals(model, batch)
    n_layer = gpt.config.n_layer
    restored = {}
    with noised_subject(model, (start, end), noise):
        with eval_mode(model):
            corrupted = float(metric(model(batch)[0]))
        for kind in kinds:
            # Before the subject the clean and corrupted runs are the same (causal attention):
            # restoring there changes nothing, so it is not run.
            grid = torch.full((n_layer, T), corrupted)
            for layer in range(n_layer):
                layers = window_layers(layer, n_layer, 1 if kind == "resid" else window)
                for position in range(start, T):
                    sites = [Site(kind, la, position=position) for la in layers]
                    grid[layer, position] = float(metric(patched_logits(model, batch, clean,
                                                                        sites)))
            restored[kind] = grid
    return Trace(float(metric(clean.logits)), corrupted, restored)


def window_layers(layer: int, n_layer: int, window: int) -> list[int]:
    """The `window` layers centred on layer, clipped to the model (ROME's window)."""
    low = max(0, min(layer - window // 2, n_layer - window))
    return list(range(low, min(n_layer, low + window)))


def position_kinds(T: int, subject: tuple[int, int]) -> list[str]:
    """Each position's kind (POSITION_KINDS) in a prompt of T tokens with the subject at
    [start, end): the last subject token before the last token where they coincide."""
    start, end = check_subject(subject, T)
    kinds = []
    for t in range(T):
        if t == end - 1:
            kinds.append("last subject")
        elif t == T - 1:
            kinds.append("last")
        elif t < start:
            kinds.append("before subject")
        elif t < end:
            kinds.append("subject")
        else:
            kinds.append("after subject")
    return kinds


def by_position_kind(grid: Tensor, kinds: Sequence[str]) -> dict[str, list[float] | None]:
    """(n_layer, T) -> {kind: per-layer mean over that kind's positions}, None for a kind
    the prompt has no position of."""
    out: dict[str, list[float] | None] = {}
    for kind in POSITION_KINDS:
        columns = [t for t, k in enumerate(kinds) if k == kind]
        out[kind] = grid[:, columns].mean(dim=1).tolist() if columns else None
    return out
