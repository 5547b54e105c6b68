"""View 4's tables that need no run (gptlab.lab.calculator.positions), through their routes:
the sinusoidal table against the formula, RoPE's scores against a NumPy rotation and
depending on the offset only; bad sizes refused."""

from __future__ import annotations

import numpy as np
import pytest


def test_sinusoidal_matches_the_formula(client, post, bad):
    d = post(client, "/api/sinusoidal", {"positions": 20, "d_model": 10})
    pos = np.arange(20, dtype=np.float64)[:, None]
    i = np.arange(0, 10, 2, dtype=np.float64)
    expected = np.zeros((20, 10))
    expected[:, 0::2] = np.sin(pos / 10000 ** (i / 10))
    expected[:, 1::2] = np.cos(pos / 10000 ** (i / 10))
    table = np.array(d["table"])
    np.testing.assert_allclose(table, expected, atol=1e-6)
    np.testing.assert_allclose(np.array(d["similarity"]), table @ table.T, atol=1e-9)
    bad(client, "/api/sinusoidal", {"positions": 10_000}, "positions must be between")


def test_rope_scores_depend_on_offset_only(client, post, bad):
    d = post(client, "/api/rope", {"head_dim": 8, "base": 100.0, "positions": 12, "offset": 4})
    q, k = np.array(d["q"], dtype=np.float64), np.array(d["k"], dtype=np.float64)
    theta = 100.0 ** (-np.arange(0, 8, 2) / 8)

    def rotate(x, m):  # pairs (i, i + 4), rotated by m * theta_i
        a, b = x[:4], x[4:]
        c, s = np.cos(m * theta), np.sin(m * theta)
        return np.concatenate([a * c - b * s, a * s + b * c])

    expected = np.array([[rotate(q, m) @ rotate(k, n) for n in range(12)] for m in range(12)])
    np.testing.assert_allclose(np.array(d["scores"]), expected, atol=1e-4)
    np.testing.assert_allclose(d["inv_freq"], theta, rtol=1e-6)
    offsets = [s["score"] for s in d["same_offset"]]
    assert len(offsets) == 8 and max(offsets) - min(offsets) < 1e-4
    assert offsets[0] == pytest.approx(q @ rotate(k, 4), abs=1e-4)
    assert np.hypot(*d["q_pair0"][5]) == pytest.approx(np.hypot(q[0], q[4]), abs=1e-5)
    bad(client, "/api/rope", {"head_dim": 7}, "head_dim must be even")
    bad(client, "/api/rope", {"positions": 8, "offset": 8}, "offset must be between 0 and 7")
    bad(client, "/api/rope", {"base": 1}, "base must be between")
