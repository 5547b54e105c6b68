"""capture_residuals: every piece of the stream is the model's own, and the pieces add up."""

import pytest
import torch

from gptlab import GPT, GPTConfig
from gptlab.errors import UsageError
from gptlab.interp.residuals import capture_residuals
from test_hf import widen

# Bias and not, learned / sinusoidal / rotary positions, LayerNorm and RMSNorm, GELU and
# SwiGLU, grouped-query attention: every kind of pre-norm block gptlab builds.
KINDS = {
    "gpt2": dict(),
    "sinusoidal-bias-free": dict(pos_encoding="sinusoidal", bias=False),
    "llama-gqa": dict(pos_encoding="rope", norm="rmsnorm", mlp="swiglu", n_kv_head=2,
                      bias=False, tie_embeddings=False),
}


def widened(kind, seed=0):
    torch.manual_seed(seed)
    model = GPT(GPTConfig.from_preset("tiny-gpt2", **KINDS[kind])).eval()
    widen(model, seed)
    return model


IDX = torch.tensor([[3, 14, 15, 92, 65, 35, 89, 79, 3, 14], [2, 71, 82, 81, 82, 84, 59, 4, 5, 2]])


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_pieces_add_up_to_the_stream(kind, one_thread):
    model = widened(kind)
    p = capture_residuals(model, IDX)
    with torch.no_grad():
        logits, _ = model(IDX)
    assert torch.equal(p.logits, logits)
    assert p.final.abs().max() > 1.0  # widened: nothing hides under tiny values
    start = p.embed if p.pos_embed is None else p.embed + p.pos_embed
    assert torch.equal(p.resid_pre[0], start)
    for layer in range(model.config.n_layer):
        if layer:
            assert torch.equal(p.resid_pre[layer], p.resid_post[layer - 1])
        torch.testing.assert_close(p.resid_mid[layer], p.resid_pre[layer] + p.attn_out[layer],
                                   rtol=0, atol=1e-5)
        torch.testing.assert_close(p.resid_post[layer], p.resid_mid[layer] + p.mlp_out[layer],
                                   rtol=0, atol=1e-5)
        bias = model.blocks[layer].attn.proj.bias
        heads = p.head_results[layer].sum(dim=1) + (0 if bias is None else bias)
        torch.testing.assert_close(heads, p.attn_out[layer], rtol=0, atol=1e-5)
        assert p.head_outputs[layer].shape == (2, model.config.n_head, 10, model.config.head_dim)
    assert torch.equal(p.final, p.resid_post[-1])
    assert (p.pos_embed is None) == (kind == "llama-gqa")


def test_one_head_result_by_hand(one_thread):
    """Head h's result is its output times its own hs columns of W_O."""
    model = widened("gpt2")
    p = capture_residuals(model, IDX[:1])
    hs = model.config.head_dim
    w_o = model.blocks[1].attn.proj.weight.double()  # (C, nh * hs)
    for h in range(model.config.n_head):
        expected = p.head_outputs[1][0, h].double() @ w_o[:, h * hs:(h + 1) * hs].T
        torch.testing.assert_close(p.head_results[1][0, h].double(), expected, rtol=0,
                                   atol=1e-5)


def test_post_norm_and_bad_tokens_are_refused():
    post = GPT(GPTConfig.from_preset("tiny-gpt2", norm_position="post"))
    with pytest.raises(UsageError, match="pre-norm"):
        capture_residuals(post, IDX)
    with pytest.raises(UsageError, match="outside the vocabulary"):
        capture_residuals(widened("gpt2"), torch.tensor([1, 97]))


def test_hooks_are_gone_afterwards():
    model = widened("gpt2")
    capture_residuals(model, IDX)
    for module in model.modules():
        assert not module._forward_hooks and not module._forward_pre_hooks
