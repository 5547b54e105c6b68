"""The GPT as a whole: causality for every architecture switch, KV-cached decoding, greedy
generation, init, tying, loss, and errors."""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from gptlab import GPT, GPTConfig
from gptlab.errors import UsageError
from gptlab.model.kv_cache import new_kv_cache

ARCHITECTURES = list(itertools.product(
    ["learned", "sinusoidal", "rope", "none"],
    ["layernorm", "rmsnorm"],
    ["gelu", "gelu_tanh", "swiglu"],
    ["pre", "post"],
))


def tiny(**overrides) -> GPTConfig:
    fields = dict(vocab_size=23, block_size=16, n_layer=2, n_head=4, n_kv_head=2, n_embd=16,
                  ffn_hidden=24)
    return GPTConfig(**{**fields, **overrides})


def seeded_model(config: GPTConfig, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    model = GPT(config).eval()
    with torch.no_grad():  # larger weights than GPT-2 init, so every path matters
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return model


@pytest.mark.parametrize("pos,norm,mlp,where", ARCHITECTURES)
def test_future_tokens_never_change_past_logits(pos, norm, mlp, where):
    model = seeded_model(tiny(pos_encoding=pos, norm=norm, mlp=mlp, norm_position=where))
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 23, (2, 12), generator=g)
    logits, _ = model(idx)
    for t in (0, 5, 10):
        changed = idx.clone()
        changed[:, t + 1:] = torch.randint(0, 23, (2, 11 - t), generator=g)
        changed_logits, _ = model(changed)
        assert torch.equal(changed_logits[:, : t + 1], logits[:, : t + 1])
        assert not torch.allclose(changed_logits[:, t + 1:], logits[:, t + 1:])


@pytest.mark.parametrize("pos,norm,mlp,where", ARCHITECTURES[::5])
def test_kv_cached_decoding_equals_full_recomputation(pos, norm, mlp, where):
    model = seeded_model(tiny(pos_encoding=pos, norm=norm, mlp=mlp, norm_position=where))
    idx = torch.randint(0, 23, (3, 14), generator=torch.Generator().manual_seed(2))
    full, _ = model(idx)
    cache = new_kv_cache(model, batch_size=3)
    pieces = [model(idx[:, a:b], cache=cache)[0] for a, b in ((0, 5), (5, 6), (6, 7), (7, 14))]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-5, atol=1e-5)
    assert cache.length == 14


@pytest.mark.parametrize("preset", ["tiny-gpt2", "tiny-llama"])
def test_greedy_generate_equals_argmax_loop_without_cache(preset):
    model = seeded_model(GPTConfig.from_preset(preset))
    prompt = torch.randint(0, 97, (2, 5), generator=torch.Generator().manual_seed(3))
    out = model.generate(prompt, max_new_tokens=20, top_k=1)
    idx = prompt
    for _ in range(20):
        logits, _ = model(idx)
        idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, idx)
    assert torch.equal(model.generate(prompt, 20, temperature=0.0), idx)


def test_generation_slides_past_the_context_for_learned_positions():
    model = seeded_model(GPTConfig.from_preset("tiny-gpt2"))  # block_size 32
    prompt = torch.randint(0, 97, (1, 30))
    out = model.generate(prompt, max_new_tokens=50, top_k=1)
    assert out.shape == (1, 80)
    # the first token after the context fills comes from the last 16 tokens re-encoded
    n_fill = 32 - 30  # tokens generated before the cache is full
    window = out[:, 30 + n_fill - 16 + 1 : 30 + n_fill + 1]
    expected = model(window)[0][:, -1].argmax(-1)
    assert out[0, 30 + n_fill + 1].item() == expected.item()


def test_long_prompt_is_cropped_from_the_left_with_a_warning():
    model = seeded_model(GPTConfig.from_preset("tiny-gpt2"))
    prompt = torch.randint(0, 97, (1, 40))
    with pytest.warns(UserWarning, match="cropped"):
        out = model.generate(prompt, max_new_tokens=1, top_k=1)
    expected = model(prompt[:, -32:])[0][:, -1].argmax(-1)
    assert out[0, -1].item() == expected.item()


