"""View 2, why scores are divided by sqrt(d_k): the statistics of q . k and of the softmax
over them at one d_k, with and without the division (gptlab.lab.calculator.compute)."""

from __future__ import annotations

from typing import Any

from gptlab.lab.calculator import compute, schemas


def scaling_view(body: schemas.ScalingRequest) -> dict[str, Any]:
    return compute.scaling_stats(body.d_k, body.n_keys, body.seed)
