"""Training steps for the benchmarks: one forward + backward + AdamW update on a fixed batch,
for gptlab's GPT and for Hugging Face's GPT2LMHeadModel, with the speed levers as switches."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gptlab import GPT, GPTConfig


@dataclass(frozen=True)
class Levers:
    """Speed switches for a training step. The defaults are plain eager fp32 PyTorch."""

    bf16: bool = False  # autocast matmuls to bfloat16 (weights and optimizer stay fp32)
    fused_adamw: bool = False  # one fused kernel for the whole AdamW update
    compile: bool = False  # torch.compile the model's forward (and so its backward)
    compile_mode: str | None = None  # None is torch.compile's default mode

    def label(self) -> str:
        parts = ["bf16" if self.bf16 else "fp32"]
        if self.fused_adamw:
            parts.append("fused AdamW")
        if self.compile:
            parts.append("compile" + (f"({self.compile_mode})" if self.compile_mode else ""))
        return " + ".join(parts)


def adamw(model: nn.Module, lr: float = 1e-3, fused: bool = False) -> torch.optim.AdamW:
    """nanoGPT's optimizer: weight decay 0.1 on matrices only (not on norms and biases),
    betas (0.9, 0.99) as in its Shakespeare recipe."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99), fused=fused or None)


def autocast(enabled: bool, device_type: str = "cpu") -> contextlib.AbstractContextManager:
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=torch.bfloat16)


def hf_gpt2(config: GPTConfig) -> nn.Module:
    """transformers' GPT2LMHeadModel in the same shape, random init, SDPA attention.
    Its GELU is set to ours; it always carries biases (GPT-2 has no switch for them)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    hf_config = GPT2Config(
        vocab_size=config.vocab_size, n_positions=config.block_size, n_embd=config.n_embd,
        n_layer=config.n_layer, n_head=config.n_head, n_inner=config.ffn_hidden,
        activation_function={"gelu": "gelu", "gelu_tanh": "gelu_new"}[config.mlp],
        layer_norm_epsilon=config.norm_eps, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        tie_word_embeddings=config.tie_embeddings, bos_token_id=None, eos_token_id=None,
    )
    model = GPT2LMHeadModel._from_config(hf_config, attn_implementation="sdpa")
    assert model.config._attn_implementation == "sdpa"
    return model


class _HFLogits(nn.Module):
    """Calls a transformers causal LM and returns plain logits, so one step fits both."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, idx: Tensor) -> Tensor:
        return self.model(input_ids=idx, use_cache=False).logits


class _OurLogits(nn.Module):
    def __init__(self, model: GPT) -> None:
        super().__init__()
        self.model = model

    def forward(self, idx: Tensor) -> Tensor:
        return self.model(idx)[0]


def build_model(kind: str, config: GPTConfig, seed: int = 0) -> nn.Module:
    """'ours' or 'hf': a module mapping idx (B, T) to logits (B, T, vocab)."""
    torch.manual_seed(seed)
    if kind == "ours":
        return _OurLogits(GPT(config))
    if kind == "hf":
        return _HFLogits(hf_gpt2(config))
    raise ValueError(f"unknown model kind {kind!r}")


def make_step(
    model: nn.Module, levers: Levers, batches: list[tuple[Tensor, Tensor]],
    lr: float = 1e-3, grad_clip: float = 1.0,
) -> Callable[[], float]:
    """A closure doing one full training step on the next batch (cycling); returns the loss.
    The loss is cross-entropy over every position, computed in fp32 by the same code for
    every model, so each contender does the same work."""
    model.train()
    optimizer = adamw(model, lr=lr, fused=levers.fused_adamw)
    forward = torch.compile(model, mode=levers.compile_mode) if levers.compile else model
    params = [p for p in model.parameters()]
    state = {"i": 0}

    def step() -> float:
        x, y = batches[state["i"] % len(batches)]
        state["i"] += 1
        with autocast(levers.bf16, x.device.type):
            logits = forward(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
        loss.backward()
        if grad_clip:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    return step


def random_batches(
    vocab_size: int, batch_size: int, seq_len: int, n: int = 4, seed: int = 0
) -> list[tuple[Tensor, Tensor]]:
    """n fixed (x, y) batches of random tokens; every contender trains on the same ones."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        w = torch.randint(vocab_size, (batch_size, seq_len + 1), generator=g)
        out.append((w[:, :-1].contiguous(), w[:, 1:].contiguous()))
    return out
