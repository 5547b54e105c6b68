"""View 1, the attention calculator (gptlab.lab.calculator.attention), through its route:
every stage checked against a float64 NumPy recomputation (np_attention, conftest.py), for
both positions of the mask switch, on seeded and edited inputs; every bad input answered
with a 400 and a message."""

from __future__ import annotations

import numpy as np
import pytest

ATOL = 1e-12  # float64 end to end (the calculator computes in float64)


def arr(x):
    """JSON matrix -> float64 array, null (masked, -inf) -> -inf."""
    return np.array([[-np.inf if v is None else v for v in row] for row in x], dtype=np.float64)


@pytest.mark.parametrize("causal", [True, False])
def test_attention_stages_match_float64_recomputation(client, causal, post, np_attention):
    d = post(client, "/api/attention", {"causal": causal})
    assert d["tokens"] == ["cat", "sat", "on", "the", "mat"] and d["d"] == 4
    ref = np_attention(arr(d["x"]), arr(d["w_q"]), arr(d["w_k"]), arr(d["w_v"]), causal)
    for name, expected in ref.items():
        np.testing.assert_allclose(arr(d[name]), expected, atol=ATOL, rtol=0, err_msg=name)
    other = np_attention(arr(d["x"]), arr(d["w_q"]), arr(d["w_k"]), arr(d["w_v"]), not causal)
    for name in ("masked", "weights", "out"):
        np.testing.assert_allclose(arr(d["other"][name]), other[name], atol=ATOL, rtol=0)


def test_mask_row0_is_exactly_one_and_upper_triangle_is_minus_inf(client, post):
    masked = post(client, "/api/attention", {"causal": True})
    assert masked["weights"][0] == [1.0, 0.0, 0.0, 0.0, 0.0]  # "cat" sees only itself
    T = len(masked["tokens"])
    for i in range(T):
        for j in range(T):
            assert (masked["masked"][i][j] is None) == (j > i)
    bidirectional = post(client, "/api/attention", {"causal": False})
    assert all(v is not None for row in bidirectional["masked"] for v in row)
    assert 0 < bidirectional["weights"][0][0] < 1
    assert all(w > 0 for w in bidirectional["weights"][0])


def test_inputs_are_seeded_per_token_and_editable(client, post, np_attention):
    a = post(client, "/api/attention", {"tokens": "the cat saw the dog", "seed": 7})
    assert a["x"][0] == a["x"][3]  # same token, same embedding row
    assert all(round(v, 2) == v for row in a["x"] + a["w_q"] for v in row)  # 2 decimals
    again = post(client, "/api/attention", {"tokens": "the cat saw the dog", "seed": 7})
    assert again["out"] == a["out"]
    x = [row[:] for row in a["x"]]
    x[1][2] += 1.5
    edited = post(client, "/api/attention", {"tokens": "the cat saw the dog", "seed": 7, "x": x})
    assert edited["x"] == x and edited["out"] != a["out"]
    ref = np_attention(arr(x), arr(a["w_q"]), arr(a["w_k"]), arr(a["w_v"]), True)
    np.testing.assert_allclose(arr(edited["out"]), ref["out"], atol=ATOL, rtol=0)
    wide = post(client, "/api/attention", {"tokens": ["a"] * 64, "d": 64})
    assert len(wide["out"]) == 64 and len(wide["out"][0]) == 64


def test_attention_rejects_bad_input(client, bad):
    bad(client, "/api/attention", {"d": 0}, "d must be between 1 and 64")
    bad(client, "/api/attention", {"d": 65}, "d must be between 1 and 64")
    bad(client, "/api/attention", {"d": "four"}, "d must be an integer")
    bad(client, "/api/attention", {"tokens": " ".join(["a"] * 65)}, "at most 64")
    bad(client, "/api/attention", {"tokens": ""}, "at least one token")
    bad(client, "/api/attention", {"tokens": ["x" * 40]}, "longer than 32")
    bad(client, "/api/attention", {"tokens": "a b", "d": 2, "x": [[1, 2]]}, "2 x 2 matrix")
    bad(client, "/api/attention", {"tokens": "a b", "d": 2, "x": [[1, 2], [3, "z"]]},
        "x[1][1] must be a finite number")
    bad(client, "/api/attention", '{"tokens": "a b", "d": 2, "w_q": [[1, NaN], [0, 1]]}',
        "w_q[0][1] must be a finite number")
    bad(client, "/api/attention", {"tokens": "a", "d": 1, "x": [[1e9]]}, "beyond")
    bad(client, "/api/attention", {"causal": "maybe"}, "causal must be true or false")
    bad(client, "/api/attention", "{not json", "not valid JSON")
    bad(client, "/api/attention", "[1, 2]", "must be a JSON object")
    bad(client, "/api/attention", b"\xff\xfe", "not valid JSON")
    bad(client, "/api/attention", "{" + " " * 300_000 + "}", "the limit is")
