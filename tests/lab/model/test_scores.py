"""View 6, head scores and ablation (gptlab.lab.model.scores), through its routes: every
head's previous-token, duplicate and induction score recomputed from its attention pattern
(view 3's), the chance scores from even attention, and one head's ablation agreeing with
the table of deltas."""

from __future__ import annotations

import numpy as np
import pytest


def test_head_scores_and_ablation(client, post, bad):
    d = post(client, "/api/head_scores", {"run": "tiny", "seed": 3})
    ids = d["ids"]
    T = len(ids)
    assert ids[: T // 2] == ids[T // 2 :]  # the default probe: random tokens, repeated
    pattern = post(client, "/api/heads", {"run": "tiny", "ids": ids, "layer": 1})["attention"]
    tok = np.array(ids)
    prev = np.zeros((T, T))
    prev[np.arange(1, T), np.arange(T - 1)] = 1
    dup = ((tok[:, None] == tok[None, :]) & (np.arange(T)[None, :] < np.arange(T)[:, None]))
    induction = np.zeros((T, T))
    induction[:, 1:] = dup[:, :-1]
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]  # chance: even attention
    for name, D in [("previous_token", prev), ("duplicate_token", dup), ("induction", induction)]:
        assert d["chance"][name] == pytest.approx((uniform * D).sum() / uniform.sum(), abs=1e-9)
        for layer in range(2):
            for head in range(4):
                A = np.array(pattern[layer][head])
                assert d["scores"][name][layer][head] == pytest.approx(
                    (A * D).sum() / A.sum(), abs=1e-5), (name, layer, head)
    a = post(client, "/api/ablate", {"run": "tiny", "ids": ids, "layer": 1, "head": 2})
    assert a["loss"] == pytest.approx(d["loss"], abs=1e-6)
    assert a["delta"] == pytest.approx(d["ablation_deltas"][1][2], abs=1e-5)
    assert a["delta"] == pytest.approx(a["ablated_loss"] - a["loss"], abs=1e-9)
    bad(client, "/api/ablate", {"run": "tiny", "layer": 0, "head": 4}, "head must be between")
    bad(client, "/api/head_scores", {"run": "tiny", "prompt": "t"}, "at least 2 tokens")
