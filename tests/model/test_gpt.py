"""The GPT as a whole (gptlab.model.gpt): causality for every architecture switch, init,
tying, loss, dropout, padding, autocast, and errors."""

import math

import pytest
import torch
import torch.nn.functional as F

from gptlab import GPT, GPTConfig
from gptlab.errors import UsageError
from gptlab.model.gpt import PostNormBlock, PreNormBlock


def test_future_tokens_never_change_past_logits(architecture, small_config, seeded_model):
    model = seeded_model(small_config(**architecture))
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 23, (2, 12), generator=g)
    logits, _ = model(idx)
    for t in (0, 5, 10):
        changed = idx.clone()
        changed[:, t + 1:] = torch.randint(0, 23, (2, 11 - t), generator=g)
        changed_logits, _ = model(changed)
        assert torch.equal(changed_logits[:, : t + 1], logits[:, : t + 1])
        assert not torch.allclose(changed_logits[:, t + 1:], logits[:, t + 1:])


def test_learned_positions_refuse_sequences_longer_than_block_size(small_config):
    model = GPT(small_config(pos_encoding="learned"))
    with pytest.raises(UsageError, match="block_size = 16 rows.*no row for position 16"):
        model(torch.zeros(1, 17, dtype=torch.long))
    # positions without a table have no such limit
    for encoding in ("rope", "sinusoidal", "alibi", "none"):
        GPT(small_config(pos_encoding=encoding))(torch.zeros(1, 17, dtype=torch.long))


def test_loss_is_cross_entropy_of_the_logits_and_ignores_minus_one(small_config, seeded_model):
    model = seeded_model(small_config())
    idx = torch.randint(0, 23, (2, 8))
    targets = torch.randint(0, 23, (2, 8))
    targets[0, :3] = -1
    logits, loss = model(idx, targets)
    keep = targets.reshape(-1) != -1
    expected = F.cross_entropy(logits.reshape(-1, 23)[keep], targets.reshape(-1)[keep])
    torch.testing.assert_close(loss, expected)
    # a float64 model's loss is float64 (half-precision logits are upcast, never down)
    logits, loss = model.double()(idx, targets)
    expected = F.cross_entropy(logits.reshape(-1, 23)[keep], targets.reshape(-1)[keep])
    assert loss.dtype == torch.float64
    torch.testing.assert_close(loss, expected, rtol=1e-12, atol=1e-12)
    # a fresh GPT-2-init model predicts near-uniformly: loss ~ ln(vocab)
    fresh_loss = GPT(small_config())(idx, targets)[1]
    assert fresh_loss.item() == pytest.approx(math.log(23), rel=0.05)


def test_gpt2_init_scales_residual_projections():
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=500, block_size=64, n_layer=8, n_head=4, n_embd=256)
    model = GPT(config)
    residual_std = 0.02 / math.sqrt(2 * 8)
    assert model.blocks[0].attn.proj.weight.std().item() == pytest.approx(residual_std, rel=0.05)
    assert model.blocks[3].mlp.proj.weight.std().item() == pytest.approx(residual_std, rel=0.05)
    assert model.blocks[0].attn.qkv.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.wte.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.blocks[0].attn.qkv.bias.abs().max().item() == 0.0


def test_tied_embeddings_share_one_matrix(small_config):
    tied, untied = GPT(small_config(tie_embeddings=True)), GPT(small_config(tie_embeddings=False))
    assert tied.lm_head.weight is tied.wte.weight
    assert untied.num_parameters() - tied.num_parameters() == 23 * 16


def test_post_norm_has_no_final_norm_and_pre_norm_does(small_config):
    assert GPT(small_config(norm_position="post")).ln_f is None
    assert GPT(small_config(norm_position="pre")).ln_f is not None


def test_dropout_is_active_in_training_only(small_config, seeded_model):
    model = seeded_model(small_config(dropout=0.5))
    idx = torch.randint(0, 23, (2, 8))
    model.train()
    assert not torch.equal(model(idx)[0], model(idx)[0])
    model.eval()
    assert torch.equal(model(idx)[0], model(idx)[0])


def test_padding_mask_matches_unpadded_sequence_with_rope(small_config, seeded_model):
    # RoPE scores depend only on relative position, so shifting the real tokens right by
    # two pads changes nothing once the pads are masked out.
    model = seeded_model(small_config(pos_encoding="rope"))
    idx = torch.randint(1, 23, (1, 6))
    padded = torch.cat([torch.zeros(1, 2, dtype=torch.long), idx], dim=1)
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1]])
    with_pad, _ = model(padded, attention_mask=mask)
    alone, _ = model(idx)
    torch.testing.assert_close(with_pad[:, 2:], alone, rtol=1e-5, atol=1e-5)


def test_runs_in_bfloat16_autocast(small_config, seeded_model):
    model = seeded_model(small_config(pos_encoding="rope", norm="rmsnorm", mlp="swiglu"))
    idx = torch.randint(0, 23, (2, 8))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, loss = model(idx, idx)
    assert torch.isfinite(loss)
    reference, _ = model(idx)
    assert (logits.float() - reference).abs().max() < 0.5


def test_generate_and_forward_name_a_bad_idx(small_config, seeded_model):
    model = seeded_model(small_config())
    with pytest.raises(ValueError, match=r"idx must be a \(B, T\) tensor.*got shape \(3,\)"):
        model.generate(torch.zeros(3, dtype=torch.long), 2)
    with pytest.raises(ValueError, match=r"idx must be a \(B, T\) tensor.*got shape \(3,\)"):
        model(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="idx must hold integer token ids"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match=r"token ids 0\.\.23, outside the vocabulary 0\.\.22"):
        model.generate(torch.tensor([[0, 23]]), 2)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model.generate(torch.tensor([[-1]]), 2)


@pytest.mark.parametrize("field, value, message", [
    ("n_head", 5, r"n_embd \(16\) must be divisible by n_head \(5\)"),
    ("n_layer", 0, "n_layer must be a positive integer, got 0"),
    ("n_kv_head", 3, r"n_head \(4\) must be divisible by n_kv_head \(3\)"),
    ("pos_encoding", "xpos", "unknown pos_encoding 'xpos'"),
    ("dropout", float("nan"), "dropout must be in"),
    ("norm_eps", float("inf"), "norm_eps must be a finite number > 0"),
])
def test_a_config_changed_into_an_invalid_one_is_refused_by_gpt(field, value, message,
                                                                small_config):
    config = small_config()
    setattr(config, field, value)
    with pytest.raises(ValueError, match=message):
        GPT(config)


def test_a_config_changed_into_a_valid_one_derives_head_dim_again(small_config):
    config = small_config(n_head=4, n_kv_head=4)
    config.n_embd, config.ffn_hidden = 32, 48
    model = GPT(config)
    assert config.head_dim == 8 and model(torch.zeros(1, 2, dtype=torch.long))[0].shape == (
        1, 2, 23)


def test_pre_and_post_norm_blocks_wire_residuals_as_their_papers_say(layer_config, randomize):
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    pre = randomize(PreNormBlock(layer_config(), layer=0))
    h = x + pre.attn(pre.norm_1(x))
    torch.testing.assert_close(pre(x), h + pre.mlp(pre.norm_2(h)))
    post = randomize(PostNormBlock(layer_config(), layer=0))
    h = post.norm_1(x + post.attn(x))
    torch.testing.assert_close(post(x), post.norm_2(h + post.mlp(h)))
