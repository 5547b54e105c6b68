"""The whole model for one token (gptlab.interp.walk): each stage recomputed by hand in
float64 from the weights alone (embeddings, norms with their mean and scale, attention's
weights, the FFN's expansion and activation, the adds), the readings equal to the residual
stream's capture, the final stage equal to softmax(model(idx)); pre- and post-norm."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from gptlab.errors import UsageError
from gptlab.interp.lens import logit_lens
from gptlab.interp.residuals import capture_residuals
from gptlab.interp.walk import walk_token


@torch.no_grad()
def by_hand(model, ids: list[int], t: int) -> dict:
    """Every stage of token t, recomputed in float64 from the weights (no hook, no module
    forward except the norms' and attention's formulas written out here)."""
    m = copy.deepcopy(model).double()
    c = m.config
    T, C, nh, hs = len(ids), c.n_embd, c.n_head, c.head_dim
    x = m.wte.weight[ids]  # (T, C)
    pos = None
    if c.pos_encoding == "learned":
        pos = m.wpe.weight[:T]
    elif c.pos_encoding == "sinusoidal":
        i2 = torch.arange(0, C, 2, dtype=torch.float64)
        ang = torch.arange(T, dtype=torch.float64)[:, None] / 10000.0 ** (i2 / C)
        pos = torch.zeros(T, C, dtype=torch.float64)
        pos[:, 0::2], pos[:, 1::2] = torch.sin(ang), torch.cos(ang[:, : C // 2])
    if pos is not None:
        x = x + pos

    def norm(mod, v):
        if c.norm == "rmsnorm":
            out = v / torch.sqrt(v.pow(2).mean(-1, keepdim=True) + mod.eps)
        else:
            mu = v.mean(-1, keepdim=True)
            out = (v - mu) / torch.sqrt((v - mu).pow(2).mean(-1, keepdim=True) + mod.eps)
        out = out * mod.weight
        return out + mod.bias if getattr(mod, "bias", None) is not None else out

    def attention(block, v):
        qkv = v @ block.attn.qkv.weight.T
        if block.attn.qkv.bias is not None:
            qkv = qkv + block.attn.qkv.bias
        q, k, val = qkv.split([nh * hs, c.kv_dim, c.kv_dim], dim=-1)
        q = q.view(T, nh, hs).transpose(0, 1)
        k = k.view(T, c.n_kv_head, hs).transpose(0, 1).repeat_interleave(nh // c.n_kv_head, 0)
        val = val.view(T, c.n_kv_head, hs).transpose(0, 1).repeat_interleave(
            nh // c.n_kv_head, 0)
        if m.rope is not None:
            cos, sin = m.rope(torch.arange(T))
            rot = lambda z: torch.cat((-z[..., hs // 2:], z[..., : hs // 2]), -1)  # noqa: E731
            q = q * cos.double() + rot(q) * sin.double()
            k = k * cos.double() + rot(k) * sin.double()
        s = q @ k.transpose(-1, -2) / math.sqrt(hs)
        s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        w = torch.softmax(s, -1)
        out = (w @ val).transpose(0, 1).reshape(T, nh * hs) @ block.attn.proj.weight.T
        if block.attn.proj.bias is not None:
            out = out + block.attn.proj.bias
        return out, w

    def ffn(mlp, v):
        lin = lambda layer, z: F.linear(z, layer.weight, layer.bias)  # noqa: E731
        if c.mlp == "swiglu":
            expand = lin(mlp.gate, v)
            act = F.silu(expand) * lin(mlp.up, v)
        else:
            expand = lin(mlp.fc, v)
            act = F.gelu(expand, approximate="tanh" if c.mlp == "gelu_tanh" else "none")
        return expand, act, lin(mlp.proj, act)

    out = {"embedded": x[t].clone(), "adds": [], "attention": [], "expand": [], "act": []}
    for block in m.blocks:
        if c.norm_position == "pre":
            a, w = attention(block, norm(block.norm_1, x))
            x = x + a
            out["adds"].append(x[t].clone())
            e, act, f = ffn(block.mlp, norm(block.norm_2, x))
            x = x + f
            out["adds"].append(x[t].clone())
        else:
            a, w = attention(block, x)
            s1 = x + a
            out["adds"].append(s1[t].clone())
            x = norm(block.norm_1, s1)
            e, act, f = ffn(block.mlp, x)
            s2 = x + f
            out["adds"].append(s2[t].clone())
            x = norm(block.norm_2, s2)
        out["attention"].append(w[:, t])
        out["expand"].append(e[t])
        out["act"].append(act[t])
    if m.ln_f is not None:
        x = norm(m.ln_f, x)
    out["probs"] = torch.softmax(m.lm_head(x[t]), -1)
    return out


CASES = {
    "gpt2": ("tiny-gpt2", {}),
    "gpt2-post-norm": ("tiny-gpt2", dict(norm_position="post")),
    "llama-gqa": ("tiny-llama", {}),
    "sinusoidal-swiglu-rms-bias": ("tiny-gpt2", dict(pos_encoding="sinusoidal", mlp="swiglu",
                                                     norm="rmsnorm")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_stage_equals_a_float64_recomputation(case, preset_model, widen, one_thread):
    preset, fields = CASES[case]
    model = preset_model(preset, **fields)
    widen(model, 1)
    ids, t = [3, 14, 15, 92, 65, 35, 89, 79, 3, 14], 7
    w = walk_token(model, torch.tensor(ids), t)
    ref = by_hand(model, ids, t)
    close = lambda a, b: torch.testing.assert_close(a.double(), b, rtol=1e-4, atol=1e-4)  # noqa: E731
    close(w.embedded.vector, ref["embedded"])
    assert [r.name for r in w.readings()][0].startswith("embedding")
    for got, want in zip(w.readings()[1:], ref["adds"], strict=True):
        close(got.vector, want)
        assert got.norm == pytest.approx(float(want.norm()), rel=1e-4)
    for b, att, e, act in zip(w.blocks, ref["attention"], ref["expand"], ref["act"], strict=True):
        close(b.attention, att)
        close(b.ffn.expand, e)
        close(b.ffn.activation, act)
        assert b.ffn.fired == int((e > 0).sum())
        assert 0 < b.ffn.fired < model.config.ffn_hidden
        for n in (b.norm_1, b.norm_2):  # normalized has mean 0 (layernorm) and rms 1
            z = n.normalized.double()
            if n.kind == "layernorm":
                assert abs(float(z.mean())) < 1e-5 and n.mean == pytest.approx(
                    float(n.input.double().mean()), abs=1e-6)
            assert float(z.pow(2).mean()) == pytest.approx(1, abs=2e-3)  # eps aside
            rebuilt = z * n.weight.double() + (0 if n.bias is None else n.bias.double())
            torch.testing.assert_close(rebuilt, n.output.double(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(w.probs, ref["probs"], rtol=0, atol=1e-5)
    assert (w.final_norm is None) == (fields.get("norm_position") == "post")


@pytest.mark.parametrize("case", list(CASES))
def test_final_stage_is_the_model_and_the_last_lens_its_prediction(case, preset_model,
                                                                   one_thread):
    preset, fields = CASES[case]
    model = preset_model(preset, **fields)
    idx = torch.tensor([[5, 6, 7, 8, 9, 10]])
    for t in (0, 3, -1):
        w = walk_token(model, idx, t, top=3)
        with torch.no_grad():
            logits, _ = model(idx)
        want = torch.softmax(logits[0, t].double(), -1)
        assert (w.probs - want).abs().max() < 1e-6
        assert torch.equal(w.logits, logits[0, t])
        last = w.readings()[-1]
        assert last.lens_ids[0] == int(want.argmax())
        assert last.lens_probs[0] == pytest.approx(float(want.max()), abs=1e-6)
        assert len(w.readings()) == 1 + 2 * model.config.n_layer
        assert w.position == t % idx.shape[1]


def test_pre_norm_readings_are_the_residual_stream_and_the_logit_lens(preset_model, one_thread):
    model = preset_model("tiny-llama")
    idx = torch.tensor([[1, 2, 3, 4, 5, 1, 2]])
    parts = capture_residuals(model, idx)
    lens = logit_lens(model, idx)
    probs = torch.softmax(lens.float(), -1)
    for t in range(idx.shape[1]):
        w = walk_token(model, idx, t)
        assert torch.equal(w.readings()[-1].vector, parts.final[0, t])
        for layer, b in enumerate(w.blocks):
            assert torch.equal(b.input, parts.resid_pre[layer][0, t])
            assert torch.equal(b.add_1.vector, parts.resid_mid[layer][0, t])
            assert torch.equal(b.attn_out, parts.attn_out[layer][0, t])
            assert torch.equal(b.ffn.output, parts.mlp_out[layer][0, t])
            # the lens after a block is the logit lens's row for that depth
            assert b.add_2.lens_ids[0] == int(probs[layer + 1, 0, t].argmax())


def test_bad_positions_and_batches_are_one_line_errors(preset_model):
    model = preset_model()
    with pytest.raises(UsageError, match="position must be between 0 and 2"):
        walk_token(model, torch.tensor([1, 2, 3]), 3)
    with pytest.raises(UsageError, match="one sequence"):
        walk_token(model, torch.tensor([[1, 2], [3, 4]]))


