"""The learning-rate schedule: linear warm-up, then cosine decay to a floor, or
warm-up-stable-decay (WSD).

Cosine is nanoGPT's `get_lr`, so its recipes reproduce step for step:
warm-up lr * (step + 1) / (warmup + 1); then min_lr + (lr - min_lr) * (1 + cos(pi * r)) / 2
with r going 0 -> 1 from `warmup_iters` to `decay_iters`; min_lr after that.
WSD (Hu et al. 2024, MiniCPM; modded-nanogpt's schedule): the same warm-up, lr held, then
a linear cool-down to min_lr over the last `cooldown_frac` of the steps from warm-up to
`decay_iters`; min_lr after that.
"""

from __future__ import annotations

import math


def lr_at(step: int, lr: float, min_lr: float, warmup_iters: int, decay_iters: int,
          schedule: str = "cosine", cooldown_frac: float = 0.2) -> float:
    """The learning rate for optimizer step `step` (0-based)."""
    if step < warmup_iters:
        return lr * (step + 1) / (warmup_iters + 1)
    if step > decay_iters:
        return min_lr
    if decay_iters == warmup_iters:
        return lr
    if schedule == "wsd":
        cooldown = cooldown_frac * (decay_iters - warmup_iters)
        if cooldown == 0:
            return lr
        left = (decay_iters - step) / cooldown  # 1 at the cool-down's start, 0 at its end
        return min_lr + min(1.0, left) * (lr - min_lr)
    ratio = (step - warmup_iters) / (decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))  # 1 -> 0
    return min_lr + coeff * (lr - min_lr)
