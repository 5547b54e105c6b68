"""Decoding (gptlab.model.decoding): temperature, top-k and top-p on crafted logits, the
draws they allow, and GPT.generate's loop (greedy against an argmax loop, the window past
the context, a long prompt cropped, bad arguments)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gptlab import GPTConfig
from gptlab.errors import UsageError
from gptlab.model.decoding import SamplingSettings, filter_logits, generate_tokens, sample_next
from gptlab.model.positional import ContextWarning

# probabilities 0.4, 0.25, 0.15, 0.1, 0.06, 0.04 (sum 1), shuffled so order is not position
PROBS = torch.tensor([0.1, 0.4, 0.04, 0.25, 0.06, 0.15])

LOGITS = PROBS.log()[None, :]  # (1, 6)


def possible(logits: torch.Tensor) -> set[int]:
    return set(torch.nonzero(torch.isfinite(logits[0])).flatten().tolist())


def drawn(n: int = 4000, **kw) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    logits = LOGITS.expand(n, -1)  # n independent draws in one call
    return sample_next(logits, SamplingSettings(**kw), generator=g).flatten()


@pytest.mark.parametrize("k, kept", [(1, {1}), (2, {1, 3}), (3, {1, 3, 5}), (6, set(range(6))),
                                     (100, set(range(6)))])
def test_top_k_keeps_exactly_the_k_likeliest(k, kept):
    assert possible(filter_logits(LOGITS, SamplingSettings(top_k=k))) == kept
    assert set(drawn(top_k=k).tolist()) == kept


def test_top_k_keeps_ties_at_the_kth_value():
    logits = torch.tensor([[1.0, 3.0, 2.0, 2.0, 0.0]])
    assert possible(filter_logits(logits, SamplingSettings(top_k=2))) == {1, 2, 3}


@pytest.mark.parametrize("p, kept", [
    (5e-324, {1}),              # below float32's range, compares as 0: the top still stays
    (1e-30, {1}),
    (0.3, {1}),                 # 0.4 alone reaches 0.3
    (0.399, {1}),               # just under the top token's 0.4: it alone
    (0.41, {1, 3}),             # 0.65
    (0.649, {1, 3}),
    (0.66, {1, 3, 5}),          # 0.8
    (0.85, {1, 3, 5, 0}),       # 0.9
    (0.95, {1, 3, 5, 0, 4}),    # 0.96
    (0.97, set(range(6))),
    (1.0, set(range(6))),
])
def test_top_p_keeps_the_smallest_nucleus(p, kept):
    assert possible(filter_logits(LOGITS, SamplingSettings(top_p=p))) == kept
    assert set(drawn(top_p=p).tolist()) == kept


def test_top_k_and_top_p_together_and_temperature_before_top_p():
    assert possible(filter_logits(LOGITS, SamplingSettings(top_k=3, top_p=0.99))) == {1, 3, 5}
    # temperature 2 flattens: top token 0.4 -> sqrt-proportional ~0.28, so 0.3 needs two
    assert possible(filter_logits(LOGITS, SamplingSettings(2.0, top_p=0.3))) == {1, 3}


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_temperature_draws_follow_softmax(temperature):
    n = 20000
    counts = torch.bincount(drawn(n, temperature=temperature), minlength=6).double()
    expected = torch.softmax(LOGITS[0].double() / temperature, dim=0) * n
    chi2 = ((counts - expected) ** 2 / expected).sum().item()
    assert chi2 < 20.5  # chi-square, 5 degrees of freedom: p = 0.001


def test_greedy():
    assert set(drawn(temperature=0.0).tolist()) == {1}
    assert possible(filter_logits(LOGITS, SamplingSettings(temperature=0.0))) == {1}


@pytest.mark.parametrize("kw", [dict(temperature=-1.0), dict(top_k=0), dict(top_p=0.0),
                                dict(top_p=1.5)])
def test_bad_arguments(kw):
    with pytest.raises(UsageError):
        SamplingSettings(**kw)


def test_settings_are_frozen_and_know_when_they_are_greedy():
    settings = SamplingSettings(0.8, top_k=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.temperature = -1.0
    assert not settings.greedy and not SamplingSettings(top_p=0.5).greedy
    assert SamplingSettings(0.0).greedy and SamplingSettings(top_k=1).greedy


@pytest.mark.parametrize("temperature", [1e-300, 5e-324, 1e-40])
def test_a_tiny_temperature_keeps_the_argmax_instead_of_nan(temperature):
    logits = torch.tensor([[1.0, 3.0, -2.0, 2.5]])
    probs = torch.softmax(filter_logits(logits, SamplingSettings(temperature)), dim=-1)
    assert torch.equal(probs, torch.tensor([[0.0, 1.0, 0.0, 0.0]]))


@pytest.mark.parametrize("kwargs, message", [
    ({"temperature": float("nan")}, "temperature must be a finite number >= 0, got nan"),
    ({"temperature": float("inf")}, "temperature must be a finite number >= 0, got inf"),
    ({"top_k": 2.5}, "top_k must be an integer >= 1, got 2.5"),
    ({"top_p": float("nan")}, r"top_p must be in \(0, 1\], got nan"),
])
def test_non_finite_sampling_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SamplingSettings(**kwargs)


@pytest.mark.parametrize("preset", ["tiny-gpt2", "tiny-llama"])
def test_greedy_generate_equals_argmax_loop_without_cache(preset, seeded_model):
    model = seeded_model(GPTConfig.from_preset(preset))
    prompt = torch.randint(0, 97, (2, 5), generator=torch.Generator().manual_seed(3))
    out = model.generate(prompt, max_new_tokens=20, top_k=1)
    idx = prompt
    for _ in range(20):
        logits, _ = model(idx)
        idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, idx)
    assert torch.equal(model.generate(prompt, 20, temperature=0.0), idx)


def test_generation_slides_past_the_context_for_learned_positions(seeded_model):
    model = seeded_model(GPTConfig.from_preset("tiny-gpt2"))  # block_size 32
    prompt = torch.randint(0, 97, (1, 30))
    out = model.generate(prompt, max_new_tokens=50, top_k=1)
    assert out.shape == (1, 80)
    # the first token after the context fills comes from the last 16 tokens re-encoded
    n_fill = 32 - 30  # tokens generated before the cache is full
    window = out[:, 30 + n_fill - 16 + 1 : 30 + n_fill + 1]
    expected = model(window)[0][:, -1].argmax(-1)
    assert out[0, 30 + n_fill + 1].item() == expected.item()


@pytest.mark.parametrize("encoding", ["rope", "alibi", "sinusoidal", "none"])
def test_generation_runs_past_block_size_when_the_context_is_longer(encoding, small_config,
                                                                    seeded_model):
    """With a context of 48 on a model built for 16, the KV cache and the mask grow to 48:
    greedy decoding equals an argmax loop over the whole text, with no window slid."""
    model = seeded_model(small_config(pos_encoding=encoding))
    prompt = torch.randint(0, 23, (2, 5), generator=torch.Generator().manual_seed(3))
    with pytest.warns(ContextWarning, match="never saw positions 16..47"):
        new = list(generate_tokens(model, prompt, 43, SamplingSettings(0.0), context=48))
    idx = prompt
    for _ in range(43):
        logits, _ = model(idx)
        idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(torch.cat([prompt, *new], dim=1), idx)
    with pytest.warns(ContextWarning):
        model.set_context(48)  # the model's own default from now on
    assert torch.equal(model.generate(prompt, 43, temperature=0.0), idx)


def test_learned_positions_refuse_a_longer_context(small_config, seeded_model):
    model = seeded_model(small_config(pos_encoding="learned"))
    with pytest.raises(UsageError, match="no row for position 16"):
        next(generate_tokens(model, torch.zeros(1, 3, dtype=torch.long), 5, context=17))
    with pytest.raises(UsageError, match="no row for position 16"):
        model.set_context(17)


def test_long_prompt_is_cropped_from_the_left_with_a_warning(seeded_model):
    model = seeded_model(GPTConfig.from_preset("tiny-gpt2"))
    prompt = torch.randint(0, 97, (1, 40))
    with pytest.warns(UserWarning, match="cropped"):
        out = model.generate(prompt, max_new_tokens=1, top_k=1)
    expected = model(prompt[:, -32:])[0][:, -1].argmax(-1)
    assert out[0, -1].item() == expected.item()


@pytest.mark.parametrize("max_new_tokens", [-1, -100, 2.5, "3", True])
def test_generate_names_a_bad_max_new_tokens(max_new_tokens, small_config, seeded_model):
    model = seeded_model(small_config())
    with pytest.raises(ValueError, match="max_new_tokens must be an integer >= 0"):
        model.generate(torch.zeros(1, 3, dtype=torch.long), max_new_tokens)
