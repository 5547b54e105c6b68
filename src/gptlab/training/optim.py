"""The optimizers a run uses: AdamW with weight decay on matrices only, or Muon for the
hidden matrices with AdamW for the rest (gptlab.training.muon)."""

from __future__ import annotations

import inspect

import torch
from torch import nn

from gptlab.training.config import TrainConfig
from gptlab.training.muon import Muon, MuonWithAdamW, hidden_matrices


def make_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device):
    """AdamW with weight decay on 2-D tensors only (matmul weights and embeddings); fused
    kernels where this torch has them for the device. optimizer "muon": Muon for the hidden
    weight matrices (gptlab.muon.hidden_matrices), this AdamW for the rest."""
    if cfg.optimizer == "muon":
        matrices, rest = hidden_matrices(model)
        named = dict(model.named_parameters())
        muon = Muon([{"params": [named[n] for n in matrices],
                      "lr_scale": cfg.muon_lr / cfg.learning_rate}],
                    lr=cfg.muon_lr, momentum=cfg.muon_momentum,
                    weight_decay=cfg.muon_weight_decay,
                    ns_dtype=None if cfg.muon_dtype == "auto" else cfg.muon_dtype)
        return MuonWithAdamW(muon, _adamw([named[n] for n in rest], cfg, device))
    return _adamw(list(model.parameters()), cfg, device)


def _adamw(params: list[nn.Parameter], cfg: TrainConfig, device: torch.device):
    params = [p for p in params if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    extra = {}
    if "fused" in inspect.signature(torch.optim.AdamW).parameters and device.type in (
        "cuda", "cpu"
    ):
        extra["fused"] = True
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2), **extra)
