"""The lab's views (gptlab.lab.api) through its JSON API: every number checked against a
float64 NumPy recomputation (the calculator, sqrt(d_k), positions, parameter counts, a run's
heads, their scores and ablations), every bad input answered with a 400 and a message."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fastapi.testclient import TestClient

from gptlab import GPT, GPTConfig
from gptlab.lab.server import create_app

ATOL = 1e-12  # float64 end to end (the calculator computes in float64)


def arr(x):
    """JSON matrix -> float64 array, null (masked, -inf) -> -inf."""
    return np.array([[-np.inf if v is None else v for v in row] for row in x], dtype=np.float64)


def np_attention(x, wq, wk, wv, causal):
    q, k, v = x @ wq, x @ wk, x @ wv
    scores = q @ k.T / math.sqrt(q.shape[1])
    masked = scores.copy()
    if causal:
        masked[np.triu_indices(len(x), 1)] = -np.inf
    e = np.exp(masked - masked.max(axis=1, keepdims=True))
    weights = e / e.sum(axis=1, keepdims=True)
    return {"q": q, "k": k, "v": v, "scores": scores, "masked": masked, "weights": weights,
            "out": weights @ v}


# ----------------------------------------------------------------------------- calculator


@pytest.mark.parametrize("causal", [True, False])
def test_attention_stages_match_float64_recomputation(client, causal, post):
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


def test_inputs_are_seeded_per_token_and_editable(client, post):
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


# ----------------------------------------------------------------------------- sqrt(d_k)


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


# ----------------------------------------------------------------------------- positions


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


# ----------------------------------------------------------------------------- parameters


@pytest.mark.parametrize("preset, total", [("gpt2", 124_439_808), ("llama2-7b", 6_738_415_616),
                                           ("llama2-70b", 68_976_648_192)])
def test_params_presets_match_reference_counts(client, preset, total, post):
    d = post(client, "/api/params", {"preset": preset})
    assert d["total"] == total
    assert sum(r["params"] * r["count"] for r in d["rows"]) == total
    L, dm = d["config"]["n_layer"], d["config"]["n_embd"]
    assert d["estimate_12Ld2"] == 12 * L * dm * dm


def test_params_edited_config_matches_a_built_model(client, post, bad):
    config = dict(GPTConfig.from_preset("tiny-llama").to_dict(), n_layer=3, n_embd=48,
                  n_head=6, n_kv_head=3)
    d = post(client, "/api/params", {"config": config})
    assert d["total"] == GPT(GPTConfig.from_dict(config)).num_parameters()
    edited = post(client, "/api/params", {"preset": "gpt2", "config": {"n_layer": 24}})
    assert edited["total"] > post(client, "/api/params", {"preset": "gpt2"})["total"]
    bad(client, "/api/params", {"preset": "gpt2", "config": {"n_head": 7}}, "divisible")
    bad(client, "/api/params", {"preset": "nope"}, "unknown preset")
    bad(client, "/api/params", {"config": {"colour": 1}}, "unknown config field")
    bad(client, "/api/params", {"config": [1]}, "config must be a JSON object")
    presets = client.get("/api/presets").json()["presets"]
    assert presets["gpt2"]["n_layer"] == 12 and "tiny-gpt2" in presets


def test_presets_send_the_config_choices_the_server_takes(client, post):
    choices = client.get("/api/presets").json()["choices"]
    assert choices["pos_encoding"] == ["learned", "sinusoidal", "rope", "alibi", "none"]
    for field, values in choices.items():
        for value in values:
            post(client, "/api/params", {"preset": "gpt2", "config": {field: value}})


# ----------------------------------------------------------------------------- heads


def _layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def test_heads_match_a_float64_recomputation_of_layer0(client, runs_root, post):
    d = post(client, "/api/heads", {"run": "tiny", "prompt": "the cat sat on the mat",
                                    "layer": 0})
    model = GPT(GPTConfig.from_json(runs_root / "tiny/config.json"))
    from gptlab.model_dir import load_weights

    load_weights(model, runs_root / "tiny/model.safetensors")
    sd = {k: v.detach().double().numpy() for k, v in model.state_dict().items()}
    cfg = model.config
    ids = d["ids"]
    T, nh, hs = len(ids), cfg.n_head, cfg.head_dim
    x = sd["wte.weight"][ids] + sd["wpe.weight"][:T]
    h = _layer_norm(x, sd["blocks.0.norm_1.weight"], sd["blocks.0.norm_1.bias"], cfg.norm_eps)
    qkv = h @ sd["blocks.0.attn.qkv.weight"].T + sd["blocks.0.attn.qkv.bias"]
    q, k, v = np.split(qkv, 3, axis=-1)
    heads = []
    for head in range(nh):
        sl = slice(head * hs, (head + 1) * hs)
        ref = np_attention(np.eye(T), q[:, sl], k[:, sl], v[:, sl], causal=True)
        np.testing.assert_allclose(np.array(d["attention"][0][head]), ref["weights"], atol=2e-5)
        np.testing.assert_allclose(np.array(d["heads"][head]), ref["out"], atol=2e-5)
        heads.append(ref["out"])
    concat = np.concatenate(heads, axis=1)  # (T, nh*hs)
    np.testing.assert_allclose(np.array(d["concat"]), concat, atol=2e-5)
    w_o = np.array(d["w_o"])
    np.testing.assert_allclose(w_o, sd["blocks.0.attn.proj.weight"].T, atol=0)
    out = concat @ w_o + np.array(d["b_o"])
    np.testing.assert_allclose(np.array(d["out"]), out, atol=2e-5)
    assert d["tokens"][:3] == ["t", "h", "e"] and len(d["attention"]) == cfg.n_layer


def test_heads_reject_bad_prompts(client, bad):
    bad(client, "/api/heads", {"run": "tiny", "prompt": "XYZ"}, "not in the vocabulary")
    bad(client, "/api/heads", {"run": "tiny", "prompt": ""}, "the prompt is empty")
    bad(client, "/api/heads", {"run": "tiny", "prompt": "the cat " * 10},
        "longer than the model's context of 32")
    bad(client, "/api/heads", {"run": "tiny", "prompt": "the", "layer": 2}, "layer must be")
    bad(client, "/api/heads", {"run": "tiny", "ids": [0, 999]}, "outside the vocabulary")
    bad(client, "/api/heads", {"run": "tiny", "ids": "0 1"}, "ids must be a list")
    bad(client, "/api/heads", {"run": "tiny", "prompt": "x" * 5000}, "limit is 4000")


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


def test_heads_of_a_rope_gqa_model_without_biases(tmp_path, post, save_char_model):
    save_char_model(tmp_path / "llama", "abcdefgh ", preset="tiny-llama")
    c = TestClient(create_app(tmp_path))
    d = post(c, "/api/heads", {"run": "llama", "prompt": "abc abc", "layer": 1})
    assert d["b_o"] is None and len(d["attention"][1]) == 4
    out = np.array(d["concat"]) @ np.array(d["w_o"])
    np.testing.assert_allclose(np.array(d["out"]), out, atol=1e-5)
    weights = np.array(d["attention"][1])
    np.testing.assert_allclose(weights.sum(-1), 1, atol=1e-5)
    assert np.all(np.triu(weights, 1) == 0)
