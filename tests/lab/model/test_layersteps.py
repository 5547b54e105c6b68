"""The whole-model view's block step by step (gptlab.lab.model.layersteps, POST /api/walk/layer):
every attention stage against a float64 recomputation from the run's weights and against
the library's own capture (the recorded softmax weights, the per-head outputs at
attn.heads, attention's output), the mask switch's other side, W_O's block norms; the FFN's
top units against gptlab.interp.memory; pre-norm learned positions, Llama-style RoPE and
GQA-free SwiGLU, post-norm; bad input as one-line 400s."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from gptlab.interp.hooks import capture_attention, forward_hooks
from gptlab.interp.memory import value_logits
from gptlab.lab.runs import Runs
from gptlab.model.attention import AttentionInputs

TEXT = "the cat sat on the m"


def near(served, expected, tol: float) -> bool:
    """served (nested lists) within tol of expected (a tensor) everywhere."""
    gap = torch.as_tensor(served, dtype=torch.float64) - expected.detach().double()
    return float(gap.abs().max()) <= tol


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory, copy_tiny_run, save_char_model, tiny_text):
    root = tmp_path_factory.mktemp("runs")
    copy_tiny_run(root / "tiny")
    save_char_model(root / "llama", tiny_text, preset="tiny-llama", widen_seed=1)
    save_char_model(root / "post", tiny_text, preset="tiny-gpt2", norm_position="post",
                    widen_seed=2)
    return root


def captured(runs_root, name, layer):
    """The library's capture: attention weights, per-head outputs and attention's output."""
    run = Runs(runs_root).load(name)
    model = run.model.eval()
    idx = torch.tensor([run.tokenizer.encode(TEXT)])
    seen = {}
    attn = model.blocks[layer].attn
    hooks = [(attn.heads, lambda _m, _a, out: seen.__setitem__("heads", out[0])),
             (attn, lambda _m, a, out: seen.update(x=a[0][0], out=out[0]))]
    with torch.no_grad(), forward_hooks(*hooks):
        model(idx)
    return model, idx, capture_attention(model, idx)[layer, 0], seen


@pytest.mark.parametrize("name", ["tiny", "llama", "post"])
@pytest.mark.parametrize(("position", "layer", "head"), [(6, 1, 1), (0, 0, 0), (None, 1, 0)])
def test_every_stage_is_the_models(client, runs_root, post, name, position, layer, head):
    d = post(client, "/api/walk/layer", {"run": name, "text": TEXT, "position": position,
                                         "layer": layer, "head": head})
    model, idx, weights, seen = captured(runs_root, name, layer)
    T = idx.shape[1]
    t = T - 1 if position is None else position
    assert d["position"] == t and len(d["tokens"]) == T
    cfg, attn = model.config, model.blocks[layer].attn
    hs = cfg.head_dim
    # float64 recomputation from the weights (q, k, v: rows of the fused qkv)
    x = seen["x"].double()
    assert d["x"] == pytest.approx(x[t].tolist(), abs=1e-6)
    qkv = x @ attn.qkv.weight.double().T
    if attn.qkv.bias is not None:
        qkv = qkv + attn.qkv.bias.double()
    q = qkv[:, head * hs:(head + 1) * hs]
    kv_head = head // (cfg.n_head // cfg.n_kv_head)
    k0 = cfg.n_head * hs + kv_head * hs
    k = qkv[:, k0:k0 + hs]
    v0 = cfg.n_head * hs + cfg.n_kv_head * hs + kv_head * hs
    v = qkv[:, v0:v0 + hs]
    if model.rope is None:  # RoPE rotates q and k: checked through the weights below
        assert d["q"] == pytest.approx(q[t].tolist(), abs=1e-9)
        assert near(d["keys"], k, 1e-9)
        assert d["raw"] == pytest.approx((k @ q[t]).tolist(), abs=1e-9)
    q_t, keys = (torch.tensor(d[key], dtype=torch.float64) for key in ("q", "keys"))
    assert d["raw"] == pytest.approx((keys @ q_t).tolist(), abs=1e-12)
    assert near(d["values"], v, 1e-9)
    raw = torch.tensor(d["raw"], dtype=torch.float64)
    assert d["scaled"] == pytest.approx((raw / math.sqrt(hs)).tolist(), abs=1e-12)
    assert d["sqrt_d_k"] == pytest.approx(math.sqrt(hs))
    assert [m is None for m in d["masked"]] == [j > t for j in range(T)]
    assert [m for m in d["masked"] if m is not None] == d["scaled"][:t + 1]
    # the library's capture: softmax weights, the head's output, attention's output
    assert d["weights"] == pytest.approx(weights[head, t].double().tolist(), abs=1e-6)
    assert sum(d["weights"][t + 1:]) == 0
    both = torch.softmax(torch.tensor(d["scaled"], dtype=torch.float64), -1)
    assert d["weights_bidirectional"] == pytest.approx(both.tolist(), abs=1e-12)
    head_out = seen["heads"][head, t].double()
    assert d["head_out"] == pytest.approx(head_out.tolist(), abs=1e-6)
    assert d["head_out_bidirectional"] == pytest.approx((both @ v).tolist(), abs=1e-9)
    concat = seen["heads"][:, t].reshape(-1).double()
    assert d["concat"] == pytest.approx(concat.tolist(), abs=1e-6)
    assert d["out"] == pytest.approx(seen["out"][t].double().tolist(), abs=1e-5)
    w_o = attn.proj.weight.detach().double()
    norms = [float(w_o[:, h * hs:(h + 1) * hs].norm()) for h in range(cfg.n_head)]
    assert d["w_o_norms"] == pytest.approx(norms, rel=1e-9)
    assert near(d["w_o_block"], w_o[:, head * hs:(head + 1) * hs], 1e-9)
    written = [float((w_o[:, h * hs:(h + 1) * hs] @ concat[h * hs:(h + 1) * hs]).norm())
               for h in range(cfg.n_head)]
    assert d["written_norms"] == pytest.approx(written, rel=1e-5)


@pytest.mark.parametrize("name", ["tiny", "llama"])
def test_ffn_units_are_the_memories(client, runs_root, post, name):
    d = post(client, "/api/walk/layer", {"run": name, "text": TEXT, "position": 5,
                                         "layer": 1, "units": 4, "top": 3})["ffn"]
    run = Runs(runs_root).load(name)
    model = run.model.eval()
    mlp = model.blocks[1].mlp
    seen = {}
    pre_module = mlp.gate if hasattr(mlp, "gate") else mlp.fc
    hooks = [(mlp.proj, lambda _m, a, _o: seen.__setitem__("coef", a[0][0, 5])),
             (pre_module, lambda _m, _a, out: seen.__setitem__("pre", out[0, 5]))]
    with torch.no_grad(), forward_hooks(*hooks):
        model(torch.tensor([run.tokenizer.encode(TEXT)]))
    best = seen["coef"].double().topk(4).indices
    assert [u["unit"] for u in d["top"]] == best.tolist()
    assert [u["coef"] for u in d["top"]] == pytest.approx(seen["coef"][best].tolist(), abs=1e-6)
    assert [u["pre"] for u in d["top"]] == pytest.approx(seen["pre"][best].tolist(), abs=1e-6)
    logits = value_logits(model, 1, best)
    for unit, row in zip(d["top"], logits, strict=True):
        assert [c["id"] for c in unit["tokens"]] == row.topk(3).indices.tolist()
        assert unit["tokens"][0]["token"] == run.tokenizer.decode([unit["tokens"][0]["id"]])
    act = {"swiglu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu,
           "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh")}[model.config.mlp]
    xs = torch.tensor(d["curve"]["x"], dtype=torch.float64)
    assert d["curve"]["y"] == pytest.approx(act(xs).tolist(), abs=1e-12)
    assert min(d["curve"]["x"]) <= min(d["pre"]) and max(d["curve"]["x"]) >= max(d["pre"])


def test_bad_input_is_one_line(client, bad):
    path = "/api/walk/layer"
    bad(client, path, {"run": "tiny", "text": "the", "layer": 9}, "layer must be between 0 and 1")
    bad(client, path, {"run": "tiny", "text": "the", "head": 9}, "head must be between 0 and")
    bad(client, path, {"run": "tiny", "text": "the", "position": 3}, "between 0 and 2")
    bad(client, path, {"run": "tiny", "text": ""}, "text must not be empty")
    bad(client, path, {"run": "nope", "text": "the"}, "no run named 'nope'")


def bidirectional_reference(model, layer, x):
    """The library's own attention layer in float64 on the captured input x (T, C), the mask
    off (is_causal=False): each head's output (nh, T, hs) and attention's output (T, C)."""
    attn = copy.deepcopy(model.blocks[layer].attn).double()
    T, seen = x.shape[0], {}
    rope = None
    if model.rope is not None:
        cos, sin = model.rope(torch.arange(T), T)
        rope = (cos.double(), sin.double())
    with torch.no_grad(), forward_hooks((attn.heads, lambda _m, _a, out: seen.__setitem__(
            "heads", out[0]))):
        out = attn(x.double()[None], AttentionInputs(rope=rope, is_causal=False))[0]
    return seen["heads"], out


LATER = (1, 2, 6)  # layer, head, position: a token with later tokens to mask


@pytest.mark.parametrize("name", ["tiny", "llama", "post", "shakespeare"])
def test_every_stage_after_the_mask_without_it(client, runs_root, post, name):
    """With the mask off: each head's output, the concatenation, W_O's output and the stream
    after the add, against the library's own attention layer run without the mask; with
    it on, the model's own."""
    layer, head, t = LATER
    d = post(client, "/api/walk/layer", {"run": name, "text": TEXT, "position": t,
                                         "layer": layer, "head": head})
    model, idx, _, seen = captured(runs_root, name, layer)
    cfg = model.config
    heads, out = bidirectional_reference(model, layer, seen["x"].double())
    assert d["head_out_bidirectional"] == pytest.approx(heads[head, t].tolist(), abs=1e-9)
    assert d["concat_bidirectional"] == pytest.approx(heads[:, t].reshape(-1).tolist(), abs=1e-9)
    assert d["out_bidirectional"] == pytest.approx(out[t].tolist(), abs=1e-9)
    # the mask on: the same layer, causal, is the model's own output
    assert d["out"] == pytest.approx(seen["out"][t].double().tolist(), abs=1e-5)
    assert max(abs(a - b) for a, b in zip(d["out"], d["out_bidirectional"], strict=True)) > 1e-3
    w_o = model.blocks[layer].attn.proj.weight.detach().double().view(cfg.n_embd, cfg.n_head, -1)
    written = [float((w_o[:, h] @ heads[h, t]).norm()) for h in range(cfg.n_head)]
    assert d["written_norms_bidirectional"] == pytest.approx(written, rel=1e-9)
    # the residual: the block's input plus attention's output, with the mask and without
    stream = stream_into(model, idx, layer)[t]
    assert d["stream"] == pytest.approx(stream.tolist(), abs=1e-6)
    assert d["added"] == pytest.approx((stream + seen["out"][t].double()).tolist(), abs=1e-5)
    assert d["added_bidirectional"] == pytest.approx((stream + out[t]).tolist(), abs=1e-6)


