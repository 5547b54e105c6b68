"""The model options of later work (gptlab.model.config: attn_scale, qk_norm,
zero_init_proj, value_residual): each computes what its paper says, keeps the model causal
and its cached decoding exact, reduces to the plain model where it should, and is refused by
name where a format or a tool cannot follow it. The speedrun's options that were not
adopted are gone: a config that used one is refused by name, one saved with it off loads."""

from __future__ import annotations

import pytest
import torch

from gptlab import GPT
from gptlab.convert.gguf_export import gguf_architecture
from gptlab.convert.hf_config import keymap_for
from gptlab.errors import ConfigError, UsageError
from gptlab.interp.patching import Site, check_site
from gptlab.interp.residuals import capture_residuals
from gptlab.interp.walk import walk_token
from gptlab.model.attention import attention_weights
from gptlab.model.config import GPTConfig
from gptlab.model.kv_cache import new_kv_cache
from gptlab.training.config import TrainConfig
from gptlab.training.plan import check_settings

OPTIONS = {
    "no sqrt(d_k)": dict(attn_scale=False),
    "qk_norm": dict(qk_norm=True),
    "value residual": dict(value_residual=True),
    "attention only": dict(mlp="none"),
    "all": dict(attn_scale=False, qk_norm=True, value_residual=True, n_layer=3),
}


@pytest.fixture(params=list(OPTIONS), ids=list(OPTIONS))
def option_model(request, small_config, seeded_model) -> GPT:
    return seeded_model(small_config(pos_encoding="rope", **OPTIONS[request.param]))


def test_a_future_token_never_changes_a_past_logit(option_model):
    idx = torch.randint(0, 23, (2, 10))
    later = idx.clone()
    later[:, 6:] = torch.randint(0, 23, (2, 4))
    with torch.no_grad():
        a, b = option_model(idx)[0], option_model(later)[0]
    torch.testing.assert_close(a[:, :6], b[:, :6])
    assert not torch.allclose(a[:, 6:], b[:, 6:])


def test_cached_decoding_equals_the_full_forward(option_model):
    idx = torch.randint(0, 23, (2, 12))
    cache = new_kv_cache(option_model, 2)
    with torch.no_grad():
        full = option_model(idx)[0]
        steps = [option_model(idx[:, :5], cache=cache)[0]]
        steps += [option_model(idx[:, t:t + 1], cache=cache)[0] for t in range(5, 12)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)


def test_without_the_scale_scores_are_plain_dot_products(small_config):
    q, k = torch.randn(3, 5, 8, dtype=torch.float64), torch.randn(3, 7, 8, dtype=torch.float64)
    expected = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    torch.testing.assert_close(attention_weights(q, k, scale=1.0), expected)
    assert GPT(small_config(attn_scale=False)).blocks[0].attn.scale == 1.0
    assert GPT(small_config()).blocks[0].attn.scale == 0.5  # 1/sqrt(4)


