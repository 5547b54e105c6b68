"""A run's learned positions (the Positions view, beside the sinusoidal and RoPE tables):
its own position table (wpe), PE . PE^T, and each position's nearest others by cosine."""

from __future__ import annotations

from typing import Any

import torch

from gptlab.errors import UsageError
from gptlab.lab.model import schemas
from gptlab.lab.runs import Runs


def neighbours(cosine: torch.Tensor, k: int) -> list[list[dict[str, Any]]]:
    """(P, P) cosine similarities -> for each position its k nearest others, nearest first
    (ties by the lower position)."""
    masked = cosine.clone().fill_diagonal_(float("-inf"))
    out = []
    for row in masked:
        order = torch.argsort(row, descending=True, stable=True)[:k]
        out.append([{"position": int(j), "cosine": float(row[j])} for j in order])
    return out


def mean_at_distance(cosine: torch.Tensor, lo: int, hi: int | None = None) -> float | None:
    """Mean cosine over pairs (m, n) with lo <= n - m (< hi); None if there is none."""
    P = cosine.shape[0]
    gap = torch.arange(P)[None, :] - torch.arange(P)[:, None]
    pick = (gap >= lo) if hi is None else (gap >= lo) & (gap < hi)
    return float(cosine[pick].mean()) if pick.any() else None


def learned_positions_view(runs: Runs, body: schemas.LearnedPositionsRequest) -> dict[str, Any]:
    run = runs.load(body.run)
    cfg = run.model.config
    if cfg.pos_encoding != "learned":
        raise UsageError(f"run {body.run!r} has {cfg.pos_encoding} positions, not a learned "
                         "table: this needs a run trained with pos_encoding 'learned' (the "
                         "shipped model is one); sinusoidal and RoPE positions are drawn above")
    P = min(cfg.block_size, body.positions or schemas.MAX_POSITIONS)
    table = run.model.wpe.weight.detach()[:P].double()  # (P, C)
    similarity = table @ table.T
    unit = table / table.norm(dim=1, keepdim=True).clamp_min(1e-12)
    cosine = unit @ unit.T
    k = min(body.neighbours, P - 1)
    return {
        "run": run.name, "block_size": cfg.block_size, "n_embd": cfg.n_embd, "positions": P,
        "table": table.tolist(), "similarity": similarity.tolist(), "cosine": cosine.tolist(),
        "neighbours": neighbours(cosine, k),
        "adjacent_cosine": mean_at_distance(cosine, 1, 2),
        "distant_cosine": mean_at_distance(cosine, 8),
    }