@pytest.mark.parametrize("name", ["tiny", "llama", "post", "shakespeare"])
def test_whole_matrices_are_the_heads(client, runs_root, post, name):
    """The chosen head's T x T matrices, a row per query: row t is the row stages', the
    causal softmax every row the library's recorded one, q_i . k_j from the weights."""
    layer, head, t = LATER
    d = post(client, "/api/walk/layer", {"run": name, "text": TEXT, "position": t,
                                         "layer": layer, "head": head})
    model, idx, weights, seen = captured(runs_root, name, layer)
    T, cfg = idx.shape[1], model.config
    m = {key: torch.tensor([[math.nan if c is None else c for c in row] for row in rows],
                           dtype=torch.float64) for key, rows in d["matrices"].items()}
    assert all(v.shape == (T, T) for v in m.values())
    for key in ("raw", "scaled", "weights", "weights_bidirectional"):
        assert m[key][t].tolist() == pytest.approx(d[key], abs=1e-12), key
    assert d["matrices"]["masked"][t] == d["masked"]
    later = torch.ones(T, T, dtype=torch.bool).triu(1)
    assert bool(m["masked"][later].isnan().all()) and not bool(m["masked"][~later].isnan().any())
    assert near(m["masked"][~later], m["scaled"][~later], 0)
    assert near(m["scaled"], m["raw"] * model.blocks[layer].attn.scale, 1e-12)
    assert near(m["weights"], weights[head].double(), 1e-6)
    assert near(m["weights_bidirectional"], torch.softmax(m["scaled"], -1), 1e-12)
    if model.rope is None:  # q_i . k_j from the weights, every query (RoPE: through weights)
        attn, x, hs = model.blocks[layer].attn, seen["x"].double(), cfg.head_dim
        qkv = x @ attn.qkv.weight.double().T
        if attn.qkv.bias is not None:
            qkv = qkv + attn.qkv.bias.double()
        q = qkv[:, head * hs:(head + 1) * hs]
        kv0 = cfg.n_head * hs + head // (cfg.n_head // cfg.n_kv_head) * hs
        assert near(m["raw"], q @ qkv[:, kv0:kv0 + hs].T, 1e-9)


def stream_into(model, idx, layer):
    """The block's input (T, C): the residual stream, from the library's capture."""
    seen = {}
    with torch.no_grad(), forward_hooks((model.blocks[layer], lambda _m, a, _o: seen.__setitem__(
            "x", a[0][0]))):
        model(idx)
    return seen["x"].double()