def test_learned_positions_refuse_sequences_longer_than_block_size():
    model = GPT(tiny(pos_encoding="learned"))
    with pytest.raises(UsageError, match="longer than block_size 16"):
        model(torch.zeros(1, 17, dtype=torch.long))
    # positions without a table have no such limit
    GPT(tiny(pos_encoding="rope"))(torch.zeros(1, 17, dtype=torch.long))


def test_loss_is_cross_entropy_of_the_logits_and_ignores_minus_one():
    model = seeded_model(tiny())
    idx = torch.randint(0, 23, (2, 8))
    targets = torch.randint(0, 23, (2, 8))
    targets[0, :3] = -1
    logits, loss = model(idx, targets)
    keep = targets.reshape(-1) != -1
    expected = F.cross_entropy(logits.reshape(-1, 23)[keep], targets.reshape(-1)[keep])
    torch.testing.assert_close(loss, expected)
    # a fresh GPT-2-init model predicts near-uniformly: loss ~ ln(vocab)
    fresh_loss = GPT(tiny())(idx, targets)[1]
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


def test_tied_embeddings_share_one_matrix():
    tied, untied = GPT(tiny(tie_embeddings=True)), GPT(tiny(tie_embeddings=False))
    assert tied.lm_head.weight is tied.wte.weight
    assert untied.num_parameters() - tied.num_parameters() == 23 * 16


def test_post_norm_has_no_final_norm_and_pre_norm_does():
    assert GPT(tiny(norm_position="post")).ln_f is None
    assert GPT(tiny(norm_position="pre")).ln_f is not None


def test_dropout_is_active_in_training_only():
    model = seeded_model(tiny(dropout=0.5))
    idx = torch.randint(0, 23, (2, 8))
    model.train()
    assert not torch.equal(model(idx)[0], model(idx)[0])
    model.eval()
    assert torch.equal(model(idx)[0], model(idx)[0])


def test_padding_mask_matches_unpadded_sequence_with_rope():
    # RoPE scores depend only on relative position, so shifting the real tokens right by
    # two pads changes nothing once the pads are masked out.
    model = seeded_model(tiny(pos_encoding="rope"))
    idx = torch.randint(1, 23, (1, 6))
    padded = torch.cat([torch.zeros(1, 2, dtype=torch.long), idx], dim=1)
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1]])
    with_pad, _ = model(padded, attention_mask=mask)
    alone, _ = model(idx)
    torch.testing.assert_close(with_pad[:, 2:], alone, rtol=1e-5, atol=1e-5)


def test_runs_in_bfloat16_autocast():
    model = seeded_model(tiny(pos_encoding="rope", norm="rmsnorm", mlp="swiglu"))
    idx = torch.randint(0, 23, (2, 8))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, loss = model(idx, idx)
    assert torch.isfinite(loss)
    reference, _ = model(idx)
    assert (logits.float() - reference).abs().max() < 0.5


@pytest.mark.parametrize("max_new_tokens", [-1, -100, 2.5, "3", True])
def test_generate_names_a_bad_max_new_tokens(max_new_tokens):
    model = seeded_model(tiny())
    with pytest.raises(ValueError, match="max_new_tokens must be an integer >= 0"):
        model.generate(torch.zeros(1, 3, dtype=torch.long), max_new_tokens)


def test_generate_and_forward_name_a_bad_idx():
    model = seeded_model(tiny())
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
    ("pos_encoding", "alibi", "unknown pos_encoding 'alibi'"),
    ("dropout", float("nan"), "dropout must be in"),
    ("norm_eps", float("inf"), "norm_eps must be a finite number > 0"),
])
def test_a_config_changed_into_an_invalid_one_is_refused_by_gpt(field, value, message):
    config = tiny()
    setattr(config, field, value)
    with pytest.raises(ValueError, match=message):
        GPT(config)


def test_a_config_changed_into_a_valid_one_derives_head_dim_again():
    config = tiny(n_head=4, n_kv_head=4)
    config.n_embd, config.ffn_hidden = 32, 48
    model = GPT(config)
    assert config.head_dim == 8 and model(torch.zeros(1, 2, dtype=torch.long))[0].shape == (
        1, 2, 23)


def test_usage_errors_are_value_errors():
    from gptlab.errors import ConfigError

    assert issubclass(UsageError, ValueError) and issubclass(ConfigError, UsageError)
    with pytest.raises(ValueError):
        GPTConfig(n_layer=-1)
