"""The optimizers a run uses: AdamW with weight decay on matrices only, or Muon for the
hidden matrices with AdamW for the rest (gptlab.training.muon)."""

from __future__ import annotations

import torch
from torch import nn

from gptlab.model.attention import CausalSelfAttention
from gptlab.training import plain_optim
from gptlab.training.config import TrainConfig
from gptlab.training.muon import Muon, MuonWithAdamW, hidden_matrices

# How torch.optim.AdamW walks the parameters: one fused kernel for all of them, a few
# multi-tensor (foreach) kernels per step, or a Python loop over the tensors.
ADAMW_IMPLEMENTATIONS = {"fused": {"fused": True}, "foreach": {"foreach": True},
                         "for-loop": {"foreach": False}}
# Chosen per device type; others get torch's own default. CPU (bench/adamw_startup.py,
# 2 threads, torch 2.13, 2-core Xeon VM; medians of 240 steps): one AdamW step on the demo
# model (shakespeare-char-cpu, B=12, T=64) takes 0.55 ms fused, 3.9 foreach, 2.0 for-loop
# (a whole training step 27.3 / 28.6 / 29.3 ms); on the speedrun model's AdamW part 0.10 /
# 0.26 / 0.31 ms. Start-up is the same for all three: every torch.optim optimizer imports
# torch._dynamo in its constructor (Optimizer.add_param_group is @torch._disable_dynamo;
# 0.8-0.9 s here), and a fresh process reaches the end of its first step in 1.7-1.9 s
# either way (quiet rounds; the first step itself 4-8 ms). So fused on a CPU, for both
# sizes; on CUDA fused too (torch's fastest there; not measured here). nanoGPT's recipe
# reproduces to 4 decimals with it (tests/test_recipe.py). Beside Muon, AdamW is
# gptlab.training.plain_optim's: torch's fused step without torch.optim's start-up.
ADAMW_FOR_DEVICE = {"cuda": "fused", "cpu": "fused"}


def adamw_implementation(device: torch.device) -> str | None:
    """The AdamW implementation (a key of ADAMW_IMPLEMENTATIONS) for device, or None for
    torch's default."""
    return ADAMW_FOR_DEVICE.get(device.type)


def make_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device,
                   adamw: str | None = None):
    """AdamW with weight decay on 2-D tensors only (matmul weights and embeddings), in the
    implementation chosen for the device (adamw: one of ADAMW_IMPLEMENTATIONS instead).
    optimizer "muon": Muon for the hidden weight matrices (gptlab.training.muon.hidden_matrices),
    this AdamW for the rest."""
    implementation = adamw or adamw_implementation(device)
    if cfg.speed.optimizer == "muon":
        matrices, rest = hidden_matrices(model)
        named = dict(model.named_parameters())
        fused = fused_qkv_rows(model) if cfg.speed.muon_split_qkv else {}
        # a group per way of cutting the matrices into the ones Muon orthogonalises
        blocks = [None, *sorted(set(fused.values()))]
        groups = [[n for n in matrices if fused.get(n) == rows] for rows in blocks]
        muon = Muon([{"params": [named[n] for n in names], "row_blocks": rows,
                      "lr_scale": cfg.speed.muon_lr / cfg.learning_rate}
                     for names, rows in zip(groups, blocks, strict=True) if names],
                    lr=cfg.speed.muon_lr, momentum=cfg.speed.muon_momentum,
                    weight_decay=cfg.speed.muon_weight_decay,
                    ns_dtype=None if cfg.speed.muon_dtype == "auto" else cfg.speed.muon_dtype)
        # gptlab's AdamW (torch's step, not torch.optim's start-up) beside Muon
        return MuonWithAdamW(muon, _adamw([named[n] for n in rest], cfg, implementation,
                                          plain_optim.AdamW, embeddings(model)))
    return _adamw(list(model.parameters()), cfg, implementation, torch.optim.AdamW,
                  embeddings(model))


def embeddings(model: nn.Module) -> set[int]:
    """ids of the model's nn.Embedding weights (a head tied to one is the same tensor)."""
    return {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}


def fused_qkv_rows(model: nn.Module) -> dict[str, tuple[int, int, int]]:
    """{name of each attention layer's fused q/k/v weight: its rows of q, k and v}."""
    return {f"{name}.qkv.weight": (m.n_head * m.head_dim, m.n_kv_head * m.head_dim,
                                   m.n_kv_head * m.head_dim)
            for name, m in model.named_modules() if isinstance(m, CausalSelfAttention)}


def _adamw(params: list[nn.Parameter], cfg: TrainConfig, implementation: str | None,
           kind: type, embedded: set[int]):
    """Weight decay on 2-D tensors; with embedding_lr, the embeddings (ids in `embedded`) in
    a group of their own, last (a run without it keeps the two groups its checkpoints
    hold), at embedding_lr / learning_rate of the schedule's rate."""
    params = [p for p in params if p.requires_grad]
    apart = embedded if cfg.speed.embedding_lr is not None else set()
    groups = [
        {"params": [p for p in params if p.dim() >= 2 and id(p) not in apart],
         "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    if any(id(p) in apart for p in params):
        groups.append({"params": [p for p in params if id(p) in apart],
                       "weight_decay": cfg.weight_decay,
                       "lr_scale": cfg.speed.embedding_lr / cfg.learning_rate})
    extra = ADAMW_IMPLEMENTATIONS[implementation] if implementation is not None else {}
    return kind(groups, lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2), **extra)
