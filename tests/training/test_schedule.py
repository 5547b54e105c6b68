"""Warm-up-stable-decay (gptlab.training.schedule.lr_at with schedule="wsd"; cosine is
nanoGPT's, tested in test_run.py)."""

from __future__ import annotations

import pytest

from gptlab.training.schedule import lr_at


def wsd(step: int, cooldown_frac: float = 0.25) -> float:
    # lr 1e-3 -> 1e-4, warm-up 100, decay ends at 900: the cool-down is the last 200 steps.
    return lr_at(step, 1e-3, 1e-4, 100, 900, "wsd", cooldown_frac)


def test_wsd_warms_up_holds_then_cools_down_linearly():
    assert wsd(0) == pytest.approx(1e-3 / 101)  # the warm-up is cosine's (nanoGPT's)
    assert wsd(99) == pytest.approx(1e-3 * 100 / 101)
    assert all(wsd(s) == 1e-3 for s in range(100, 701))  # stable
    assert wsd(800) == pytest.approx(5.5e-4)  # half-way down the line
    assert wsd(900) == pytest.approx(1e-4)
    assert wsd(5000) == 1e-4
    steps = [wsd(s) for s in range(100, 901)]
    assert all(a >= b for a, b in zip(steps[:-1], steps[1:], strict=True))
    slopes = {round(a - b, 12) for a, b in zip(steps[600:-1], steps[601:], strict=True)}
    assert slopes == {round(9e-4 / 200, 12)}  # linear


def test_wsd_edges():
    assert all(wsd(s, 0.0) == 1e-3 for s in (100, 500, 900))  # no cool-down: constant
    # the whole post-warm-up span cooling down: a straight line from lr to min_lr
    assert wsd(500, 1.0) == pytest.approx(5.5e-4)
    assert lr_at(50, 1e-3, 1e-4, 50, 50, "wsd", 0.5) == 1e-3  # nothing left to decay
