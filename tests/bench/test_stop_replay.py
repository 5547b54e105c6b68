"""bench.stop_replay's replay: the look policy (val_target's own) on a recording, and the
oracle, the first recorded step whose whole split meets the target."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from bench.stop_replay import replay

from gptlab.training.val_target import ValTarget


def recording(val: torch.Tensor, steps: range, loss_at) -> dict[str, np.ndarray]:
    """Every window at loss_at(step) a token, plus a fixed offset of its own (the windows
    differ, as a text's do)."""
    spans = ValTarget(1.0, val, 16, 100, 10).spans
    counts = np.array([float(e - b - first) for b, e, first in spans])
    offsets = np.random.default_rng(0).normal(0, 0.3, len(spans))
    rec = {str(s): (loss_at(s) + offsets) * counts for s in steps}
    rec["counts"] = counts
    return rec


def test_the_policy_stops_at_a_recorded_step_that_meets_the_target_and_costs_its_looks():
    val = torch.zeros(8 * 64 * 8 + 5, dtype=torch.long)
    rec = recording(val, range(50, 100, 10), lambda s: 2.0 - 0.01 * (s - 50))
    whole = {s: float(rec[str(s)].sum() / rec["counts"].sum()) for s in range(50, 100, 10)}
    oracle = min(s for s in whole if whole[s] <= 1.75)
    r = replay(rec, val, 16, 1.75, max_iters=100, every=10, step_ms=10.0, window_ms=1.0)
    assert r["oracle"] == oracle == 80
    assert r["stop"] in whole and whole[r["stop"]] <= 1.75 and r["stop"] >= oracle
    n = len(rec["counts"])
    assert r["oracle_seconds"] == pytest.approx((oracle * 10 + n) / 1000)
    # the policy's time: its steps plus at least one whole split (the look that met)
    assert r["seconds"] >= (r["stop"] * 10 + n) / 1000


def test_a_look_at_a_step_not_recorded_is_an_error():
    val = torch.zeros(8 * 64 * 8 + 5, dtype=torch.long)
    rec = recording(val, range(60, 100, 10), lambda s: 2.0)  # the first look is at 50
    with pytest.raises(ValueError, match="no step 50"):
        replay(rec, val, 16, 1.75, max_iters=100, every=10)
