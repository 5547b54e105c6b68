"""Attention: the step path against float64 NumPy, the fused path against the step path,
the causal mask's exact zeros and ones, the sqrt(d_k) argument, permutation equivariance."""

import math

import numpy as np
import pytest
import torch

from gptlab import GPTConfig
from gptlab.model.attention import (
    AttentionInputs,
    CausalSelfAttention,
    attention_steps,
    attention_weights,
    causal_mask,
    set_float32_attention,
)


def numpy_attention(x, w_q, w_k, w_v, causal):
    """The 2017 formula in float64 NumPy, written independently of the library."""
    x, w_q, w_k, w_v = (np.asarray(a, dtype=np.float64) for a in (x, w_q, w_k, w_v))
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scores = q @ k.T / np.sqrt(q.shape[1])
    if causal:
        scores = np.where(np.triu(np.ones_like(scores), k=1) == 1, -np.inf, scores)
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights = e / e.sum(axis=1, keepdims=True)
    return {"q": q, "k": k, "v": v, "weights": weights, "out": weights @ v}


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("T,d_model,d_k", [(5, 4, 4), (7, 8, 3), (1, 2, 2), (16, 12, 6)])
def test_attention_steps_matches_float64_numpy(causal, T, d_model, d_k):
    g = torch.Generator().manual_seed(T * 100 + d_k)
    x = torch.randn(T, d_model, generator=g, dtype=torch.float64)
    w = [torch.randn(d_model, d_k, generator=g, dtype=torch.float64) for _ in range(3)]
    steps = attention_steps(x, *w, causal=causal)
    ref = numpy_attention(x, *w, causal)
    for name in ("q", "k", "v", "weights", "out"):
        np.testing.assert_allclose(steps[name].numpy(), ref[name], rtol=1e-12, atol=1e-12)
    # scores are the unmasked scaled dot products; masked differs only above the diagonal
    np.testing.assert_allclose(
        steps["scores"].numpy(), ref["q"] @ ref["k"].T / math.sqrt(d_k), rtol=1e-12
    )
    upper = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    if causal:
        assert torch.isneginf(steps["masked"][upper]).all()
    else:
        assert torch.equal(steps["masked"], steps["scores"])


def test_causal_weights_row0_is_exactly_one_and_upper_triangle_exactly_zero():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 4, generator=g)
    steps = attention_steps(x, *(torch.randn(4, 4, generator=g) for _ in range(3)))
    weights = steps["weights"]
    assert weights[0, 0].item() == 1.0
    assert (weights[0, 1:] == 0).all()
    assert (weights[torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)] == 0).all()
    assert torch.allclose(weights.sum(-1), torch.ones(5))
    unmasked = attention_steps(x, *(torch.randn(4, 4, generator=g) for _ in range(3)), False)
    assert (unmasked["weights"][0] > 0).all()  # bidirectional: row 0 sees every token


def test_causal_mask_with_offset_for_cached_queries():
    mask = causal_mask(2, 5)
    assert mask.tolist() == [[True, True, True, True, False], [True] * 5]


def test_sqrt_dk_keeps_score_variance_near_one():
    # q.k is a sum of d_k products of unit-variance terms: variance d_k. Dividing by
    # sqrt(d_k) brings it back to 1. 20,000 samples: the sample variance's relative
    # standard error is sqrt(2/n) ~ 1%, so a 5% tolerance cannot fail by chance.
    d_k, n = 128, 20_000
    g = torch.Generator().manual_seed(1234)
    q = torch.randn(n, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n, d_k, generator=g, dtype=torch.float64)
    dots = (q * k).sum(-1)
    assert dots.var().item() == pytest.approx(d_k, rel=0.05)
    assert (dots / math.sqrt(d_k)).var().item() == pytest.approx(1.0, rel=0.05)
    # and unscaled scores saturate the softmax: one key takes nearly all the weight
    scores = q[:256] @ k[:64].T  # 256 queries over 64 keys
    assert torch.softmax(scores, -1).max(-1).values.mean() > 0.75
    assert torch.softmax(scores / math.sqrt(d_k), -1).max(-1).values.mean() < 0.3


def test_attention_is_permutation_equivariant_without_mask_and_positions():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(9, 6, generator=g, dtype=torch.float64)
    w = [torch.randn(6, 6, generator=g, dtype=torch.float64) for _ in range(3)]
    perm = torch.randperm(9, generator=g)
    out = attention_steps(x, *w, causal=False)["out"]
    out_perm = attention_steps(x[perm], *w, causal=False)["out"]
    torch.testing.assert_close(out_perm, out[perm], rtol=1e-12, atol=1e-12)
    # with the mask, order matters: the same check fails
    causal_out = attention_steps(x, *w, causal=True)["out"]
    assert not torch.allclose(attention_steps(x[perm], *w)["out"], causal_out[perm])


