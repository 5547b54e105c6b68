"""View 2, why sqrt(d_k) (gptlab.lab.calculator.scaling), through its route: the raw and
scaled scores' spreads, histograms and softmax statistics consistent with each other and with
Var(q.k) = d_k, the scaled row recomputed from the unscaled one; bad sizes refused."""

from __future__ import annotations

import math

import numpy as np
import pytest


@pytest.mark.parametrize("d_k", [1, 64, 512])
def test_scaling_numbers_are_consistent(client, d_k, post, bad):
    d = post(client, "/api/scaling", {"d_k": d_k, "n_keys": 16})
    assert d["std_raw"] == pytest.approx(d["std_scaled"] * math.sqrt(d_k), rel=1e-12)
    # Var(q.k) = d_k; with one coordinate the 16 keys' own spread dominates the estimate
    assert d["std_raw"] == pytest.approx(math.sqrt(d_k), rel=0.3 if d_k < 16 else 0.1)
    assert sum(d["hist_raw"]) == sum(d["hist_scaled"]) == d["n_queries"] * d["n_keys"]
    unscaled = np.array(d["example_row_unscaled"])
    scaled = np.array(d["example_row_scaled"])
    assert unscaled.sum() == pytest.approx(1) and scaled.sum() == pytest.approx(1)
    # softmax(raw / sqrt(d_k)) recomputed from softmax(raw): log w = raw - const
    logits = np.log(unscaled) / math.sqrt(d_k)
    expected = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    np.testing.assert_allclose(scaled, expected, atol=1e-9)
    for side in ("scaled", "unscaled"):
        assert 0 < d[side]["entropy"] <= d["max_entropy"] + 1e-12
    if d_k == 1:
        assert d["unscaled"] == d["scaled"]
    else:  # saturation without the scale
        assert d["unscaled"]["max_weight"] > d["scaled"]["max_weight"] + 0.3
        assert d["unscaled"]["entropy"] < d["scaled"]["entropy"] - 0.5
    assert [s["d_k"] for s in d["sweep"]][:4] == [1, 2, 4, 8]
    bad(client, "/api/scaling", {"d_k": 0}, "d_k must be between")
    bad(client, "/api/scaling", {"n_keys": 1000}, "n_keys must be between")