def test_with_d_k_1_the_scale_changes_nothing(small_config, seeded_model):
    """sqrt(1) = 1: a model with one dimension per head is the same either way."""
    shape = dict(n_head=16, n_kv_head=16)
    on = seeded_model(small_config(**shape))
    off = GPT(small_config(attn_scale=False, **shape)).eval()
    off.load_state_dict(on.state_dict())
    idx = torch.randint(0, 23, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(off(idx)[0], on(idx)[0])


def test_qk_norm_makes_attention_blind_to_the_size_of_q_and_k(small_config, seeded_model):
    """RMSNorm without a gain: scaling the query and key rows of W_qkv changes nothing."""
    model = seeded_model(small_config(qk_norm=True, bias=False))
    idx = torch.randint(0, 23, (1, 10))
    with torch.no_grad():
        before = model(idx)[0]
        for block in model.blocks:
            rows = block.attn.qkv.weight
            q_and_k = rows.shape[0] - 8  # the last 8 rows are v (2 kv heads of 4)
            rows[:q_and_k] *= 7.0
        torch.testing.assert_close(model(idx)[0], before, rtol=1e-5, atol=1e-5)


def test_a_retired_option_loads_when_off_and_is_refused_by_name_when_used(small_config):
    plain = small_config().to_dict()
    assert GPTConfig.from_dict({**plain, "logit_softcap": None, "unet_skips": False}) == \
        GPTConfig.from_dict(plain)
    for used in ({"logit_softcap": 15.0}, {"unet_skips": True}):
        with pytest.raises(ConfigError, match=f"uses {next(iter(used))}=.*not adopted"):
            GPTConfig.from_dict({**plain, **used})
    with pytest.raises(ConfigError, match="unknown mlp .relu2.; expected one of"):
        GPTConfig.from_dict({**plain, "mlp": "relu2"})


def test_zero_initialised_projections_start_every_block_as_the_identity(small_config):
    model = GPT(small_config(zero_init_proj=True)).eval()
    idx = torch.randint(0, 23, (1, 8))
    with torch.no_grad():
        stream = model.wte(idx) + model.wpe(torch.arange(8))
        torch.testing.assert_close(model(idx)[0], model.lm_head(model.ln_f(stream)))
    assert all(not b.attn.proj.weight.any() and not b.mlp.proj.weight.any()
               for b in model.blocks)


@pytest.mark.parametrize("mix,which", [(1.0, "own"), (0.0, "first")])
def test_value_residual_mixes_each_layers_values_with_the_first_layers(
        mix, which, small_config, seeded_model):
    """lambda = 1: every layer keeps its own values (the plain model); lambda = 0: every
    layer reads the first layer's values (its own value rows do not matter)."""
    mixed = seeded_model(small_config(value_residual=True, n_layer=3))
    plain = GPT(small_config(n_layer=3)).eval()
    idx = torch.randint(0, 23, (2, 10))
    with torch.no_grad():
        for block in mixed.blocks[1:]:
            block.attn.value_mix.fill_(mix)
        plain.load_state_dict({k: v for k, v in mixed.state_dict().items()
                               if "value_mix" not in k})
        if which == "own":
            torch.testing.assert_close(mixed(idx)[0], plain(idx)[0])
        else:
            before = mixed(idx)[0]
            for block in mixed.blocks[1:]:
                block.attn.qkv.weight[-8:] = torch.randn(8, 16)  # later layers' v rows
            torch.testing.assert_close(mixed(idx)[0], before)
    assert [b.attn.value_mix is None for b in mixed.blocks] == [True, False, False]


@pytest.mark.parametrize("name", [n for n in OPTIONS if n != "attention only"])
def test_export_refuses_each_option_by_name(name, small_config):
    llama = dict(pos_encoding="rope", norm="rmsnorm", bias=False, tie_embeddings=False)
    config = small_config(**{**llama, **OPTIONS[name], "mlp": "swiglu"})
    for export in (keymap_for, gguf_architecture):
        with pytest.raises(UsageError) as info:
            export(config)
        assert all(option.split("=")[0] in str(info.value) for option in config.later_options())


def test_zero_init_needs_no_export_option(small_config):
    config = small_config(zero_init_proj=True, norm="rmsnorm", mlp="swiglu",
                          pos_encoding="rope", bias=False, n_kv_head=4)
    assert config.later_options() == [] and keymap_for(config).architecture


def test_an_attention_only_model_is_its_attention_and_is_refused_by_name(small_config,
                                                                         seeded_model):
    """mlp none: each block is x + attn(norm_1(x)) (pre) or norm_1(x + attn(x)) (post),
    nothing else; export, tensor parallel and the tools that read an MLP refuse it."""
    idx = torch.randint(0, 23, (2, 10))
    for position in ("pre", "post"):
        model = seeded_model(small_config(mlp="none", norm_position=position))
        assert all(b.mlp is None and b.norm_2 is None for b in model.blocks)
        x = model.drop(model.wte(idx) + model.wpe(torch.arange(10)))
        for block in model.blocks:
            x = (x + block.attn(block.norm_1(x)) if position == "pre"
                 else block.norm_1(x + block.attn(x)))
        expected = model.lm_head(model.ln_f(x) if model.ln_f is not None else x)
        torch.testing.assert_close(model(idx)[0], expected)
    config = small_config(mlp="none", pos_encoding="rope", norm="rmsnorm", bias=False,
                          tie_embeddings=False)
    assert config.later_options() == ["mlp=none"]
    for export in (keymap_for, gguf_architecture):
        with pytest.raises(UsageError, match="mlp=none"):
            export(config)
    with pytest.raises(UsageError, match="attention-only model"):
        check_settings(TrainConfig(parallel="tp", tp=2), config, 2)
    model = seeded_model(config)
    with pytest.raises(UsageError, match="attention only"):
        capture_residuals(model, idx[:1])
    with pytest.raises(UsageError, match="attention only"):
        walk_token(model, idx[0], 3)
    with pytest.raises(UsageError, match="no MLP to patch"):
        check_site(model, Site("mlp", 0), 10)


def test_tensor_parallel_refuses_the_learned_scalars_by_name(small_config):
    with pytest.raises(UsageError, match="learned scalars of value_residual"):
        check_settings(TrainConfig(parallel="tp", tp=2), small_config(value_residual=True), 2)
