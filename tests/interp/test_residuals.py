"""capture_residuals (gptlab.interp.residuals): every piece of the stream is the model's own,
the pieces add up, and each equals TransformerLens's hook point of the same name."""

import pytest
import torch

from gptlab import GPT, GPTConfig
from gptlab.errors import UsageError
from gptlab.interp.residuals import capture_residuals

ATOL = 1e-5  # against TransformerLens, float32


def test_the_pieces_add_up_to_the_stream(kind, one_thread, widened, idx):
    model = widened(kind)
    p = capture_residuals(model, idx)
    with torch.no_grad():
        logits, _ = model(idx)
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


def test_one_head_result_by_hand(one_thread, widened, idx):
    """Head h's result is its output times its own hs columns of W_O."""
    model = widened("gpt2")
    p = capture_residuals(model, idx[:1])
    hs = model.config.head_dim
    w_o = model.blocks[1].attn.proj.weight.double()  # (C, nh * hs)
    for h in range(model.config.n_head):
        expected = p.head_outputs[1][0, h].double() @ w_o[:, h * hs:(h + 1) * hs].T
        torch.testing.assert_close(p.head_results[1][0, h].double(), expected, rtol=0,
                                   atol=1e-5)


def test_post_norm_and_bad_tokens_are_refused(widened, idx):
    post = GPT(GPTConfig.from_preset("tiny-gpt2", norm_position="post"))
    with pytest.raises(UsageError, match="pre-norm"):
        capture_residuals(post, idx)
    with pytest.raises(UsageError, match="outside the vocabulary"):
        capture_residuals(widened("gpt2"), torch.tensor([1, 97]))


def test_hooks_are_gone_afterwards(widened, idx):
    model = widened("gpt2")
    capture_residuals(model, idx)
    for module in model.modules():
        assert not module._forward_hooks and not module._forward_pre_hooks


# ----------------------------------------------------------------------------- TransformerLens

@pytest.mark.oracle
def test_every_hook_point_matches_transformer_lens(lens_pair, one_thread):
    t = lens_pair
    _, cache = t.raw.run_with_cache(t.clean)
    p = capture_residuals(t.ours, t.clean)
    diffs = {"hook_embed": t.worst(cache["hook_embed"], p.embed),
             "hook_pos_embed": t.worst(cache["hook_pos_embed"], p.pos_embed)}
    for layer in range(t.ours.config.n_layer):
        ours_by_hook = {"hook_resid_pre": p.resid_pre[layer], "hook_resid_mid": p.resid_mid[layer],
                        "hook_resid_post": p.resid_post[layer],
                        "hook_attn_out": p.attn_out[layer], "hook_mlp_out": p.mlp_out[layer],
                        "attn.hook_z": p.head_outputs[layer].transpose(1, 2)}  # (B, T, nh, hs)
        for hook, mine in ours_by_hook.items():
            diffs[f"blocks.{layer}.{hook}"] = t.worst(cache[f"blocks.{layer}.{hook}"], mine)
    results = cache.stack_head_results(layer=-1)  # (n_layer * nh, B, T, C)
    diffs["stack_head_results"] = t.worst(results, torch.cat(
        [r.transpose(0, 1) for r in p.head_results]))
    print(t.name, "hook points: max |diff|", max(diffs.values()))
    assert max(diffs.values()) < ATOL, diffs
    assert p.final.abs().max() > 1.0 or t.name != "random-gpt2-widened"
