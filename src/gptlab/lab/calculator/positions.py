"""View 4's tables that need no run: the sinusoidal encoding and its dot products, and RoPE,
whose scores depend on the offset n - m only (gptlab.lab.calculator.compute). A run's own
learned table is gptlab.lab.model.learnedpos."""

from __future__ import annotations

from typing import Any

from gptlab.lab.calculator import compute, schemas


def sinusoidal_view(body: schemas.SinusoidalRequest) -> dict[str, Any]:
    positions, d_model = body.positions, body.d_model
    pe = compute.sinusoidal(positions, d_model)
    return {"positions": positions, "d_model": d_model, "table": pe["table"].tolist(),
            "similarity": pe["similarity"].tolist()}


def rope_view(body: schemas.RopeRequest) -> dict[str, Any]:
    head_dim, base, positions, seed = body.head_dim, body.base, body.positions, body.seed
    offset = body.offset  # set, below positions, by the model
    r = compute.rope_scores(head_dim, base, positions, seed)
    half = head_dim // 2
    same_offset = [{"m": m, "n": m + offset, "score": r["scores"][m, m + offset].item()}
                   for m in range(positions - offset)]
    return {
        "head_dim": head_dim, "base": base, "positions": positions, "offset": offset,
        "seed": seed, "inv_freq": r["inv_freq"].tolist(),
        "q": r["q"].tolist(), "k": r["k"].tolist(),
        "unrotated_score": (r["q"] @ r["k"]).item(),
        "scores": r["scores"].tolist(), "same_offset": same_offset,
        # the first pair (dims 0 and hs/2) of q at each position: a point on a circle
        "q_pair0": [[r["q_rot"][m, 0].item(), r["q_rot"][m, half].item()]
                    for m in range(positions)],
        "k_pair0": [[r["k_rot"][m, 0].item(), r["k_rot"][m, half].item()]
                    for m in range(positions)],
    }