def module_attention_by_hand(attn: CausalSelfAttention, x, allowed):
    """Multi-head attention from attention_steps' formula, head by head, in float64."""
    cfg_h, kv, hs = attn.n_head, attn.n_kv_head, attn.head_dim
    W = attn.qkv.weight.double()
    b = attn.qkv.bias.double() if attn.qkv.bias is not None else 0
    qkv = x.double() @ W.T + b
    q, k, v = qkv.split([cfg_h * hs, kv * hs, kv * hs], -1)
    outs = []
    for h in range(cfg_h):
        g = h // (cfg_h // kv)  # the kv head this query head shares
        qh, kh, vh = (t[..., i * hs:(i + 1) * hs] for t, i in ((q, h), (k, g), (v, g)))
        outs.append(attention_weights(qh, kh, allowed) @ vh)
    y = torch.cat(outs, -1)
    proj_b = attn.proj.bias.double() if attn.proj.bias is not None else 0
    return y @ attn.proj.weight.double().T + proj_b


@pytest.mark.parametrize("n_head,n_kv_head", [(4, 4), (4, 2), (6, 3), (4, 1)])
@pytest.mark.parametrize("bias", [True, False])
def test_fused_path_equals_step_path(n_head, n_kv_head, bias):
    cfg = GPTConfig(vocab_size=11, block_size=16, n_layer=1, n_head=n_head,
                    n_kv_head=n_kv_head, n_embd=n_head * 4, bias=bias)
    torch.manual_seed(0)
    attn = CausalSelfAttention(cfg).eval()
    for p in attn.parameters():  # wide weights so layout mistakes cannot hide
        torch.nn.init.normal_(p, std=0.5)
    x = torch.randn(2, 10, cfg.n_embd)
    fused = attn(x)
    expected = module_attention_by_hand(attn, x, causal_mask(10, 10))
    torch.testing.assert_close(fused.double(), expected, rtol=1e-5, atol=1e-5)
    attn.record_weights = True  # the explicit path gives the same answer
    torch.testing.assert_close(attn(x), fused, rtol=1e-5, atol=1e-5)
    assert attn.weights.shape == (2, n_head, 10, 10)


def test_padding_mask_hides_padded_keys():
    cfg = GPTConfig(vocab_size=11, block_size=16, n_layer=1, n_head=2, n_embd=8)
    torch.manual_seed(0)
    attn = CausalSelfAttention(cfg).eval()
    x = torch.randn(1, 6, 8)
    keys = torch.tensor([[False, False, True, True, True, True]])  # two left pads
    allowed = causal_mask(6, 6) & keys[:, None, None, :]
    allowed = allowed | torch.eye(6, dtype=torch.bool)
    padded = attn(x, AttentionInputs(allowed=allowed))
    alone = attn(x[:, 2:])  # the same tokens without padding (no positions here)
    torch.testing.assert_close(padded[:, 2:], alone, rtol=1e-5, atol=1e-6)



def test_float32_attention_under_autocast(monkeypatch):
    """set_float32_attention: under bf16 autocast the fused kernel gets float32 q, k, v (a
    different computation of the same output, to bf16's rounding) and gradients flow;
    without autocast the setting changes nothing, bit for bit."""
    cfg = GPTConfig(vocab_size=11, block_size=16, n_layer=1, n_head=4, n_embd=32)
    torch.manual_seed(0)
    model = torch.nn.Sequential(CausalSelfAttention(cfg))
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.5)
    x = torch.randn(3, 16, 32)
    seen, fused = [], torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        lambda q, k, v, **kw: (seen.append(q.dtype), fused(q, k, v, **kw))[1])
    exact = model(x)
    out = {}
    for on in (False, True):
        set_float32_attention(model, on)
        torch.testing.assert_close(model(x), exact, rtol=0, atol=0)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out[on] = model(x)
        out[on].float().square().sum().backward()
        assert all(p.grad is not None and p.grad.isfinite().all() for p in model.parameters())
    assert seen == [torch.float32, torch.float32, torch.bfloat16, torch.float32, torch.float32]
    assert not torch.equal(out[True], out[False])  # another computation...
    for on in (False, True):  # ...of the same thing, to bf16's rounding
        assert (out[on].float() - exact).abs().mean() < 0.02 * exact.abs().mean()
