"""The calculator's arithmetic (gptlab.lab.calculator.compute): seeded inputs a learner can
redo by hand (two decimals, a token's row its own), attention against
softmax(QK^T / sqrt(d)) V written out, the softmax statistics and histograms at their
extremes, and the sqrt(d_k) numbers: raw scores spread like sqrt(d_k), scaled ones like 1."""

from __future__ import annotations

import math

import pytest
import torch

from gptlab.lab.calculator import compute
from gptlab.model.positional import sinusoidal_similarity


def test_seeded_inputs_are_two_decimals_and_a_tokens_row_is_its_own():
    a = compute.seeded_inputs(["the", "cat", "the"], d=4, seed=7)
    assert a["x"].shape == (3, 4) and a["w_q"].shape == a["w_k"].shape == (4, 4)
    for value in a.values():
        assert torch.equal(value, torch.round(value * 100) / 100)
    assert torch.equal(a["x"][0], a["x"][2])  # "the" twice: one row twice
    b = compute.seeded_inputs(["the", "dog", "the"], d=4, seed=7)
    assert torch.equal(a["x"][0], b["x"][0]) and not torch.equal(a["x"][1], b["x"][1])
    assert torch.equal(a["w_v"], b["w_v"])  # the weights depend on the seed only
    c = compute.seeded_inputs(["the"], d=4, seed=8)
    assert not torch.equal(a["x"][0], c["x"][0]) and not torch.equal(a["w_q"], c["w_q"])


@pytest.mark.parametrize("causal", [True, False])
def test_attention_is_the_formula_written_out(causal):
    inputs = compute.seeded_inputs(["a", "b", "c", "d"], d=3, seed=1)
    x = inputs["x"]
    q, k, v = x @ inputs["w_q"], x @ inputs["w_k"], x @ inputs["w_v"]
    scores = q @ k.T / math.sqrt(3)
    if causal:
        scores = scores.masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), -math.inf)
    steps = compute.attention(inputs, causal)
    weights = torch.softmax(scores, -1)
    found = [s for s in steps.values() if torch.is_tensor(s) and s.shape == weights.shape
             and torch.allclose(s, weights, atol=1e-12)]
    assert found, list(steps)
    outputs = [s for s in steps.values() if torch.is_tensor(s) and s.shape == (4, 3)
               and torch.allclose(s, weights @ v, atol=1e-12)]
    assert outputs, list(steps)


def test_softmax_stats_at_the_extremes():
    uniform = compute.softmax_stats(torch.full((3, 8), 1 / 8, dtype=torch.float64))
    assert uniform == pytest.approx({"max_weight": 1 / 8, "entropy": math.log(8)})
    one_hot = compute.softmax_stats(torch.eye(4, dtype=torch.float64))
    assert one_hot == pytest.approx({"max_weight": 1.0, "entropy": 0.0})


def test_a_histogram_counts_every_value_outliers_in_the_edge_bins():
    counts = compute.histogram(torch.tensor([-100.0, -1.0, 0.1, 0.9, 100.0]), -1, 1, 4)
    assert counts == [2, 0, 1, 2] and sum(counts) == 5


@pytest.mark.parametrize("d_k", [1, 64, 512])
def test_raw_scores_spread_like_sqrt_dk_and_scaled_ones_like_one(d_k):
    s = compute.scaling_stats(d_k, n_keys=16, seed=0)
    assert s["expected_std_raw"] == math.sqrt(d_k) and s["max_entropy"] == math.log(16)
    assert s["std_scaled"] == pytest.approx(s["std_raw"] / math.sqrt(d_k))
    if d_k > 1:  # (with one coordinate the 16 keys' own spread dominates the estimate)
        assert s["std_raw"] == pytest.approx(math.sqrt(d_k), rel=0.15)
    n = compute.N_QUERIES * 16
    assert sum(s["hist_raw"]) == sum(s["hist_scaled"]) == n
    assert len(s["hist_raw"]) == s["bins"] == compute.HIST_BINS
    assert [row["d_k"] for row in s["sweep"]] == [2**i for i in range(11)]  # up to 1024
    # unscaled, the softmax saturates as d_k grows; scaled, it does not
    first, last = s["sweep"][0], s["sweep"][-1]
    assert last["unscaled"]["max_weight"] > 0.9 > first["unscaled"]["max_weight"]
    assert last["scaled"]["max_weight"] < 0.5
    assert sum(s["example_row_scaled"]) == pytest.approx(1.0)


def test_view_4_shows_the_chapters_own_numbers():
    assert compute.sinusoidal is sinusoidal_similarity
