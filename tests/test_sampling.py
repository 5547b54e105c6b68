"""Temperature, top-k, top-p on crafted logits; the streaming text decoder with stop strings."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from gptlab.errors import UsageError
from gptlab.inference.sampling import TextStream, generate_text
from gptlab.model.config import GPTConfig
from gptlab.model.decoding import SamplingSettings, filter_logits, sample_next
from gptlab.model.gpt import GPT

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


def chars_decode(ids):
    return "".join(chr(i) for i in ids)


def feed(stream: TextStream, text: str) -> list[str]:
    return [stream.push([ord(c)]) for c in text] + [stream.finish()]


def test_stream_without_stop_strings_emits_each_token_at_once():
    pieces = feed(TextStream(chars_decode), "hello")
    assert pieces == ["h", "e", "l", "l", "o", ""]


def test_stream_stops_before_the_stop_string_and_holds_back_its_prefix():
    stream = TextStream(chars_decode, stop=["\n\n", "END"])
    pieces = feed(stream, "ab\nc\n\nnever")
    assert "".join(pieces) == "ab\nc" and stream.stopped
    assert pieces[2] == ""  # "\n" might start "\n\n": held back until "c" arrives
    stream = TextStream(chars_decode, stop=["END"])
    assert "".join(feed(stream, "the ENDING")) == "the " and stream.stopped
    stream = TextStream(chars_decode, stop=["END"])
    assert "".join(feed(stream, "EN and E")) == "EN and E" and not stream.stopped


def test_stream_holds_back_a_split_utf8_character():
    raw = "é!".encode()  # 3 bytes; a byte-level tokenizer may emit them one by one
    stream = TextStream(lambda ids: bytes(ids).decode("utf-8", errors="replace"))
    pieces = [stream.push([b]) for b in raw] + [stream.finish()]
    assert pieces == ["", "é", "!", ""]


def test_empty_stop_string_is_refused():
    with pytest.raises(UsageError, match="stop string"):
        TextStream(chars_decode, stop=[""])


def test_generate_text_matches_generate_and_streams():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=128, block_size=8, n_layer=1, n_head=2, n_embd=16)).eval()
    prompt = "ab"
    encode = lambda s: [ord(c) for c in s]  # noqa: E731
    pieces = []
    greedy = SamplingSettings(temperature=0.0)
    text = generate_text(model, encode, chars_decode, prompt, 20, greedy,
                         on_text=pieces.append)
    ids = model.generate(torch.tensor([encode(prompt)]), 20, temperature=0.0)[0, 2:].tolist()
    assert text == chars_decode(ids) == "".join(pieces)
    assert len(pieces) > 1  # it came out piece by piece (past the context too: 22 > 8)
    stop = text[5:7]
    cut = generate_text(model, encode, chars_decode, prompt, 20, greedy, stop=[stop])
    assert cut == text[: text.find(stop)]
    assert math.isfinite(len(cut))


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
