"""View 1, the attention calculator: one head's every stage on seeded or edited inputs
(gptlab.lab.calculator.compute, float64), for both positions of the mask switch. Masked
scores (-inf) are sent as null, since JSON has no infinities; the page draws them as -inf."""

from __future__ import annotations

import math
from typing import Any

import torch

from gptlab.lab.calculator import compute, schemas


def to_json(t: torch.Tensor) -> Any:
    """A tensor as nested lists, -inf as None (JSON has no infinities)."""
    t = t.detach().to(torch.float64)
    if torch.isinf(t).any():
        return [to_json(row) for row in t] if t.dim() > 1 else [
            None if math.isinf(x) else x for x in t.tolist()]
    return t.tolist()


def attention_view(body: schemas.AttentionRequest) -> dict[str, Any]:
    """Every stage of one head, for the mask switch's both positions (`causal` selects
    which one is the main result; `other` holds the rest, so the page can show the diff)."""
    tokens, d, seed, causal = body.tokens, body.d, body.seed, body.causal
    inputs = compute.seeded_inputs(tokens, d, seed)
    for name in ("x", "w_q", "w_k", "w_v"):  # edited cells (shapes checked) replace seeded ones
        if getattr(body, name) is not None:
            inputs[name] = torch.tensor(getattr(body, name), dtype=torch.float64)
    steps = compute.attention(inputs, causal=causal)
    other = compute.attention(inputs, causal=not causal)
    out = {"tokens": tokens, "d": d, "d_k": d, "seed": seed, "causal": causal,
           "sqrt_d_k": math.sqrt(d)}
    out.update({name: to_json(t) for name, t in inputs.items()})
    out.update({name: to_json(t) for name, t in steps.items()})
    out["other"] = {name: to_json(steps_t) for name, steps_t in other.items()
                    if name in ("masked", "weights", "out")}
    return out
