"""View 3, a run's heads (gptlab.lab.model.heads), through its route: the attention weights,
each head's output, the concatenation and W_O of layer 0 checked against a float64 NumPy
recomputation from the run's weights (np_attention, conftest.py); a RoPE, GQA model without
biases answered too."""

from __future__ import annotations

import numpy as np
from fastapi.testclient import TestClient

from gptlab import GPT, GPTConfig
from gptlab.lab.server import create_app


def _layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def test_heads_match_a_float64_recomputation_of_layer0(client, runs_root, post,
                                                        np_attention):
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
